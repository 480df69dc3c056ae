"""Stage ``benchmark-score`` (``mdcr benchmark score``): MAP, nDCG and R@5 on a benchmark.

Per field and macro-averaged, with the original MDCR scorer's semantics
(:mod:`mdcr.benchmark.scoring`), and the candidate-type analysis. Its report
(``report.md``, ``report.json`` and ``tables/``: the Table 3 / Table 4 layouts, every mean
with its 95% bootstrap interval, each retriever's difference from the baseline, tied
groups and the minimum detectable effect, the paired tests, where the encoders win and
lose) is drawn by :mod:`mdcr.scoring.mdcr_report`, as the pools report draws its MDCR
section; every interval is in ``intervals.parquet``, every paired test in
``significance.parquet``.

Each retriever's built-in entry (:mod:`mdcr.retrievers.builtin_entry`) decides its label
and whether it is set beside the paper's Tables 3 and 4 and published MDCR rows; its name
never does. The manifest records the entries (``info.builtin_entries``) and the
queries whose ``true`` list is empty (``info.queries_without_positives``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mdcr.contracts.artifacts import BENCHMARK_METRICS, INTERVALS
from mdcr.core.config import input_path, param
from mdcr.core.errors import ConfigError, ManifestMismatchError
from mdcr.core.hints import key
from mdcr.core.stage import STAGES, PlanFacts, StageContext, StagePlan, StageSpec
from mdcr.scoring.comparison_params import IntervalParams, PairedTestParams

if TYPE_CHECKING:
    import pandas as pd

    from mdcr.contracts.facts import RankInfo

OFFICIAL_JSON = "official.json"
SIGNIFICANCE = "significance.parquet"


@dataclass(frozen=True)
class BenchScoreConfig(PairedTestParams, IntervalParams):
    benchmark: str = input_path(help="benchmark build or import output")
    ranks: tuple[str, ...] = input_path(help="benchmark-rank outputs", multiple=True)
    splits: tuple[Literal["val", "test"], ...] = param(
        (), help="splits to score; empty = every split the ranks cover"
    )
    ties: Literal["trec_eval", "paper_id"] = param(
        "trec_eval",
        help="tied scores: trec_eval's order, i.e. the original scorer's (paper_id "
        "descending as strings), or paper_id ascending (the project's rule for runs)",
    )
    by_type: bool = param(True, help="also score each candidate type alone (Table 4)")
    title: str = param("MDCR benchmark results", help="the report's title")

    def validate(self) -> None:
        self.validate_paired_tests("benchmark-score")
        self.validate_intervals("benchmark-score")


@dataclass(frozen=True)
class Ranked:
    """One benchmark-rank output: its info, its pair scores, its folder and its built-in
    entry (None: not one)."""

    info: RankInfo
    scores: pd.DataFrame
    folder: Path
    entry: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.info.retriever


def _load_ranks(folders: list[Path], bench_fp: str) -> list[Ranked]:
    from mdcr.contracts.artifacts import PAIR_SCORES
    from mdcr.contracts.outputs import rank_info
    from mdcr.retrievers.builtin_entry import entry_of

    out = []
    names: set[str] = set()
    for folder in folders:
        info = rank_info(folder)
        if info.retriever in names:
            raise ConfigError(f"benchmark-score.ranks: retriever '{info.retriever}' is given twice")
        names.add(info.retriever)
        if info.benchmark_fingerprint != bench_fp:
            raise ManifestMismatchError(
                f"'{folder}' ({info.retriever}) ranks another benchmark "
                f"({info.benchmark_fingerprint}); rank this one"
            )
        out.append(Ranked(info, PAIR_SCORES.read_pandas(folder), folder, entry_of(folder)))
    return out


def _scored_splits(cfg: BenchScoreConfig, ranks: list[Ranked]) -> list[str]:
    """The splits every rank covers (of those asked for), val before test."""
    covered = sorted(set.intersection(*(set(r.scores["split"]) for r in ranks)))
    splits = [s for s in ("val", "test") if s in covered and (not cfg.splits or s in cfg.splits)]
    if not splits:
        raise ConfigError(
            f"{key('benchmark-score', 'splits')}: the ranks cover "
            f"{', '.join(covered) or 'no split'} together"
        )
    return splits


def _per_query(
    cfg: BenchScoreConfig,
    bench: pd.DataFrame,
    ranks: list[Ranked],
    splits: list[str],
    ctx: StageContext,
) -> pd.DataFrame:
    """Every retriever's per-query metrics on every split, in a stable order."""
    import pandas as pd

    from mdcr.benchmark.scoring import per_query_metrics

    frames = []
    for r in ranks:
        for split in splits:
            b = bench[bench["split"] == split]
            s = r.scores[r.scores["split"] == split]
            with ctx.timed(f"metrics_{r.name}_{split}"):
                pq_ = per_query_metrics(b, s, ties=cfg.ties, by_type=cfg.by_type)
            frames.append(pq_.assign(retriever=r.name))
    per_query = pd.concat(frames, ignore_index=True)
    cols = ["retriever", "split", "subset", "field", "query_id", "metric", "value"]
    return per_query[cols].sort_values(cols[:-1], kind="stable").reset_index(drop=True)


def run_benchmark_score(cfg: BenchScoreConfig, ctx: StageContext) -> None:
    import pandas as pd

    from mdcr.benchmark.formats import read_benchmark
    from mdcr.contracts.outputs import benchmark_origin
    from mdcr.core.fingerprints import artifact_fingerprint
    from mdcr.scoring.document import Report, write_report
    from mdcr.scoring.intervals import IntervalOptions
    from mdcr.scoring.mdcr_report import MdcrScores, RankedRetriever, mdcr_report
    from mdcr.scoring.mdcr_tables import field_means, macro_means, queries_without_positives
    from mdcr.scoring.report_context import SectionOptions
    from mdcr.scoring.table_intervals import write_intervals

    folder = ctx.input("benchmark")
    bench = read_benchmark(folder)
    origin = benchmark_origin(folder)
    ranks = _load_ranks(ctx.inputs.get("ranks") or [], artifact_fingerprint(folder))
    if not ranks:
        raise ConfigError("benchmark-score.ranks: give at least one benchmark-rank output")
    splits = _scored_splits(cfg, ranks)
    per_query = _per_query(cfg, bench, ranks, splits, ctx)
    per_field = field_means(per_query)
    macro = macro_means(per_field)
    per_query.to_parquet(BENCHMARK_METRICS.output(ctx, rows=len(per_query)), index=False)
    per_field.to_parquet(ctx.output("per_field.parquet", rows=len(per_field)), index=False)
    macro.to_parquet(ctx.output("macro.parquet", rows=len(macro)), index=False)
    official = _official(per_field, [r.name for r in ranks], splits)
    (ctx.out / OFFICIAL_JSON).write_text(json.dumps(official, indent=2, sort_keys=True) + "\n")
    ctx.output(OFFICIAL_JSON)

    scores = MdcrScores(
        per_query,
        bench,
        folder,
        origin,
        tuple(RankedRetriever(r.info, r.folder, r.entry) for r in ranks),
        tuple(splits),
        cfg.ties,
        cfg.by_type,
    )
    options = SectionOptions.of(cfg, chance_rows=False)
    intervals = IntervalOptions(cfg.resamples, cfg.seed, cfg.interval_method)
    with ctx.timed("report"):
        drawn = mdcr_report(scores, options, intervals, ctx.out)
    sig = pd.concat(list(drawn.significance.values()), ignore_index=True)
    sig.to_parquet(ctx.output(SIGNIFICANCE, rows=len(sig)), index=False)
    report = Report(cfg.title, drawn.preamble)
    report.sections = drawn.sections
    write_intervals(drawn.intervals, ctx)
    write_report(report, ctx)
    empty = queries_without_positives(bench[bench["split"].isin(splits)])
    ctx.record("retrievers", [r.name for r in ranks])
    ctx.record("builtin_entries", {r.name: r.entry for r in ranks})
    ctx.record(
        "queries_without_positives",
        {
            s: {str(f): int(n) for f, n in zip(g["field"], g["n"], strict=True)}
            for s, g in empty.groupby("split", sort=True)
        },
    )
    ctx.record("splits", splits)
    ctx.record("ties", cfg.ties)
    ctx.record("benchmark_fingerprint", artifact_fingerprint(folder))
    ctx.record("origin", origin.as_dict())
    ctx.record(
        "macro",
        {
            f"{r.retriever}|{r.split}|{r.subset}|{r.metric}": round(float(r.value), 6)  # type: ignore[arg-type]
            for r in macro.itertuples(index=False)
        },
    )


def _official(per_field: pd.DataFrame, names: list[str], splits: list[str]) -> dict[str, Any]:
    """What the original scorer prints, per retriever and split: fields and AVG, rounded."""
    from mdcr.scoring.mdcr_tables import official_key, official_round

    official: dict[str, Any] = {}
    for name in names:
        for split in splits:
            sub = per_field[
                (per_field["retriever"] == name)
                & (per_field["split"] == split)
                & (per_field["subset"] == "all")
            ]
            fields, avg = official_round(sub)
            entry = {
                f: {official_key(m): float(v) for m, v in zip(g["metric"], g["value"], strict=True)}
                for f, g in fields.groupby("field", sort=True)
            }
            entry["AVG"] = {
                official_key(m): float(v) for m, v in zip(avg["metric"], avg["value"], strict=True)
            }
            official.setdefault(name, {})[split] = entry
    return official


def plan_benchmark_score(
    cfg: BenchScoreConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    from mdcr.planning.work import facts_of, queries_work

    ranks = len(inputs.get("ranks", []))
    bench = facts_of(inputs, "benchmark", upstream)
    return StagePlan(
        f"MAP, nDCG and R@5 of {ranks} ranking(s) of the benchmark; Tables 3 and 4",
        work=queries_work("benchmark-score", bench[0].queries, ranks) if bench else None,
    )


SPEC = STAGES.register(
    StageSpec(
        name="benchmark-score",
        version="6",
        config=BenchScoreConfig,
        run=run_benchmark_score,
        plan=plan_benchmark_score,
        help="MAP, nDCG, R@5 on a benchmark (original scorer's semantics), Tables 3 and 4",
        main_output="report.md",
        command="benchmark score",
        writes=(BENCHMARK_METRICS, INTERVALS),
    )
)


def read_official_results(folder: Path) -> dict[str, Any]:
    """``{retriever: {split: {field or AVG: {metric: value}}}}`` as the original scorer prints."""
    from mdcr.core.errors import InputDataError

    path = folder / OFFICIAL_JSON
    if not path.is_file():
        raise InputDataError(f"no {OFFICIAL_JSON} in '{folder}'; point to a benchmark-score output")
    return json.loads(path.read_text())  # type: ignore[no-any-return]
