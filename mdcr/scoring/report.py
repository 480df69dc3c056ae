"""Stage ``report``: paper-style tables, significance tests, plots and the paper comparison.

Input: one or more ``score`` outputs (on the same pools). Output folder::

    report.md                  every table, the inputs' fingerprints, methods, plots
    report.json                the report model (mdcr.scoring.document) report.md renders
    tables/<name>.csv|.tex     each table (CSV: full precision, 0-1; LaTeX: booktabs, x100)
    plots/<name>.png|.svg      metric vs pool size, per-field bars, per-query AP boxes,
                               per-query differences against BM25 (:mod:`mdcr.scoring.wins_losses`)
    significance.parquet       every paired comparison: effect, direction, p, adjusted p

Layouts follow the paper: Table 1 (dataset-level: rows retrievers; per pool size MAP, nDCG,
R@k as mean ± std over repetitions) and Tables 2, 7, 8 (field-level: rows retrievers;
columns the fields' abbreviations and their macro average AVG), one per metric. Each table
has the analytic expected-chance row and, when it was scored, the random encoder's row.
The sections are built in :mod:`mdcr.scoring.report_sections`; the benchmark-score outputs
given as ``benchmark`` make one section per benchmark, every retriever scored on it
together (:func:`benchmark_sections`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mdcr.contracts.artifacts import INTERVALS
from mdcr.core.config import input_path, param
from mdcr.core.errors import ConfigError, InputDataError, ManifestMismatchError
from mdcr.core.hints import key
from mdcr.core.stage import STAGES, PlanFacts, StageContext, StagePlan, StageSpec, Work
from mdcr.scoring.comparison_params import IntervalParams, PairedTestParams

if TYPE_CHECKING:
    import pandas as pd

    from mdcr.scoring.document import Report, Section
    from mdcr.scoring.mdcr_report import MdcrScores
    from mdcr.scoring.report_context import Context

SPLITS = ("val", "test")


@dataclass(frozen=True)
class ReportConfig(PairedTestParams, IntervalParams):
    scores: tuple[str, ...] = input_path(help="score stage outputs (same pools)", multiple=True)
    benchmark: tuple[str, ...] = input_path(
        (),
        help="benchmark-score outputs whose MDCR tables (Tables 3 and 4 layouts) go in the report",
        multiple=True,
    )
    splits: tuple[str, ...] = param(("test",), help="splits to report: test, val")
    paper_comparison: bool = param(True, help="compare with the paper's published numbers")
    chance_rows: bool = param(True, help="add the analytic expected-chance row to tables")
    title: str = param("mdcr evaluation report", help="the report's title")
    repeated_retrievers: Literal["error", "last"] = param(
        "error",
        help="a retriever scored in several score outputs: error, or last (its scores come "
        "from the last output listed that holds it; the others' are left out, and the "
        "report's inputs say so)",
    )

    def validate(self) -> None:
        for s in self.splits:
            if s not in SPLITS:
                raise ConfigError(
                    f"{key('report', 'splits')}: {s!r} is not valid; valid: val, test"
                )
        if not self.splits:
            raise ConfigError(f"{key('report', 'splits')}: empty; valid: val, test")
        self.validate_paired_tests("report")
        self.validate_intervals("report")


# ----------------------------------------------------------------------------- inputs


@dataclass
class Scores:
    per_query: pd.DataFrame
    per_pool: pd.DataFrame
    chance: pd.DataFrame
    sources: list[dict[str, Any]]

    @property
    def pool_meta(self) -> pd.DataFrame:
        import pandas as pd

        from mdcr.scoring.aggregate import POOL_KEYS

        frames = [self.per_pool[["pool_id", *POOL_KEYS]]]
        if not self.chance.empty:
            frames.append(self.chance[["pool_id", *POOL_KEYS]])
        return pd.concat(frames).drop_duplicates("pool_id").reset_index(drop=True)


def load_scores(folders: list[Path], repeated: str = "error") -> Scores:
    """Read and merge score outputs; they must share their pools. A retriever in several
    of them is an error, or with ``repeated="last"`` taken from the last one holding it."""
    import pandas as pd

    from mdcr.contracts.artifacts import CHANCE, POOL_MEANS, POOL_METRICS

    pq_frames, pp_frames, ch_frames = [], [], []
    sources: list[dict[str, Any]] = []
    for source, folder in enumerate(folders):
        pq_frames.append(POOL_METRICS.read_pandas(folder).assign(_source=source))
        pp_frames.append(POOL_MEANS.read_pandas(folder).assign(_source=source))
        if CHANCE.exists(folder):
            ch_frames.append(CHANCE.read_pandas(folder))
        sources.append(_score_source(folder))
    pools = {str(s["pools_fingerprint"]) for s in sources if s["pools_fingerprint"]}
    if len(pools) > 1:
        raise ManifestMismatchError(
            "report.scores: the score outputs were made on different pools "
            f"({', '.join(sorted(pools))}); report retrievers scored on the same pools"
        )
    per_pool = pd.concat(pp_frames, ignore_index=True)
    per_query = pd.concat(pq_frames, ignore_index=True)
    if repeated == "last":
        per_pool, per_query = _keep_last(per_pool, per_query, sources)
    dup = per_pool.duplicated(["retriever", "pool_id", "metric"])
    if dup.any():
        r = per_pool[dup].iloc[0]
        raise InputDataError(
            f"report.scores: retriever '{r['retriever']}' is scored twice on pool "
            f"'{r['pool_id']}'; pass each retriever's scores once"
        )
    chance = (
        pd.concat(ch_frames, ignore_index=True).drop_duplicates(["pool_id", "metric"])
        if ch_frames
        else pd.DataFrame(
            columns=[
                "pool_id",
                "setup",
                "split",
                "field",
                "size",
                "rep",
                "metric",
                "value",
                "n_queries",
            ]
        )
    )
    return Scores(
        per_query.drop(columns="_source").reset_index(drop=True),
        per_pool.drop(columns="_source").reset_index(drop=True),
        chance,
        sources,
    )


def _score_source(folder: Path) -> dict[str, Any]:
    """What the report says of one score output: its fingerprint, pools, runs, cut-offs."""
    from mdcr.contracts.outputs import score_info

    found = score_info(folder)
    fp, info = found if found is not None else ("(no manifest)", None)
    return {
        "path": str(folder),
        "fingerprint": fp,
        "pools_fingerprint": info.pools_fingerprint if info else None,
        "runs": list(info.runs) if info else [],
        "depth": info.depth if info else None,
        "recall_k": info.recall_k if info else None,
        "left_out": [],  # retrievers scored again in a later output
    }


def _keep_last(
    per_pool: pd.DataFrame, per_query: pd.DataFrame, sources: list[dict[str, Any]]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each retriever's scores from the last output holding it; the earlier ones are
    named in their source's ``left_out``."""
    newest = per_pool.groupby("retriever")["_source"].max()
    held = per_pool[["_source", "retriever"]].drop_duplicates()
    for source, retriever in held.itertuples(index=False):
        if source < newest[retriever]:
            sources[int(source)]["left_out"].append(str(retriever))
    per_pool = per_pool[per_pool["_source"] == per_pool["retriever"].map(newest)]
    per_query = per_query[per_query["_source"] == per_query["retriever"].map(newest)]
    return per_pool, per_query


def builtin_entries(scores: Scores) -> dict[str, Any]:
    """Each reported retriever's built-in entry (:mod:`mdcr.retrievers.builtin_entry`), as
    the score output it is taken from recorded it; None where it is not one."""
    out: dict[str, Any] = {}
    for src in scores.sources:  # oldest first: a later output's run wins, as its scores do
        for r in src["runs"]:
            if r.get("retriever") not in src["left_out"]:
                out[str(r.get("retriever"))] = r["builtin_entry"]
    return out


def _retriever_lines(scores: Scores, retrievers: list[str]) -> list[str]:
    """A table of every reported retriever's setup (:mod:`mdcr.retrievers.setups`): its
    spec, the model's commit or digest and the options that change its outputs."""
    from mdcr.retrievers.setups import run_setup

    entries: dict[str, Any] = {}
    for src in scores.sources:  # oldest first: the output a retriever is taken from wins
        for r in src["runs"]:
            if r.get("retriever") not in src["left_out"]:
                entries[str(r.get("retriever"))] = r
    lines = ["| retriever | spec | model and options |", "|---|---|---|"]
    for name in retrievers:
        setup = run_setup(entries[name]) if name in entries else None
        spec, detail = (setup["spec"], setup["detail"]) if setup else ("?", "")
        lines.append(f"| `{name}` | `{spec}` | {detail or 'defaults'} |")
    return lines


def _inputs_lines(scores: Scores) -> list[str]:
    from mdcr.retrievers.builtin_entry import describe

    lines = [
        "| score output | fingerprint | pools fingerprint | depth | R@k |",
        "|---|---|---|---:|---:|",
    ]
    for src in scores.sources:
        lines.append(
            f"| `{src['path']}` | `{src['fingerprint']}` | `{src['pools_fingerprint']}` | "
            f"{src['depth']} | {src['recall_k']} |"
        )
    lines += [
        "",
        "| retriever | built-in entry | run fingerprint | run folder | pools | queries | "
        "queries without results |",
        "|---|---|---|---|---:|---:|---:|",
    ]
    entries = builtin_entries(scores)
    for src in scores.sources:
        for r in src["runs"]:
            if r.get("retriever") in src["left_out"]:
                continue
            lines.append(
                f"| {r.get('retriever')} | {describe(entries.get(str(r.get('retriever'))))} | "
                f"`{r.get('fingerprint')}` | `{r.get('path')}` | "
                f"{r.get('pools', '')} | {r.get('queries', '')} | "
                f"{r.get('queries_without_results', '')} |"
            )
    left_out = [
        f"{', '.join(f'`{r}`' for r in src['left_out'])} from `{src['path']}`"
        for src in scores.sources
        if src["left_out"]
    ]
    if left_out:
        lines += [
            "",
            "Left out, since a later score output scores the same retriever name again: "
            + "; ".join(left_out)
            + ".",
        ]
    return lines


def _setup_lines(per_pool: pd.DataFrame) -> list[str]:
    from mdcr.contracts.paper import field_abbreviation, size_label

    lines = [
        "| split | setup | pool size | field | repetitions | queries per pool |",
        "|---|---|---:|---|---:|---:|",
    ]
    meta = per_pool.drop_duplicates("pool_id")
    for (split, setup, size, fld), g in meta.groupby(
        ["split", "setup", "size", "field"], dropna=False, sort=True
    ):
        nq = f"{g['n_queries'].min()}" + (
            f"–{g['n_queries'].max()}" if g["n_queries"].max() != g["n_queries"].min() else ""
        )
        fl = "–" if fld is None or fld != fld else field_abbreviation(str(fld))
        size_text = size_label(int(size))  # type: ignore[call-overload]
        lines.append(f"| {split} | {setup} | {size_text} | {fl} | {len(g)} | {nq} |")
    return lines


def _methods_lines(c: Context, scores: Scores) -> list[str]:
    from mdcr.measures.registry import label as metric_label
    from mdcr.measures.registry import parse

    cut = [parse(m) for m in c.metrics]
    depth = sorted({k for m, k in cut if m.cutoff == "depth" and k is not None})
    try:
        ranx_version = metadata.version("ranx")
    except metadata.PackageNotFoundError:  # pragma: no cover
        ranx_version = "?"
    tests = {
        "fisher": f"Fisher's randomization test ({c.cfg.permutations} permutations, "
        f"seed {c.cfg.seed}; exact when 2^n ≤ permutations)",
        "student": "the paired t-test (ranx / scipy)",
    }
    method = "BCa" if c.interval_options.method == "bca" else "percentile"
    first = c.cfg.stat_tests[0]
    chance_note = (
        "The `random` encoder's row is the empirical chance floor."
        if "random" in c.retrievers
        else "No `random` retriever was scored; the expected-chance row is the chance floor."
    )
    return [
        f"- Metrics: {', '.join(metric_label(m) + f' (`{m}`)' for m in c.metrics)}, computed "
        f"with ranx {ranx_version} from each query's ranking in rank order"
        + (f" (top {depth[0]})" if len(depth) == 1 else "")
        + "; every query in the qrels is scored, and one with no retrieved positive scores 0.",
        "- Aggregation: a pool's value is the mean over its queries; a pool size's or a "
        "field's value is the mean over its repetitions (± the sample standard deviation); "
        "AVG is the macro average over fields.",
        f"- Baselines: {chance_note} The expected-chance row is the exact expectation of "
        "each metric under a uniformly random ranking of the pool (closed forms in "
        "`mdcr/measures/chance.py`), averaged over the queries and repetitions.",
        "- Significance: paired per query (a query's value averaged over the repetitions), "
        "two-sided, with "
        + " and ".join(tests[t] for t in c.cfg.stat_tests)
        + f"; {c.cfg.correction} correction over the comparisons of each table, "
        f"α = {c.cfg.alpha}. Field AVG comparisons pool the queries of all fields.",
        f"- Intervals and tied groups: 95% {method} bootstrap intervals over queries "
        f"({c.interval_options.resamples} resamples, seed {c.cfg.seed}); the query is the "
        "unit sampled independently, so it is resampled with its values in every repetition "
        "and pool size (the same queries, as the paired tests pair them); fields are strata. "
        f"† marks a retriever not significantly worse than its column's best under the "
        f"{first} test, where that test can reach the corrected level α/m on the column's "
        "queries; ° where it cannot (too few queries: no tie is claimed). The minimum "
        f'detectable effect is the {first} test\'s at α/m, "not reachable" where it cannot '
        "reach it. See docs/scoring.md for the calibration of both.",
    ]


def benchmark_sections(
    c: Context, folders: list[Path], splits: tuple[str, ...], repeated: str = "error"
) -> list[Section]:
    """One "MDCR benchmark" section per benchmark the ``benchmark`` inputs score, drawn
    from all of its benchmark-score outputs together (:func:`mdcr_scores`), so every
    retriever scored on it is in the one section, with the report's paired tests and
    intervals (:mod:`mdcr.scoring.mdcr_report`). From the second benchmark on, table and
    plot names are ``mdcr<number>_…``, so no file overwrites another."""
    from mdcr.contracts.outputs import stage_of
    from mdcr.core.fingerprints import artifact_fingerprint
    from mdcr.core.manifests import open_output
    from mdcr.scoring.document import Section
    from mdcr.scoring.mdcr_report import mdcr_report

    groups: dict[str, list[Path]] = {}
    for folder in folders:
        out = open_output(folder)
        if out is None or stage_of(folder) != "benchmark-score":
            raise InputDataError(
                f"'{folder}' is not a benchmark-score output; point report.benchmark to a "
                "benchmark-score step"
            )
        groups.setdefault(str(out.info("benchmark_fingerprint", "")), []).append(folder)
    sections = []
    for number, outputs in enumerate(groups.values(), start=1):
        prefix = "mdcr_" if number == 1 else f"mdcr{number}_"
        scores = mdcr_scores(outputs, splits, repeated)
        drawn = mdcr_report(scores, c.cfg, c.interval_options, c.out, plot_prefix=prefix)

        def renamed(name: str, prefix: str = prefix) -> str:
            return prefix + name.removeprefix("mdcr_")

        for s in drawn.sections:
            for t in [*s.tables, *(t for sub in s.subsections for t in sub.tables)]:
                t.name = renamed(t.name)
        c.intervals += [f.assign(table=f["table"].map(renamed)) for f in drawn.intervals]
        intro = [f"From `{f}` (benchmark-score `{artifact_fingerprint(f)}`)." for f in outputs]
        if len(outputs) > 1:
            intro.append(
                "Their retrievers are scored together here: one table per measure, tested "
                "and compared as one."
            )
        intro += ["", *drawn.preamble]
        sections.append(Section("MDCR benchmark", intro=intro, subsections=drawn.sections))
    return sections


def mdcr_scores(outputs: list[Path], splits: tuple[str, ...], repeated: str) -> MdcrScores:
    """The per-query values of benchmark-score ``outputs`` of one benchmark, together, on
    the report's ``splits``: each retriever once (one benchmark-rank output scored in
    several of them is the same retriever; two under one name are an error, or with
    ``repeated="last"`` the last output's)."""
    import pandas as pd

    from mdcr.contracts.artifacts import BENCHMARK, BENCHMARK_METRICS
    from mdcr.contracts.outputs import benchmark_origin, input_paths, rank_info
    from mdcr.core.manifests import read_manifest
    from mdcr.retrievers.builtin_entry import entry_of
    from mdcr.scoring.mdcr_report import MdcrScores, RankedRetriever

    params = [(read_manifest(f) or {}).get("params", {}) for f in outputs]
    ties = {str(p.get("ties", "trec_eval")) for p in params}
    if len(ties) > 1:
        raise InputDataError(
            "report.benchmark: benchmark-score outputs of one benchmark break tied scores "
            f"differently ({', '.join(sorted(ties))}); score them with the same ties"
        )
    taken: dict[str, RankedRetriever] = {}
    values: dict[str, pd.DataFrame] = {}
    for folder in outputs:
        per_query = BENCHMARK_METRICS.read_pandas(folder)
        for rank in input_paths(folder, "ranks"):
            info = rank_info(rank)
            name = info.retriever
            if name in taken and taken[name].folder != rank and repeated != "last":
                raise InputDataError(
                    f"report.benchmark: retriever '{name}' is scored by two benchmark-rank "
                    f"outputs ('{taken[name].folder}' and '{rank}'); give it once, or set "
                    'report.repeated_retrievers = "last"'
                )
            taken[name] = RankedRetriever(info, rank, entry_of(rank))
            values[name] = per_query[per_query["retriever"] == name]
    (bench_folder,) = input_paths(outputs[0], "benchmark")
    if not bench_folder.is_dir():
        raise InputDataError(
            f"benchmark-score output '{outputs[0]}': its benchmark '{bench_folder}' is not "
            "found; build or import it again"
        )
    per_query = pd.concat(list(values.values()), ignore_index=True)
    scored = [s for s in SPLITS if s in splits and s in set(per_query["split"])]
    return MdcrScores(
        per_query[per_query["split"].isin(scored)].reset_index(drop=True),
        BENCHMARK.read_pandas(bench_folder),
        bench_folder,
        benchmark_origin(bench_folder),
        tuple(taken.values()),
        tuple(scored),
        ties.pop(),
        all(bool(p.get("by_type", True)) for p in params),
    )


def run_report(cfg: ReportConfig, ctx: StageContext) -> None:
    from mdcr.measures.registry import sort_key as metric_sort_key
    from mdcr.scoring.aggregate import CHANCE_ROW, over_reps, query_means
    from mdcr.scoring.document import Report, Section, write_report
    from mdcr.scoring.intervals import IntervalOptions
    from mdcr.scoring.per_query import pools_of, pools_rows
    from mdcr.scoring.published import order_retrievers
    from mdcr.scoring.report_context import Context, SectionOptions, letters_for
    from mdcr.scoring.table_intervals import pool_values, write_intervals
    from mdcr.scoring.wins_losses import wins_losses_section

    folders = ctx.inputs.get("scores") or []
    if not folders:
        raise ConfigError("report.scores: no score outputs given; name at least one")
    scores = load_scores(folders, cfg.repeated_retrievers)
    per_pool = _scored_pools(cfg, scores)
    pools = set(per_pool["pool_id"])
    per_query = scores.per_query[scores.per_query["pool_id"].isin(pools)]
    retrievers = order_retrievers(sorted(per_pool["retriever"].unique()))
    metrics = sorted(per_pool["metric"].unique(), key=metric_sort_key)
    c = Context(
        SectionOptions.of(cfg, chance_rows=cfg.chance_rows),
        retrievers,
        letters_for(retrievers),
        metrics,
        ctx.out,
    )
    c.entries = builtin_entries(scores)
    c.values = pool_values(per_query, scores.pool_meta)
    c.interval_options = IntervalOptions(cfg.resamples, cfg.seed, cfg.interval_method)

    agg = over_reps(per_pool)
    chance = scores.chance[scores.chance["pool_id"].isin(pools)]
    chance_agg = (
        over_reps(chance.assign(retriever=CHANCE_ROW)) if not chance.empty else agg.iloc[:0]
    )
    units = query_means(per_query, scores.pool_meta)

    report = Report(
        cfg.title,
        preamble=[
            "Values are metric × 100 with one decimal, as in the paper. Retrievers: "
            + ", ".join(f"`{r}`" for r in retrievers)
            + "."
        ],
    )
    report.sections = [
        Section("Inputs", intro=_inputs_lines(scores)),
        Section("Retrievers", intro=_retriever_lines(scores, retrievers)),
        Section("Setups", intro=_setup_lines(per_pool)),
        Section("Methods", intro=_methods_lines(c, scores)),
        *_result_sections(cfg, c, agg, chance_agg, units),
    ]
    wins = wins_losses_section(
        c, pools_rows(per_query, pools_of(folders[0])), [s for s in SPLITS if s in cfg.splits]
    )
    report.sections += [wins] if wins is not None else []
    benchmarks = ctx.inputs.get("benchmark") or []
    report.sections += benchmark_sections(c, benchmarks, cfg.splits, cfg.repeated_retrievers)
    report.file_tables = c.file_tables
    sig = _write_significance(c, ctx)
    write_intervals(c.intervals, ctx)
    write_report(report, ctx)
    _record_report(ctx, report, c, scores, sig)


def _scored_pools(cfg: ReportConfig, scores: Scores) -> pd.DataFrame:
    """The per-pool means of the reported splits; none is a one-line error."""
    per_pool = scores.per_pool[scores.per_pool["split"].isin(cfg.splits)]
    if per_pool.empty:
        have = ", ".join(sorted(scores.per_pool["split"].dropna().unique())) or "none"
        raise InputDataError(
            f"{key('report', 'splits')}: no scored pools in {', '.join(cfg.splits)}; "
            f"scored splits: {have}"
        )
    return per_pool


def _result_sections(
    cfg: ReportConfig,
    c: Context,
    agg: pd.DataFrame,
    chance_agg: pd.DataFrame,
    units: pd.DataFrame,
) -> list[Section]:
    """Dataset- and field-level sections per split, then the comparison with the paper."""
    from mdcr.scoring.document import Section
    from mdcr.scoring.report_sections import dataset_section, field_sections, paper_section

    sections: list[Section] = []
    for split in [s for s in SPLITS if s in cfg.splits]:
        ds = dataset_section(c, split, agg, chance_agg, units)
        if ds is not None:
            sections.append(ds)
        sections += field_sections(c, split, agg, chance_agg, units)
    if cfg.paper_comparison:
        if "test" in cfg.splits:
            sections.append(paper_section(c, agg))
        else:
            sections.append(
                Section(
                    "Comparison with the paper",
                    ["The paper reports test splits; add test to splits."],
                )
            )
    return sections


def _write_significance(c: Context, ctx: StageContext) -> pd.DataFrame:
    """Every section's pairwise comparisons in significance.parquet and its CSV."""
    import pandas as pd

    sig = pd.concat(c.significance, ignore_index=True) if c.significance else pd.DataFrame()
    if not sig.empty:
        sig.to_parquet(ctx.output("significance.parquet", rows=len(sig)), index=False)
        sig.to_csv(ctx.output("tables/significance.csv"), index=False)
    return sig


def _record_report(
    ctx: StageContext, report: Report, c: Context, scores: Scores, sig: pd.DataFrame
) -> None:
    """The manifest facts: tables, retrievers and built-in entries, inputs, significant
    counts."""
    ctx.record("tables", [t.name for s in report.sections for t in s.tables if t.files])
    ctx.record("retrievers", c.retrievers)
    ctx.record("builtin_entries", {r: c.entries.get(r) for r in c.retrievers})
    ctx.record("score_inputs", [s["fingerprint"] for s in scores.sources])
    if not sig.empty:
        ctx.record(
            "significant",
            {
                f"{t}|{test}": f"{int(g['significant'].sum())}/{int(g['p_value'].notna().sum())}"
                for (t, test), g in sig.groupby(["table", "test"], sort=True)
            },
        )


def plan_report(
    cfg: ReportConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    return StagePlan(
        f"tables, significance tests and plots of {len(inputs.get('scores', []))} score output(s)",
        work=Work("report"),
    )


SPEC = STAGES.register(
    StageSpec(
        name="report",
        version="7",
        config=ReportConfig,
        run=run_report,
        plan=plan_report,
        help="paper-style tables, significance tests, plots and the paper comparison",
        main_output="report.md",
        writes=(INTERVALS,),
    )
)
