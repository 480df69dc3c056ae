"""The BM25 stages' inputs: the corpus text and the pools, queried with DuckDB.

A :class:`PoolData` is opened by each process that works on pools (the stage, or each of
its Ray workers); it reads the prefilter and pools outputs in place.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.core.errors import InputDataError

if TYPE_CHECKING:
    import duckdb
    import numpy as np
    import pandas as pd

_BATCH = 50_000  # papers read per batch when indexing


@dataclass(frozen=True)
class PoolInfo:
    pool_id: str
    setup: str
    split: str
    field: str | None


class PoolData:
    """The corpus text and the pools, queried with DuckDB."""

    def __init__(self, corpus: Path, pools: Path, threads: int) -> None:
        import duckdb

        from mdcr.contracts.artifacts import PAPERS, POOL_META, POOLS, QRELS
        from mdcr.core.fingerprints import artifact_fingerprint

        self.corpus_fp = artifact_fingerprint(corpus)
        self.pools_fp = artifact_fingerprint(pools)
        files = {
            "papers": PAPERS.require(corpus),
            "pools": POOLS.require(pools),
            "qrels": QRELS.require(pools),
        }
        if POOL_META.exists(pools):
            files["pool_meta"] = POOL_META.require(pools)
        self._prefetched: set[str] = set()
        self.con: duckdb.DuckDBPyConnection = duckdb.connect()
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        for name, path in files.items():
            self.con.execute(
                f"CREATE VIEW {name} AS SELECT * FROM read_parquet({_sql_str(str(path))})"
            )
        if "pool_meta" not in files:  # pools from elsewhere: setup/split/field from the id
            self.con.execute(
                "CREATE VIEW pool_meta AS SELECT pool_id, split_part(pool_id, '/', 1) AS setup, "
                "split_part(pool_id, '/', 2) AS split, CASE WHEN split_part(pool_id, '/', 1) "
                "= 'field' THEN split_part(pool_id, '/', 3) END AS field "
                "FROM (SELECT DISTINCT pool_id FROM pools)"
            )

    def close(self) -> None:
        self.con.close()

    def prefetch(self, pool_ids: Sequence[str], spill: Path) -> int:
        """Read the texts of every paper and query of ``pool_ids`` in one scan of the
        corpus, into a DuckDB table (in memory up to a quarter of the machine's, then
        spilling under ``spill``); later reads of these pools come from it. Without it
        each pool scans the whole corpus twice (its papers and its queries): about 20 s a
        scan at 16M papers on 2 cores. Returns the papers read."""
        import os

        spill.mkdir(parents=True, exist_ok=True)
        self.con.execute(f"SET temp_directory = {_sql_str(str(spill))}").fetchall()
        # A quarter of the memory (DuckDB's default is 80%), so that the table spills to
        # disk rather than crowd out the sweep's index beside it.
        limit = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
        self.con.execute(f"SET memory_limit = '{limit // 2**20}MiB'").fetchall()
        ids = list(pool_ids)
        self.con.execute(
            "CREATE OR REPLACE TEMP TABLE pool_papers AS "
            "SELECT p.paper_id, p.title, p.abstract FROM papers p SEMI JOIN ("
            "SELECT paper_id FROM pools WHERE list_contains(?, pool_id) UNION ALL "
            "SELECT query_id FROM qrels WHERE list_contains(?, pool_id)) w "
            "ON p.paper_id = w.paper_id",
            [ids, ids],
        ).fetchall()
        self._prefetched = set(ids)
        ((count,),) = self.con.execute("SELECT count(*) FROM pool_papers").fetchall()
        return int(count)

    def _papers_of(self, pool_id: str) -> str:
        """The table holding the texts of ``pool_id``'s papers and queries."""
        return "pool_papers" if pool_id in self._prefetched else "papers"

    def pools_of(self, splits: Sequence[str]) -> list[PoolInfo]:
        rows = self.con.execute(
            "SELECT pool_id, setup, split, field FROM pool_meta ORDER BY pool_id"
        ).fetchall()
        return [PoolInfo(*r) for r in rows if r[2] in splits]

    def splits(self) -> list[str]:
        rows = self.con.execute("SELECT DISTINCT split FROM pool_meta ORDER BY 1").fetchall()
        return [r[0] for r in rows]

    def pool_ids(self, pool_id: str) -> list[str]:
        """The pool's paper ids, sorted (code-point order, as ``rank_candidates`` sorts)."""
        rel = self.con.sql(
            "SELECT DISTINCT paper_id FROM pools WHERE pool_id = ?", params=[pool_id]
        )
        table = (getattr(rel, "to_arrow_table", None) or rel.arrow)()  # duckdb >= 1.4 / older
        return sorted(table.column(0).to_pylist())

    def pool_texts(self, pool_id: str) -> Iterator[tuple[list[str], list[str]]]:
        """(paper ids, title + newline + abstract) of the pool's papers, in batches."""
        rel: Any = self.con.sql(
            "SELECT p.paper_id, coalesce(p.title, '') || chr(10) || coalesce(p.abstract, '') "
            f"FROM {self._papers_of(pool_id)} p "
            "SEMI JOIN (SELECT paper_id FROM pools WHERE pool_id = ?) c "
            "ON p.paper_id = c.paper_id",
            params=[pool_id],
        )
        fetch = getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader
        for batch in fetch(_BATCH):
            yield batch.column(0).to_pylist(), batch.column(1).to_pylist()

    def pool_texts_sorted(self, pool_id: str) -> tuple[np.ndarray, list[str]]:
        """The pool's paper ids sorted (Lucene's document order) and their texts in that order."""
        import numpy as np

        ids = np.asarray(self.pool_ids(pool_id), dtype=object)
        position = {pid: i for i, pid in enumerate(ids.tolist())}
        texts: list[str] = [""] * len(ids)
        for batch_ids, batch_texts in self.pool_texts(pool_id):
            for pid, text in zip(batch_ids, batch_texts, strict=True):
                texts[position[pid]] = text
        return ids, texts

    def queries(self, pool_id: str) -> tuple[list[str], list[str]]:
        """(query ids sorted, their title + newline + abstract) of a pool's queries."""
        rows = self.con.execute(
            "SELECT q.query_id, p.paper_id IS NULL, "
            "coalesce(p.title, '') || chr(10) || coalesce(p.abstract, '') "
            "FROM (SELECT DISTINCT query_id FROM qrels WHERE pool_id = ?) q "
            f"LEFT JOIN {self._papers_of(pool_id)} p ON p.paper_id = q.query_id "
            "ORDER BY q.query_id",
            [pool_id],
        ).fetchall()
        missing = [r[0] for r in rows if r[1]]
        if missing:
            raise InputDataError(
                f"pool '{pool_id}': {len(missing)} query paper(s) are not in the corpus "
                f"(e.g. {missing[0]!r}); use the corpus the pools were built from"
            )
        return [r[0] for r in rows], [r[2] for r in rows]

    def qrels(self, pool_id: str) -> pd.DataFrame:
        return self.con.execute(
            "SELECT query_id, paper_id, relevance FROM qrels WHERE pool_id = ?", [pool_id]
        ).df()


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


@dataclass(frozen=True)
class PoolJob:
    """What a worker needs to work on pools (paths absolute, picklable).

    ``out``: the stage's work folder (each pool's part goes under it); ``spill``: where
    DuckDB spills the texts it holds; ``index_dir``: the Lucene indexes of the driver's
    store; ``metrics``: bm25-tune's metrics (empty for bm25).
    """

    corpus: Path
    pools: Path
    out: Path
    spill: Path
    index_dir: Path
    threads: int
    backend: str  # "lucene" or "sweep"
    depth: int
    device: str  # where the sweep scores (a device spec)
    grid: tuple[tuple[float, float], ...]
    metrics: tuple[str, ...] = ()


@dataclass
class PoolWorker:
    """A worker's state: the job, the pools' data and a quiet context for index builds.

    ``spill`` is set in a worker process of its own: it reads each pool's texts with one
    corpus scan as the pool starts (:meth:`open_pool`); the stage's own process read every
    pool's at once before it mapped them.
    """

    job: PoolJob
    data: PoolData
    ctx: Any
    spill: Path | None = None

    def open_pool(self, pool_id: str) -> None:
        """Get ready to work on ``pool_id``: in a worker process, read the texts of its
        papers and queries in one corpus scan (two otherwise: papers, then queries)."""
        if self.spill is not None:
            self.data.prefetch([pool_id], self.spill)


def open_pool_worker(job: PoolJob) -> PoolWorker:
    """A worker's state, opened in the worker's own process (its own DuckDB and JVM)."""
    import dataclasses
    import os
    import socket

    from mdcr.core.stage import StageContext

    if not job.threads:  # the CPUs Ray gave this worker (it sets OMP_NUM_THREADS to them)
        job = dataclasses.replace(job, threads=int(os.environ.get("OMP_NUM_THREADS") or 1))
    data = PoolData(job.corpus, job.pools, job.threads)
    ctx = StageContext(out=job.out, inputs={}, quiet=True)
    # DuckDB's spill files are named per database, not per process: a folder of its own.
    spill = job.spill / f"{socket.gethostname()}-{os.getpid()}"
    return PoolWorker(job, data, ctx, spill=spill)
