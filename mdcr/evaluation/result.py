"""What an evaluation found, as numbers: one tidy shape for Python, and what ``mdcr
evaluate`` prints (the pools summary; on a benchmark, the original scorer's printout).

Both modes of :func:`mdcr.evaluate` return an :class:`EvaluationResult` with two frames of
the same columns, values in percent (metric × 100, unrounded: the scale of report.md and of
everything ``mdcr evaluate`` prints):

- ``summary`` (:data:`SUMMARY_COLUMNS`): one row per retriever, setup, split, field, pool
  size and measure (its table label, in both modes: ``MAP``, ``nDCG``, ``R@30`` on pools,
  ``R@5`` on MDCR): ``mean`` and ``std`` over the repetitions (sample std, ddof=1; NaN for
  one repetition) and ``n``, the values averaged (repetitions; for an ``AVG`` row, the
  fields). On pools these are exactly the numbers of the report's tables: every retriever
  the report holds (the new ones beside those scored earlier on the same pools) and its
  expected-chance row (retriever ``expected chance``); ``setup`` is ``dataset`` (``field``
  empty) or ``field`` (each field and ``AVG``, their macro average). On a benchmark
  ``setup`` is ``mdcr``, ``pool_size`` empty and ``n`` 1 (each field's queries are scored
  once), and ``AVG`` is the macro average over the fields. ``ci_low`` and ``ci_high``: the
  95% bootstrap interval of ``mean`` (the query resampled, with its values in every
  repetition); ``tie_group``: ``best``, ``tied`` (not significantly worse than the best,
  where the test can tell on the queries), ``separated`` or ``unresolved`` (too few
  queries to tell), and ``tied`` the same as a boolean (NA where unresolved)
  (:mod:`mdcr.scoring.table_intervals`).
- ``per_pool`` (:data:`PER_POOL_COLUMNS`): one row per retriever, pool (on a benchmark: a
  field's queries of a split) and measure, the mean over its ``n_queries`` queries.

The frames are built from the report's own inputs with the report's own aggregation
(:mod:`mdcr.scoring.aggregate`), never from its Markdown.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mdcr.core.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from mdcr.contracts.facts import BenchmarkOrigin
    from mdcr.scoring.report import ReportConfig

SUMMARY_COLUMNS = (
    "retriever",
    "setup",
    "split",
    "field",
    "pool_size",
    "measure",
    "mean",
    "std",
    "n",
    "ci_low",
    "ci_high",
    "tied",
    "tie_group",
)
PER_POOL_COLUMNS = (
    "retriever",
    "pool_id",
    "setup",
    "split",
    "field",
    "pool_size",
    "rep",
    "measure",
    "value",
    "n_queries",
)
AVG = "AVG"
MDCR_SETUP = "mdcr"
SCALE = 100.0


class Finished(Protocol):
    """What an evaluation made: :class:`mdcr.evaluation.request.Evaluated`."""

    @property
    def result(self) -> Path: ...  # the report (pools) or benchmark-score output
    @property
    def retrievers(self) -> tuple[tuple[str, Path], ...]: ...  # (spec, run or rank output)
    @property
    def pools(self) -> Path | None: ...  # pools mode: the pools scored on
    @property
    def earlier_scores(self) -> int: ...  # pools mode: earlier score outputs in the report
    @property
    def origin(self) -> BenchmarkOrigin | None: ...  # benchmark mode: where its files come from


@dataclass(frozen=True)
class EvaluationResult:
    """What an evaluation found, in both modes (see the module docstring): what
    :func:`mdcr.evaluate` returns and what ``mdcr evaluate`` prints (``str(result)``) and
    writes (``--scores-out``: :meth:`save`), built once by :func:`result_of`."""

    summary: pd.DataFrame
    per_pool: pd.DataFrame
    report_path: Path  # report.md of the report (pools) or benchmark-score output
    retrievers: tuple[str, ...] = ()  # the retrievers this evaluation scored
    # (encoder spec, its search or bm25 run, or benchmark-rank output), for mdcr.load_run
    runs: tuple[tuple[str, Path], ...] = ()
    text: str = field(default="", repr=False)  # what mdcr evaluate prints
    mode: str = "benchmark"  # "pools" or "benchmark"

    def __str__(self) -> str:
        return self.text

    def to_frame(self, which: str = "summary") -> pd.DataFrame:
        """A copy of the ``summary`` (default) or ``per_pool`` frame."""
        if which not in ("summary", "per_pool"):
            raise ConfigError(f"to_frame('{which}'): give 'summary' or 'per_pool'")
        frame: pd.DataFrame = getattr(self, which)
        return frame.copy()

    def save(self, template: str | Path) -> list[Path]:
        """Each benchmark-rank output's scores for the original MDCR scorer, copied to the
        path ``template`` names (``{encoder}`` and ``{split}`` in it when there are several);
        returns the paths written. Only on a benchmark."""
        if self.mode != "benchmark":
            raise ConfigError(
                "--scores-out: the original scorer's files exist for a benchmark only; "
                "drop it with --pools"
            )
        return write_scores_out(Path(template), self.runs)

    @property
    def per_query(self) -> pd.DataFrame:
        """One row per (pool or benchmark split and field, query, retriever, measure) with
        the query's facts (:mod:`mdcr.scoring.per_query`), values in percent as above."""
        from mdcr.scoring.per_query_export import per_query_rows

        rows = per_query_rows(self.report_path.parent)
        rows = rows.assign(value=rows["value"] * SCALE).rename(columns={"metric": "measure"})
        return _tidy(rows, [c if c != "metric" else "measure" for c in rows.columns])


def _set(frame: pd.DataFrame, **values: Any) -> pd.DataFrame:
    """A copy of ``frame`` with these columns set (a value or a column each)."""
    out = frame.copy()
    for key, value in values.items():
        out[key] = value
    return out


def _tidy(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """The frame's columns in order; measures under their table labels (the stored names
    ``map@500``, ``recall@30`` on pools and ``map``, ``recall@5`` on MDCR become ``MAP``,
    ``R@30`` and ``MAP``, ``R@5``: one naming, as report.md and the printouts use)."""
    from mdcr.measures.registry import shown_name

    out = frame.reindex(columns=list(columns)).reset_index(drop=True)
    if "measure" in out:
        out["measure"] = out["measure"].map(lambda m: shown_name(str(m)))
    for col in ("pool_size", "rep", "n", "n_queries"):
        if col in out:
            out[col] = out[col].astype("Int64")
    return out


# ----------------------------------------------------------------------------- pools


def _report_config(report: Path) -> ReportConfig:
    """The report stage's config of a finished report, its score inputs found again."""
    from mdcr.contracts.outputs import input_paths
    from mdcr.core.config import from_mapping
    from mdcr.core.errors import InputDataError
    from mdcr.core.manifests import read_manifest
    from mdcr.scoring.report import ReportConfig

    manifest = read_manifest(report)
    if manifest is None or manifest.get("stage") != "report":
        raise InputDataError(f"'{report}' is not a finished report output")
    scores = [str(p) for p in input_paths(report, "scores")]
    return from_mapping(ReportConfig, {**manifest["params"], "scores": scores}, "report")


def pools_frames(report: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(per_pool, summary)`` of a report output, from its score inputs, as it aggregates."""
    import pandas as pd

    from mdcr.scoring.aggregate import CHANCE_ROW, field_average, over_reps
    from mdcr.scoring.report import load_scores

    cfg = _report_config(report)
    scores = load_scores([Path(p) for p in cfg.scores], cfg.repeated_retrievers)
    per_pool = scores.per_pool[scores.per_pool["split"].isin(cfg.splits)]
    agg = over_reps(per_pool)
    frames = [agg]
    chance = scores.chance[scores.chance["pool_id"].isin(set(per_pool["pool_id"]))]
    chance_agg = agg.iloc[:0]
    if cfg.chance_rows and not chance.empty:  # an expectation: no std, as in the report
        chance_agg = _set(over_reps(chance.assign(retriever=CHANCE_ROW)), std=math.nan)
        frames.append(chance_agg)
    # Field AVG: per table (split, pool size, measure), the report's own (field_average).
    fld = agg[agg["setup"] == "field"]
    for (split, size, metric), cell in fld.groupby(["split", "size", "metric"], sort=True):
        table = cell[["retriever", "field", "mean", "std"]]
        ch = chance_agg[
            (chance_agg["setup"] == "field")
            & (chance_agg["split"] == split)
            & (chance_agg["size"] == size)
            & (chance_agg["metric"] == metric)
        ]
        avg = field_average(table, table["field"].nunique(), ch)
        avg = avg[["retriever", "mean", "n"]].rename(columns={"n": "n_reps"})
        labels = {"setup": "field", "split": split, "field": AVG, "size": size, "metric": metric}
        frames.append(_set(avg, **labels, std=math.nan))
    summary = pd.concat(frames, ignore_index=True)
    summary = summary.assign(mean=summary["mean"] * SCALE, std=summary["std"] * SCALE)
    summary = summary.rename(columns={"size": "pool_size", "metric": "measure", "n_reps": "n"})
    pools = per_pool.assign(value=per_pool["value"] * SCALE)
    pools = pools.rename(columns={"size": "pool_size", "metric": "measure"})
    return _tidy(pools, PER_POOL_COLUMNS), _tidy(_ordered(summary), SUMMARY_COLUMNS)


def _ordered(summary: pd.DataFrame) -> pd.DataFrame:
    """Rows in the report's order: split, measure, setup, pool size, field (paper order,
    AVG last), retriever (paper order, expected chance last)."""
    from mdcr.measures.registry import sort_key
    from mdcr.scoring.aggregate import CHANCE_ROW
    from mdcr.scoring.published import field_order, order_retrievers

    fields = field_order([str(f) for f in summary["field"].dropna().unique() if f != AVG])
    names = order_retrievers([r for r in summary["retriever"].unique() if r != CHANCE_ROW])
    measures = sorted(summary["measure"].unique(), key=sort_key)
    rank = {
        "split": {"val": 0, "test": 1},
        "measure": {m: i for i, m in enumerate(measures)},
        "setup": {"dataset": 0, "field": 1, MDCR_SETUP: 2},
        "field": {f: i for i, f in enumerate([*fields, AVG])},
        "retriever": {r: i for i, r in enumerate([*names, CHANCE_ROW])},
    }
    keys = summary.assign(
        **{f"_{k}": summary[k].map(v).fillna(-1) for k, v in rank.items()},
        _size=summary["pool_size"].fillna(-1),
    )
    order = ["_split", "_measure", "_setup", "_size", "_field", "_retriever"]
    return summary.loc[keys.sort_values(order, kind="stable").index]


# ------------------------------------------------------------------------- benchmark


def benchmark_frames(scored: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(per_pool, summary)`` of a benchmark-score output (all candidates, not per type)."""
    import pandas as pd

    per_field = pd.read_parquet(scored / "per_field.parquet")
    macro = pd.read_parquet(scored / "macro.parquet")
    per_field = per_field[per_field["subset"] == "all"]
    macro = macro[macro["subset"] == "all"]
    common: dict[str, Any] = {"setup": MDCR_SETUP, "pool_size": pd.NA}
    per_pool = _set(
        per_field,
        pool_id=MDCR_SETUP + "/" + per_field["split"] + "/" + per_field["field"],
        rep=pd.NA,
        value=per_field["value"] * SCALE,
        **common,
    ).rename(columns={"metric": "measure"})
    fields = _set(per_field, mean=per_field["value"] * SCALE, n=1, **common)
    avg = _set(macro, field=AVG, mean=macro["value"] * SCALE, n=macro["n_fields"], **common)
    summary = _set(pd.concat([fields, avg], ignore_index=True), std=math.nan)
    summary = summary.rename(columns={"metric": "measure"})
    return _tidy(per_pool, PER_POOL_COLUMNS), _tidy(_ordered(summary), SUMMARY_COLUMNS)


def result_of(done: Finished) -> EvaluationResult:
    """The result of a finished evaluation, either mode: its frames and its printout."""
    from mdcr.contracts.outputs import rank_info
    from mdcr.scoring.table_intervals import with_intervals

    if done.pools is not None:
        per_pool, summary = pools_frames(done.result)
        summary = with_intervals(summary, done.result)  # ci_low, ci_high, tied, tie_group
        names = [name for name, _ in done.retrievers]  # the names score gave the runs
        report = done.result / "report.md"
        lines = pools_lines(done, names, summary, report)
        mode = "pools"
    else:
        per_pool, summary = benchmark_frames(done.result)
        summary = with_intervals(summary, done.result)  # ci_low, ci_high, tied, tie_group
        names = [rank_info(f).retriever for _, f in done.retrievers]
        lines = benchmark_lines(done, summary)
        mode = "benchmark"
    return EvaluationResult(
        summary,
        per_pool,
        done.result / "report.md",
        tuple(names),
        tuple(done.retrievers),
        text="\n".join(lines),
        mode=mode,
    )


# ----------------------------------------------------------------------------- printing


def _row_label(setup: str, size: Any, fld: object) -> str:
    from mdcr.contracts.paper import field_abbreviation, size_label

    if setup == MDCR_SETUP:
        return field_abbreviation(str(fld))
    if setup == "dataset":
        return f"dataset {size_label(int(size))}"
    return f"field {size_label(int(size))} {field_abbreviation(str(fld))}"


def summary_lines(summary: pd.DataFrame) -> list[str]:
    """The pools summary as text: per split and measure a table, rows the pool sizes
    (dataset-level) and fields (field-level, with AVG), columns the retrievers, cells
    mean ± std over repetitions, × 100 with one decimal (as report.md), its 95% interval,
    † for the tied group and ° where too few queries tell
    (:func:`mdcr.scoring.table_intervals.cell_text`). On a benchmark the rows are the
    fields and AVG."""
    from mdcr.scoring.table_intervals import cell_text

    lines: list[str] = []
    names = list(dict.fromkeys(summary["retriever"]))
    for (split, measure), block in summary.groupby(["split", "measure"], sort=False):
        rows: dict[str, dict[str, str]] = {}
        for r in block.to_dict("records"):
            label = _row_label(str(r["setup"]), r["pool_size"], r["field"])
            rows.setdefault(label, {})[str(r["retriever"])] = cell_text(r)
        cols = [n for n in names if n in set(block["retriever"])]
        head = f"{measure} × 100, {split} split"
        table = [[head, *cols]] + [[lbl, *(c.get(n, "–") for n in cols)] for lbl, c in rows.items()]
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        for row in table:
            cells = [row[0].ljust(widths[0])] + [
                v.rjust(w) for v, w in zip(row[1:], widths[1:], strict=True)
            ]
            lines.append("  ".join(cells).rstrip())
        lines.append("")
    return lines


def pools_lines(done: Finished, names: list[str], summary: pd.DataFrame, report: Path) -> list[str]:
    """What ``mdcr evaluate --pools`` prints: the retrievers scored, the summary of the
    report (see :func:`summary_lines`) and the report's path."""
    from mdcr.scoring.table_intervals import TIED_LEGEND

    return [
        f"scored {', '.join(sorted(names))} on {done.pools}; with "
        f"{done.earlier_scores} earlier score output(s)",
        "cells: mean ± std over repetitions (× 100, as in the report); AVG: mean over fields",
        TIED_LEGEND,
        "",
        *summary_lines(summary),
        *unreproducible_lines(report.parent),
        f"report: {report}",
    ]


# ------------------------------------------------------------- what mdcr evaluate prints


def _scores_out(template: Path, encoder: str, split: str, n_enc: int, n_split: int) -> Path:
    text = str(template)
    if n_enc > 1 and "{encoder}" not in text:
        raise ConfigError("--scores-out: several encoders; put {encoder} in the path")
    if n_split > 1 and "{split}" not in text:
        raise ConfigError("--scores-out: several splits; put {split} in the path, or give --split")
    safe = encoder.replace("/", "_").replace(":", "_")
    return Path(text.replace("{encoder}", safe).replace("{split}", split))


def write_scores_out(template: Path, ranks: Sequence[tuple[str, Path]]) -> list[Path]:
    """Copy each rank's scores file for the original scorer to the path ``template`` names."""
    import shutil

    from mdcr.contracts.outputs import rank_info
    from mdcr.core.atomic import atomic_path

    written = []
    for spec, folder in ranks:
        splits = rank_info(folder).splits
        for split in splits:
            target = _scores_out(template, spec, split, len(ranks), len(splits))
            target.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(target) as tmp:
                shutil.copyfile(folder / f"scores_{split}.json", tmp)
            print(f"scores for the original scorer ({spec}, {split}): {target}", file=sys.stderr)
            written.append(target)
    return written


def benchmark_lines(done: Finished, summary: pd.DataFrame) -> list[str]:
    """The original scorer's printout per retriever and split, then the summary with its
    intervals and tied groups (:func:`summary_lines`), then the report's path."""
    from mdcr.benchmark.score import read_official_results
    from mdcr.core.manifests import open_output
    from mdcr.scoring.mdcr_tables import MDCR_METRICS, official_key
    from mdcr.scoring.published import comparable_with_published, order_retrievers, published_mdcr
    from mdcr.scoring.table_intervals import TIED_LEGEND

    lines: list[str] = []
    official = read_official_results(done.result)
    published = comparable_with_published(done.origin)
    if done.origin is not None:
        lines.append(done.origin.line())
        if not published:
            lines.append(
                "No published results beside it: they were computed on the official release."
            )
        lines.append("")
    scored = open_output(done.result)
    # Published rows go by the built-in entry benchmark-score recorded, never a name.
    entries = scored.info("builtin_entries", {}) if scored else {}
    empty = scored.info("queries_without_positives", {}) if scored else {}
    for name in order_retrievers(list(official)):
        for split, fields in official[name].items():
            lines.append(f"{name} on MDCR {split}:")
            for fld, m in fields.items():
                if fld == "AVG":
                    continue
                lines.append("\t".join([fld] + [f"{k}: {v:g}" for k, v in m.items()]))
            lines.append("\t".join(["AVG"] + [f"{k}: {v:g}" for k, v in fields["AVG"].items()]))
            if empty.get(split):
                n = sum(empty[split].values())
                where = ", ".join(f"{f}: {k}" for f, k in empty[split].items())
                lines.append(
                    f"({n} {'query' if n == 1 else 'queries'} without positives ({where}), "
                    "scored 0 and counted, as the original scorer does)"
                )
            # Only beside the official release; the label says which (declared or not).
            if published and done.origin is not None and split == "test":
                files = done.origin.files(split)
                for row in published_mdcr(entries.get(name)):
                    if row["field"] == "AVG":
                        keys = [official_key(m) for m in MDCR_METRICS]
                        cells = [f"{k}: {row[k]:g}" for k in keys if k in row]
                        label = f"published AVG on {files} ({row['citation']})"
                        lines.append("\t".join([label, *cells]))
            lines.append("")
    lines.append(f"fields and AVG × 100; {TIED_LEGEND}")  # the intervals and tied groups
    lines.append("")
    lines.extend(summary_lines(summary))
    lines.extend(unreproducible_lines(done.result))
    lines.append(f"report: {done.result / 'report.md'}")
    return lines


def unreproducible_lines(result: Path) -> list[str]:
    """One line per reason the numbers of ``result`` are not reproducible (an encoder that
    is not deterministic), as its manifest carries them; none when they are."""
    from mdcr.core.manifests import open_output
    from mdcr.core.stage import UNREPRODUCIBLE

    made = open_output(result)
    reasons = made.info(UNREPRODUCIBLE, []) if made else []
    return [f"not reproducible: {reason}; these numbers are one draw" for reason in reasons]
