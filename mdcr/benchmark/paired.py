"""Paired significance tests between the retrievers of an MDCR report.

Per split, every pair of retrievers is compared on each query's MAP, nDCG and R@5 (full
candidate lists), all fields' queries pooled, with the tests of :mod:`mdcr.scoring.significance`
(Fisher randomization and paired t-test by default). All comparisons of one split are one
family, corrected together (Holm by default), as each table of the pools report is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

TEST_NAMES = {"fisher": "Fisher randomization test", "student": "paired t-test"}


def split_comparisons(
    per_query: pd.DataFrame,
    split: str,
    retrievers: Sequence[str],
    *,
    tests: Sequence[str],
    correction: str,
    alpha: float,
    permutations: int,
    seed: int,
) -> pd.DataFrame:
    """Corrected pairwise comparisons of one split (columns of
    :func:`mdcr.scoring.significance.correct`, with ``table`` = ``mdcr_<split>``)."""
    from mdcr.benchmark.scoring import ALL, MDCR_METRICS
    from mdcr.scoring.significance import correct, pairwise_tests

    pq = per_query[(per_query["split"] == split) & (per_query["subset"] == ALL)]
    units = pq.assign(query_id=pq["field"] + "\x1f" + pq["query_id"])[
        ["retriever", "metric", "query_id", "value"]
    ]
    comps = pairwise_tests(units, ["metric"], list(retrievers), tests, permutations, seed)
    order = {m: i for i, m in enumerate(MDCR_METRICS)}
    comps = comps.sort_values("metric", key=lambda s: s.map(order), kind="stable")
    comps.insert(0, "table", f"mdcr_{split}")
    comps.insert(1, "split", split)
    return correct(comps.reset_index(drop=True), ["table"], correction, alpha)


def comparison_lines(
    corrected: pd.DataFrame, tests: Sequence[str], correction: str, alpha: float, labels: dict
) -> list[str]:
    """The summary sentence and the table of comparisons, worded as the pools report's."""
    import pandas as pd

    from mdcr.measures.registry import label
    from mdcr.scoring.significance import summary_line

    if corrected.empty:
        return ["Significance: no comparisons (fewer than two retrievers).", ""]
    parts = [f"{TEST_NAMES[t]}: {summary_line(corrected, t)}" for t in tests]
    lines = [
        f"Significance ({correction}-corrected over this table, α = {alpha}; per-query values "
        "of all fields' queries, paired): " + "; ".join(parts) + ".",
        "",
    ]
    pair = ["metric", "retriever_a", "retriever_b"]
    first = corrected[corrected["test"] == tests[0]]
    by_test = {
        t: corrected[corrected["test"] == t].set_index(pair)[["p_value", "p_adjusted"]]
        for t in tests
    }
    head = ["metric", "A", "B", "n", "Δ (A−B) ×100", "direction"]
    head += [f"p {t} (adjusted)" for t in tests]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in first.to_dict("records"):
        key = tuple(row[k] for k in pair)
        ps = []
        for t in tests:
            p, pa = by_test[t].loc[key] if key in by_test[t].index else (float("nan"),) * 2
            ps.append("–" if pd.isna(p) else f"{p:.3g} ({pa:.3g})")
        star = " *" if row["significant"] else ""
        cells = [
            label(str(row["metric"])),
            labels.get(row["retriever_a"], row["retriever_a"]),
            labels.get(row["retriever_b"], row["retriever_b"]),
            str(int(row["n_queries"])),
            f"{row['diff'] * 100:+.2f}",
            f"A {row['direction']} B{star}",
            *ps,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"`*`: significant under the {tests[0]} test after correction.", ""]
    return lines
