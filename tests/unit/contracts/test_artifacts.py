"""Contracts: each artifact's Arrow schema is declared once and the writers use it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mdcr.contracts.artifacts import CITATIONS, POOL_META, QRELS, RUNS, col
from mdcr.core.errors import InputDataError
from mdcr.index.runs import RunWriter, run_table


def test_run_writers_write_the_declared_schema(tmp_path: Path) -> None:
    assert RUNS.schema == pa.schema(
        [
            ("pool_id", pa.string()),
            ("query_id", pa.string()),
            ("paper_id", pa.string()),
            ("score", pa.float64()),
            ("rank", pa.int32()),
        ]
    )
    ranked = [(np.array(["b", "a"]), np.array([2.0, 1.0])), (np.array(["c"]), np.array([0.5]))]
    table = run_table("p", ["q1", "q2"], ranked)
    assert table.schema == RUNS.schema and table.column("rank").to_pylist() == [1, 2, 1]
    path = tmp_path / RUNS.file
    with RunWriter(path) as writer:  # a table of other widths is cast to the contract's
        wide = pa.schema([*list(table.schema)[:3], ("score", pa.float32()), ("rank", pa.int64())])
        writer.write(table.cast(wide))
    assert pq.read_schema(path).remove_metadata() == RUNS.schema
    RUNS.require(tmp_path)


def test_readers_accept_any_width_and_require_only_required_columns() -> None:
    meta = pa.schema(
        [(n, pa.large_string()) for n in ("pool_id", "setup", "split", "field")]
        + [("size", pa.int32()), ("rep", pa.int64())]
    )
    POOL_META.check_schema(meta, "meta")  # seed, counts: declared, written, not required
    assert "seed" in POOL_META.schema.names and POOL_META.schema.field("rep").type == pa.int32()
    assert QRELS.schema.field("pool_id").type == pa.dictionary(pa.int32(), pa.string())
    with pytest.raises(InputDataError, match="lacks column 'cited_id'"):
        CITATIONS.check_schema(pa.schema([("citing_id", pa.string())]), "x")


def test_a_contract_without_a_physical_type_has_no_schema() -> None:
    from mdcr.contracts.artifacts import PAPERS

    with pytest.raises(ValueError, match="declares no Arrow type for paper_id"):
        _ = PAPERS.schema
    with pytest.raises(ValueError, match="unknown Arrow type 'utf8'"):
        col("x", "str", "utf8")
