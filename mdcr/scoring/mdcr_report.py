"""The report of an MDCR benchmark, drawn from per-query values: per split the Table 3
and nDCG tables with their intervals, tied groups and MDE, Table 4, the paired tests, the
paper's and published numbers beside ours and the original scorer's printout; then where
the encoders win and lose. benchmark-score draws its own report with it, and the pools
report its section of each benchmark, from every benchmark-score output of that benchmark
together (so every retriever scored on it, fused ones included, is in one section).

Each retriever's built-in entry (:mod:`mdcr.retrievers.builtin_entry`) decides its label and
whether it is set beside the paper's Tables 3 and 4 and published MDCR rows; its name never
does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from mdcr.contracts.facts import BenchmarkOrigin, RankInfo
    from mdcr.scoring.document import Section
    from mdcr.scoring.intervals import IntervalOptions
    from mdcr.scoring.report_context import Context, SectionOptions


@dataclass(frozen=True)
class RankedRetriever:
    """One retriever scored on the benchmark: its benchmark-rank (or benchmark-fuse) facts,
    output folder and built-in entry (None: not one)."""

    info: RankInfo
    folder: Path
    entry: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.info.retriever


@dataclass(frozen=True)
class MdcrScores:
    """What a benchmark's report is drawn from: benchmark-score's per-query values (one
    copy per retriever), the benchmark's rows, folder and origin, the retrievers, the
    splits, and how the scores were taken (``ties``, ``by_type``)."""

    per_query: pd.DataFrame
    bench: pd.DataFrame
    benchmark: Path
    origin: BenchmarkOrigin
    retrievers: tuple[RankedRetriever, ...]
    splits: tuple[str, ...]
    ties: str = "trec_eval"
    by_type: bool = True


@dataclass
class MdcrReport:
    """The drawn report: its preamble, a section per split (and where the encoders win and
    lose), each split's paired tests, and every table's intervals."""

    preamble: list[str]
    sections: list[Section]
    significance: dict[str, pd.DataFrame]
    intervals: list[pd.DataFrame] = field(default_factory=list)


def mdcr_report(
    scores: MdcrScores,
    options: SectionOptions,
    interval_options: IntervalOptions,
    out: Path,
    *,
    plot_prefix: str = "",
) -> MdcrReport:
    """The report of ``scores`` with these paired tests, baseline and intervals; its plots
    go under ``out/plots`` (names prefixed with ``plot_prefix``)."""
    from mdcr.measures import registry as measures
    from mdcr.scoring.mdcr_tables import field_means, macro_means, queries_without_positives
    from mdcr.scoring.per_query import benchmark_values_rows
    from mdcr.scoring.published import order_retrievers
    from mdcr.scoring.report_context import Context
    from mdcr.scoring.table_intervals import split_comparisons
    from mdcr.scoring.wins_losses import wins_losses_section

    names = order_retrievers(sorted(r.name for r in scores.retrievers))
    c = Context(options, names, {}, [measures.MAP.name(None)], out)
    c.interval_options = interval_options
    per_field = field_means(scores.per_query)
    macro = macro_means(per_field)
    empty = queries_without_positives(scores.bench[scores.bench["split"].isin(scores.splits)])
    given = [r.name for r in scores.retrievers]  # the comparisons' pairs in the given order
    sig = {
        split: split_comparisons(scores.per_query, split, given, options) for split in scores.splits
    }
    sections = [
        _split_section(c, scores, split, per_field, macro, empty, sig[split])
        for split in scores.splits
    ]
    rows = benchmark_values_rows(scores.per_query, scores.benchmark)
    wins = wins_losses_section(c, rows, scores.splits, on_benchmark=True, plot_prefix=plot_prefix)
    sections += [wins] if wins is not None else []
    preamble = [scores.origin.line(), "", *_method_lines(scores, options, interval_options)]
    return MdcrReport(preamble, sections, sig, c.intervals)


def _split_section(
    c: Context,
    scores: MdcrScores,
    split: str,
    per_field: pd.DataFrame,
    macro: pd.DataFrame,
    empty: pd.DataFrame,
    sig: pd.DataFrame,
) -> Section:
    from mdcr.scoring.document import Section
    from mdcr.scoring.mdcr_tables import (
        summary_lines,
        table3,
        table4,
        table_ndcg,
        without_positives_line,
    )
    from mdcr.scoring.published import label_for
    from mdcr.scoring.table_intervals import annotate_split, comparison_lines

    held = set(scores.per_query.loc[scores.per_query["split"] == split, "retriever"])
    ranks = [r for r in scores.retrievers if r.name in held]
    labels = {r.name: label_for(r.name, r.entry) for r in ranks}
    entries = {r.name: r.entry for r in ranks}
    s = Section(split)
    s.tables += [
        table3(per_field, macro, split, labels=labels),
        table_ndcg(per_field, macro, split, labels=labels),
    ]
    annotate_split(c, s, split, scores.per_query, entries)
    if scores.by_type:
        s.tables.append(table4(macro, split, labels=labels))
    note = without_positives_line(empty, split)
    if note:
        s.body += [note, ""]
    s.body += comparison_lines(sig, c.cfg, labels)
    if split == "test":
        s.body += _comparison_lines(macro, scores.origin, entries)
    s.body += ["Original scorer's printout (x100, rounded as `evaluate.py` rounds):", ""]
    for r in sorted(ranks, key=lambda r: c.retrievers.index(r.name)):
        s.body += [f"`{r.name}`:", "", "```", *summary_lines(per_field, split, r.name), "```", ""]
    return s


def _method_lines(
    scores: MdcrScores, options: SectionOptions, interval_options: IntervalOptions
) -> list[str]:
    from mdcr.retrievers.builtin_entry import describe
    from mdcr.scoring.published import order_retrievers

    sizes = scores.bench.groupby(["split", "field", "query_id"]).size()
    method = "BCa" if interval_options.method == "bca" else "percentile"
    lines = [
        "Metrics as the original MDCR scorer computes them: binary relevance (a candidate is "
        "relevant iff it is in the query's `true` list), MAP and nDCG over each query's whole "
        "candidate list (no cut-off), recall at 5; the mean over a field's queries, then the "
        "plain mean over fields (AVG). Values are x100.",
        "Ties: "
        + (
            "paper_id ascending (not the original scorer's order)."
            if scores.ties == "paper_id"
            else "trec_eval's order, as the original scorer (paper_id descending as strings)."
        ),
        f"Queries: {_per_split(sizes.groupby(level=0).size())}; candidates per query: "
        f"{int(sizes.min())}-{int(sizes.max())}.",
        "Candidate-type table: each query scored on its positives plus only that type's "
        "negatives, aggregated the same way; the AVG row is the mean over the retrievers.",
        f"Intervals: 95% {method} bootstrap over queries ({interval_options.resamples} "
        f"resamples, seed {interval_options.seed}; a field's queries one stratum, AVG with "
        f"the fields as strata), differences against `{options.baseline}`; tied groups from "
        f"the {options.stat_tests[0]} test per field (AVG: all fields' queries), "
        f"{options.correction}-corrected over each measure's table; a tie only where the "
        "test can reach the corrected level on the field's queries.",
        "",
        "Retrievers:",
        "",
    ]
    order = order_retrievers(sorted(r.name for r in scores.retrievers))
    for r in sorted(scores.retrievers, key=lambda r: order.index(r.name)):
        extra = f" ({r.info.detail})" if r.info.detail else ""
        lines.append(f"- `{r.name}`: {r.info.method}{extra}; {describe(r.entry)}; `{r.folder}`")
    return lines


def _per_split(counts: pd.Series) -> str:
    """``val 29, test 27``: a count per split, in the splits' order."""
    order = {"val": 0, "test": 1}
    keys = sorted(counts.index, key=lambda k: (order.get(str(k), 2), str(k)))
    return ", ".join(f"{k} {int(counts[k])}" for k in keys)


def _comparison_lines(
    macro: pd.DataFrame, origin: BenchmarkOrigin, entries: Mapping[str, Any]
) -> list[str]:
    """The paper's and other published numbers beside ours: on the official release only,
    and for built-in retrievers only (by built-in entry, never by name)."""
    from mdcr.scoring.published import comparable_with_published

    if not comparable_with_published(origin):
        return [
            f"No paper or published numbers beside these: this is {origin.label}, not the "
            "official MDCR release proven by provenance (`mdcr download mdcr`), and those "
            "numbers were computed on the official release.",
            "",
        ]
    files = origin.files("test")
    return _paper_lines(macro, entries, files) + _published_lines(macro, entries, files)


def _published_lines(macro: pd.DataFrame, entries: Mapping[str, Any], files: str) -> list[str]:
    """Our test AVG next to MDCR results published beyond the paper (model cards, the MDCR
    README), for the retrievers whose built-in entry has them."""
    from mdcr.scoring.mdcr_tables import MDCR_METRICS, official_key
    from mdcr.scoring.published import published_mdcr

    ours = macro[(macro["split"] == "test") & (macro["subset"] == "all")]
    rows = []
    for r in ours.itertuples(index=False):
        key = official_key(str(r.metric)) if r.metric in MDCR_METRICS else None
        for row in published_mdcr(entries.get(str(r.retriever))):
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


def _paper_lines(macro: pd.DataFrame, entries: Mapping[str, Any], files: str) -> list[str]:
    """Our AVG next to the paper's (Tables 3 and 4) for the retrievers whose built-in entry is
    one of the paper's models (built in, default setup); a name alone never matches."""
    from mdcr.measures.registry import label as measure_label
    from mdcr.scoring.mdcr_tables import TABLE_METRICS, paper_type_column, type_label
    from mdcr.scoring.published import paper_models, paper_values

    ids = paper_models(entries)
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
