"""Stage ``search``: exact dense retrieval of every pool's queries against that pool.

For each pool: the pool's papers and its queries (the distinct query_ids of its qrels) are
looked up in the embedding store, an exact index is built over the pool (Faiss
``IndexFlatIP``/``IndexFlatL2``, on GPU when Faiss sees one; the torch backend on CUDA
without faiss-gpu), and the top ``k`` per query are written to ``runs.parquet`` by the
run contract: ties by (score desc, paper_id asc), the query itself excluded. Queries are
searched in batches, so no query x pool score matrix is ever built.

Exactness and ties are handled in :mod:`mdcr.index.exact` (a candidate margin, float64
re-scoring from the float16 store, and widening when a tie crosses the boundary), which
is why every backend writes the same run.

Scores: ``ip`` and ``cos`` (unit vectors) are inner products; ``l2`` is minus the squared
distance. Multi-vector stores (Aspire) score a paper by its best sentence pair.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mdcr.config import input_path, param, setting
from mdcr.device import DEVICE_HELP, check_device_spec
from mdcr.engine import (
    EXECUTOR_HELP,
    RAY_ADDRESS_HELP,
    RAY_WORKERS_HELP,
    check_engine_settings,
)
from mdcr.errors import ConfigError
from mdcr.paper import DEPTH
from mdcr.stage import PlanFacts, StageContext, StagePlan, StageSpec, register


@dataclass(frozen=True)
class SearchConfig:
    pools: str = input_path(help="pools output folder (pools.parquet, qrels.parquet)")
    embeddings: str = input_path(help="encode output folder holding every pool paper and query")
    k: int = param(DEPTH, help="papers retrieved per query")
    metric: Literal["default", "ip", "l2", "cos"] = param(
        "default", help="override the store's metric; cos normalises vectors first"
    )
    backend: Literal["auto", "faiss", "torch"] = setting(
        "auto", help="auto = Faiss (GPU if Faiss sees one), torch on CUDA without faiss-gpu"
    )
    query_batch: int = setting(
        1024, help="queries per search call (large batches amortise Faiss's thread syncs)"
    )
    margin: int = setting(64, help="extra candidates fetched to settle ties (widened if needed)")
    device: str = setting("auto", help=f"where to search: {DEVICE_HELP}")
    executor: Literal["local", "ray"] = setting("local", help=EXECUTOR_HELP)
    ray_address: str = setting("", help=RAY_ADDRESS_HELP)
    ray_workers: int = setting(0, help=RAY_WORKERS_HELP)

    def validate(self) -> None:
        for key in ("k", "query_batch"):
            if getattr(self, key) < 1:
                raise ConfigError(f"search.{key}: {getattr(self, key)} is not valid; use >= 1")
        if self.margin < 0:
            raise ConfigError(f"search.margin: {self.margin} is negative; use >= 0")
        check_device_spec(self.device, "search.device")
        check_engine_settings(self, "search")


def read_pool_queries(pools_dir: Path) -> dict[str, list[str]]:
    """Each pool's queries: the distinct query_ids of its qrels, sorted."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mdcr.artifacts import QRELS

    table = QRELS.read(pools_dir, columns=["pool_id", "query_id"])
    # Plain strings: the pools stage may dictionary-encode pool_id (one dictionary per
    # row group), which Arrow cannot group by directly.
    table = pa.table({name: pc.cast(table[name], pa.string()) for name in ("pool_id", "query_id")})
    table = table.group_by(["pool_id", "query_id"]).aggregate([])
    table = table.sort_by([("pool_id", "ascending"), ("query_id", "ascending")])
    out: dict[str, list[str]] = {}
    pool_col = pc.cast(table["pool_id"], "string").to_pylist()
    query_col = pc.cast(table["query_id"], "string").to_pylist()
    for pool_id, query_id in zip(pool_col, query_col, strict=True):
        out.setdefault(pool_id, []).append(query_id)
    return out


def read_pool_papers(pools_dir: Path, pool_id: str) -> Any:
    """The pool's paper_ids as an Arrow string array, sorted (byte order)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mdcr.artifacts import POOLS

    col = POOLS.read(pools_dir, columns=["paper_id"], filters=[("pool_id", "=", pool_id)])[
        "paper_id"
    ]
    ids = pc.cast(col, pa.string()).combine_chunks()
    ids = pc.unique(ids)
    return pc.take(ids, pc.sort_indices(ids))


@dataclass
class PoolResult:
    query_ids: list[str]
    ranked: list[tuple[np.ndarray, np.ndarray]]  # per query: paper ids, float64 scores
    stats: dict[str, Any]


def search_pool(
    store: Any,
    pool_ids: Any,
    query_ids: list[str],
    *,
    k: int,
    metric: str,
    backend: str,
    device: Any,
    query_batch: int = 1024,
    margin: int = 64,
    query_store: Any = None,
) -> PoolResult:
    """Exact top-k for one pool (``pool_ids`` sorted) and its queries.

    ``query_store``: the store read in the query role (an asymmetric encoder's query
    vectors); None: queries are read from ``store`` like the pool's papers."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mdcr.encoders.store import unit_vectors16
    from mdcr.index.backends import make_backend
    from mdcr.index.exact import SearchStats, exact_topk, exact_topk_multi, max_norm

    t0 = time.perf_counter()
    db_rows = store.require_rows(pool_ids, "pool papers")
    queries = query_store if query_store is not None else store
    q_rows = queries.require_rows(query_ids, "queries")
    q_arr = pa.array(query_ids, pa.string())
    exclude = np.asarray(
        pc.index_in(q_arr, value_set=pool_ids).fill_null(-1).to_numpy(zero_copy_only=False),
        dtype=np.int64,
    )
    search_metric = "ip" if metric in ("ip", "cos") else "l2"
    stats = SearchStats()
    if store.multi_vector:
        db, db_off = store.doc_vectors(db_rows)
        qv, q_off = queries.doc_vectors(q_rows)
        if metric == "cos" and store.metric != "cos":  # an override: normalise here
            db, qv = unit_vectors16(db), unit_vectors16(qv)
        sentence_doc = np.repeat(np.arange(len(db_rows)), np.diff(db_off))
        load_s = time.perf_counter() - t0
        index = make_backend(backend, db, search_metric, device)  # type: ignore[arg-type]
        build_s = time.perf_counter() - t0 - load_s
        ranked_rows = exact_topk_multi(
            index,
            db,
            sentence_doc,
            qv,
            q_off,
            exclude,
            k,
            search_metric,  # type: ignore[arg-type]
            margin=margin,
            batch=max(1, query_batch // 8),
            db_max_norm=getattr(index, "max_norm", None) or max_norm(db),
            stats=stats,
        )
    else:
        db = store.vectors(db_rows)
        qv = queries.vectors(q_rows)
        if metric == "cos" and store.metric != "cos":  # an override: normalise here
            db, qv = unit_vectors16(db), unit_vectors16(qv)
        load_s = time.perf_counter() - t0
        index = make_backend(backend, db, search_metric, device)  # type: ignore[arg-type]
        build_s = time.perf_counter() - t0 - load_s
        ranked_rows = exact_topk(
            index,
            db,
            qv,
            exclude,
            k,
            search_metric,  # type: ignore[arg-type]
            margin=margin,
            batch=query_batch,
            db_max_norm=getattr(index, "max_norm", None) or max_norm(db),
            stats=stats,
        )
    ids_np = np.asarray(pool_ids.to_numpy(zero_copy_only=False), dtype=str)
    ranked = [(ids_np[rows], scores) for rows, scores in ranked_rows]
    total = time.perf_counter() - t0
    return PoolResult(
        query_ids,
        ranked,
        {
            "papers": len(pool_ids),
            "vectors": len(db),
            "queries": len(query_ids),
            "backend": getattr(index, "name", backend),
            "load_s": round(load_s, 3),
            "build_s": round(build_s, 3),
            "search_s": round(total - load_s - build_s, 3),
            "widened": stats.widened,
            "max_window": stats.max_window,
        },
    )


@dataclass(frozen=True)
class SearchJob:
    """What a worker needs to search pools (paths absolute, picklable)."""

    pools: Path
    embeddings: Path
    k: int
    metric: str
    backend: str
    device: str
    query_batch: int
    margin: int


@dataclass
class SearchWorker:
    """A worker's state: the embedding store (both roles), the device and the backend."""

    job: SearchJob
    store: Any
    query_store: Any
    device: Any
    backend: str


def open_search_worker(job: SearchJob) -> SearchWorker:
    from mdcr.device import resolve_device
    from mdcr.encoders.store import EmbeddingStore
    from mdcr.index.backends import choose_backend

    device = resolve_device(job.device)
    return SearchWorker(
        job,
        EmbeddingStore(job.embeddings),
        EmbeddingStore(job.embeddings, role="query"),
        device,
        choose_backend(job.backend, device),  # type: ignore[arg-type]
    )


def search_one_pool(worker: SearchWorker, pool: tuple[str, list[str]]) -> PoolResult:
    """One unit of work: the top k of one pool's queries (pool id, its query ids)."""
    job = worker.job
    pool_id, query_ids = pool
    return search_pool(
        worker.store,
        read_pool_papers(job.pools, pool_id),
        query_ids,
        k=job.k,
        metric=job.metric,
        backend=worker.backend,
        device=worker.device,
        query_batch=job.query_batch,
        margin=job.margin,
        query_store=worker.query_store,
    )


def run_search(cfg: SearchConfig, ctx: StageContext) -> None:
    from mdcr.artifacts import RUNS, RunInfo
    from mdcr.device import resolve_device
    from mdcr.encoders.store import EmbeddingStore
    from mdcr.engine import open_engine
    from mdcr.index.backends import choose_backend
    from mdcr.index.runs import RunWriter, run_table
    from mdcr.store import artifact_fingerprint

    pools_dir = ctx.input("pools")
    store = EmbeddingStore(ctx.input("embeddings"))
    query_store = EmbeddingStore(ctx.input("embeddings"), role="query")
    metric = store.metric if cfg.metric == "default" else cfg.metric
    device = resolve_device(cfg.device)
    backend = choose_backend(cfg.backend, device)
    pool_queries = read_pool_queries(pools_dir)
    engine = open_engine(cfg, ctx, reads=[pools_dir, ctx.input("embeddings")])
    gpus = engine.worker_gpus(cfg.device)
    job = SearchJob(
        pools=pools_dir.resolve(),
        embeddings=ctx.input("embeddings").resolve(),
        k=cfg.k,
        metric=metric,
        backend=cfg.backend,
        device=cfg.device if engine.in_process else ("auto" if gpus else "cpu"),
        query_batch=cfg.query_batch,
        margin=cfg.margin,
    )
    if engine.in_process:  # the stores and device this process already opened

        def setup() -> SearchWorker:
            return SearchWorker(job, store, query_store, device, backend)

    else:
        setup = functools.partial(open_search_worker, job)
    ctx.log(
        f"[search] {store.name}: {len(pool_queries)} pools, metric {metric}, "
        f"backend {backend} on {device} ({engine.name} engine)"
    )
    per_pool: dict[str, Any] = {}
    pools = [(pool_id, pool_queries[pool_id]) for pool_id in sorted(pool_queries)]
    results = engine.map(search_one_pool, pools, setup=setup, gpus=gpus)
    with RunWriter(RUNS.output(ctx)) as writer:
        for (pool_id, _), result in ctx.progress(
            zip(pools, results, strict=True), total=len(pools), desc="search", unit="pool"
        ):
            writer.write(run_table(pool_id, result.query_ids, result.ranked))
            per_pool[pool_id] = result.stats
    ctx.outputs[RUNS.file] = writer.rows
    RunInfo(store.name, artifact_fingerprint(pools_dir)).record(ctx)
    ctx.record("encoder", store.identity)
    ctx.record("embeddings_fingerprint", artifact_fingerprint(ctx.input("embeddings")))
    ctx.record("metric", metric)
    ctx.record("k", cfg.k)
    ctx.record("backend", backend)
    ctx.record("device", str(device))
    ctx.record("pools", per_pool)


def plan_search(
    cfg: SearchConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    return StagePlan(
        f"exact dense search (backend {cfg.backend}, device {cfg.device}) of every pool's "
        f"queries, top {cfg.k}, ties by paper_id, query excluded"
    )


SPEC = register(
    StageSpec(
        name="search",
        version="1",
        config=SearchConfig,
        run=run_search,
        help="Exact dense search per pool (Faiss or torch), top-k runs by the run contract",
        plan=plan_search,
        main_output="runs.parquet",
    )
)
