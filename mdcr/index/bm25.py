"""BM25 stages: ``bm25-tune`` (grid search of k1, b on validation pools) and ``bm25`` (runs).

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
import itertools
import json
import math
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from mdcr.contracts.paper import DEPTH, RECALL_K
from mdcr.core.config import input_path, param, setting
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.stage import PlanFacts, StageContext, StagePlan, StageSpec, register
from mdcr.engine import EngineSettings, check_engine_settings
from mdcr.index.bm25_data import PoolData, PoolInfo, PoolJob, PoolWorker, open_pool_worker
from mdcr.measures import registry as measures
from mdcr.retrievers.device import DEVICE_HELP, check_device_spec

SWEEP_DEVICE_HELP = f"{DEVICE_HELP}; the sweep uses one GPU, torch's, and Lucene none"

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa


GRID_FILE = "grid.parquet"
CHOSEN_FILE = "chosen.json"
PARTS = "parts"
# pyserini's (and Anserini's) default BM25 parameters.
DEFAULT_K1 = 0.9
DEFAULT_B = 0.4
DEFAULT_K1_GRID = (0.6, 0.8, 0.9, 1.0, 1.2, 1.4, 1.6)
DEFAULT_B_GRID = (0.2, 0.4, 0.6, 0.75, 0.8, 1.0)


def _check_k1_b(where: str, k1s: Sequence[float], bs: Sequence[float]) -> None:
    for k1 in k1s:
        if not math.isfinite(k1) or k1 < 0:
            raise ConfigError(f"{where}.k1: must be a finite number >= 0, got {k1}")
    for b in bs:
        if not 0 <= b <= 1:
            raise ConfigError(f"{where}.b: must be between 0 and 1, got {b}")


def metric_name(metric: str, depth: int) -> str:
    """The stored name of the measure to maximise: a kind is cut at ``depth`` (``map`` ->
    ``map@<depth>``) or at the paper's k (``recall`` -> ``recall@30``), as its registry
    entry says; a name with a cut-off (``recall@30``) stays as it is."""
    name = metric.strip().lower()
    try:
        if "@" not in name:
            measure = measures.get(name)
            return measure.name(measure.cutoff_of(depth, RECALL_K))
        measures.parse(name)
    except (ConfigError, InputDataError):
        valid = ", ".join(measures.kinds())
        raise ConfigError(
            f"bm25-tune.metric: {metric!r} is not valid; valid: {valid} (or kind@N)"
        ) from None
    return name


@dataclass(frozen=True)
class TuneConfig(EngineSettings):
    # What runs BM25 was called ``engine`` before ``--engine`` came to name local or Ray.
    RENAMED_KEYS: ClassVar[dict[str, str]] = {"engine": "backend"}

    corpus: str = input_path(help="prefilter output (papers.parquet with title and abstract)")
    pools: str = input_path(help="pools output; only its validation (split 'val') pools are used")
    k1: tuple[float, ...] = param(DEFAULT_K1_GRID, help="k1 values of the grid")
    b: tuple[float, ...] = param(DEFAULT_B_GRID, help="b values of the grid")
    metric: str = param(
        measures.MAP.kind,
        help="measure to maximise, averaged over val pools: map, ndcg or recall@30 (any "
        "registered kind, or kind@N)",
    )
    depth: int = param(DEPTH, help="ranking depth searched and scored (MAP and nDCG cut-off)")
    threads: int = setting(0, help="threads for indexing and search (0: all cores)")
    backend: Literal["sweep", "lucene"] = setting(
        "sweep",
        help="sweep: the whole grid from one pass over each query's postings (exact: equal "
        "to Lucene's rankings and scores, tested); lucene: one Lucene search per grid point",
    )
    device: str = setting("auto", help=f"where the sweep scores: {SWEEP_DEVICE_HELP}")

    def validate(self) -> None:
        if not self.k1 or not self.b:
            raise ConfigError("bm25-tune.k1 and bm25-tune.b: the grid must not be empty")
        for key, values in (("k1", self.k1), ("b", self.b)):
            if len(set(values)) != len(values):
                raise ConfigError(f"bm25-tune.{key}: has duplicates: {list(values)}")
        _check_k1_b("bm25-tune", self.k1, self.b)
        if self.depth < 1:
            raise ConfigError(f"bm25-tune.depth: must be >= 1, got {self.depth}")
        if self.threads < 0:
            raise ConfigError(f"bm25-tune.threads: must be >= 0, got {self.threads}")
        check_engine_settings(self, "bm25-tune")
        check_device_spec(self.device, "bm25-tune.device")
        metric_name(self.metric, self.depth)


@dataclass(frozen=True)
class BM25Config(EngineSettings):
    # What runs BM25 was called ``engine`` before ``--engine`` came to name local or Ray.
    RENAMED_KEYS: ClassVar[dict[str, str]] = {"engine": "backend"}

    corpus: str = input_path(help="prefilter output (papers.parquet with title and abstract)")
    pools: str = input_path(help="pools output")
    params: str | None = input_path(
        None, help="bm25-tune output: use its chosen k1 and b (else the k1 and b keys)"
    )
    k1: float = param(DEFAULT_K1, help="BM25 k1 when no params input is given")
    b: float = param(DEFAULT_B, help="BM25 b when no params input is given")
    k: int = param(DEPTH, help="candidates kept per query (top-k)")
    splits: tuple[Literal["val", "test"], ...] = param(("test",), help="pool splits to search")
    threads: int = setting(0, help="threads for indexing and search (0: all cores)")
    backend: Literal["lucene", "sweep"] = setting(
        "lucene", help="lucene (the reference) or sweep (mdcr's exact BM25, equal to Lucene's)"
    )
    device: str = setting("auto", help=f"where the sweep scores: {SWEEP_DEVICE_HELP}")

    def validate(self) -> None:
        _check_k1_b("bm25", [self.k1], [self.b])
        if self.params and (self.k1 != DEFAULT_K1 or self.b != DEFAULT_B):
            raise ConfigError("bm25: give either params (a bm25-tune output) or k1/b, not both")
        if self.k < 1:
            raise ConfigError(f"bm25.k: must be >= 1, got {self.k}")
        if not self.splits or len(set(self.splits)) != len(self.splits):
            raise ConfigError(f"bm25.splits: must be non-empty without duplicates: {self.splits}")
        if self.threads < 0:
            raise ConfigError(f"bm25.threads: must be >= 0, got {self.threads}")
        check_engine_settings(self, "bm25")
        check_device_spec(self.device, "bm25.device")


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


def _home(ctx: StageContext) -> Path | None:
    """The home of the store the stage runs in (None: the default store)."""
    return ctx.store.home if ctx.store is not None else None


def _index_fingerprints(data: PoolData, pools: Sequence[PoolInfo]) -> dict[str, str]:
    """pool_id -> the fingerprint of its Lucene index."""
    from mdcr.index.lucene import index_fingerprint

    return {p.pool_id: index_fingerprint(data.pool_ids(p.pool_id), data.corpus_fp) for p in pools}


def ensure_index(
    data: PoolData, pool: PoolInfo, threads: int, ctx: StageContext, root: Path
) -> Path:
    """The pool's Lucene index under ``root`` (the store's ``lucene-index/``), built now
    unless an identical one exists."""
    from mdcr.index.lucene import Doc, build_index, index_fingerprint, read_index_meta

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


def _pool_run(
    pool_id: str, query_ids: Sequence[str], ranked: Sequence[tuple[np.ndarray, np.ndarray]]
) -> pa.Table:
    from mdcr.index.runs import run_table

    return run_table(pool_id, query_ids, ranked)


def _write_part(path: Path, table: pa.Table) -> None:
    import pyarrow.parquet as pq

    from mdcr.core.atomic import atomic_path

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def read_chosen(path: Path) -> tuple[float, float, dict[str, Any]]:
    """(k1, b, the whole choice) of a bm25-tune output (or its chosen.json)."""
    file = path / CHOSEN_FILE if path.is_dir() else path
    if not file.is_file():
        raise InputDataError(
            f"no {CHOSEN_FILE} at '{path}'; point params (evaluate: --bm25-params) to a "
            "bm25-tune output"
        )
    try:
        chosen = json.loads(file.read_text())
        k1, b = float(chosen["k1"]), float(chosen["b"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputDataError(
            f"'{file}' is not a bm25-tune choice ({exc}); re-run bm25-tune"
        ) from exc
    _check_k1_b(str(file), [k1], [b])
    return k1, b, chosen


def run_bm25(cfg: BM25Config, ctx: StageContext) -> None:
    """Search every pool of the chosen splits with BM25 and write one run file."""
    import numpy as np
    import pyarrow.parquet as pq

    from mdcr.contracts.artifacts import RUNS
    from mdcr.contracts.facts import RunInfo
    from mdcr.index.runs import RunWriter
    from mdcr.retrievers.builtin import BM25
    from mdcr.retrievers.identity import BM25_IDENTITY

    params = ctx.inputs.get("params") or []
    if params:
        k1, b, chosen = read_chosen(params[0])
        ctx.record("params_from", {"path": str(params[0]), "metric": chosen.get("metric")})
    else:
        k1, b = cfg.k1, cfg.b
    data = PoolData(ctx.input("corpus"), ctx.input("pools"), cfg.threads)
    try:
        pools = data.pools_of(cfg.splits)
        if not pools:
            raise InputDataError(
                f"no pools of split(s) {', '.join(cfg.splits)} in the pools input; "
                f"it has: {', '.join(data.splits()) or 'none'}"
            )
        ctx.log(f"[bm25] {len(pools)} pools, k1={k1}, b={b}")
        indexes: dict[str, str] = {}
        terms: list[np.ndarray] = []
        job = _pool_job(cfg, ctx, ((k1, b),), cfg.k)
        _map_pools(ctx, cfg, data, job, pools, bm25_pool, "bm25")
        with RunWriter(RUNS.output(ctx)) as writer:
            for pool in pools:
                part = ctx.out / PARTS / part_name(pool.pool_id)
                writer.write(pq.read_table(part).cast(RUNS.schema))
                side = json.loads(part.with_suffix(".json").read_text())
                if "index" in side:
                    indexes[pool.pool_id] = side["index"]
                terms.append(np.asarray(side["n_terms"], dtype=np.int64))
        ctx.outputs[RUNS.file] = writer.rows
        shutil.rmtree(ctx.out / PARTS, ignore_errors=True)
        RunInfo(BM25.name, data.pools_fp, dict(BM25_IDENTITY)).record(ctx)
        ctx.record("k1", k1)
        ctx.record("b", b)
        ctx.record("k", cfg.k)
        ctx.record("splits", list(cfg.splits))
        ctx.record("corpus_fingerprint", data.corpus_fp)
        ctx.record("n_pools", len(pools))
        ctx.record("indexes", indexes)
        ctx.record("query_terms", _terms_summary(terms))
        ctx.record("lucene", _lucene_info())
    finally:
        data.close()


def query_terms(texts: Sequence[str]) -> np.ndarray:
    """Distinct analysed terms of each query text (the Boolean clauses Lucene searches)."""
    import numpy as np

    from mdcr.index.lucene import Analyzer

    analyzer = Analyzer()
    return np.array([len(set(analyzer.analyze(t))) for t in texts], dtype=np.int64)


def _terms_summary(terms: list[np.ndarray]) -> dict[str, Any]:
    import numpy as np

    from mdcr.index.lucene import QueryStats

    return QueryStats(np.concatenate(terms)).summary()


def _lucene_info() -> dict[str, Any]:
    from mdcr.index.java import start_jvm
    from mdcr.index.lucene import ANALYZER, _Java

    info = start_jvm()
    return {
        "anserini": info.anserini_version,
        "lucene": _Java.get().lucene_version,
        "java": info.version,
        "analyzer": ANALYZER,
    }


# ---------------------------------------------------------------------------------------
# Tuning


def choose(grid: pd.DataFrame, metric: str) -> dict[str, Any]:
    """The grid point with the best mean ``metric`` over pools.

    ``grid`` has pool_id, k1, b, metric, value (a pool's mean over its queries). Each pool
    weighs the same. Ties (to 1e-12) go to the point nearest pyserini's default (0.9, 0.4),
    then to the smaller k1 and b, so the choice never depends on the grid's order.
    """
    rows = grid[grid["metric"] == metric]
    if rows.empty:
        raise InputDataError(f"the grid has no values of metric '{metric}'")
    agg = rows.groupby(["k1", "b"], as_index=False).agg(value=("value", "mean"))
    means = {
        (float(k1), float(b)): float(v)
        for k1, b, v in zip(agg["k1"], agg["b"], agg["value"], strict=True)
    }

    def rank(point: tuple[float, float]) -> tuple[float, float, float, float]:
        k1, b = point
        dist = abs(k1 - DEFAULT_K1) + abs(b - DEFAULT_B)
        return (-round(means[point], 12), dist, k1, b)

    order = sorted(means, key=rank)
    k1, b = order[0]
    out: dict[str, Any] = {
        "k1": k1,
        "b": b,
        "metric": metric,
        "value": means[(k1, b)],
        "n_pools": int(rows["pool_id"].nunique()),
        "selection": "best mean over validation pools of each pool's mean over its queries",
    }
    if (DEFAULT_K1, DEFAULT_B) in means:
        out["default"] = {"k1": DEFAULT_K1, "b": DEFAULT_B, "value": means[(DEFAULT_K1, DEFAULT_B)]}
    out["top"] = [{"k1": p[0], "b": p[1], "value": means[p]} for p in order[:5]]
    return out


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
        from mdcr.index.lucene import default_threads
        from mdcr.index.sweep import sweep_pool
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
    from mdcr.index.lucene import index_root, open_index

    path = ensure_index(data, pool, threads, ctx, index_dir or index_root(_home(ctx)))
    with open_index(path) as index:
        queries, _ = index.build_queries(qids, texts)
        for k1, b in grid:
            yield (k1, b), index.search(queries, depth, k1=k1, b=b, exclude=qids, threads=threads)


def tune_pool(
    pool: PoolInfo,
    qids: Sequence[str],
    rankings: Iterable[tuple[tuple[float, float], list[tuple[np.ndarray, np.ndarray]]]],
    qrels: pd.DataFrame,
    metrics: Sequence[str],
    depth: int,
) -> pd.DataFrame:
    """Mean metrics of one pool at every grid point of ``rankings``."""
    import pandas as pd

    from mdcr.measures.compute import score_pool

    rows = []
    for (k1, b), ranked in rankings:
        run = _pool_run(pool.pool_id, qids, ranked).to_pandas()
        per_query = score_pool(qrels, run, metrics, depth, where=f"pool {pool.pool_id}")
        means = per_query.groupby("metric")["value"].mean()
        for m in metrics:
            rows.append(
                {
                    "pool_id": pool.pool_id,
                    "setup": pool.setup,
                    "field": pool.field,
                    "k1": float(k1),
                    "b": float(b),
                    "metric": m,
                    "value": float(means[m]),
                    "n_queries": len(qids),
                }
            )
    return pd.DataFrame(rows)


def run_bm25_tune(cfg: TuneConfig, ctx: StageContext) -> None:
    """Grid-search k1 and b on the validation pools; store the grid and the choice."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mdcr.core.atomic import atomic_write_text

    metric = metric_name(cfg.metric, cfg.depth)
    # the grid holds the paper's measures (at this depth) and the one maximised
    paper = measures.names(measures.PAPER_KINDS, cfg.depth, RECALL_K)
    metrics = list(dict.fromkeys([*paper, metric]))
    grid = list(itertools.product(cfg.k1, cfg.b))
    data = PoolData(ctx.input("corpus"), ctx.input("pools"), cfg.threads)
    try:
        pools = data.pools_of(("val",))
        if not pools:
            raise InputDataError(
                f"no validation pools (split 'val') in the pools input; it has: "
                f"{', '.join(data.splits()) or 'none'}; build pools with splits including 'val'"
            )
        ctx.log(f"[bm25-tune] {len(pools)} val pools x {len(grid)} grid points, metric {metric}")
        job = _pool_job(cfg, ctx, tuple(grid), cfg.depth, tuple(metrics))
        _map_pools(ctx, cfg, data, job, pools, tune_one_pool, "bm25-tune")
        parts = [pq.read_table(ctx.out / PARTS / part_name(p.pool_id)).to_pandas() for p in pools]
        table = pd.concat(parts, ignore_index=True).sort_values(
            ["pool_id", "k1", "b", "metric"], kind="stable"
        )
        pq.write_table(
            pa.Table.from_pandas(table, preserve_index=False),
            ctx.output(GRID_FILE, rows=len(table)),
        )
        chosen = choose(table, metric)
        chosen["grid"] = {"k1": list(cfg.k1), "b": list(cfg.b)}
        chosen["depth"] = cfg.depth
        chosen["pools"] = [p.pool_id for p in pools]
        atomic_write_text(ctx.output(CHOSEN_FILE), json.dumps(chosen, indent=2) + "\n")
        shutil.rmtree(ctx.out / PARTS, ignore_errors=True)
        ctx.record("chosen", {k: chosen[k] for k in ("k1", "b", "metric", "value", "n_pools")})
        ctx.record("pools_fingerprint", data.pools_fp)
        if cfg.backend == "lucene":  # the indexes it searched (mdcr gc keeps them)
            ctx.record("indexes", _index_fingerprints(data, pools))
        ctx.record("lucene", _lucene_info())
        ctx.log(
            f"[bm25-tune] chosen k1={chosen['k1']}, b={chosen['b']}: "
            f"{metric} {chosen['value']:.4f} (mean over {chosen['n_pools']} val pools)"
        )
    finally:
        data.close()


# ---------------------------------------------------------------------------------------
# Units of work: one pool each, run by the engine (this process, or Ray workers)


def _pool_job(
    cfg: BM25Config | TuneConfig,
    ctx: StageContext,
    grid: tuple[tuple[float, float], ...],
    depth: int,
    metrics: tuple[str, ...] = (),
) -> PoolJob:
    from mdcr.index.lucene import index_root
    from mdcr.retrievers.device import resolve_device

    if cfg.backend == "sweep" and cfg.executor == "local":
        resolve_device(cfg.device)  # a GPU asked for but absent: one line, before any pool
    return PoolJob(
        corpus=ctx.input("corpus").resolve(),
        pools=ctx.input("pools").resolve(),
        out=ctx.out.resolve(),
        spill=(ctx.out / PARTS / "spill").resolve(),
        index_dir=index_root(_home(ctx)).resolve(),
        threads=cfg.threads,
        backend=cfg.backend,
        device=cfg.device,
        depth=depth,
        grid=grid,
        metrics=metrics,
    )


def _map_pools(
    ctx: StageContext,
    cfg: BM25Config | TuneConfig,
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


def bm25_pool(worker: PoolWorker, pool: PoolInfo) -> tuple[int, float]:
    """Search one pool at the job's (k1, b) and write its part; (queries, seconds)."""
    from mdcr.core.atomic import atomic_write_text
    from mdcr.index.lucene import index_fingerprint

    job, data = worker.job, worker.data
    part = job.out / PARTS / part_name(pool.pool_id)
    worker.open_pool(pool.pool_id)
    qids, texts = data.queries(pool.pool_id)
    t0 = time.perf_counter()
    ((_, ranked),) = grid_rankings(
        data, pool, qids, texts, job.grid, job.depth, job.threads, job.backend, worker.ctx,
        job.device, job.index_dir,
    )  # fmt: skip
    seconds = time.perf_counter() - t0
    side = {"backend": job.backend, "n_terms": query_terms(texts).tolist()}
    if job.backend == "lucene":
        side["index"] = index_fingerprint(data.pool_ids(pool.pool_id), data.corpus_fp)
    atomic_write_text(part.with_suffix(".json"), json.dumps(side))
    _write_part(part, _pool_run(pool.pool_id, qids, ranked))  # last: marks it done
    return len(qids), seconds


def tune_one_pool(worker: PoolWorker, pool: PoolInfo) -> tuple[int, float]:
    """Score one validation pool at every grid point and write its part; (queries, seconds)."""
    import pyarrow as pa

    job, data = worker.job, worker.data
    worker.open_pool(pool.pool_id)
    qids, texts = data.queries(pool.pool_id)
    t0 = time.perf_counter()
    rankings = grid_rankings(
        data, pool, qids, texts, job.grid, job.depth, job.threads, job.backend, worker.ctx,
        job.device, job.index_dir,
    )  # fmt: skip
    df = tune_pool(pool, qids, rankings, data.qrels(pool.pool_id), job.metrics, job.depth)
    seconds = time.perf_counter() - t0
    table = pa.Table.from_pandas(df, preserve_index=False)
    _write_part(job.out / PARTS / part_name(pool.pool_id), table)
    return len(qids), seconds


def plan_bm25_tune(
    cfg: TuneConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    how = (
        "the exact sweep, one pass per query"
        if cfg.backend == "sweep"
        else "Lucene, one index per pool in the store's lucene-index/"
    )
    from mdcr.planning.work import facts_of, pool_work

    pools = facts_of(inputs, "pools", upstream)
    grid = len(cfg.k1) * len(cfg.b)
    work = None
    if pools:  # the sweep's rate is for the whole default grid; Lucene pays each point
        work = (
            pool_work("bm25-tune", pools[0], ["val"])
            if cfg.backend == "sweep"
            else pool_work("bm25", pools[0], ["val"], pair_factor=grid)
        )
    return StagePlan(
        f"grid {len(cfg.k1)} k1 x {len(cfg.b)} b on every val pool ({how}); choose by {cfg.metric}",
        work=work,
    )


def plan_bm25(
    cfg: BM25Config, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    how = "k1, b from bm25-tune" if inputs.get("params") else f"k1={cfg.k1}, b={cfg.b}"
    from mdcr.planning.work import facts_of, pool_work

    backend = "Lucene" if cfg.backend == "lucene" else "the exact sweep"
    pools = facts_of(inputs, "pools", upstream)
    rate = "bm25" if cfg.backend == "lucene" else "bm25-tune"
    return StagePlan(
        f"BM25 ({backend}) top-{cfg.k} on {', '.join(cfg.splits)} pools; {how}",
        work=pool_work(rate, pools[0], cfg.splits) if pools else None,
    )


def identify_bm25_tune(cfg: TuneConfig) -> dict[str, Any]:
    """The definition of the maximised measure when it was registered at run time."""
    return measures.identity([measures.parse(metric_name(cfg.metric, cfg.depth))[0].kind])


TUNE_SPEC = register(
    StageSpec(
        name="bm25-tune",
        version="1",
        config=TuneConfig,
        run=run_bm25_tune,
        help="grid-search BM25 k1 and b on the validation pools (exact sweep, or Lucene)",
        resumable=True,
        plan=plan_bm25_tune,
        identity=identify_bm25_tune,
        main_output=CHOSEN_FILE,
        finished_units=finished_pools,
    )
)

SPEC = register(
    StageSpec(
        name="bm25",
        version="1",
        config=BM25Config,
        run=run_bm25,
        help="BM25 runs (Lucene via Anserini) for every pool of the chosen splits",
        resumable=True,
        plan=plan_bm25,
        main_output="runs.parquet",
        finished_units=finished_pools,
    )
)
