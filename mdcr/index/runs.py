"""Runs: the ranked lists every retriever writes, with one tie rule for all of them.

Contract (docs/architecture.md §3): ``pool_id, query_id, paper_id, score (float64, higher is
better), rank (int32, 1-based)``. Rules (§7): ties are broken by (score descending,
paper_id ascending) in every retriever, and a query is never a candidate in its own ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mdcr.contracts.artifacts import RUNS

if TYPE_CHECKING:
    pass


def rank_candidates(
    paper_ids: np.ndarray,
    scores: np.ndarray,
    k: int,
    exclude: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top ``k`` of one query's candidates by (score desc, paper_id asc), without ``exclude``.

    ``paper_ids`` is an array of str, ``scores`` of float. Returns (ids, scores) in rank order.
    """
    ids = np.asarray(paper_ids).astype(str)
    sc = np.asarray(scores, dtype=np.float64)
    if exclude is not None:
        keep = ids != exclude
        ids, sc = ids[keep], sc[keep]
    order = np.lexsort((ids, -sc))[:k]
    return ids[order], sc[order]


def run_table(
    pool_id: str,
    query_ids: Sequence[str],
    ranked: Sequence[tuple[np.ndarray, np.ndarray]],
) -> pa.Table:
    """A run table for one pool from per-query (ids, scores) already in rank order."""
    n = [len(ids) for ids, _ in ranked]
    total = int(sum(n))
    ranks: Any = np.concatenate([np.arange(1, m + 1, dtype=np.int32) for m in n]) if total else []
    return pa.table(
        {
            "pool_id": pa.array([pool_id] * total, pa.string()),
            "query_id": pa.array(np.repeat(np.asarray(query_ids, dtype=object), n), pa.string()),
            "paper_id": pa.array(
                np.concatenate([ids for ids, _ in ranked]) if total else [], pa.string()
            ),
            "score": pa.array(
                np.concatenate([s for _, s in ranked]) if total else [], pa.float64()
            ),
            "rank": pa.array(ranks, pa.int32()),
        },
        schema=RUNS.schema,
    )


class RunWriter:
    """Writes a run Parquet file incrementally (one pool or query batch at a time)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows = 0
        self._writer = pq.ParquetWriter(path, RUNS.schema, compression="zstd")

    def write(self, table: pa.Table) -> None:
        if table.num_rows:
            self._writer.write_table(table.cast(RUNS.schema))
            self.rows += table.num_rows

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
