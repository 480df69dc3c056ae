"""Stage ``benchmark-score`` (``mdcr benchmark score``): MAP, nDCG and R@5 on a benchmark.

Per field and macro-averaged, with the original MDCR scorer's semantics
(:mod:`mdcr.benchmark.scoring`), the candidate-type analysis, and the Table 3 / Table 4
layouts, written through the one report model (:mod:`mdcr.scoring.document`): ``report.md``,
``report.json`` and ``tables/``.

Every mean of the MAP, R@5 and nDCG tables has a 95% bootstrap interval, and each
retriever's difference from the baseline its interval and corrected p, in a ``_ci``
companion table; the retrievers tied with each field's best are bold with a dagger, the
minimum detectable effect is under each table (:mod:`mdcr.scoring.benchmark_intervals`),
and every interval is in ``intervals.parquet``. A section "Where the encoders win and lose"
plots each retriever's per-query difference from the baseline by field, year and
positives (:mod:`mdcr.scoring.wins_losses`; ``plots/``).

Each retriever's registry identity (:mod:`mdcr.retrievers.identity`) decides its label and
whether it is set beside the paper's Tables 3 and 4 and published MDCR rows; its name
never does. The manifest records the identities (``info.retriever_identities``) and the
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
from mdcr.core.stage import PlanFacts, StageContext, StagePlan, StageSpec, register
from mdcr.scoring.comparison_params import IntervalParams, PairedTestParams

if TYPE_CHECKING:
    import pandas as pd

    from mdcr.contracts.facts import BenchmarkOrigin, RankInfo
    from mdcr.scoring.document import Section
    from mdcr.scoring.report_context import Context

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
    """One benchmark-rank output: its info, its pair scores, its folder and its registry
    identity (None: not a built-in entry)."""

    info: RankInfo
    scores: pd.DataFrame
    folder: Path
    identity: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.info.retriever


def _load_ranks(folders: list[Path], bench_fp: str) -> list[Ranked]:
    from mdcr.contracts.artifacts import PAIR_SCORES
    from mdcr.contracts.outputs import rank_info
    from mdcr.retrievers.identity import identity_of

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
        out.append(Ranked(info, PAIR_SCORES.read_pandas(folder), folder, identity_of(folder)))
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


def _significance(
    cfg: BenchScoreConfig,
    per_query: pd.DataFrame,
    ranks: list[Ranked],
    splits: list[str],
    ctx: StageContext,
) -> dict[str, pd.DataFrame]:
    """The paired tests between the retrievers, per split (written as one file)."""
    import pandas as pd

    from mdcr.benchmark.paired import split_comparisons

    sig = {
        split: split_comparisons(
            per_query,
            split,
            [r.name for r in ranks],
            tests=cfg.stat_tests,
            correction=cfg.correction,
            alpha=cfg.alpha,
            permutations=cfg.permutations,
            seed=cfg.seed,
        )
        for split in splits
    }
    sig_all = pd.concat(list(sig.values()), ignore_index=True)
    sig_all.to_parquet(ctx.output(SIGNIFICANCE, rows=len(sig_all)), index=False)
    return sig


def run_benchmark_score(cfg: BenchScoreConfig, ctx: StageContext) -> None:
    from mdcr.benchmark.formats import read_benchmark
    from mdcr.benchmark.scoring import field_means, macro_means, queries_without_positives
    from mdcr.contracts.artifacts import BENCHMARK_METRICS
    from mdcr.contracts.outputs import benchmark_origin
    from mdcr.core.fingerprints import artifact_fingerprint
    from mdcr.scoring.document import Report, write_report
    from mdcr.scoring.per_query import benchmark_values_rows
    from mdcr.scoring.report_intervals import write_intervals
    from mdcr.scoring.wins_losses import wins_losses_section

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

    empty = queries_without_positives(bench[bench["split"].isin(splits)])
    sig = _significance(cfg, per_query, ranks, splits, ctx)
    c = _interval_context(cfg, ranks, ctx)
    report = Report(cfg.title, [origin.line(), "", *_method_lines(cfg, bench, ranks)])
    report.sections = [
        _split_section(cfg, c, split, per_field, macro, per_query, ranks, origin, empty, sig)
        for split in splits
    ]
    with ctx.timed("wins_losses"):
        rows = benchmark_values_rows(per_query, folder)
        wins = wins_losses_section(c, rows, splits, on_benchmark=True)
    report.sections += [wins] if wins is not None else []
    write_intervals(c.intervals, ctx)
    write_report(report, ctx)
    ctx.record("retrievers", [r.name for r in ranks])
    ctx.record("retriever_identities", {r.name: r.identity for r in ranks})
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
    from mdcr.benchmark.scoring import official_key, official_round

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


def _interval_context(cfg: BenchScoreConfig, ranks: list[Ranked], ctx: StageContext) -> Context:
    """The report context the intervals, tied groups and wins and losses are drawn in:
    this stage's paired tests, interval parameters and baseline; MAP first."""
    from mdcr.measures import registry as measures
    from mdcr.scoring.intervals import IntervalOptions
    from mdcr.scoring.published import order_retrievers
    from mdcr.scoring.report_context import Context, SectionOptions

    names = order_retrievers(sorted(r.name for r in ranks))
    c = Context(
        SectionOptions.of(cfg, chance_rows=False), names, {}, [measures.MAP.name(None)], ctx.out
    )
    c.interval_options = IntervalOptions(cfg.resamples, cfg.seed, cfg.interval_method)
    return c


def _split_section(
    cfg: BenchScoreConfig,
    c: Context,
    split: str,
    per_field: pd.DataFrame,
    macro: pd.DataFrame,
    per_query: pd.DataFrame,
    ranks: list[Ranked],
    origin: BenchmarkOrigin,
    empty: pd.DataFrame,
    sigs: dict[str, pd.DataFrame],
) -> Section:
    from mdcr.benchmark.paired import comparison_lines
    from mdcr.benchmark.scoring import (
        summary_lines,
        table3,
        table4,
        table_ndcg,
        without_positives_line,
    )
    from mdcr.scoring.benchmark_intervals import annotate_split
    from mdcr.scoring.document import Section
    from mdcr.scoring.published import label_for

    labels = {r.name: label_for(r.name, r.identity) for r in ranks}
    s = Section(split)
    s.tables += [
        table3(per_field, macro, split, labels=labels),
        table_ndcg(per_field, macro, split, labels=labels),
    ]
    annotate_split(c, s, split, per_query, {r.name: r.identity for r in ranks})
    if cfg.by_type:
        s.tables.append(table4(macro, split, labels=labels))
    note = without_positives_line(empty, split)
    if note:
        s.body += [note, ""]
    s.body += comparison_lines(sigs[split], cfg.stat_tests, cfg.correction, cfg.alpha, labels)
    if split == "test":
        identities = {r.name: r.identity for r in ranks}
        s.body += _comparison_lines(macro, origin, identities)
    s.body += ["Original scorer's printout (x100, rounded as `evaluate.py` rounds):", ""]
    for r in ranks:
        s.body += [f"`{r.name}`:", "", "```", *summary_lines(per_field, split, r.name), "```", ""]
    return s


def _method_lines(cfg: BenchScoreConfig, bench: pd.DataFrame, ranks: list[Ranked]) -> list[str]:
    sizes = bench.groupby(["split", "field", "query_id"]).size()
    lines = [
        "Metrics as the original MDCR scorer computes them: binary relevance (a candidate is "
        "relevant iff it is in the query's `true` list), MAP and nDCG over each query's whole "
        "candidate list (no cut-off), recall at 5; the mean over a field's queries, then the "
        "plain mean over fields (AVG). Values are x100.",
        "Ties: "
        + (
            "paper_id ascending (not the original scorer's order)."
            if cfg.ties == "paper_id"
            else "trec_eval's order, as the original scorer (paper_id descending as strings)."
        ),
        f"Queries: {_per_split(sizes.groupby(level=0).size())}; candidates per query: "
        f"{int(sizes.min())}-{int(sizes.max())}.",
        "Candidate-type table: each query scored on its positives plus only that type's "
        "negatives, aggregated the same way; the AVG row is the mean over the retrievers.",
        f"Intervals: 95% {'BCa' if cfg.interval_method == 'bca' else 'percentile'} bootstrap "
        f"over queries ({cfg.resamples} resamples, seed {cfg.seed}; a field's queries one "
        "stratum, AVG with the fields as strata), differences against "
        f"`{cfg.baseline}`; tied groups from the {cfg.stat_tests[0]} test per field (AVG: "
        f"all fields' queries), {cfg.correction}-corrected over each measure's table.",
        "",
        "Retrievers:",
        "",
    ]
    from mdcr.retrievers.identity import describe

    for r in ranks:
        extra = f" ({r.info.detail})" if r.info.detail else ""
        lines.append(f"- `{r.name}`: {r.info.method}{extra}; {describe(r.identity)}; `{r.folder}`")
    return lines


def _per_split(counts: pd.Series) -> str:
    """``val 29, test 27``: a count per split, in the splits' order."""
    order = {"val": 0, "test": 1}
    keys = sorted(counts.index, key=lambda k: (order.get(str(k), 2), str(k)))
    return ", ".join(f"{k} {int(counts[k])}" for k in keys)


def _comparison_lines(
    macro: pd.DataFrame, origin: BenchmarkOrigin, identities: Mapping[str, Any]
) -> list[str]:
    """The paper's and other published numbers beside ours: on the official release only,
    and for built-in retrievers only (by registry identity, never by name)."""
    from mdcr.scoring.published import comparable_with_published

    if not comparable_with_published(origin):
        return [
            f"No paper or published numbers beside these: this is {origin.label}, not the "
            "official MDCR release proven by provenance (`mdcr download mdcr`), and those "
            "numbers were computed on the official release.",
            "",
        ]
    files = origin.files("test")
    return _paper_lines(macro, identities, files) + _published_lines(macro, identities, files)


def _published_lines(macro: pd.DataFrame, identities: Mapping[str, Any], files: str) -> list[str]:
    """Our test AVG next to MDCR results published beyond the paper (model cards, the MDCR
    README), for the retrievers whose identity has them (built-in entries only)."""
    from mdcr.benchmark.scoring import MDCR_METRICS, official_key
    from mdcr.scoring.published import published_mdcr

    ours = macro[(macro["split"] == "test") & (macro["subset"] == "all")]
    rows = []
    for r in ours.itertuples(index=False):
        key = official_key(str(r.metric)) if r.metric in MDCR_METRICS else None
        for row in published_mdcr(identities.get(str(r.retriever))):
            if row["field"] == "AVG" and key in row:
                ours_v = 100 * float(r.value)  # type: ignore[arg-type]
                rows.append(
                    f"| {r.retriever} | {row['model']} | {key} | {ours_v:.2f} | {row[key]:g} | "
                    f"{row['citation']} |"
                )
    if not rows:
        return []
    return [
        f"Published MDCR test results, beside ours on {files}:",
        "",
        "| retriever | published as | metric | ours | published | source |",
        "|---|---|---|---:|---:|---|",
        *rows,
        "",
    ]


def _paper_lines(macro: pd.DataFrame, identities: Mapping[str, Any], files: str) -> list[str]:
    """Our AVG next to the paper's (Tables 3 and 4) for the retrievers whose identity is
    one of the paper's models (built in, default setup); a name alone never matches."""
    from mdcr.benchmark.scoring import TABLE_METRICS, paper_type_column, type_label
    from mdcr.measures.registry import label as measure_label
    from mdcr.scoring.published import paper_models, paper_values

    ids = paper_models(identities)
    mine = macro[(macro["split"] == "test") & macro["retriever"].isin(list(ids))]
    if mine.empty:
        return []
    paper = paper_values()
    label = {m: measure_label(m) for m in TABLE_METRICS}
    rows = []
    for r in mine.itertuples(index=False):
        if r.metric not in label:
            continue
        model = ids[str(r.retriever)]
        if r.subset == "all":
            sel = (paper["table"] == "table3") & (paper["column"] == "AVG")
        else:
            sel = (paper["table"] == "table4") & (
                paper["column"] == (paper_type_column(str(r.subset)) or "")
            )
        sel &= (paper["model"] == model) & (paper["metric"] == label[str(r.metric)])
        if sel.any():
            pv = float(paper.loc[sel, "value"].iloc[0])
            what = "all" if r.subset == "all" else type_label(str(r.subset))
            ours = 100 * float(r.value)  # type: ignore[arg-type]
            rows.append(f"| {model} | {what} | {label[str(r.metric)]} | {ours:.1f} | {pv:.1f} |")
    if not rows:
        return []
    return [
        f"Comparison with the paper (test, AVG over fields; ours on {files}):",
        "",
        "| model | candidates | metric | ours | paper |",
        "|---|---|---|---:|---:|",
        *rows,
        "",
    ]


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


SPEC = register(
    StageSpec(
        name="benchmark-score",
        version="5",
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
