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
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from mdcr.contracts.paper import DEPTH
from mdcr.core.config import input_path, param, setting
from mdcr.core.errors import ConfigError
from mdcr.core.stage import STAGES, PlanFacts, StageContext, StagePlan, StageSpec
from mdcr.engine import EngineSettings, check_engine_settings
from mdcr.retrievers.device import DEVICE_HELP, check_device_spec

if TYPE_CHECKING:
    from mdcr.index.backends import SearchMetric

# Vectors indexed at once: 2M x 768 is about 9 GB (float16 rows and Faiss's float32 copy),
# the paper's largest single-vector pool in one index.
BLOCK_VECTORS = 2_000_000


@dataclass(frozen=True)
class SearchConfig(EngineSettings):
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
        1024,
        help="query vectors per search call, whole queries (large batches amortise Faiss's "
        "thread syncs)",
    )
    margin: int = setting(64, help="extra candidates fetched to settle ties (widened if needed)")
    device: str = setting("auto", help=f"where to search: {DEVICE_HELP}")
    block_vectors: int = setting(
        BLOCK_VECTORS,
        help="most vectors indexed at once; a larger pool is searched in blocks (same runs)",
    )

    def validate(self) -> None:
        for key in ("k", "query_batch", "block_vectors"):
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

    from mdcr.contracts.artifacts import QRELS

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

    from mdcr.contracts.artifacts import POOLS

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
    block_vectors: int = BLOCK_VECTORS,
) -> PoolResult:
    """Exact top-k for one pool (``pool_ids`` sorted) and its queries.

    ``query_store``: the store read in the query role (an asymmetric encoder's query
    vectors); None: queries are read from ``store`` like the pool's papers.

    A pool of more than ``block_vectors`` vectors is searched in blocks of consecutive
    papers, one index at a time, so memory stays bounded (Aspire on a 2M-paper pool holds
    18M sentence vectors: 55 GB in float32). Each block gives its exact top k with the
    same float64 scores as one index would, and merging them by (score desc, row asc)
    gives the same ranking, because rows follow paper_id order."""
    import itertools

    from mdcr.index.exact import SearchStats

    t0 = time.perf_counter()
    db_rows = store.require_rows(pool_ids, "pool papers")
    queries = query_store if query_store is not None else store
    q_rows = queries.require_rows(query_ids, "queries")
    exclude = _own_rows(query_ids, pool_ids)
    stats = SearchStats()
    timings = {"load_s": 0.0, "build_s": 0.0}
    bounds = _block_bounds(store.vector_counts(db_rows), block_vectors)
    ranked_rows: list[tuple[np.ndarray, np.ndarray]] = []
    vectors = 0
    name = backend
    for lo, hi in itertools.pairwise(bounds):
        in_block = (exclude >= lo) & (exclude < hi)
        block_exclude = np.where(in_block, exclude - lo, -1)
        part, n_vectors, name = _search_block(
            store, queries, db_rows[lo:hi], q_rows, block_exclude, k=k, metric=metric,
            backend=backend, device=device, query_batch=query_batch, margin=margin,
            stats=stats, timings=timings,
        )  # fmt: skip
        vectors += n_vectors
        part = [(rows + lo, scores) for rows, scores in part]
        ranked_rows = part if not ranked_rows else _merge(ranked_rows, part, k)
    ids_np = np.asarray(pool_ids.to_numpy(zero_copy_only=False), dtype=str)
    ranked = [(ids_np[rows], scores) for rows, scores in ranked_rows]
    total = time.perf_counter() - t0
    return PoolResult(
        query_ids,
        ranked,
        {
            "papers": len(pool_ids),
            "vectors": vectors,
            "queries": len(query_ids),
            "backend": name,
            "blocks": len(bounds) - 1,
            "load_s": round(timings["load_s"], 3),
            "build_s": round(timings["build_s"], 3),
            "search_s": round(total - timings["load_s"] - timings["build_s"], 3),
            "widened": stats.widened,
            "max_window": stats.max_window,
        },
    )


def _own_rows(query_ids: list[str], pool_ids: Any) -> np.ndarray:
    """Each query's row in the pool (the paper_ids ``pool_ids``), -1 when it is not there."""
    import pyarrow as pa
    import pyarrow.compute as pc

    found = pc.index_in(pa.array(query_ids, pa.string()), value_set=pool_ids)
    return np.asarray(found.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


def _block_bounds(counts: np.ndarray, block_vectors: int) -> list[int]:
    """Boundaries of the blocks of consecutive papers (``counts``: vectors per paper): each
    block as many papers as fit in ``block_vectors`` vectors, at least one."""
    ends = np.cumsum(counts)
    bounds = [0]
    while bounds[-1] < len(counts):
        start = bounds[-1]
        limit = (ends[start - 1] if start else 0) + max(1, block_vectors)
        bounds.append(max(start + 1, int(np.searchsorted(ends, limit, side="right"))))
    return bounds


def _merge(
    a: list[tuple[np.ndarray, np.ndarray]], b: list[tuple[np.ndarray, np.ndarray]], k: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query, the top k of two ranked lists by (score desc, row asc)."""
    out = []
    for (rows_a, scores_a), (rows_b, scores_b) in zip(a, b, strict=True):
        rows = np.concatenate([rows_a, rows_b])
        scores = np.concatenate([scores_a, scores_b])
        top = np.lexsort((rows, -scores))[:k]
        out.append((rows[top], scores[top]))
    return out


def _search_block(
    store: Any,
    queries: Any,
    db_rows: np.ndarray,
    q_rows: np.ndarray,
    exclude: np.ndarray,
    *,
    k: int,
    metric: str,
    backend: str,
    device: Any,
    query_batch: int,
    margin: int,
    stats: Any,
    timings: dict[str, float],
) -> tuple[list[tuple[np.ndarray, np.ndarray]], int, str]:
    """Exact top-k of the queries among the papers at ``db_rows`` (rows within the block)."""
    from mdcr.encoders.store import unit_vectors16
    from mdcr.index.backends import make_backend
    from mdcr.index.exact import built_max_norm, exact_topk, exact_topk_multi

    t0 = time.perf_counter()
    search_metric: SearchMetric = "ip" if metric in ("ip", "cos") else "l2"
    if store.multi_vector:
        db, db_off = store.doc_vectors(db_rows)
        qv, q_off = queries.doc_vectors(q_rows)
    else:
        db, qv = store.vectors(db_rows), queries.vectors(q_rows)
    if metric == "cos" and store.metric != "cos":  # an override: normalise here
        db, qv = unit_vectors16(db), unit_vectors16(qv)
    t1 = time.perf_counter()
    index = make_backend(backend, db, search_metric, device)
    timings["load_s"] += t1 - t0
    timings["build_s"] += time.perf_counter() - t1
    options: dict[str, Any] = {"margin": margin, "batch": query_batch, "stats": stats}
    options["db_max_norm"] = built_max_norm(index, db)
    if store.multi_vector:
        doc_of = np.repeat(np.arange(len(db_rows)), np.diff(db_off))
        ranked = exact_topk_multi(
            index, db, doc_of, qv, q_off, exclude, k, search_metric, **options
        )
    else:
        ranked = exact_topk(index, db, qv, exclude, k, search_metric, **options)
    return ranked, len(db), str(getattr(index, "name", backend))


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
    block_vectors: int


@dataclass
class SearchWorker:
    """A worker's state: the embedding store (both roles), the device and the backend."""

    job: SearchJob
    store: Any
    query_store: Any
    device: Any
    backend: str


def open_search_worker(job: SearchJob) -> SearchWorker:
    from mdcr.encoders.store import EmbeddingStore
    from mdcr.index.backends import choose_backend
    from mdcr.retrievers.device import resolve_device

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
        block_vectors=job.block_vectors,
    )


def run_search(cfg: SearchConfig, ctx: StageContext) -> None:
    from mdcr.contracts.artifacts import RUNS
    from mdcr.contracts.facts import RunInfo
    from mdcr.core.fingerprints import artifact_fingerprint
    from mdcr.encoders.store import EmbeddingStore
    from mdcr.engine import open_engine
    from mdcr.index.backends import choose_backend
    from mdcr.index.runs import RunWriter, run_table
    from mdcr.retrievers.device import resolve_device

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
        block_vectors=cfg.block_vectors,
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
    from mdcr.retrievers.builtin_entry import entry_of

    entry = entry_of(ctx.input("embeddings"))
    RunInfo(store.name, artifact_fingerprint(pools_dir), entry).record(ctx)
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
    from mdcr.planning.work import search_work

    return StagePlan(
        f"exact dense search (backend {cfg.backend}, device {cfg.device}) of every pool's "
        f"queries, top {cfg.k}, ties by paper_id, query excluded",
        work=search_work(inputs, upstream),
    )


SPEC = STAGES.register(
    StageSpec(
        name="search",
        version="1",
        config=SearchConfig,
        run=run_search,
        help="exact dense search per pool (Faiss or torch), top-k runs by the run contract",
        plan=plan_search,
        main_output="runs.parquet",
    )
)
