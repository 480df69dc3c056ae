"""The graph candidate type on a handmade citation graph with a known answer.

Query Q (2019) cites A, B, C, D, E (|C_q| = 5). Neighbourhoods N_c = C_c ∪ I_c (Q is in
each, as a citer):

    C: {A, D, Q}                     overlap 2 / min(5, 3) = 0.667   (visited 1st)
    A: {B, C, D, Q, X1, X2, X3, X4}  overlap 3 / min(5, 8) = 0.600   (2nd)
    D: {A, C, Q, W1, W2, W3}         overlap 2 / min(5, 6) = 0.400   (3rd)
    B: {A, Q, Y1}                    overlap 1 / min(5, 3) = 0.333   (4th)
    E: {Q, V1}                       overlap 0                        (5th)

Eligible additions (not cited by Q, not Q, year <= 2019): C adds nothing (A and D are
cited); A adds X1, X2, X3 (X4 is from 2020); D adds W1, W2 (W3 is from 2021). That makes
five, so with five graph negatives per query the answer is {X1, X2, X3, W1, W2}: B's Y1
and E's V1 are never reached. A similarity normalised by |N_c| alone would visit B before
D and pick Y1, and the plain intersection count would visit A first; the overlap
coefficient gives the order above.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mdcr.benchmark.build import SPEC, BenchmarkConfig
from mdcr.core.errors import InputDataError
from mdcr.core.inputs import resolve_inputs
from mdcr.core.store import Store

CS = "Computer Science"
EDGES = [
    ("Q", "A"),
    ("Q", "B"),
    ("Q", "C"),
    ("Q", "D"),
    ("Q", "E"),
    ("A", "B"),
    ("A", "C"),
    ("A", "D"),
    ("X1", "A"),
    ("X2", "A"),
    ("X3", "A"),
    ("X4", "A"),
    ("C", "D"),
    ("D", "W1"),
    ("W2", "D"),
    ("W3", "D"),
    ("B", "Y1"),
    ("V1", "E"),
    # filler papers for the other types: most cited and random
    *[(f"F{i}", f"F{i + 1}") for i in range(12)],
]
YEARS = {"X4": 2020, "W3": 2021, "Q": 2019}


def write_world(root: Path) -> tuple[Path, Path]:
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    ids = sorted({p for e in EDGES for p in e})
    n_in = {p: sum(1 for _, b in EDGES if b == p) for p in ids}
    n_out = {p: sum(1 for a, _ in EDGES if a == p) for p in ids}
    pq.write_table(
        pa.table(
            {
                "paper_id": ids,
                "title": [f"title {p}" for p in ids],
                "abstract": [f"abstract of paper {p}" for p in ids],
                "year": pa.array([YEARS.get(p, 2010) for p in ids], pa.int32()),
                "fields": [[CS] for _ in ids],
                "n_out": pa.array([n_out[p] for p in ids], pa.int32()),
                "n_in": pa.array([n_in[p] for p in ids], pa.int32()),
            }
        ),
        corpus / "papers.parquet",
    )
    pq.write_table(
        pa.table({"citing_id": [a for a, _ in EDGES], "cited_id": [b for _, b in EDGES]}),
        corpus / "citations.parquet",
    )
    pools = root / "pools"
    pools.mkdir()
    pq.write_table(
        pa.table(
            {
                "query_id": ["Q"],
                "split": ["test"],
                "setup": ["field"],
                "field": [CS],
                "year": pa.array([2019], pa.int32()),
            }
        ),
        pools / "queries.parquet",
    )
    pd.DataFrame(
        {
            "pool_id": [f"field/test/{CS}/r0"],
            "setup": ["field"],
            "split": ["test"],
            "field": [CS],
            "size": [100],
            "rep": [0],
            "all_field_cited": [True],
        }
    ).to_parquet(pools / "pool_meta.parquet")
    return corpus, pools


def build(root: Path, **params: object) -> Path:
    corpus, pools = write_world(root)
    cfg = BenchmarkConfig(
        corpus=str(corpus),
        pools=str(pools),
        models=(),
        splits=("test",),
        **{"n_per_type": 5, "top_n": 5, "most_cited_n": 30, "hf_export": False, **params},  # type: ignore[arg-type]
    )
    return Store(root / "home").execute(SPEC, cfg, resolve_inputs(cfg), quiet=True).path


def test_graph_type_known_answer(tmp_path: Path) -> None:
    out = build(tmp_path)
    bench = pd.read_parquet(out / "benchmark.parquet")
    graph = set(bench.loc[bench["candidate_type"] == "graph", "paper_id"])
    assert graph == {"X1", "X2", "X3", "W1", "W2"}
    assert set(bench.loc[bench["candidate_type"] == "true", "paper_id"]) == set("ABCDE")
    # Other types never repeat a graph candidate, never include Q, cited papers or late papers.
    rest = bench[~bench["candidate_type"].isin(("graph", "true"))]
    assert not (set(rest["paper_id"]) & (graph | set("ABCDE") | {"Q", "X4", "W3"}))
    assert not bench.duplicated("paper_id").any()


def test_intersection_variant_visits_by_count(tmp_path: Path) -> None:
    # |C_q ∩ N_c|: A 3, C 2, D 2, B 1, E 0 -> A then C/D (hash order) then B: same five.
    out = build(tmp_path, graph_similarity="intersection")
    bench = pd.read_parquet(out / "benchmark.parquet")
    assert set(bench.loc[bench["candidate_type"] == "graph", "paper_id"]) == {
        "X1",
        "X2",
        "X3",
        "W1",
        "W2",
    }


def test_graph_short_when_neighbourhood_is_exhausted(tmp_path: Path) -> None:
    with pytest.raises(InputDataError, match="graph 7 of 8"):
        build(tmp_path / "a", n_per_type=8, top_n=8)
    out = build(tmp_path / "b", n_per_type=8, top_n=8, on_short="warn")
    bench = pd.read_parquet(out / "benchmark.parquet")
    graph = set(bench.loc[bench["candidate_type"] == "graph", "paper_id"])
    # All seven eligible neighbours, B's Y1 and E's V1 included.
    assert graph == {"X1", "X2", "X3", "W1", "W2", "Y1", "V1"}
    short = pd.read_parquet(out / "short_queries.parquet")
    row = short[short["candidate_type"] == "graph"].iloc[0]
    assert (row["got"], row["needed"], row["query_id"]) == (7, 8, "Q")
