"""The MDCR report's wording: Table 4's columns name kinds of candidates, not retrievers,
and the paper's Table 4 numbers are still found for them."""

from __future__ import annotations

import pandas as pd

from mdcr.scoring.mdcr_report import _paper_lines, _per_split
from mdcr.scoring.mdcr_tables import R_AT_K, table4
from mdcr.scoring.published import paper_values

TYPES = ("bm25", "specter", "scincl", "graph", "most_cited", "random")


def _macro() -> pd.DataFrame:
    rows = [
        {"retriever": r, "split": "test", "subset": t, "metric": m, "value": 0.5}
        for r in ("scincl", "random")
        for t in ("all", *TYPES)
        for m in ("map", "ndcg", R_AT_K)
    ]
    return pd.DataFrame(rows).assign(n_fields=3)


def test_table4_columns_say_how_the_candidates_were_chosen() -> None:
    md = table4(_macro(), "test").to_markdown()
    header = md.splitlines()[0]
    for label in (
        "chosen by BM25",
        "chosen by SPECTER",
        "chosen by SciNCL",
        "citation graph",
        "most cited",
        "random papers",
    ):
        assert label in header, label
    # No column reads like a retriever's name alone.
    cols = [c.strip() for c in header.strip("|").split("|")][1:]
    assert not {"BM25", "SPECTER", "SciNCL", "Graph", "Random", "Most cited"} & set(cols)


def test_the_papers_table4_numbers_still_match_the_candidate_types() -> None:
    entries = {"scincl": {"builtin": "scincl", "model": {"commit": "c"}, "options": {}}}
    lines = _paper_lines(_macro(), entries, "the official MDCR test files")
    rows = [ln for ln in lines if ln.startswith("| SciNCL |")]
    # AVG MAP and R@5, plus MAP and R@5 for each of the six candidate types.
    assert len(rows) == 2 + 2 * len(TYPES)
    v = paper_values()
    graph = v[
        (v["table"] == "table4")
        & (v["model"] == "SciNCL")
        & (v["column"] == "Graph")
        & (v["metric"] == "MAP")
    ]["value"].iloc[0]
    assert f"| SciNCL | citation graph | MAP | 50.0 | {graph:.1f} |" in lines


def test_query_counts_are_words_not_a_dict() -> None:
    counts = pd.Series({"test": 27, "val": 29})
    assert _per_split(counts) == "val 29, test 27"
