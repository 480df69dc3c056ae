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
  once), and ``AVG`` is the macro average over the fields.
- ``per_pool`` (:data:`PER_POOL_COLUMNS`): one row per retriever, pool (on a benchmark: a
  field's queries of a split) and measure, the mean over its ``n_queries`` queries.

The frames are built from the report's own inputs with the report's own aggregation
(:mod:`mdcr.eval.aggregate`), never from its Markdown.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mdcr.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

    from mdcr.eval.report import ReportConfig
    from mdcr.evaluation.request import Evaluated

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


@dataclass(frozen=True)
class EvaluationResult:
    """What :func:`mdcr.evaluate` returns, in both modes (see the module docstring)."""

    summary: pd.DataFrame
    per_pool: pd.DataFrame
    report_path: Path  # report.md of the report (pools) or benchmark-score output
    retrievers: tuple[str, ...] = ()  # the retrievers this evaluation scored
    # (encoder spec, its search or bm25 run, or benchmark-rank output), for mdcr.load_run
    runs: tuple[tuple[str, Path], ...] = ()

    @property
    def per_query(self) -> pd.DataFrame:
        """One row per (pool or benchmark split and field, query, retriever, measure) with
        the query's facts (:mod:`mdcr.eval.per_query`), values in percent as above."""
        from mdcr.eval.per_query_export import per_query_rows

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
    from mdcr.config import from_mapping
    from mdcr.errors import InputDataError
    from mdcr.eval.report import ReportConfig
    from mdcr.manifests import read_manifest
    from mdcr.outputs import input_paths

    manifest = read_manifest(report)
    if manifest is None or manifest.get("stage") != "report":
        raise InputDataError(f"'{report}' is not a finished report output")
    scores = [str(p) for p in input_paths(report, "scores")]
    return from_mapping(ReportConfig, {**manifest["params"], "scores": scores}, "report")


def pools_frames(report: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(per_pool, summary)`` of a report output, from its score inputs, as it aggregates."""
    import pandas as pd

    from mdcr.eval.aggregate import macro_over, over_reps
    from mdcr.eval.report import load_scores
    from mdcr.eval.report_sections import CHANCE_ROW

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
    # Field AVG: per table (split, pool size, measure) as the report makes it; a retriever
    # missing a field of the table gets none.
    fld = agg[agg["setup"] == "field"]
    for (split, size, metric), cell in fld.groupby(["split", "size", "metric"], sort=True):
        table = cell[["retriever", "field", "mean", "std"]]
        avg = macro_over(table, "field", ["retriever"])
        avg.loc[~avg["complete"], "mean"] = math.nan
        rows = [avg[["retriever", "mean", "n"]].rename(columns={"n": "n_reps"})]
        if not chance_agg.empty:
            ch = chance_agg[
                (chance_agg["setup"] == "field")
                & (chance_agg["split"] == split)
                & (chance_agg["size"] == size)
                & (chance_agg["metric"] == metric)
            ]
            if not ch.empty:
                n_fields = table["field"].nunique()
                mean = ch["mean"].mean() if len(ch) == n_fields else math.nan
                rows.append(
                    pd.DataFrame({"retriever": [CHANCE_ROW], "mean": [mean], "n_reps": [len(ch)]})
                )
        labels = {"setup": "field", "split": split, "field": AVG, "size": size, "metric": metric}
        frames.append(_set(pd.concat(rows, ignore_index=True), **labels, std=math.nan))
    summary = pd.concat(frames, ignore_index=True)
    summary = summary.assign(mean=summary["mean"] * SCALE, std=summary["std"] * SCALE)
    summary = summary.rename(columns={"size": "pool_size", "metric": "measure", "n_reps": "n"})
    pools = per_pool.assign(value=per_pool["value"] * SCALE)
    pools = pools.rename(columns={"size": "pool_size", "metric": "measure"})
    return _tidy(pools, PER_POOL_COLUMNS), _tidy(_ordered(summary), SUMMARY_COLUMNS)


def _ordered(summary: pd.DataFrame) -> pd.DataFrame:
    """Rows in the report's order: split, measure, setup, pool size, field (paper order,
    AVG last), retriever (paper order, expected chance last)."""
    from mdcr.eval.published import field_order, order_retrievers
    from mdcr.eval.report_sections import CHANCE_ROW
    from mdcr.measures.registry import sort_key

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
    """The tidy frames of a finished evaluation, either mode."""
    from mdcr.outputs import rank_info

    if done.pools is not None:
        per_pool, summary = pools_frames(done.result)
        names = [name for name, _ in done.retrievers]  # the names score gave the runs
    else:
        per_pool, summary = benchmark_frames(done.result)
        names = [rank_info(f).retriever for _, f in done.retrievers]
    return EvaluationResult(
        summary, per_pool, done.result / "report.md", tuple(names), tuple(done.retrievers)
    )


# ----------------------------------------------------------------------------- printing


def _cell(mean: float, std: float) -> str:
    if mean is None or math.isnan(mean):
        return "–"
    text = f"{mean:.1f}"
    return text if std is None or math.isnan(std) else f"{text} ± {std:.1f}"


def _row_label(setup: str, size: int, fld: object) -> str:
    from mdcr.paper import field_abbreviation, size_label

    if setup == "dataset":
        return f"dataset {size_label(size)}"
    return f"field {size_label(size)} {field_abbreviation(str(fld))}"


def summary_lines(summary: pd.DataFrame) -> list[str]:
    """The pools summary as text: per split and measure a table, rows the pool sizes
    (dataset-level) and fields (field-level, with AVG), columns the retrievers, cells
    mean ± std over repetitions, × 100 with one decimal (as report.md)."""
    lines: list[str] = []
    names = list(dict.fromkeys(summary["retriever"]))
    for (split, measure), block in summary.groupby(["split", "measure"], sort=False):
        rows: dict[str, dict[str, str]] = {}
        for r in block.to_dict("records"):
            label = _row_label(str(r["setup"]), int(r["pool_size"]), r["field"])
            rows.setdefault(label, {})[str(r["retriever"])] = _cell(r["mean"], r["std"])
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


def print_pools_summary(done: Finished) -> None:
    """What ``mdcr evaluate --pools`` prints: the retrievers scored, the summary of the
    report (see :func:`summary_lines`) and the report's path."""
    result = result_of(done)
    print(
        f"scored {', '.join(sorted(result.retrievers))} on {done.pools}; with "
        f"{done.earlier_scores} earlier score output(s)"
    )
    print("cells: mean ± std over repetitions (× 100, as in the report); AVG: mean over fields")
    print()
    for line in summary_lines(result.summary):
        print(line)
    print(f"report: {result.report_path}")


# ------------------------------------------------------------- what mdcr evaluate prints


def _scores_out(template: Path, encoder: str, split: str, n_enc: int, n_split: int) -> Path:
    text = str(template)
    if n_enc > 1 and "{encoder}" not in text:
        raise ConfigError("--scores-out: several encoders; put {encoder} in the path")
    if n_split > 1 and "{split}" not in text:
        raise ConfigError("--scores-out: several splits; put {split} in the path, or give --split")
    safe = encoder.replace("/", "_").replace(":", "_")
    return Path(text.replace("{encoder}", safe).replace("{split}", split))


def write_scores_out(template: Path, done: Evaluated) -> None:
    """Copy each rank's scores file for the original scorer to the path ``template`` names."""
    import shutil

    from mdcr.atomic import atomic_path
    from mdcr.outputs import rank_info

    for spec, folder in done.retrievers:
        splits = rank_info(folder).splits
        for split in splits:
            target = _scores_out(template, spec, split, len(done.retrievers), len(splits))
            target.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(target) as tmp:
                shutil.copyfile(folder / f"scores_{split}.json", tmp)
            print(f"scores for the original scorer ({spec}, {split}): {target}", file=sys.stderr)


def print_results(done: Evaluated) -> None:
    """The original scorer's printout per retriever and split, then the report's path."""
    if done.pools is not None:
        print_pools_summary(done)
        return
    from mdcr.benchmark.score import read_official_results
    from mdcr.benchmark.scoring import MDCR_METRICS, official_key
    from mdcr.eval.published import comparable_with_published, order_retrievers, published_mdcr
    from mdcr.manifests import open_output

    official = read_official_results(done.result)
    published = comparable_with_published(done.origin)
    if done.origin is not None:
        print(done.origin.line())
        if not published:
            print("No published results beside it: they were computed on the official release.")
        print()
    scored = open_output(done.result)
    # Published rows go by the registry identity benchmark-score recorded, never a name.
    identities = scored.info("retriever_identities", {}) if scored else {}
    empty = scored.info("queries_without_positives", {}) if scored else {}
    for name in order_retrievers(list(official)):
        for split, fields in official[name].items():
            print(f"{name} on MDCR {split}:")
            for field, m in fields.items():
                if field == "AVG":
                    continue
                print("\t".join([field] + [f"{k}: {v:g}" for k, v in m.items()]))
            print("\t".join(["AVG"] + [f"{k}: {v:g}" for k, v in fields["AVG"].items()]))
            if empty.get(split):
                n = sum(empty[split].values())
                where = ", ".join(f"{f}: {k}" for f, k in empty[split].items())
                print(
                    f"({n} {'query' if n == 1 else 'queries'} without positives ({where}), "
                    "scored 0 and counted, as the original scorer does)"
                )
            # Only beside the official release; the label says which (declared or not).
            if published and done.origin is not None and split == "test":
                files = done.origin.files(split)
                for row in published_mdcr(identities.get(name)):
                    if row["field"] == "AVG":
                        keys = [official_key(m) for m in MDCR_METRICS]
                        cells = [f"{k}: {row[k]:g}" for k in keys if k in row]
                        label = f"published AVG on {files} ({row['citation']})"
                        print("\t".join([label, *cells]))
            print()
    print(f"report: {done.result / 'report.md'}")
