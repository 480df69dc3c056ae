"""Intervals, differences against the baseline, tied groups and the MDE on a result table of
any setup (pools or MDCR), for the pools report, benchmark-score's report and the summary of
``mdcr evaluate``; the statistics are :mod:`mdcr.scoring.intervals`'.

For each table (after its paired tests):

- the retrievers tied with the column's best (not significantly worse after the table's
  correction under the first test, where that test can reach the corrected level on the
  column's queries) are bold with a dagger (the best stays bold); those the test cannot
  tell from the best on so few queries get a ring (°) and a line under the table, never a
  dagger;
- a companion table ``<name>_ci`` (same columns) gives every mean with its 95% interval
  ``41.2 [39.8, 42.7]`` and, under a rule, each retriever's difference from the baseline
  with its interval and adjusted p; the tables themselves keep their layout;
- the minimum detectable effect against the baseline is a note under the table, "not
  reachable" where the test cannot reach the corrected level;
- every interval goes into ``intervals.parquet`` (``tied``, ``tie_group``), one row per
  table, retriever and cell; the summary of ``mdcr evaluate`` reads it back
  (:func:`with_intervals`).

On pools a cell's values are the per-query values of its pools (a query with its values in
every repetition, the unit resampled); on MDCR a field's queries are one pool, and the AVG
takes the fields as strata. MDCR's tables also get their paired tests here: per field and,
for AVG, over all fields' queries pooled (:func:`field_comparisons`), and, for the split's
comparison table, all measures of a split as one family (:func:`split_comparisons`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from mdcr.scoring.document import Section
    from mdcr.scoring.report_context import Context, SectionOptions
    from mdcr.scoring.tables import Table

Column = Callable[[tuple[Any, ...]], tuple[str, str]]
AVG = "AVG"
SCALE = 100.0
# Below this many queries a 95% bootstrap interval covers visibly less (docs/scoring.md).
FEW_QUERIES = 20
TEST_NAMES = {"fisher": "Fisher randomization test", "student": "paired t-test"}


def pool_values(per_query: pd.DataFrame, pool_meta: pd.DataFrame) -> pd.DataFrame:
    """Per-query values with their pool's setup, split, field, size and rep."""
    from mdcr.scoring.aggregate import POOL_KEYS

    meta = pool_meta[["pool_id", *POOL_KEYS]].drop_duplicates("pool_id")
    return per_query.merge(meta, on="pool_id", how="left", validate="many_to_one")


def _cells(c: Context, values: pd.DataFrame, cell_keys: list[str], avg: bool) -> pd.DataFrame:
    """Intervals of each (retriever, cell); with ``avg`` also each retriever's field AVG
    (the fields as strata, weighted equally), for those scored on every field."""
    import pandas as pd

    from mdcr.scoring.intervals import cell_intervals

    out = cell_intervals(values, ["retriever", *cell_keys], [], c.interval_options)
    if avg:
        n_fields = values["field"].nunique()
        full = values.groupby("retriever")["field"].nunique()
        keep = values[values["retriever"].map(full) == n_fields]
        rest = [k for k in cell_keys if k != "field"]
        whole = cell_intervals(keep, ["retriever", *rest], ["field"], c.interval_options)
        out = pd.concat([out, whole.assign(field=AVG)], ignore_index=True)
    return out


def annotate(
    c: Context,
    table: Table,
    sig: pd.DataFrame,
    units: pd.DataFrame,
    values: pd.DataFrame,
    cell_keys: list[str],
    column: Column,
    *,
    avg: bool = False,
) -> Table:
    """Mark ``table``'s tied groups, add its MDE note, and return its ``_ci`` companion.

    ``values``: the table's per-query values (one row per retriever, pool and query);
    ``units``: the per-query units its tests paired (``cell_keys``, retriever, query_id,
    value); ``column`` maps a cell's keys to the table's column.
    """
    import pandas as pd

    from mdcr.scoring.intervals import (
        SEPARATED,
        TIED,
        UNRESOLVED,
        paired_differences,
        tie_groups,
    )

    values = values[values["retriever"].isin(c.retrievers)]
    means = _cells(c, values, cell_keys, avg)
    test = c.cfg.stat_tests[0]
    groups = (
        tie_groups(
            sig,
            means.rename(columns={"estimate": "mean"}),
            cell_keys,
            test,
            alpha=c.cfg.alpha,
            permutations=c.cfg.permutations,
        )
        if not sig.empty
        else {}  # one retriever: no comparison, no group
    )
    base = c.cfg.baseline
    diffs = pd.DataFrame()
    if base in set(values["retriever"]):
        diffs = _cells(c, paired_differences(values, base), cell_keys, avg)
    rows: list[dict[str, Any]] = []
    r: dict[str, Any]
    for r in means.to_dict("records"):  # type: ignore[assignment]
        key = tuple(r[k] for k in cell_keys)
        group = groups.get((*key, r["retriever"]))
        tied = None if group in (None, UNRESOLVED) else group != SEPARATED
        cell = table.cells.get((r["retriever"], column(key)))
        if cell is not None and not sig.empty:
            cell.tied, cell.unresolved = tied, group == UNRESOLVED
        rows.append({**r, "table": table.name, "kind": "mean", "tied": tied, "tie_group": group})
    for r in diffs.to_dict("records"):  # type: ignore[assignment]
        key = tuple(r[k] for k in cell_keys)
        p = _adjusted_p(sig, cell_keys, key, r["retriever"], base, test)
        rows.append({**r, "table": table.name, "kind": f"minus {base}", "p_adjusted": p})
    frame = pd.DataFrame(rows)
    for k in ("setup", "split", "size", "metric"):  # the table's fixed keys, for the frame
        if k not in cell_keys and k in values and not values.empty and values[k].nunique() == 1:
            frame[k] = values[k].iloc[0]
    c.intervals.append(frame)
    table.notes.append(_mde_line(c, sig, units, cell_keys, column, test))
    shown = [g for k, g in groups.items() if k[-1] in c.retrievers]
    if TIED in shown:
        table.notes.append(
            "Bold with †: not significantly worse than the column's best (bold) after "
            f"the {c.cfg.correction} correction ({test} test), where the test can tell on "
            "the column's queries: the tied group."
        )
    if UNRESOLVED in shown:
        table.notes.append(_unresolved_line(c, sig, test))
    return _companion(c, table, frame, cell_keys, column)


def _adjusted_p(
    sig: pd.DataFrame, cell_keys: list[str], key: tuple, a: str, b: str, test: str
) -> float:
    if sig.empty:
        return math.nan
    m = sig["test"] == test
    for k, v in zip(cell_keys, key, strict=True):
        m &= sig[k] == v
    pair = (sig["retriever_a"].isin([a, b])) & (sig["retriever_b"].isin([a, b]))
    hit = sig[m & pair]
    return float(hit["p_adjusted"].iloc[0]) if len(hit) else math.nan


def _level(c: Context, sig: pd.DataFrame, test: str) -> tuple[int, float]:
    """The table's family size m under ``test`` and its corrected level α/m."""
    from mdcr.scoring.intervals import corrected_alpha

    m = int(sig[sig["test"] == test]["p_value"].notna().sum()) if not sig.empty else 0
    return m, corrected_alpha(c.cfg.alpha, m)


def _unresolved_line(c: Context, sig: pd.DataFrame, test: str) -> str:
    """What the ring says: the test's smallest p on the columns' queries exceeds α/m."""
    from mdcr.scoring.intervals import reachable, smallest_p_value

    m, level = _level(c, sig, test)
    first = sig[sig["test"] == test]
    short = first[~reachable(first, c.cfg.alpha, c.cfg.permutations)]
    sizes = sorted({int(n) for n in short["n_queries"]}, reverse=True)
    floors = ", ".join(
        f"{smallest_p_value(test, n, c.cfg.permutations):.2g} on n = {n}" for n in sizes
    )
    return (
        f"°: not significantly worse than the column's best, but too few queries to tell: "
        f"the {test} test's smallest two-sided p ({floors}) is above α/m = {c.cfg.alpha}/{m} "
        f"= {level:.2g}, so no difference there could be significant and no tie is claimed."
    )


def _mde_line(
    c: Context,
    sig: pd.DataFrame,
    units: pd.DataFrame,
    cell_keys: list[str],
    column: Column,
    test: str,
) -> str:
    """The MDE against the baseline per column (range over the retrievers), x100; "not
    reachable" where the test cannot reach α/m on the column's queries."""
    from mdcr.scoring.intervals import POWER, minimum_detectable_effect, smallest_p_value

    base = c.cfg.baseline
    m, level = _level(c, sig, test)
    if base not in set(units["retriever"]):
        return f"Minimum detectable effect: no baseline `{base}` in this table."
    wide = units.pivot_table(
        index=[*cell_keys, "query_id"], columns="retriever", values="value", aggfunc="first"
    )
    parts = []
    for key, block in wide.groupby(level=list(range(len(cell_keys))), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        label = " ".join(x for x in column(key) if x)
        diffs = [
            (block[r] - block[base]).dropna().to_numpy()
            for r in block.columns
            if r != base and r in c.retrievers
        ]
        sizes = [len(d) for d in diffs if len(d)]
        if sizes and smallest_p_value(test, min(sizes), c.cfg.permutations) > level:
            parts.append(f"{label} not reachable (n = {min(sizes)})")
            continue
        mdes = [minimum_detectable_effect(d, level) * 100 for d in diffs]
        mdes = [v for v in mdes if v == v]
        if mdes:
            lo, hi = min(mdes), max(mdes)
            span = f"{lo:.1f}" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}–{hi:.1f}"
            parts.append(f"{label} {span}")
    return (
        f"Minimum detectable effect vs `{base}` ×100 ({POWER:.0%} power of the paired test at "
        f"α/m = {c.cfg.alpha}/{m} = {level:.2g}: the t-test's exact power, noncentral t with "
        f"n − 1 df; range over retrievers; not reachable: the {test} test cannot reach α/m "
        "on n queries): " + "; ".join(parts) + "."
    )


def _companion(
    c: Context, table: Table, frame: pd.DataFrame, cell_keys: list[str], column: Column
) -> Table:
    """``<name>_ci``: means with intervals, then differences from the baseline."""
    from mdcr.scoring.tables import Cell, Table

    base = c.cfg.baseline
    cells: dict[tuple[str, tuple[str, str]], Cell] = {}
    rows: list[str] = []
    diff_rows: list[str] = []
    for r in frame.to_dict("records"):
        col = column(tuple(r[k] for k in cell_keys))
        if col not in table.columns:
            continue
        name = r["retriever"] if r["kind"] == "mean" else f"{r['retriever']} − {base}"
        (rows if r["kind"] == "mean" else diff_rows).append(name)
        p = r.get("p_adjusted")
        note = "" if r["kind"] == "mean" or p != p else f"(p {p:.2g})"
        cells[(name, col)] = Cell(r["estimate"], low=r["ci_low"], high=r["ci_high"], note=note)
    order = {n: i for i, n in enumerate(c.retrievers)}
    rows = sorted(dict.fromkeys(rows), key=lambda n: order.get(n, len(order)))
    diff_rows = sorted(dict.fromkeys(diff_rows), key=lambda n: order.get(n.split(" − ")[0], 0))
    method = "BCa" if c.interval_options.method == "bca" else "percentile"
    few = [int(n) for n in frame.get("n_queries", []) if n == n and n < FEW_QUERIES]
    caveat = (
        f" With fewer than {FEW_QUERIES} queries (here {min(few)}) an interval covers less "
        'than 95% (docs/scoring.md, "Calibration").'
        if few
        else ""
    )
    return Table(
        name=f"{table.name}_ci",
        title=f"{table.title}: 95% intervals",
        row_header=table.row_header,
        rows=rows + diff_rows,
        columns=list(table.columns),
        cells=cells,
        notes=[
            f"95% {method} bootstrap intervals over queries ({c.interval_options.resamples} "
            f"resamples, seed {c.interval_options.seed}): a query is resampled with its "
            "values in every repetition, averaged as the table is; rows `X − "
            f"{base}`: the paired difference, its interval and the {c.cfg.correction}-"
            "adjusted p of its test." + caveat
        ],
        rule_before={diff_rows[0]} if diff_rows else set(),
        std_in_text=False,
    )


def write_intervals(frames: Sequence[pd.DataFrame], ctx: Any) -> None:
    """Every table's intervals in intervals.parquet and tables/intervals.csv."""
    import pandas as pd

    from mdcr.contracts.artifacts import INTERVALS

    if not frames:
        return
    out = pd.concat(list(frames), ignore_index=True)
    if "tied" in out:
        out["tied"] = out["tied"].astype("boolean")
    if "tie_group" in out:
        out["tie_group"] = out["tie_group"].astype(object).where(out["tie_group"].notna(), None)
    INTERVALS.write(ctx, out)
    out.to_csv(ctx.output("tables/intervals.csv"), index=False)


# --------------------------------------------------------------------------------- MDCR


def measure_units(per_query: pd.DataFrame, split: str, metric: str) -> pd.DataFrame:
    """One split's and measure's per-query values on the full lists: retriever, field,
    query_id, value."""
    from mdcr.scoring.mdcr_tables import ALL

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


def annotate_split(
    c: Context, section: Section, split: str, per_query: pd.DataFrame, entries: dict[str, Any]
) -> None:
    """Add intervals to one split's MDCR tables (``c``: a
    :class:`~mdcr.scoring.report_context.Context` whose ``cfg`` holds the paired tests and
    the baseline): for each measure of the split's Table 3 and nDCG tables, tied groups
    (bold and a dagger; a ring where unresolved) and the MDE under the table, and a
    ``mdcr_<split>_<measure>_ci`` companion after it (each field's and AVG's mean with its
    interval, then each retriever's difference from the baseline with its interval and
    adjusted p); the rows go into ``c.intervals``. ``per_query``: benchmark-score's
    per-query values."""
    from mdcr.contracts.paper import MDCR_RECALL_K
    from mdcr.measures import registry as measures
    from mdcr.scoring.published import label_for, order_retrievers

    names = sorted(per_query.loc[per_query["split"] == split, "retriever"].unique())
    if not names:
        return
    bc = dataclasses.replace(c, retrievers=order_retrievers(names))
    labels = {r: label_for(r, entries.get(r)) for r in bc.retrievers}
    shown: list[Table] = []
    for table in section.tables:
        shown.append(table)
        if table.name.endswith(f"_{split}_table3"):
            metrics = [measures.MAP.name(None), measures.RECALL.name(MDCR_RECALL_K)]
        elif table.name.endswith(f"_{split}_ndcg"):
            metrics = [measures.NDCG.name(None)]
        else:
            continue
        rings: list[str] = []
        for metric in metrics:
            companion, notes = _measure(bc, table, per_query, split, metric, labels)
            shown.append(companion)
            rings += [n for n in notes if n.startswith("°") and n not in rings]
        if any(cell.tied for cell in table.cells.values()):
            table.notes.append(
                "Bold with †: not significantly worse than the best of its field or AVG "
                f"(bold) after the {c.cfg.correction} correction ({c.cfg.stat_tests[0]} "
                "test, per field; AVG over all fields' queries), where the test can tell on "
                "those queries: the tied group."
            )
        if any(cell.unresolved for cell in table.cells.values()):
            table.notes += rings
    section.tables = shown


def _measure(
    c: Context, table: Table, per_query: pd.DataFrame, split: str, metric: str, labels: dict
) -> tuple[Table, list[str]]:
    """One measure of an MDCR table: its tied flags and MDE note on ``table``; returns its
    interval companion and the notes of its own layout."""
    from mdcr.contracts.paper import field_abbreviation
    from mdcr.measures.registry import label as metric_label
    from mdcr.scoring.tables import Cell, Table

    units = measure_units(per_query, split, metric)
    short = metric.split("@")[0]
    sig = field_comparisons(units, c.retrievers, c.cfg, f"mdcr_{split}_{short}")
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
    values = units.assign(pool_id=units["field"], setup="mdcr", split=split, metric=metric)
    column = lambda k: ("", field_abbreviation(str(k[0])))  # noqa: E731
    companion = annotate(c, own, sig, sig.attrs["units"], values, ["field"], column, avg=True)
    by_table3 = table.name.endswith("_table3")
    for (r, (_, col)), cell in own.cells.items():
        key = (col, (labels[r], metric_label(metric))) if by_table3 else (col, ("", labels[r]))
        if key in table.cells and (cell.tied is not None or cell.unresolved):
            table.cells[key].tied, table.cells[key].unresolved = cell.tied, cell.unresolved
    for row in table.rows:  # the best of a field's measure is bold (the nDCG table too)
        mine = [table.cells.get((row, ("", labels[r]))) for r in c.retrievers]
        if by_table3:
            mine = [table.cells.get((row, (labels[r], metric_label(metric)))) for r in c.retrievers]
        found = [x for x in mine if x is not None and not math.isnan(x.mean)]
        best = max((x.mean for x in found), default=math.nan)
        for x in found:
            x.bold = x.bold or (len(found) > 1 and x.mean == best)
    table.notes.append(f"{metric_label(metric)}: {own.notes[0]}")  # the MDE
    return companion, own.notes


def split_comparisons(
    per_query: pd.DataFrame, split: str, retrievers: Sequence[str], tests: SectionOptions
) -> pd.DataFrame:
    """Corrected pairwise comparisons of one MDCR split: every pair of ``retrievers`` (in
    the given order) on each query's MAP, nDCG and R@5 (full candidate lists), all fields'
    queries pooled; all comparisons of the split one family (columns of
    :func:`mdcr.scoring.significance.correct`, with ``table`` = ``mdcr_<split>``)."""
    from mdcr.scoring.mdcr_tables import ALL, MDCR_METRICS
    from mdcr.scoring.significance import correct, pairwise_tests

    pq = per_query[(per_query["split"] == split) & (per_query["subset"] == ALL)]
    units = pq.assign(query_id=pq["field"] + "\x1f" + pq["query_id"])[
        ["retriever", "metric", "query_id", "value"]
    ]
    comps = pairwise_tests(
        units, ["metric"], list(retrievers), tests.stat_tests, tests.permutations, tests.seed
    )
    order = {m: i for i, m in enumerate(MDCR_METRICS)}
    comps = comps.sort_values("metric", key=lambda s: s.map(order), kind="stable")
    comps.insert(0, "table", f"mdcr_{split}")
    comps.insert(1, "split", split)
    return correct(comps.reset_index(drop=True), ["table"], tests.correction, tests.alpha)


def comparison_lines(corrected: pd.DataFrame, tests: SectionOptions, labels: dict) -> list[str]:
    """The summary sentence and the table of an MDCR split's comparisons, worded as the
    pools report's."""
    import pandas as pd

    from mdcr.measures.registry import label
    from mdcr.scoring.significance import summary_line

    if corrected.empty:
        return ["Significance: no comparisons (fewer than two retrievers).", ""]
    names = tests.stat_tests
    parts = [f"{TEST_NAMES[t]}: {summary_line(corrected, t)}" for t in names]
    lines = [
        f"Significance ({tests.correction}-corrected over this table, α = {tests.alpha}; "
        "per-query values of all fields' queries, paired): " + "; ".join(parts) + ".",
        "",
    ]
    pair = ["metric", "retriever_a", "retriever_b"]
    first = corrected[corrected["test"] == names[0]]
    by_test = {
        t: corrected[corrected["test"] == t].set_index(pair)[["p_value", "p_adjusted"]]
        for t in names
    }
    head = ["metric", "A", "B", "n", "Δ (A−B) ×100", "direction"]
    head += [f"p {t} (adjusted)" for t in names]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in first.to_dict("records"):
        key = tuple(row[k] for k in pair)
        ps = []
        for t in names:
            p, pa = by_test[t].loc[key] if key in by_test[t].index else (float("nan"),) * 2
            ps.append("–" if pd.isna(p) else f"{p:.3g} ({pa:.3g})")
        star = " *" if row["significant"] else ""
        cells = [
            label(str(row["metric"])),
            labels.get(row["retriever_a"], row["retriever_a"]),
            labels.get(row["retriever_b"], row["retriever_b"]),
            str(int(row["n_queries"])),
            f"{row['diff'] * 100:+.2f}",
            f"A {row['direction']} B{star}",
            *ps,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"`*`: significant under the {names[0]} test after correction.", ""]
    return lines


# ------------------------------------------------------------------------- the summary


def with_intervals(summary: pd.DataFrame, result: Path) -> pd.DataFrame:
    """``summary`` (an evaluation's frame) with ``ci_low``, ``ci_high`` (percent),
    ``tied`` and ``tie_group`` from the result's ``intervals.parquet`` (the report's on
    pools, benchmark-score's on a benchmark); NaN/NA where a row has none (the
    expected-chance row, a left-out AVG)."""
    import pandas as pd

    from mdcr.contracts.artifacts import INTERVALS
    from mdcr.contracts.outputs import stage_of

    added = ("ci_low", "ci_high", "tied", "tie_group")
    summary = summary.drop(columns=[c for c in added if c in summary])
    found = _means(INTERVALS.read_pandas(result)) if INTERVALS.exists(result) else pd.DataFrame()
    if found.empty:
        return summary.assign(ci_low=math.nan, ci_high=math.nan, tied=None, tie_group=None)
    keys = ["retriever", "split", "field", "measure"]
    if stage_of(result) != "benchmark-score":
        keys = ["retriever", "setup", "split", "field", "pool_size", "measure"]
    found = found.assign(ci_low=found["ci_low"] * SCALE, ci_high=found["ci_high"] * SCALE)
    left = summary.assign(_field=_text(summary["field"]))
    right = found.assign(_field=_text(found["field"]))
    on = [k if k != "field" else "_field" for k in keys]
    if "pool_size" in on:
        left["pool_size"] = left["pool_size"].astype("Int64")
        right["pool_size"] = right["pool_size"].astype("Int64")
    right = right[[*on, *added]].drop_duplicates(on)
    merged = left.merge(right, on=on, how="left", validate="many_to_one")
    return merged.drop(columns="_field")


def _text(column: pd.Series) -> pd.Series:
    """A key column as text, empty where missing (so that missing keys match)."""
    return column.astype(object).where(column.notna(), "")


def _means(frame: pd.DataFrame) -> pd.DataFrame:
    """The mean intervals, keyed as the summary is (measures by their labels)."""
    from mdcr.measures.registry import shown_name

    means = frame[frame["kind"] == "mean"].copy()
    for col in ("field", "setup", "size", "tie_group"):
        if col not in means:
            means[col] = None
    means["measure"] = means["metric"].map(lambda m: shown_name(str(m)))
    means["pool_size"] = means["size"]
    means.loc[means["setup"] == "dataset", "field"] = None
    return means


TIED_LEGEND = (
    "[low, high]: 95% bootstrap interval over queries; †: the tied group (the best and "
    "those not significantly worse than it after correction, where the test can tell); °: "
    "too few queries to tell from the best at the corrected level"
)


def cell_text(row: dict) -> str:
    """A summary cell as text: ``54.1 ± 2.0 [49.5, 58.3] †`` (std, interval and the mark
    where the row has them: † tied with the best, ° unresolved)."""
    from mdcr.scoring.intervals import BEST, TIED, UNRESOLVED
    from mdcr.scoring.tables import UNRESOLVED_MARK

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
    group = row.get("tie_group")
    if group in (BEST, TIED):
        return text + " †"
    return text + f" {UNRESOLVED_MARK}" if group == UNRESOLVED else text
