"""The ``bm25-tune`` stage: a grid search of BM25's k1 and b on the validation pools
(appendix A.1), by the exact sweep (one pass over each query's postings) or Lucene; its
grid and its choice (``chosen.json``, which ``bm25`` and ``benchmark-rank`` read).
"""

from __future__ import annotations

import itertools
import json
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mdcr.contracts.paper import DEPTH, RECALL_K
from mdcr.core.config import input_path, param, setting
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.stage import STAGES, PlanFacts, StageContext, StagePlan, StageSpec
from mdcr.engine import EngineSettings, check_engine_settings
from mdcr.index.bm25.data import PoolData, PoolInfo, PoolWorker
from mdcr.index.bm25.shared import (
    DEFAULT_B,
    DEFAULT_K1,
    PARTS,
    SWEEP_DEVICE_HELP,
    check_k1_b,
    finished_pools,
    grid_rankings,
    lucene_info,
    map_pools,
    part_name,
    pool_job,
    pool_run,
    write_part,
)
from mdcr.measures import registry as measures
from mdcr.retrievers.device import check_device_spec

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


GRID_FILE = "grid.parquet"
CHOSEN_FILE = "chosen.json"
DEFAULT_K1_GRID = (0.6, 0.8, 0.9, 1.0, 1.2, 1.4, 1.6)
DEFAULT_B_GRID = (0.2, 0.4, 0.6, 0.75, 0.8, 1.0)


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
        check_k1_b("bm25-tune", self.k1, self.b)
        if self.depth < 1:
            raise ConfigError(f"bm25-tune.depth: must be >= 1, got {self.depth}")
        if self.threads < 0:
            raise ConfigError(f"bm25-tune.threads: must be >= 0, got {self.threads}")
        check_engine_settings(self, "bm25-tune")
        check_device_spec(self.device, "bm25-tune.device")
        metric_name(self.metric, self.depth)


def _index_fingerprints(data: PoolData, pools: Sequence[PoolInfo]) -> dict[str, str]:
    """pool_id -> the fingerprint of its Lucene index."""
    from mdcr.index.lucene.indexes import index_fingerprint

    return {p.pool_id: index_fingerprint(data.pool_ids(p.pool_id), data.corpus_fp) for p in pools}


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
    check_k1_b(str(file), [k1], [b])
    return k1, b, chosen


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
        run = pool_run(pool.pool_id, qids, ranked).to_pandas()
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
        job = pool_job(cfg, ctx, tuple(grid), cfg.depth, tuple(metrics))
        map_pools(ctx, cfg, data, job, pools, tune_one_pool, "bm25-tune")
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
        ctx.record("lucene", lucene_info())
        ctx.log(
            f"[bm25-tune] chosen k1={chosen['k1']}, b={chosen['b']}: "
            f"{metric} {chosen['value']:.4f} (mean over {chosen['n_pools']} val pools)"
        )
    finally:
        data.close()


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
    write_part(job.out / PARTS / part_name(pool.pool_id), table)
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


def identify_bm25_tune(cfg: TuneConfig, inputs: Mapping[str, list[Path]]) -> dict[str, Any]:
    """The definition of the maximised measure when it was registered at run time."""
    return measures.definitions([measures.parse(metric_name(cfg.metric, cfg.depth))[0].kind])


TUNE_SPEC = STAGES.register(
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
