"""Stage ``benchmark-fuse`` (``mdcr benchmark fuse``): a hybrid retriever on a benchmark.

Two or more ``benchmark-rank`` (or ``benchmark-fuse``) outputs of the same benchmark are
fused per query by ranx (:mod:`mdcr.index.fusion`: rrf by default, combsum, combmnz,
wsum), each query's candidates (MDCR: 65) ranked by the fused score. A pair is fused once
per (split, query), so a query of two fields keeps one score per candidate. ``wsum``'s
weights are tuned on the benchmark's ``val`` split (its positives the judgements) when
the ranks cover it, never on test. Writes what benchmark-rank writes (``scores.parquet``
and ``scores_<split>.json``), so benchmark-score, the report and the TREC export read it
as any other retriever.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mdcr.contracts.artifacts import PAIR_SCORES
from mdcr.core.config import input_path, param
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.stage import STAGES, PlanFacts, StageContext, StagePlan, StageSpec
from mdcr.index.fusion import (
    KEY_SEP,
    VALIDATION,
    FusionMethod,
    FusionMethodParams,
    check_method,
)

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class BenchFuseConfig(FusionMethodParams):
    ranks: tuple[str, ...] = input_path(
        help="two or more benchmark-rank (or benchmark-fuse) outputs of the same benchmark",
        multiple=True,
    )
    weights: tuple[float, ...] = param(
        (), help="wsum's weights, one per rank (empty: tuned on the val split)"
    )
    retriever: str = param("", help="the fused retriever's name (default: names joined by +)")

    def validate(self) -> None:
        check_method(self.fusion(), max(2, len(self.weights) or 2), "benchmark-fuse")

    def fusion(self) -> FusionMethod:
        return FusionMethod(self.method, self.norm, tuple(self.weights), self.tune_metric)


def _pairs(folder: Path) -> pd.DataFrame:
    """A rank output's distinct (split, query, candidate) scores, keyed by split and query."""
    from mdcr.contracts.artifacts import PAIR_SCORES

    frame = PAIR_SCORES.read_pandas(folder).astype({"split": str, "query_id": str, "paper_id": str})
    frame = frame.drop_duplicates(["split", "query_id", "paper_id"])
    frame["key"] = frame["split"] + KEY_SEP + frame["query_id"]
    return frame


def run_benchmark_fuse(cfg: BenchFuseConfig, ctx: StageContext) -> None:
    import pandas as pd

    from mdcr.benchmark.formats import read_benchmark, write_scores
    from mdcr.contracts.artifacts import PAIR_SCORES
    from mdcr.contracts.facts import RankInfo
    from mdcr.contracts.outputs import input_paths, rank_info
    from mdcr.index.fusion import fuse_scores, method_weights

    ranks = ctx.inputs.get("ranks") or []
    fm = cfg.fusion()
    check_method(fm, len(ranks), "benchmark-fuse")
    infos = [rank_info(r) for r in ranks]
    if len({i.benchmark_fingerprint for i in infos}) > 1:
        raise InputDataError(
            "benchmark-fuse.ranks: the ranks are of different benchmarks; fuse ranks of one"
        )
    splits = [s for s in infos[0].splits if all(s in i.splits for i in infos)]
    if not splits:
        raise InputDataError("benchmark-fuse.ranks: the ranks share no split; rank the same splits")
    name = cfg.retriever or "+".join(i.retriever for i in infos)
    frames = [f[f["split"].isin(splits)] for f in (_pairs(r) for r in ranks)]

    def validation() -> tuple[list[pd.DataFrame], pd.DataFrame] | None:
        if VALIDATION not in splits:
            return None
        from mdcr.contracts.paper import MDCR_POSITIVE

        found = input_paths(ranks[0], "benchmark")
        if len(found) != 1 or not found[0].exists():
            raise InputDataError(f"benchmark-fuse: the benchmark of '{ranks[0]}' is not found")
        bench = read_benchmark(found[0])
        val = bench[(bench["split"] == VALIDATION) & (bench["candidate_type"] == MDCR_POSITIVE)]
        qrels = pd.DataFrame(
            {
                "key": VALIDATION + KEY_SEP + val["query_id"].astype(str),
                "paper_id": val["paper_id"].astype(str),
                "relevance": 1,
            }
        ).drop_duplicates()
        return [f[f["split"] == VALIDATION] for f in frames], qrels

    weights = method_weights(fm, len(ranks), validation, ctx)
    with ctx.timed("fuse"):
        fused = fuse_scores([f[["key", "paper_id", "score"]] for f in frames], fm, weights)
    every = PAIR_SCORES.read_pandas(ranks[0]).astype(
        {"split": str, "field": str, "query_id": str, "paper_id": str}
    )
    every = every[every["split"].isin(splits)]
    keys = every["split"] + KEY_SEP + every["query_id"]
    scored = every[["split", "field", "query_id", "paper_id"]].assign(
        score=[fused[k].get(p, 0.0) for k, p in zip(keys, every["paper_id"], strict=True)]
    )
    scored = scored.sort_values(["split", "field", "query_id", "paper_id"]).reset_index(drop=True)
    scored.to_parquet(PAIR_SCORES.output(ctx, rows=len(scored)), index=False)
    for split in splits:
        n = write_scores(scored[scored["split"] == split], ctx.output(f"scores_{split}.json"))
        ctx.outputs[f"scores_{split}.json"] = n
    detail = f"{fm.method} of {', '.join(i.retriever for i in infos)}"
    RankInfo(name, "fuse", infos[0].benchmark_fingerprint, tuple(splits), detail, None).record(ctx)
    ctx.record(
        "fused",
        [{"retriever": i.retriever, "path": str(r)} for i, r in zip(infos, ranks, strict=True)],
    )
    ctx.record("norm", fm.norm)


def plan_benchmark_fuse(
    cfg: BenchFuseConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    if len(inputs.get("ranks", [])) < 2:
        raise ConfigError("benchmark-fuse.ranks: fusion takes two or more benchmark-rank outputs")
    return StagePlan(
        f"fuse {len(inputs['ranks'])} rankings of each query's candidates with ranx "
        f"({cfg.method}, {cfg.norm})"
    )


SPEC = STAGES.register(
    StageSpec(
        name="benchmark-fuse",
        version="2",
        config=BenchFuseConfig,
        run=run_benchmark_fuse,
        help="a hybrid retriever: rankings of a benchmark's candidates fused per query (ranx)",
        plan=plan_benchmark_fuse,
        main_output="scores.parquet",
        command="benchmark fuse",
        writes=(PAIR_SCORES,),
    )
)
