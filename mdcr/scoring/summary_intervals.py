"""The interval columns of an evaluation's summary frame (``ci_low``, ``ci_high``, percent,
and ``tied``), for :mod:`mdcr.evaluation.result`, and their text in what it prints.

They are the result's own, from its ``intervals.parquet``: the report's on pools, and
benchmark-score's on a benchmark (the same resamples, seed and method as its tables). A
benchmark-score output written before benchmark-score drew intervals has none: they are
drawn here from its per-query values with the default interval parameters (a field's
queries as one stratum, the macro average with the fields as strata) and ``tied`` from its
own paired tests (:mod:`mdcr.scoring.benchmark_intervals`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

SCALE = 100.0


def with_intervals(summary: pd.DataFrame, result: Path) -> pd.DataFrame:
    """``summary`` with ``ci_low``, ``ci_high`` (percent) and ``tied`` columns (NaN/NA
    where a row has none: the expected-chance row, a left-out AVG)."""
    import pandas as pd

    from mdcr.contracts.artifacts import INTERVALS
    from mdcr.contracts.outputs import stage_of

    summary = summary.drop(columns=[c for c in ("ci_low", "ci_high", "tied") if c in summary])
    if stage_of(result) == "benchmark-score":
        found = _benchmark(result)
        keys = ["retriever", "split", "field", "measure"]
    elif INTERVALS.exists(result):
        found = _pools(INTERVALS.read_pandas(result))
        keys = ["retriever", "setup", "split", "field", "pool_size", "measure"]
    else:
        found = pd.DataFrame()
    if found.empty:
        return summary.assign(ci_low=math.nan, ci_high=math.nan, tied=None)
    found = found.assign(ci_low=found["ci_low"] * SCALE, ci_high=found["ci_high"] * SCALE)
    left = summary.assign(
        _field=summary["field"].astype(object).where(summary["field"].notna(), "")
    )
    right = found.assign(_field=found["field"].astype(object).where(found["field"].notna(), ""))
    on = [k if k != "field" else "_field" for k in keys]
    if "pool_size" in on:
        left["pool_size"] = left["pool_size"].astype("Int64")
        right["pool_size"] = right["pool_size"].astype("Int64")
    right = right[[*on, "ci_low", "ci_high", "tied"]].drop_duplicates(on)
    merged = left.merge(right, on=on, how="left", validate="many_to_one")
    return merged.drop(columns="_field")


def _text(column: pd.Series) -> pd.Series:
    """A key column as text, empty where missing (so that missing keys match)."""
    return column.astype(object).where(column.notna(), "")


def _pools(frame: pd.DataFrame) -> pd.DataFrame:
    """The report's mean intervals, keyed as the summary is (measures by their labels)."""
    from mdcr.measures.registry import shown_name

    means = frame[frame["kind"] == "mean"].copy()
    if "field" not in means:
        means["field"] = None
    means["measure"] = means["metric"].map(lambda m: shown_name(str(m)))
    means["pool_size"] = means["size"]
    means.loc[means["setup"] == "dataset", "field"] = None
    return means


def _benchmark(scored: Path) -> pd.DataFrame:
    """Per field and the macro average of each retriever, split and measure, with the tied
    groups of benchmark-score's own paired tests (its tests, correction, alpha and seed):
    its ``intervals.parquet``, else drawn here."""
    from mdcr.contracts.artifacts import BENCHMARK_METRICS, INTERVALS
    from mdcr.measures.registry import shown_name
    from mdcr.scoring.benchmark_intervals import benchmark_cells, scored_tests
    from mdcr.scoring.comparison_params import IntervalParams
    from mdcr.scoring.intervals import IntervalOptions

    if INTERVALS.exists(scored):
        frame = INTERVALS.read_pandas(scored)
        means = frame[frame["kind"] == "mean"]
        return means.assign(measure=means["metric"].map(lambda m: shown_name(str(m))))
    tests = scored_tests(scored)
    defaults = IntervalParams()
    options = IntervalOptions(defaults.resamples, tests.seed, defaults.interval_method)
    out = benchmark_cells(BENCHMARK_METRICS.read_pandas(scored), tests, options)
    return out.assign(measure=out["metric"].map(lambda m: shown_name(str(m))))


# ---------------------------------------------------------------------------- the text

TIED_LEGEND = (
    "[low, high]: 95% bootstrap interval over queries; †: the tied group (the best and "
    "those not significantly worse than it after correction)"
)


def cell_text(row: dict) -> str:
    """A summary cell as text: ``54.1 ± 2.0 [49.5, 58.3] †`` (std, interval and the
    dagger where the row has them)."""
    mean = row.get("mean")
    if mean is None or math.isnan(mean):
        return "–"
    text = f"{mean:.1f}"
    std = row.get("std")
    if std is not None and not math.isnan(std):
        text += f" ± {std:.1f}"
    low, high = row.get("ci_low"), row.get("ci_high")
    if low is not None and high is not None and not (math.isnan(low) or math.isnan(high)):
        text += f" [{low:.1f}, {high:.1f}]"
    tied = row.get("tied")
    return text + " †" if isinstance(tied, (bool, np.bool_)) and bool(tied) else text
