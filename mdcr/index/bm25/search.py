"""The ``bm25`` stage: BM25 runs for every pool of the chosen splits, at the k1 and b a
``bm25-tune`` output chose (or given ones), by Lucene (the reference) or the exact sweep.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mdcr.contracts.paper import DEPTH
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
from mdcr.index.bm25.tune import read_chosen
from mdcr.retrievers.device import check_device_spec

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class BM25Config(EngineSettings):
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
        check_k1_b("bm25", [self.k1], [self.b])
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


def run_bm25(cfg: BM25Config, ctx: StageContext) -> None:
    """Search every pool of the chosen splits with BM25 and write one run file."""
    import numpy as np
    import pyarrow.parquet as pq

    from mdcr.contracts.artifacts import RUNS
    from mdcr.contracts.facts import RunInfo
    from mdcr.index.runs import RunWriter
    from mdcr.retrievers.builtin import BM25
    from mdcr.retrievers.builtin_entry import BM25_ENTRY

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
        job = pool_job(cfg, ctx, ((k1, b),), cfg.k)
        map_pools(ctx, cfg, data, job, pools, bm25_pool, "bm25")
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
        RunInfo(BM25.name, data.pools_fp, dict(BM25_ENTRY)).record(ctx)
        ctx.record("k1", k1)
        ctx.record("b", b)
        ctx.record("k", cfg.k)
        ctx.record("splits", list(cfg.splits))
        ctx.record("corpus_fingerprint", data.corpus_fp)
        ctx.record("n_pools", len(pools))
        ctx.record("indexes", indexes)
        ctx.record("query_terms", _terms_summary(terms))
        ctx.record("lucene", lucene_info())
    finally:
        data.close()


def query_terms(texts: Sequence[str]) -> np.ndarray:
    """Distinct analysed terms of each query text (the Boolean clauses Lucene searches)."""
    import numpy as np

    from mdcr.index.lucene.indexes import Analyzer

    analyzer = Analyzer()
    return np.array([len(set(analyzer.analyze(t))) for t in texts], dtype=np.int64)


def _terms_summary(terms: list[np.ndarray]) -> dict[str, Any]:
    import numpy as np

    from mdcr.index.lucene.indexes import QueryStats

    return QueryStats(np.concatenate(terms)).summary()


def bm25_pool(worker: PoolWorker, pool: PoolInfo) -> tuple[int, float]:
    """Search one pool at the job's (k1, b) and write its part; (queries, seconds)."""
    from mdcr.core.atomic import atomic_write_text
    from mdcr.index.lucene.indexes import index_fingerprint

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
    write_part(part, pool_run(pool.pool_id, qids, ranked))  # last: marks it done
    return len(qids), seconds


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


SPEC = STAGES.register(
    StageSpec(
        name="bm25",
        version="2",
        config=BM25Config,
        run=run_bm25,
        help="BM25 runs (Lucene via Anserini) for every pool of the chosen splits",
        resumable=True,
        plan=plan_bm25,
        main_output="runs.parquet",
        finished_units=finished_pools,
    )
)
