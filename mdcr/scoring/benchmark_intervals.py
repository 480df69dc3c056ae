"""Intervals, differences against the baseline, tied groups and the MDE on an MDCR
benchmark, from benchmark-score's per-query values (the full candidate lists): drawn by
benchmark-score into its own report and ``intervals.parquet`` (:func:`annotate_split`),
and, for a benchmark-score output written before it drew them, by the pools report
(:func:`annotate_benchmark`) and ``mdcr evaluate``'s summary (:func:`benchmark_cells`).

A field's value is the mean of its queries (one stratum); the macro average AVG is the
mean over the fields (each field a stratum, weight 1/F), so each interval is centred on
the number the tables print (:mod:`mdcr.scoring.intervals`). Tied groups come from paired
tests per field and, for AVG, over every field's queries pooled (as the pools report's
field tables and benchmark-score's own tests), corrected together over one measure's
table of one split.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from mdcr.scoring.document import Section
    from mdcr.scoring.intervals import IntervalOptions
    from mdcr.scoring.report_context import Context, SectionOptions
    from mdcr.scoring.tables import Table

AVG = "AVG"
ALL = "all"  # benchmark-score's subset of the full candidate lists (mdcr.benchmark.scoring)


def scored_tests(scored: Path) -> SectionOptions:
    """The paired-test parameters (and baseline) a benchmark-score output was made with."""
    from mdcr.core.manifests import read_manifest
    from mdcr.scoring.report_context import SectionOptions

    params = (read_manifest(scored) or {}).get("params", {})
    names = [f.name for f in dataclasses.fields(SectionOptions) if f.name != "chance_rows"]
    given = {k: params[k] for k in names if k in params}
    if "stat_tests" in given:
        given["stat_tests"] = tuple(given["stat_tests"])
    return SectionOptions(**given, chance_rows=False)


def measure_units(per_query: pd.DataFrame, split: str, metric: str) -> pd.DataFrame:
    """One split's and measure's per-query values on the full lists: retriever, field,
    query_id, value."""
    pq = per_query[
        (per_query["split"] == split)
        & (per_query["subset"] == ALL)
        & (per_query["metric"] == metric)
    ]
    return pq[["retriever", "field", "query_id", "value"]].reset_index(drop=True)


def field_comparisons(
    units: pd.DataFrame, retrievers: Sequence[str], tests: SectionOptions, table: str
) -> pd.DataFrame:
    """Corrected pairwise comparisons per field and, as field ``AVG``, over all fields'
    queries pooled; ``attrs["units"]`` holds the units they paired."""
    import pandas as pd

    from mdcr.scoring.significance import correct, pairwise_tests

    pooled = units.assign(
        query_id=units["field"].astype(str) + "\x1f" + units["query_id"], field=AVG
    )
    both = pd.concat([units, pooled], ignore_index=True)
    comps = pairwise_tests(
        both, ["field"], list(retrievers), tests.stat_tests, tests.permutations, tests.seed
    )
    comps.insert(0, "table", table)
    out = correct(comps, ["table"], tests.correction, tests.alpha)
    out.attrs["units"] = both
    return out


def benchmark_cells(
    per_query: pd.DataFrame, tests: SectionOptions, options: IntervalOptions
) -> pd.DataFrame:
    """Every retriever's interval per split, measure and field (and AVG), with ``tied``:
    not significantly worse than the best of its field (or AVG) after correction."""
    import pandas as pd

    from mdcr.scoring.intervals import cell_intervals, tied_with_best
    from mdcr.scoring.published import order_retrievers

    frames = []
    full = per_query[per_query["subset"] == ALL]
    for (split, metric), _ in full.groupby(["split", "metric"], sort=True):
        units = measure_units(per_query, str(split), str(metric))
        retrievers = order_retrievers(sorted(units["retriever"].unique()))
        v = units.assign(rep=0)
        fields = cell_intervals(v, ["retriever", "field"], ["rep"], options)
        avg = cell_intervals(v, ["retriever"], ["field", "rep"], options).assign(field=AVG)
        cells = pd.concat([fields, avg], ignore_index=True)
        sig = field_comparisons(units, retrievers, tests, f"mdcr_{split}_{metric}")
        means = cells.rename(columns={"estimate": "mean"})
        tied = tied_with_best(sig, means, ["field"], tests.stat_tests[0]) if len(sig) else set()
        flags = [(f, r) in tied for f, r in zip(cells["field"], cells["retriever"], strict=True)]
        frames.append(cells.assign(split=str(split), metric=str(metric), tied=flags))
    cols = ["retriever", "split", "metric", "field", "estimate", "ci_low", "ci_high", "tied"]
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


# ------------------------------------------------------------------ the report's MDCR section


def annotate_benchmark(c: Context, section: Section, scored: Path) -> None:
    """Add intervals to the MDCR section of the pools report (``c``: its
    :class:`~mdcr.scoring.report_context.Context`) made from a benchmark-score output
    that has none of its own (written before benchmark-score drew them): each split's
    subsection as :func:`annotate_split` does, with the report's paired tests."""
    from mdcr.contracts.artifacts import BENCHMARK_METRICS
    from mdcr.core.manifests import read_manifest

    per_query = BENCHMARK_METRICS.read_pandas(scored)
    info = (read_manifest(scored) or {}).get("info", {})
    identities = info.get("retriever_identities", {})
    for sub in section.subsections:
        annotate_split(c, sub, sub.heading, per_query, identities)


def annotate_split(
    c: Context, section: Section, split: str, per_query: pd.DataFrame, identities: dict[str, Any]
) -> None:
    """Add intervals to one split's MDCR tables (``c``: a
    :class:`~mdcr.scoring.report_context.Context` whose ``cfg`` holds the paired tests and
    the baseline): for each measure of the split's Table 3 and nDCG tables, tied groups
    (bold and a dagger) and the MDE under the table, and a ``mdcr_<split>_<measure>_ci``
    companion after it (each field's and AVG's mean with its interval, then each
    retriever's difference from the baseline with its interval and adjusted p); the rows
    go into ``c.intervals``. ``per_query``: benchmark-score's per-query values."""
    from mdcr.contracts.paper import MDCR_RECALL_K
    from mdcr.measures import registry as measures
    from mdcr.scoring.published import label_for, order_retrievers

    tests = c.cfg
    names = sorted(per_query.loc[per_query["split"] == split, "retriever"].unique())
    if not names:
        return
    bc = dataclasses.replace(c, retrievers=order_retrievers(names))
    labels = {r: label_for(r, identities.get(r)) for r in bc.retrievers}
    shown: list[Table] = []
    for table in section.tables:
        shown.append(table)
        if table.name.endswith(f"_{split}_table3"):
            metrics = [measures.MAP.name(None), measures.RECALL.name(MDCR_RECALL_K)]
        elif table.name.endswith(f"_{split}_ndcg"):
            metrics = [measures.NDCG.name(None)]
        else:
            continue
        for metric in metrics:
            shown.append(_measure(bc, table, per_query, split, metric, tests, labels))
        if any(cell.tied for cell in table.cells.values()):
            table.notes.append(
                "Bold with †: not significantly worse than the best of its field or AVG "
                f"(bold) after the {tests.correction} correction ({tests.stat_tests[0]} "
                "test, per field; AVG over all fields' queries): the tied group."
            )
    section.tables = shown


def _measure(
    c: Context,
    table: Table,
    per_query: pd.DataFrame,
    split: str,
    metric: str,
    tests: SectionOptions,
    labels: dict[str, str],
) -> Table:
    """One measure of an MDCR table: its tied flags and MDE note on ``table``; returns its
    interval companion."""
    import math

    from mdcr.contracts.paper import field_abbreviation
    from mdcr.measures.registry import label as metric_label
    from mdcr.scoring.report_intervals import annotate
    from mdcr.scoring.tables import Cell, Table

    units = measure_units(per_query, split, metric)
    short = metric.split("@")[0]
    sig = field_comparisons(units, c.retrievers, tests, f"mdcr_{split}_{short}")
    fields = [f for f in dict.fromkeys(units["field"])]
    cols = [("", field_abbreviation(f)) for f in fields] + [("", AVG)]
    # The measure's own layout (rows retrievers, columns fields): annotate marks its cells.
    own = Table(
        name=f"mdcr_{split}_{short}",
        title=f"MDCR {split}: {metric_label(metric)} per field",
        row_header="Retriever",
        rows=list(c.retrievers),
        columns=cols,
        cells={(r, col): Cell(math.nan) for r in c.retrievers for col in cols},
    )
    values = units.assign(rep=0, pool_id=units["field"], setup="mdcr", split=split, metric=metric)
    column = lambda k: ("", field_abbreviation(str(k[0])))  # noqa: E731
    companion = annotate(c, own, sig, sig.attrs["units"], values, ["field"], column, avg=True)
    by_table3 = table.name.endswith("_table3")
    for (r, (_, col)), cell in own.cells.items():
        key = (col, (labels[r], metric_label(metric))) if by_table3 else (col, ("", labels[r]))
        if key in table.cells and cell.tied is not None:
            table.cells[key].tied = cell.tied
    for row in table.rows:  # the best of a field's measure is bold (the nDCG table too)
        mine = [table.cells.get((row, ("", labels[r]))) for r in c.retrievers]
        if by_table3:
            mine = [table.cells.get((row, (labels[r], metric_label(metric)))) for r in c.retrievers]
        found = [x for x in mine if x is not None and not math.isnan(x.mean)]
        best = max((x.mean for x in found), default=math.nan)
        for x in found:
            x.bold = x.bold or (len(found) > 1 and x.mean == best)
    table.notes.append(f"{metric_label(metric)}: {own.notes[0]}")
    return companion
