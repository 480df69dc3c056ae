"""Stage ``fuse``: a hybrid retriever, two or more runs of the same pools fused by ranx.

Each query's ranked lists (one per input run: search, bm25 or fuse outputs of the same
pools) are fused by ``ranx.fuse``: ``rrf`` (reciprocal rank fusion, ``k`` 60, the
default), ``combsum``, ``combmnz`` or ``wsum`` (a weighted sum), the scores first
normalised per query (``min-max`` or ``zscore``: ranx's ``zmuv``; rank-based ``rrf`` is
unmoved by either). ``wsum``'s weights are given, or tuned by ``ranx.optimize_fusion``
on the validation split: the runs of the pools whose split is ``val`` and those pools'
qrels alone (the pools' qrels are read for the ``val`` pools only; a fused run never sees a
test judgement). Without validation runs the weights are equal, and the manifest says so.

The fused run keeps the run contract (:mod:`mdcr.index.runs`): ranx's fused scores, ties by
(score desc, paper_id asc), the top ``k`` per query. A query that only some runs retrieved
is fused from those runs. Its fingerprint hashes its inputs' fingerprints, the method,
the normalisation, the weights given and the tuning metric (:mod:`mdcr.core.fingerprints`).

The arithmetic shared with the benchmark's fusion (``benchmark-fuse``,
:mod:`mdcr.benchmark.fusion`) is :func:`fuse_scores` and :func:`tune_weights`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mdcr.contracts.artifacts import RUNS
from mdcr.contracts.paper import DEPTH
from mdcr.core.config import input_path, param
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.stage import STAGES, PlanFacts, StageContext, StagePlan, StageSpec

if TYPE_CHECKING:
    import pandas as pd

# mdcr's method names -> ranx's fusion methods; normalisations -> ranx's.
METHODS = {"rrf": "rrf", "combsum": "sum", "combmnz": "mnz", "wsum": "wsum"}
NORMS = {"min-max": "min-max", "zscore": "zmuv"}
RRF_K = 60  # ranx's default and Cormack et al.'s
TUNE_METRIC = f"map@{DEPTH}"
VALIDATION = "val"
KEY_SEP = "\x1f"  # joins the parts of a ranx query key (pool, query): in no id


@dataclass(frozen=True)
class FusionMethod:
    """How runs are fused: the method, the normalisation, the given weights (``wsum``;
    empty: tuned on validation, else equal) and the metric weights are tuned for."""

    method: str = "rrf"
    norm: str = "min-max"
    weights: tuple[float, ...] = ()
    tune_metric: str = TUNE_METRIC

    def params(self, weights: Sequence[float]) -> dict[str, Any]:
        """ranx's ``params`` for this method with ``weights`` (those of the runs fused)."""
        if self.method == "rrf":
            return {"k": RRF_K}
        if self.method == "wsum":
            return {"weights": [float(w) for w in weights]}
        return {}


def check_method(fm: FusionMethod, n_runs: int, where: str) -> None:
    """One-line errors for a method ranx cannot run on ``n_runs`` runs."""
    if fm.method not in METHODS:
        raise ConfigError(f"{where}.method: '{fm.method}' is unknown; valid: {', '.join(METHODS)}")
    if fm.norm not in NORMS:
        raise ConfigError(f"{where}.norm: '{fm.norm}' is unknown; valid: {', '.join(NORMS)}")
    if fm.weights and fm.method != "wsum":
        raise ConfigError(f"{where}.weights: only method 'wsum' takes weights; leave them out")
    if fm.weights and len(fm.weights) != n_runs:
        raise ConfigError(
            f"{where}.weights: {len(fm.weights)} weights for {n_runs} runs; give one per run"
        )
    if n_runs < 2:
        raise ConfigError(f"{where}: {n_runs} run(s) given; fusion takes two or more")


def _nested(keys: Any, papers: Any, values: Any) -> dict[str, dict[str, float]]:
    """``{key: {paper_id: value}}`` from three equally long columns."""
    out: dict[str, dict[str, float]] = {}
    for key, paper, value in zip(keys, papers, values, strict=True):
        out.setdefault(str(key), {})[str(paper)] = float(value)
    return out


def _ranx_run(frame: pd.DataFrame) -> Any:
    """A ranx Run from columns key, paper_id, score."""
    from ranx import Run

    return Run(_nested(frame["key"], frame["paper_id"], frame["score"]))


def fuse_scores(
    frames: Sequence[pd.DataFrame], fm: FusionMethod, weights: Sequence[float]
) -> dict[str, dict[str, float]]:
    """ranx's fused scores of runs given as frames (key, paper_id, score), per key.

    Keys held by every run are fused by ``ranx.fuse`` in one call; a key that only some
    runs hold is fused from those runs (ranx's normalisation and fusion functions, as
    ``ranx.fuse`` calls them, with those runs' weights).
    """
    from ranx import fuse
    from ranx.fusion import fusion_switch
    from ranx.normalization import norm_switch

    holders: dict[str, list[int]] = {}
    for i, frame in enumerate(frames):
        for key in frame["key"].unique():
            holders.setdefault(str(key), []).append(i)
    groups: dict[tuple[int, ...], list[str]] = {}
    for key, held in holders.items():
        groups.setdefault(tuple(held), []).append(key)
    out: dict[str, dict[str, float]] = {}
    for idx, keys in sorted(groups.items()):
        runs = [_ranx_run(frames[i][frames[i]["key"].isin(keys)]) for i in idx]
        params = fm.params([weights[i] for i in idx])
        if len(runs) > 1:
            fused = fuse(runs, norm=NORMS[fm.norm], method=METHODS[fm.method], params=params)
        else:
            fused = fusion_switch(METHODS[fm.method])(
                [norm_switch(NORMS[fm.norm])(runs[0])], **params
            )
        out.update(
            {q: {d: float(s) for d, s in docs.items()} for q, docs in fused.to_dict().items()}
        )
    return out


def tune_weights(
    frames: Sequence[pd.DataFrame], qrels: pd.DataFrame, fm: FusionMethod
) -> tuple[list[float], int]:
    """``ranx.optimize_fusion``'s weights for ``wsum`` on validation runs and qrels.

    ``frames``: each run's validation rows (key, paper_id, score); ``qrels``: the
    validation judgements (key, paper_id, relevance). Tuned on the keys every run holds
    and that have a positive judgement. Returns the weights and the queries tuned on.
    """
    from ranx import Qrels, optimize_fusion

    positive = qrels[qrels["relevance"] >= 1]
    keys = set(positive["key"].astype(str))
    for frame in frames:
        keys &= set(frame["key"].astype(str))
    if not keys:
        return [1.0 / len(frames)] * len(frames), 0
    judged = positive[positive["key"].isin(keys)].astype({"key": str, "paper_id": str})
    nested = _nested(judged["key"], judged["paper_id"], judged["relevance"])
    ranx_qrels = Qrels({k: {p: int(r) for p, r in docs.items()} for k, docs in nested.items()})
    runs = [_ranx_run(frame[frame["key"].isin(keys)]) for frame in frames]
    best = optimize_fusion(
        ranx_qrels,
        runs,
        norm=NORMS[fm.norm],
        method="wsum",
        metric=fm.tune_metric,
        show_progress=False,
    )
    return [float(w) for w in best["weights"]], len(keys)


def method_weights(
    fm: FusionMethod,
    n_runs: int,
    validation: Any,
    ctx: StageContext,
) -> list[float]:
    """The weights fused with: given, tuned on ``validation()`` (frames, qrels; None when
    there is no validation split) for ``wsum``, else equal. Records how in the manifest."""
    if fm.method != "wsum":
        return [1.0] * n_runs
    if fm.weights:
        ctx.record("weights", {"values": list(fm.weights), "how": "given"})
        return list(fm.weights)
    val = validation()
    if val is None:
        equal = [1.0 / n_runs] * n_runs
        ctx.record("weights", {"values": equal, "how": "equal: no validation split to tune on"})
        ctx.log("[fuse] no validation split: wsum with equal weights")
        return equal
    frames, qrels = val
    with ctx.timed("tune"):
        weights, n = tune_weights(frames, qrels, fm)
    how = f"tuned on {n} validation queries for {fm.tune_metric} (ranx.optimize_fusion)"
    ctx.record("weights", {"values": weights, "how": how})
    ctx.log(f"[fuse] weights {weights}: {how}")
    return weights


def ranked_from_scores(
    fused: Mapping[str, Mapping[str, float]], key: str, k: int, exclude: str | None
) -> tuple[Any, Any]:
    """One key's fused list by the run contract: (score desc, paper_id asc), top ``k``."""
    import numpy as np

    from mdcr.index.runs import rank_candidates

    docs = fused.get(key, {})
    ids = np.asarray(list(docs), dtype=str)
    scores = np.asarray(list(docs.values()), dtype=np.float64)
    return rank_candidates(ids, scores, k, exclude=exclude)


# -- the pools stage --------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)  # its fields follow the inputs of the configs
class FusionMethodParams:
    """How inputs are fused, the same for pools (``fuse``) and a benchmark
    (``benchmark-fuse``); each config adds its inputs and its ``weights``."""

    method: Literal["rrf", "combsum", "combmnz", "wsum"] = param(
        "rrf", help="rrf (k 60), combsum, combmnz, or wsum (weighted sum)"
    )
    norm: Literal["min-max", "zscore"] = param(
        "min-max", help="per-query score normalisation before fusing (rrf: unmoved)"
    )
    tune_metric: str = param(TUNE_METRIC, help="the ranx metric wsum's weights are tuned for")


@dataclass(frozen=True)
class FuseConfig(FusionMethodParams):
    runs: tuple[str, ...] = input_path(
        help="two or more run folders of the same pools (search, bm25 or fuse outputs)",
        multiple=True,
    )
    weights: tuple[float, ...] = param(
        (), help="wsum's weights, one per run (empty: tuned on the validation split)"
    )
    k: int = param(DEPTH, help="papers kept per query")
    retriever: str = param(
        "", help="the fused retriever's name (default: the runs' names joined by +)"
    )

    def validate(self) -> None:
        if self.k < 1:
            raise ConfigError(f"fuse.k: {self.k} is not valid; use >= 1")
        check_method(self.fusion(), max(2, len(self.weights) or 2), "fuse")

    def fusion(self) -> FusionMethod:
        return FusionMethod(self.method, self.norm, tuple(self.weights), self.tune_metric)


def read_run_frame(folder: Path) -> pd.DataFrame:
    """A run's rows as (pool_id, query_id, key, paper_id, score)."""
    from mdcr.contracts.artifacts import RUNS

    table = RUNS.read(folder, columns=["pool_id", "query_id", "paper_id", "score"])
    frame = table.to_pandas().astype({"pool_id": str, "query_id": str, "paper_id": str})
    frame["key"] = frame["pool_id"] + KEY_SEP + frame["query_id"]
    return frame


def _pools_of(runs: list[Path]) -> Path:
    """The pools every run was searched on (one-line errors for runs of other pools)."""
    from mdcr.contracts.outputs import input_paths, run_info

    prints = set()
    for folder in runs:
        info = run_info(folder)
        if info is None:
            raise InputDataError(
                f"fuse.runs: '{folder}' is not a run (search, bm25 or fuse output)"
            )
        prints.add(info.pools_fingerprint)
    if len(prints) > 1:
        raise InputDataError(
            "fuse.runs: the runs were searched on different pools; fuse runs of the same pools"
        )
    found = input_paths(runs[0], "pools")
    if len(found) != 1 or not found[0].exists():
        raise InputDataError(f"fuse.runs: the pools of '{runs[0]}' are not in the store; re-run it")
    return found[0]


def validation_pools(pools_dir: Path) -> list[str]:
    """The pool ids of the pools' validation split."""
    from mdcr.contracts.artifacts import POOL_META

    meta = POOL_META.read_pandas(pools_dir, columns=["pool_id", "split"])
    return sorted(meta.loc[meta["split"].astype(str) == VALIDATION, "pool_id"].astype(str))


def validation_qrels(pools_dir: Path, pool_ids: list[str]) -> pd.DataFrame:
    """The qrels of the validation pools only (key, paper_id, relevance): the rows of
    other pools are filtered out as the file is read."""
    from mdcr.contracts.artifacts import QRELS

    table = QRELS.read(
        pools_dir,
        columns=["pool_id", "query_id", "paper_id", "relevance"],
        filters=[("pool_id", "in", pool_ids)],
    )
    frame = table.to_pandas().astype({"pool_id": str, "query_id": str, "paper_id": str})
    frame["key"] = frame["pool_id"] + KEY_SEP + frame["query_id"]
    return frame


def run_fuse(cfg: FuseConfig, ctx: StageContext) -> None:
    import pandas as pd

    from mdcr.contracts.artifacts import RUNS
    from mdcr.contracts.facts import RunInfo
    from mdcr.contracts.outputs import run_info
    from mdcr.core.fingerprints import artifact_fingerprint
    from mdcr.index.runs import RunWriter, run_table

    runs = ctx.inputs.get("runs") or []
    fm = cfg.fusion()
    check_method(fm, len(runs), "fuse")
    pools_dir = _pools_of(runs)
    names = [str(run_info(r).retriever) for r in runs]  # type: ignore[union-attr]
    name = cfg.retriever or "+".join(names)
    frames = [read_run_frame(r) for r in runs]
    covered = set.intersection(*(set(f["pool_id"].unique()) for f in frames))
    frames = [f[f["pool_id"].isin(covered)] for f in frames]

    def validation() -> tuple[list[pd.DataFrame], pd.DataFrame] | None:
        val = [p for p in validation_pools(pools_dir) if p in covered]
        if not val:
            return None
        return [f[f["pool_id"].isin(val)] for f in frames], validation_qrels(pools_dir, val)

    weights = method_weights(fm, len(runs), validation, ctx)
    with ctx.timed("fuse"):
        fused = fuse_scores([f[["key", "paper_id", "score"]] for f in frames], fm, weights)
    queries = (
        pd.concat([f[["pool_id", "query_id"]] for f in frames])
        .drop_duplicates()
        .sort_values(["pool_id", "query_id"])
    )
    with RunWriter(RUNS.output(ctx)) as writer:
        for pool_id, group in ctx.progress(
            queries.groupby("pool_id", sort=True), desc="fuse", unit="pool"
        ):
            qids = group["query_id"].tolist()
            ranked = [
                ranked_from_scores(fused, f"{pool_id}{KEY_SEP}{q}", cfg.k, exclude=q) for q in qids
            ]
            writer.write(run_table(str(pool_id), qids, ranked))
    ctx.outputs[RUNS.file] = writer.rows
    RunInfo(name, artifact_fingerprint(pools_dir), None).record(ctx)
    ctx.record(
        "fused", [{"retriever": n, "path": str(r)} for n, r in zip(names, runs, strict=True)]
    )
    ctx.record("method", {"method": fm.method, "norm": fm.norm, "ranx": METHODS[fm.method]})
    ctx.record("pools_fused", len(covered))


def plan_fuse(
    cfg: FuseConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    tuned = (
        "weights given"
        if cfg.weights
        else f"weights tuned on the validation split for {cfg.tune_metric}"
    )
    how = f"{cfg.method}" + (f", {tuned}" if cfg.method == "wsum" else "")
    return StagePlan(
        f"fuse {len(inputs.get('runs', []))} runs per query with ranx ({how}, {cfg.norm}), "
        f"top {cfg.k}"
    )


SPEC = STAGES.register(
    StageSpec(
        name="fuse",
        version="2",
        config=FuseConfig,
        run=run_fuse,
        help="a hybrid retriever: runs of the same pools fused per query (ranx: rrf, "
        "combsum, combmnz, wsum tuned on validation)",
        plan=plan_fuse,
        main_output="runs.parquet",
        writes=(RUNS,),
    )
)
