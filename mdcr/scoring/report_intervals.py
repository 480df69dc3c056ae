"""Intervals, differences against the baseline, tied groups and the MDE in the pools report.

For each result table of :mod:`mdcr.scoring.report_sections` (after its significance tests):

- the retrievers tied with the column's best (not significantly worse after the table's
  correction, under the first test) are bold with a dagger (the best stays bold);
- a companion table ``<name>_ci`` (same columns) gives every mean with its 95% interval
  ``41.2 [39.8, 42.7]`` and, under a rule, each retriever's difference from the baseline
  with its interval and adjusted p; the paper's tables themselves keep their layout;
- the minimum detectable effect against the baseline is a note under the table;
- every interval goes into ``intervals.parquet`` (booleans ``tied``), one row per table,
  retriever and cell.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from mdcr.scoring.report_context import Context
    from mdcr.scoring.tables import Table

Column = Callable[[tuple[Any, ...]], tuple[str, str]]


def pool_values(per_query: pd.DataFrame, pool_meta: pd.DataFrame) -> pd.DataFrame:
    """Per-query values with their pool's setup, split, field, size and rep."""
    from mdcr.scoring.aggregate import POOL_KEYS

    meta = pool_meta[["pool_id", *POOL_KEYS]].drop_duplicates("pool_id")
    return per_query.merge(meta, on="pool_id", how="left", validate="many_to_one")


def _cells(
    c: Context, values: pd.DataFrame, cell_keys: list[str], levels: list[str], avg: bool
) -> pd.DataFrame:
    """Intervals of each (retriever, cell); with ``avg`` also each retriever's field AVG
    (every field's repetitions, fields weighted equally), for those scored on every field."""
    import pandas as pd

    from mdcr.scoring.intervals import cell_intervals

    out = cell_intervals(values, ["retriever", *cell_keys], levels, c.interval_options)
    if avg:
        n_fields = values["field"].nunique()
        full = values.groupby("retriever")["field"].nunique()
        keep = values[values["retriever"].map(full) == n_fields]
        rest = [k for k in cell_keys if k != "field"]
        whole = cell_intervals(keep, ["retriever", *rest], ["field", *levels], c.interval_options)
        out = pd.concat([out, whole.assign(field="AVG")], ignore_index=True)
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

    from mdcr.scoring.intervals import paired_differences, tied_with_best

    retrievers = [r for r in c.retrievers]
    values = values[values["retriever"].isin(retrievers)]
    means = _cells(c, values, cell_keys, ["rep"], avg)
    test = c.cfg.stat_tests[0]
    tied = (
        tied_with_best(sig, means.rename(columns={"estimate": "mean"}), cell_keys, test)
        if not sig.empty
        else set()
    )
    base = c.cfg.baseline
    diffs = pd.DataFrame()
    if base in set(values["retriever"]):
        d = paired_differences(values, base, ["pool_id", "query_id"])
        diffs = _cells(c, d, cell_keys, ["rep"], avg)
    rows: list[dict[str, Any]] = []
    r: dict[str, Any]
    for r in means.to_dict("records"):  # type: ignore[assignment]
        key = tuple(r[k] for k in cell_keys)
        cell = table.cells.get((r["retriever"], column(key)))
        is_tied = (*key, r["retriever"]) in tied
        if cell is not None and not sig.empty:
            cell.tied = is_tied
        rows.append({**r, "table": table.name, "kind": "mean", "tied": is_tied})
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
    if tied:
        table.notes.append(
            "Bold with †: not significantly worse than the column's best (bold) after "
            f"the {c.cfg.correction} correction ({test} test): the tied group."
        )
    return _companion(c, table, frame, cell_keys, column)


def _adjusted_p(
    sig: pd.DataFrame, cell_keys: list[str], key: tuple, a: str, b: str, test: str
) -> float:
    import math

    if sig.empty:
        return math.nan
    m = sig["test"] == test
    for k, v in zip(cell_keys, key, strict=True):
        m &= sig[k] == v
    pair = (sig["retriever_a"].isin([a, b])) & (sig["retriever_b"].isin([a, b]))
    hit = sig[m & pair]
    return float(hit["p_adjusted"].iloc[0]) if len(hit) else math.nan


def _mde_line(
    c: Context,
    sig: pd.DataFrame,
    units: pd.DataFrame,
    cell_keys: list[str],
    column: Column,
    test: str,
) -> str:
    """The MDE against the baseline per column (range over the retrievers), x100."""
    from mdcr.scoring.intervals import POWER, corrected_alpha, minimum_detectable_effect

    base = c.cfg.baseline
    m = int(sig[sig["test"] == test]["p_value"].notna().sum()) if not sig.empty else 0
    level = corrected_alpha(c.cfg.alpha, m)
    if base not in set(units["retriever"]):
        return f"Minimum detectable effect: no baseline `{base}` in this table."
    wide = units.pivot_table(
        index=[*cell_keys, "query_id"], columns="retriever", values="value", aggfunc="first"
    )
    parts = []
    for key, block in wide.groupby(level=list(range(len(cell_keys))), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        mdes = [
            minimum_detectable_effect((block[r] - block[base]).dropna().to_numpy(), level)
            for r in block.columns
            if r != base and r in c.retrievers
        ]
        mdes = [v * 100 for v in mdes if v == v]
        if mdes:
            lo, hi = min(mdes), max(mdes)
            span = f"{lo:.1f}" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}–{hi:.1f}"
            parts.append(f"{' '.join(x for x in column(key) if x)} {span}")
    return (
        f"Minimum detectable effect vs `{base}` ×100 (80% power at α/m = {c.cfg.alpha}/{m}"
        f" = {level:.2g}, paired, (z₁₋α/2 + z_{POWER}) · sd_diff / √n; range over "
        "retrievers): " + "; ".join(parts) + "."
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
    return Table(
        name=f"{table.name}_ci",
        title=f"{table.title}: 95% intervals",
        row_header=table.row_header,
        rows=rows + diff_rows,
        columns=list(table.columns),
        cells=cells,
        notes=[
            f"95% {method} bootstrap intervals over queries ({c.interval_options.resamples} "
            f"resamples, seed {c.interval_options.seed}), resampled within each repetition "
            "and averaged as the table is; rows `X − "
            f"{base}`: the paired difference, its interval and the {c.cfg.correction}-"
            "adjusted p of its test."
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
    INTERVALS.write(ctx, out)
    out.to_csv(ctx.output("tables/intervals.csv"), index=False)
