"""The shared run format: tie rule, self-exclusion, ranks, schema."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from mdcr.contracts.artifacts import RUNS
from mdcr.core.errors import InputDataError
from mdcr.index.runs import RunWriter, rank_candidates, run_table


def test_ties_break_by_paper_id_and_query_is_excluded() -> None:
    ids = np.array(["c", "a", "q", "b", "d"])
    scores = np.array([1.0, 2.0, 5.0, 2.0, 1.0])
    got_ids, got_scores = rank_candidates(ids, scores, k=10, exclude="q")
    assert got_ids.tolist() == ["a", "b", "c", "d"]
    assert got_scores.tolist() == [2.0, 2.0, 1.0, 1.0]
    top2, _ = rank_candidates(ids, scores, k=2, exclude="q")
    assert top2.tolist() == ["a", "b"]


def test_run_table_ranks_are_one_based_per_query(tmp_path: Path) -> None:
    ranked = [
        rank_candidates(np.array(["x", "y"]), np.array([0.1, 0.9]), k=5),
        rank_candidates(np.array(["z"]), np.array([0.3]), k=5),
    ]
    table = run_table("p1", ["q1", "q2"], ranked)
    assert table.schema == RUNS.schema
    rows = table.to_pylist()
    assert [(r["query_id"], r["paper_id"], r["rank"]) for r in rows] == [
        ("q1", "y", 1),
        ("q1", "x", 2),
        ("q2", "z", 1),
    ]
    path = tmp_path / "runs.parquet"
    with RunWriter(path) as w:
        w.write(table)
        w.write(run_table("p2", [], []))
    assert w.rows == 3
    assert pq.read_table(path).equals(table)
    assert RUNS.read(tmp_path).num_rows == 3


def test_reading_a_run_errors_are_clear(tmp_path: Path) -> None:
    import pyarrow as pa

    with pytest.raises(InputDataError, match=r"no runs.parquet in .*; point to a search or bm25"):
        RUNS.read(tmp_path)
    pq.write_table(run_table("p", [], []).drop(["rank"]), tmp_path / "runs.parquet")
    with pytest.raises(InputDataError, match="is not a run file: it lacks column 'rank'"):
        RUNS.read(tmp_path)
    text_scores = pa.table(
        {c: pa.array(["x"]) for c in ("pool_id", "query_id", "paper_id", "score")}
    ).append_column("rank", pa.array([1], pa.int32()))
    pq.write_table(text_scores, tmp_path / "runs.parquet")
    with pytest.raises(InputDataError, match="column 'score' of the run is string"):
        RUNS.read(tmp_path)
