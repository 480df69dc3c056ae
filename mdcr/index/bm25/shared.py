"""What both BM25 stages share: BM25's parameters and their check, the per-pool parts a run
resumes from, the pools' Lucene indexes, the rankings at grid points by either backend (the
exact sweep or Lucene), and the engine's map over pools.

BM25 is Lucene's (through Anserini, as pyserini runs it; paper section 3 and appendix A.1).
Each pool gets its own index, so document frequencies, document count and average length
are those of the pool, as the paper's per-pool evaluation implies. A document and a query
are both a paper's title + newline + abstract; the query paper is never a candidate in its
own ranking, and ties are broken by (score desc, paper_id asc), as in every retriever.

Indexes are shared, not stage outputs: the store's ``lucene-index/`` holds one folder per
distinct (pool papers, corpus, analyzer) fingerprint, so the tuning grid, the test runs,
re-runs and identical pools all reuse one index; a stage records the indexes it searched
(``info.indexes``), which ``mdcr gc`` reads. BM25's k1 and b are applied at
search time, so one index serves the whole grid. Both stages are resumable per pool.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.stage import StageContext
from mdcr.index.bm25.data import PoolData, PoolInfo, PoolJob, PoolWorker, open_pool_worker
from mdcr.retrievers.device import DEVICE_HELP

SWEEP_DEVICE_HELP = f"{DEVICE_HELP}; the sweep uses one GPU, torch's, and Lucene none"

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa


PARTS = "parts"
# pyserini's (and Anserini's) default BM25 parameters.
DEFAULT_K1 = 0.9
DEFAULT_B = 0.4


class BM25Settings(Protocol):
    """How a BM25 stage runs, as both configs hold it (``TuneConfig``, ``BM25Config``)."""

    @property
    def threads(self) -> int: ...
    @property
    def backend(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def executor(self) -> str: ...


def check_k1_b(where: str, k1s: Sequence[float], bs: Sequence[float]) -> None:
    for k1 in k1s:
        if not math.isfinite(k1) or k1 < 0:
            raise ConfigError(f"{where}.k1: must be a finite number >= 0, got {k1}")
    for b in bs:
        if not 0 <= b <= 1:
            raise ConfigError(f"{where}.b: must be between 0 and 1, got {b}")


# ---------------------------------------------------------------------------------------
# Inputs


def part_name(pool_id: str) -> str:
    """A file name for a pool's partial result (pool ids hold '/' and spaces)."""
    return hashlib.sha1(pool_id.encode()).hexdigest()[:16] + ".parquet"


def finished_pools(work: Path) -> int:
    """Pools a failed bm25 or bm25-tune run finished (their parts); a later run resumes
    from them, and a failed run without any leaves no work folder."""
    return sum(1 for _ in (work / PARTS).glob("*.parquet"))


# ---------------------------------------------------------------------------------------
# Indexes


def store_home(ctx: StageContext) -> Path | None:
    """The home of the store the stage runs in (None: the default store)."""
    return ctx.store.home if ctx.store is not None else None


def ensure_index(
    data: PoolData, pool: PoolInfo, threads: int, ctx: StageContext, root: Path
) -> Path:
    """The pool's Lucene index under ``root`` (the store's ``lucene-index/``), built now
    unless an identical one exists."""
    from mdcr.index.lucene.indexes import Doc, build_index, index_fingerprint, read_index_meta

    ids = data.pool_ids(pool.pool_id)
    if not ids:
        raise InputDataError(f"pool '{pool.pool_id}' has no papers in pools.parquet")
    fp = index_fingerprint(ids, data.corpus_fp)
    path = root / fp
    if read_index_meta(path) is not None:
        ctx.log(f"[bm25] {pool.pool_id}: reusing index {path}")
        return path
    bar = ctx.progress(total=len(ids), desc=f"index {pool.pool_id}", unit="doc")
    t0 = time.perf_counter()
    try:
        meta = build_index(
            path,
            ids,
            (Doc(i, t) for i, t in data.pool_texts(pool.pool_id)),
            meta={"fingerprint": fp, "corpus": data.corpus_fp, "first_pool": pool.pool_id},
            threads=threads,
            progress=bar.update,
        )
    finally:
        bar.close()
    wall = time.perf_counter() - t0
    ctx.log(
        f"[bm25] {pool.pool_id}: indexed {meta['n_docs']} papers in {wall:.1f}s "
        f"({meta['n_docs'] / max(wall, 1e-9):.0f} docs/s) -> {path}"
    )
    return path


# ---------------------------------------------------------------------------------------
# Search


def pool_run(
    pool_id: str, query_ids: Sequence[str], ranked: Sequence[tuple[np.ndarray, np.ndarray]]
) -> pa.Table:
    from mdcr.index.runs import run_table

    return run_table(pool_id, query_ids, ranked)


def write_part(path: Path, table: pa.Table) -> None:
    import pyarrow.parquet as pq

    from mdcr.core.atomic import atomic_path

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def lucene_info() -> dict[str, Any]:
    from mdcr.index.lucene.indexes import ANALYZER, _Java
    from mdcr.index.lucene.java import start_jvm

    info = start_jvm()
    return {
        "anserini": info.anserini_version,
        "lucene": _Java.get().lucene_version,
        "java": info.version,
        "analyzer": ANALYZER,
    }


def grid_rankings(
    data: PoolData,
    pool: PoolInfo,
    qids: Sequence[str],
    texts: Sequence[str],
    grid: Sequence[tuple[float, float]],
    depth: int,
    threads: int,
    backend: str,
    ctx: StageContext,
    device: str = "cpu",
    index_dir: Path | None = None,
) -> Iterator[tuple[tuple[float, float], list[tuple[np.ndarray, np.ndarray]]]]:
    """((k1, b), the pool's ranked papers per query) at every grid point, by either backend
    (the sweep on ``device``; Lucene with its indexes under ``index_dir``)."""
    if backend == "sweep":
        from mdcr.index.lucene.indexes import default_threads
        from mdcr.index.sweep.grid import sweep_pool
        from mdcr.retrievers.device import resolve_device

        ids, docs = data.pool_texts_sorted(pool.pool_id)
        if not len(ids):
            raise InputDataError(f"pool '{pool.pool_id}' has no papers in pools.parquet")
        per_grid = sweep_pool(
            ids, docs, qids, texts, grid, depth, threads=threads or default_threads(),
            device=resolve_device(device),
        )  # fmt: skip
        yield from zip(grid, per_grid, strict=True)
        return
    from mdcr.index.lucene.indexes import index_root, open_index

    path = ensure_index(data, pool, threads, ctx, index_dir or index_root(store_home(ctx)))
    with open_index(path) as index:
        queries, _ = index.build_queries(qids, texts)
        for k1, b in grid:
            yield (k1, b), index.search(queries, depth, k1=k1, b=b, exclude=qids, threads=threads)


# ---------------------------------------------------------------------------------------
# Units of work: one pool each, run by the engine (this process, or Ray workers)


def pool_job(
    cfg: BM25Settings,
    ctx: StageContext,
    grid: tuple[tuple[float, float], ...],
    depth: int,
    metrics: tuple[str, ...] = (),
) -> PoolJob:
    from mdcr.index.lucene.indexes import index_root
    from mdcr.retrievers.device import resolve_device

    if cfg.backend == "sweep" and cfg.executor == "local":
        resolve_device(cfg.device)  # a GPU asked for but absent: one line, before any pool
    return PoolJob(
        corpus=ctx.input("corpus").resolve(),
        pools=ctx.input("pools").resolve(),
        out=ctx.out.resolve(),
        spill=(ctx.out / PARTS / "spill").resolve(),
        index_dir=index_root(store_home(ctx)).resolve(),
        threads=cfg.threads,
        backend=cfg.backend,
        device=cfg.device,
        depth=depth,
        grid=grid,
        metrics=metrics,
    )


def map_pools(
    ctx: StageContext,
    cfg: BM25Settings,
    data: PoolData,
    job: PoolJob,
    pools: Sequence[PoolInfo],
    fn: Callable[[PoolWorker, PoolInfo], tuple[int, float]],
    label: str,
) -> None:
    """Run ``fn`` on every pool without a finished part, on the engine ``cfg`` names."""
    import functools

    from mdcr.engine import open_engine

    shared = [job.index_dir] if cfg.backend == "lucene" else []
    engine = open_engine(cfg, ctx, shared=shared, reads=[job.corpus, job.pools])
    todo = [p for p in pools if not (ctx.out / PARTS / part_name(p.pool_id)).is_file()]
    if len(todo) < len(pools):
        ctx.log(f"[{label}] {len(pools) - len(todo)} pool(s) done earlier (resumed)")
    ctx.record("pools_done_earlier", len(pools) - len(todo))
    if engine.in_process:  # this process's data and context: one corpus scan for all pools
        if todo:
            read = data.prefetch([p.pool_id for p in todo], job.spill)
            ctx.log(f"[{label}] texts of {read:,} pool papers and queries read in one pass")

        def setup() -> PoolWorker:
            return PoolWorker(job, data, ctx)

    else:
        setup = functools.partial(open_pool_worker, job)
    for pool, (n_queries, seconds) in zip(todo, engine.map(fn, todo, setup=setup), strict=True):
        ctx.timings[f"pool {pool.pool_id}"] = round(seconds, 3)
        ctx.log(f"[{label}] {pool.pool_id}: {n_queries} queries x {len(job.grid)} points")
