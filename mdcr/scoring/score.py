"""Stage ``score``: per-query MAP, nDCG and R@k of every run against the pools' qrels.

Inputs: one ``pools`` output (qrels.parquet, pool_meta.parquet, pools.parquet) and any number
of run folders (search or BM25 outputs: runs.parquet, and the retriever's name in the
manifest's info). Only the pools a run covers are scored for it (e.g. its test pools);
within a scored pool every qrels query is scored, 0 when the run retrieved nothing for it.

Outputs: ``per_query.parquet`` (retriever, pool_id, query_id, metric, value),
``per_pool.parquet`` (retriever, pool_id, setup, split, field, size, rep, metric, value,
n_queries) and ``chance.parquet`` (the analytic expectation of each metric under a random
ranking, per pool: pool_id, setup, split, field, size, rep, metric, value, n_queries).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.contracts.paper import DEPTH, RECALL_K
from mdcr.core.config import input_path, param
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.stage import STAGES, PlanFacts, StageContext, StagePlan, StageSpec
from mdcr.measures import registry as measures

if TYPE_CHECKING:
    import pandas as pd

QUERY_COLUMNS = ["retriever", "pool_id", "query_id", "metric", "value"]


@dataclass(frozen=True)
class ScoreConfig:
    pools: str = input_path(help="a pools stage output (qrels.parquet, pool_meta.parquet)")
    runs: tuple[str, ...] = input_path(
        help="run folders (search or bm25 outputs, each with runs.parquet)", multiple=True
    )
    names: tuple[str, ...] = param(
        (),
        help="retriever names, one per run, in order (default: each run manifest's "
        "info.retriever; given names take precedence)",
    )
    depth: int = param(DEPTH, help="ranks that count for MAP and nDCG (the paper: 500)")
    recall_k: int = param(RECALL_K, help="k of R@k (the paper: 30, about the positives per query)")
    metrics: tuple[str, ...] = param(
        measures.PAPER_KINDS, help=f"measures: {', '.join(measures.kinds())} (registered ones)"
    )
    chance: bool = param(True, help="also write the analytic expected chance per pool")

    def validate(self) -> None:
        if not self.metrics:
            raise ConfigError(
                f"score.metrics: empty; valid measures: {', '.join(measures.kinds())}"
            )
        for kind in self.metrics:
            measures.get(kind, "score.metrics")
        if self.depth < 1:
            raise ConfigError(f"score.depth: must be >= 1, got {self.depth}")
        if not 1 <= self.recall_k <= self.depth:
            raise ConfigError(
                f"score.recall_k: must be between 1 and depth ({self.depth}), got {self.recall_k}"
            )
        if len(set(self.metrics)) != len(self.metrics):
            raise ConfigError(f"score.metrics: {list(self.metrics)} lists a metric twice")


def retriever_names(runs: list[Path], names: tuple[str, ...]) -> list[str]:
    """The retriever name of each run: from ``names`` if given, else what its stage recorded."""
    from mdcr.contracts.outputs import run_info

    if names and len(names) != len(runs):
        raise ConfigError(
            f"score.names: {len(names)} names for {len(runs)} runs; give one name per run"
        )
    out = []
    for i, folder in enumerate(runs):
        if names:
            out.append(names[i])
            continue
        info = run_info(folder)
        if info is None or not info.retriever:
            raise ConfigError(f"score.runs: '{folder}' records no retriever name; set score.names")
        out.append(info.retriever)
    dupes = sorted({n for n in out if out.count(n) > 1})
    if dupes:
        raise ConfigError(
            f"score: retriever '{dupes[0]}' names two runs; set score.names to tell them apart"
        )
    return out


def score_run(
    run_file: Path,
    qrels: pd.DataFrame,
    known_pools: set[str],
    metrics: list[str],
    depth: int,
    retriever: str,
    ctx: StageContext | None = None,
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Per-query values of one run over the pools it covers, and its counts."""
    import pandas as pd
    import pyarrow.parquet as pq

    from mdcr.contracts.artifacts import RUNS
    from mdcr.measures.compute import score_pool

    run_file = RUNS.require(run_file)
    pool_ids = sorted(
        str(p) for p in pq.read_table(run_file, columns=["pool_id"])["pool_id"].unique().to_pylist()
    )
    unknown = [p for p in pool_ids if p not in known_pools]
    if unknown:
        raise InputDataError(
            f"run '{run_file}' has pool '{unknown[0]}' that the given pools do not have; "
            "pass the pools the run was searched on"
        )
    qrels_by_pool = dict(tuple(qrels.groupby("pool_id", sort=False)))
    frames = []
    counts = {
        "pools": len(pool_ids),
        "queries": 0,
        "queries_without_results": 0,
        "run_queries_without_qrels": 0,
    }
    it = ctx.progress(pool_ids, desc=f"score {retriever}", unit="pool") if ctx else pool_ids
    for pid in it:
        run = pq.read_table(
            run_file, columns=["query_id", "paper_id", "rank"], filters=[("pool_id", "==", pid)]
        ).to_pandas()
        q = qrels_by_pool.get(pid, qrels.iloc[:0])
        qids = set(q["query_id"].astype(str))
        rids = set(run["query_id"].astype(str))
        counts["queries"] += len(qids)
        counts["queries_without_results"] += len(qids - rids)
        counts["run_queries_without_qrels"] += len(rids - qids)
        vals = score_pool(q, run, metrics, depth, where=f"{run_file} pool {pid}")
        vals.insert(0, "pool_id", pid)
        vals.insert(0, "retriever", retriever)
        frames.append(vals)
    if not frames:
        return pd.DataFrame({c: [] for c in QUERY_COLUMNS}), counts
    return pd.concat(frames, ignore_index=True)[QUERY_COLUMNS], counts


def chance_per_pool(
    pools_dir: Path,
    qrels: pd.DataFrame,
    pool_meta: pd.DataFrame,
    pool_ids: list[str],
    metrics: list[str],
) -> pd.DataFrame:
    """Mean over each pool's queries of the metrics' expectation under a random ranking.

    A query's candidates are the pool's papers except the query itself; its relevant
    candidates are its positives found in the pool (see :mod:`mdcr.measures.chance`).
    """
    import duckdb
    import pandas as pd

    from mdcr.contracts.artifacts import POOLS
    from mdcr.scoring.aggregate import POOL_KEYS

    con = duckdb.connect()
    q = qrels[qrels["pool_id"].isin(pool_ids)][["pool_id", "query_id", "paper_id", "relevance"]]
    con.register("qrels", q)
    con.register("scored", pd.DataFrame({"pool_id": pool_ids}))
    counts = con.execute(
        """
        WITH pool AS (
            SELECT p.pool_id, p.paper_id FROM read_parquet(?) p SEMI JOIN scored USING (pool_id)
        ),
        n AS (SELECT pool_id, count(*) AS n FROM pool GROUP BY pool_id),
        qs AS (
            SELECT pool_id, query_id, count(*) FILTER (WHERE relevance >= 1) AS r
            FROM qrels GROUP BY pool_id, query_id
        ),
        self AS (
            SELECT qs.pool_id, qs.query_id FROM qs SEMI JOIN pool
            ON pool.pool_id = qs.pool_id AND pool.paper_id = qs.query_id
        ),
        m AS (
            SELECT qrels.pool_id, qrels.query_id, count(*) AS m FROM qrels SEMI JOIN pool
            ON pool.pool_id = qrels.pool_id AND pool.paper_id = qrels.paper_id
            WHERE qrels.relevance >= 1 AND qrels.paper_id <> qrels.query_id
            GROUP BY qrels.pool_id, qrels.query_id
        )
        SELECT qs.pool_id, qs.query_id, qs.r, coalesce(m.m, 0) AS m,
               n.n - (CASE WHEN self.query_id IS NULL THEN 0 ELSE 1 END) AS n_cand
        FROM qs JOIN n USING (pool_id)
        LEFT JOIN m USING (pool_id, query_id)
        LEFT JOIN self USING (pool_id, query_id)
        ORDER BY qs.pool_id, qs.query_id
        """,
        [str(POOLS.path(pools_dir))],
    ).df()
    con.close()
    rows = []
    for metric in metrics:
        if measures.parse(metric)[0].chance is None:
            continue  # a measure without a chance formula gets no chance row
        vals = [
            measures.expected(metric, int(n), int(m), int(r))
            for n, m, r in zip(counts["n_cand"], counts["m"], counts["r"], strict=True)
        ]
        frame = pd.DataFrame({"pool_id": counts["pool_id"], "value": vals})
        agg = (
            frame.groupby("pool_id", sort=True)["value"]
            .agg(value="mean", n_queries="size")
            .reset_index()
        )
        agg["metric"] = metric
        rows.append(agg)
    columns = ["pool_id", *POOL_KEYS, "metric", "value", "n_queries"]
    if not rows:
        return pd.DataFrame({c: [] for c in columns})
    out = pd.concat(rows, ignore_index=True)
    meta = pool_meta[["pool_id", *POOL_KEYS]].drop_duplicates("pool_id")
    out = out.merge(meta, on="pool_id", how="left")
    return out[columns]


def _score_runs(
    runs: list[Path],
    names: list[str],
    qrels: pd.DataFrame,
    known: set[str],
    metrics: list[str],
    depth: int,
    ctx: StageContext,
) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Every run's per-query values (sorted by retriever, pool, metric, query) and what
    score records of each run (:attr:`mdcr.contracts.facts.ScoreInfo.runs`)."""
    import pandas as pd

    from mdcr.contracts.artifacts import RUNS
    from mdcr.contracts.outputs import check_run_pools
    from mdcr.core.fingerprints import artifact_fingerprint
    from mdcr.retrievers.builtin_entry import entry_of

    pools_dir = ctx.input("pools")
    frames = []
    runs_scored = []
    for folder, name in zip(runs, names, strict=True):
        check_run_pools(folder, pools_dir)
        run_file = RUNS.path(folder)
        with ctx.timed(f"score_{name}"):
            vals, counts = score_run(run_file, qrels, known, metrics, depth, name, ctx)
        frames.append(vals)
        runs_scored.append(
            {
                "retriever": name,
                "path": str(folder),
                "fingerprint": artifact_fingerprint(folder),
                # which built-in entry ranked (None: none); a name never says
                "builtin_entry": entry_of(folder),
                **counts,
            }
        )
        if counts["queries_without_results"]:
            ctx.log(
                f"[score] {name}: {counts['queries_without_results']} qrels queries have no "
                "results in the run; they score 0"
            )
    per_query = pd.concat(frames, ignore_index=True)
    per_query = per_query.sort_values(
        ["retriever", "pool_id", "metric", "query_id"], kind="stable"
    ).reset_index(drop=True)
    return per_query, runs_scored


def _write_chance(
    pools_dir: Path,
    qrels: pd.DataFrame,
    pool_meta: pd.DataFrame,
    scored: list[str],
    metrics: list[str],
    ctx: StageContext,
) -> None:
    """The expected-chance values of the scored pools (none without pools.parquet)."""
    from mdcr.contracts.artifacts import CHANCE, POOLS

    if not POOLS.exists(pools_dir):
        ctx.log(f"[score] no pools.parquet in '{pools_dir}'; no expected-chance values")
        return
    with ctx.timed("chance"):
        chance = chance_per_pool(
            pools_dir, qrels, pool_meta.astype({"pool_id": str}), scored, metrics
        )
    chance.to_parquet(CHANCE.output(ctx, rows=len(chance)), index=False)


def run_score(cfg: ScoreConfig, ctx: StageContext) -> None:
    from mdcr.contracts.artifacts import POOL_MEANS, POOL_META, POOL_METRICS, QRELS
    from mdcr.contracts.facts import ScoreInfo
    from mdcr.core.fingerprints import artifact_fingerprint
    from mdcr.scoring.aggregate import per_pool_means

    pools_dir = ctx.input("pools")
    qrels = QRELS.read_pandas(pools_dir)
    pool_meta = POOL_META.read_pandas(pools_dir)
    qrels = qrels.astype({"pool_id": str, "query_id": str, "paper_id": str})
    runs = ctx.inputs.get("runs") or []
    if not runs:
        raise ConfigError("score.runs: no runs given; name at least one search or bm25 output")
    names = retriever_names(runs, cfg.names)
    metrics = sorted(
        measures.names(cfg.metrics, cfg.depth, cfg.recall_k, "score.metrics"),
        key=measures.sort_key,
    )
    known = set(pool_meta["pool_id"].astype(str))

    per_query, runs_scored = _score_runs(runs, names, qrels, known, metrics, cfg.depth, ctx)
    per_query.to_parquet(POOL_METRICS.output(ctx, rows=len(per_query)), index=False)
    per_pool = per_pool_means(per_query, pool_meta.astype({"pool_id": str}))
    per_pool.to_parquet(POOL_MEANS.output(ctx, rows=len(per_pool)), index=False)

    scored = sorted(per_query["pool_id"].unique().tolist())
    if cfg.chance:
        _write_chance(pools_dir, qrels, pool_meta, scored, metrics, ctx)

    ScoreInfo(artifact_fingerprint(pools_dir), cfg.depth, cfg.recall_k, tuple(runs_scored)).record(
        ctx
    )
    ctx.record("metrics", metrics)
    ctx.record("pools_scored", scored)
    ctx.record(
        "means",
        {
            f"{r.retriever}|{r.pool_id}|{r.metric}": round(float(r.value), 6)  # type: ignore[arg-type]
            for r in per_pool.itertuples(index=False)
        },
    )


def identify_score(cfg: ScoreConfig, inputs: Mapping[str, list[Path]]) -> dict[str, Any]:
    """The definitions of measures registered at run time (none for the built-in ones, so
    their fingerprints are those of mdcr's code alone)."""
    return measures.definitions(cfg.metrics)


def plan_score(
    cfg: ScoreConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    from mdcr.planning.work import facts_of, queries_work

    runs = len(inputs.get("runs", []))
    pools = facts_of(inputs, "pools", upstream)
    return StagePlan(
        f"MAP, nDCG@{cfg.depth} and R@{cfg.recall_k} of {runs} run(s) per query (ranx)",
        work=queries_work("score", pools[0].queries, runs) if pools else None,
    )


SPEC = STAGES.register(
    StageSpec(
        name="score",
        version="2",
        config=ScoreConfig,
        run=run_score,
        plan=plan_score,
        identity=identify_score,
        help="per-query MAP, nDCG and R@k of runs against pool qrels (ranx)",
    )
)
