"""The overview page: the result's tables as its report prints them, each cell a link to
the queries behind it.

A report or benchmark-score output's tables come from its own model (``report.json``,
:func:`mdcr.scoring.document.read_report`), each cell in the text the report prints
(:meth:`mdcr.scoring.tables.Table.text`: bold, the tied group's dagger, intervals,
significance letters, adjusted p), so a new mark the report gains shows here as it is.
The row of ``intervals.parquet`` behind a cell is attached whole (every column, known or
not) to the cell's JSON and tooltip. A score output has no report: its tables are the
stored per-pool means (``per_pool.parquet``), one per setup.

A cell links to a setup's queries when its labels name a retriever and a measure of a
setup (and maybe a pool size or a field) the way the report labels them
(:func:`mdcr.contracts.paper.size_label`, :func:`mdcr.contracts.paper.field_abbreviation`,
:func:`mdcr.measures.registry.label`, :func:`mdcr.scoring.published.retriever_label`);
a cell of another kind (expected chance, Table 4's candidate types) is shown unlinked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from markupsafe import Markup, escape

if TYPE_CHECKING:
    from mdcr.explore.result import Result, Setup
    from mdcr.scoring.document import Section
    from mdcr.scoring.tables import Table

# A queries-page link for (setup key, retriever, metric, field or None).
QueriesLink = Callable[[str, str, str, str | None], str | None]
DIFF = " − "  # the report's difference rows: "minilm − bm25"
AVG = "AVG"


def inline_markdown(text: str) -> Markup:
    """The report's inline Markdown as HTML: escaped, then ``**bold**``, `` `code` `` and
    the ``<sup>`` it writes itself."""
    html = str(escape(text))
    html = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html)
    html = re.sub(r"`([^`]+)`", r"<code>\1</code>", html)
    html = re.sub(r"&lt;sup&gt;(.*?)&lt;/sup&gt;", r"<sup>\1</sup>", html)
    return Markup(html)


@dataclass(frozen=True)
class Context:
    """What a table is about: a kind of setup and a split, and where every cell shares
    them, a pool size and a measure."""

    setup: str
    split: str
    size: int | None = None
    metric: str | None = None


def overview(result: Result, link: QueriesLink) -> dict[str, Any]:
    """The overview's sections, each with its tables (rows of cells with text, link and
    interval row)."""
    if result.report is not None:
        sections = _report_sections(_Labels(result), result.report.sections, link)
    else:
        sections = _score_sections(result, link)
    return {"sections": sections}


class _Labels:
    """The result's setups by kind and split, the labels the report gives their
    retrievers, pool sizes, fields and measures, and its intervals rows by table (made
    once per overview)."""

    def __init__(self, result: Result) -> None:
        from mdcr.contracts.paper import field_abbreviation, size_label
        from mdcr.measures.registry import label as metric_label
        from mdcr.scoring.published import retriever_label

        self.result = result
        self.setups: dict[tuple[str, str], list[Setup]] = {}
        for s in result.setups.values():
            self.setups.setdefault((s.setup, s.split), []).append(s)
        names = result.retrievers
        self.retriever = {n: n for n in names} | {
            retriever_label(n): n for n in names if retriever_label(n) not in names
        }
        sizes = {s.pool_size for s in result.setups.values() if s.pool_size}
        self.size = {size_label(n): n for n in sizes}
        self.field = {field_abbreviation(f): f for s in result.setups.values() for f in s.fields}
        self.metric: dict[tuple[str, str], dict[str, str]] = {}  # pools and MDCR share labels
        for key, group in self.setups.items():
            self.metric[key] = {metric_label(m): m for s in group for m in s.metrics}
        self.intervals: dict[str, list[dict[str, Any]]] = {}
        if result.intervals is not None and "table" in result.intervals:
            for row in result.intervals.to_dict("records"):
                record = {str(k): _plain(v) for k, v in row.items()}
                self.intervals.setdefault(str(record["table"]), []).append(record)

    def rows(self, table: str) -> list[dict[str, Any]]:
        return self.intervals.get(table.removesuffix("_ci"), [])


# -- a report's model ------------------------------------------------------------------


def _has_tables(s: Section) -> bool:
    return bool(s.tables) or any(_has_tables(x) for x in s.subsections)


def _report_sections(
    labels: _Labels, sections: list[Section], link: QueriesLink
) -> list[dict[str, Any]]:
    out = []
    for s in sections:
        if not _has_tables(s):
            continue
        contexts = [_context(labels, t) for t in s.tables]
        shared = next((c for c in contexts if c is not None), None)
        tables = []
        for t, ctx in zip(s.tables, contexts, strict=True):
            if ctx is None and shared is not None:  # a sibling's setup, not its measure
                ctx = Context(shared.setup, shared.split, shared.size)
            tables.append(_table(labels, t, ctx, link))
        out.append(
            {
                "heading": s.heading,
                "intro": [inline_markdown(x) for x in s.intro if not x.startswith("|")],
                "tables": tables,
                "subsections": _report_sections(labels, s.subsections, link),
            }
        )
    return out


def _single(rows: list[dict[str, Any]], column: str) -> Any:
    values = {r.get(column) for r in rows} - {None}
    return next(iter(values)) if len(values) == 1 else None


def _context(labels: _Labels, table: Table) -> Context | None:
    """The table's setup and split from its intervals rows, else from its name
    (``dataset_test``, ``field_test_map``, ``mdcr_test_...``)."""
    rows = labels.rows(table.name)
    if rows and _single(rows, "setup") and _single(rows, "split"):
        setup = str(_single(rows, "setup"))
        size = _single(rows, "size") if setup != "mdcr" else None
        metric = _single(rows, "metric")
        return Context(
            setup,
            str(_single(rows, "split")),
            None if size is None else int(size),
            None if metric is None else str(metric),
        )
    parts = table.name.split("_")
    kind = "mdcr" if parts[0].startswith("mdcr") else parts[0]
    if len(parts) > 1 and (kind, parts[1]) in labels.setups:
        return Context(kind, parts[1])
    return None


@dataclass(frozen=True)
class _Target:
    setup: Setup
    retriever: str
    kind: str  # "mean", or "minus <baseline>"
    metric: str
    field: str | None  # None: every field (or AVG)
    avg: bool


def _resolve(labels: _Labels, ctx: Context | None, row: str, col: tuple[str, str]
             ) -> _Target | None:  # fmt: skip
    """The setup, retriever and measure a cell's labels name, or None."""
    if ctx is None:
        return None
    setups = labels.setups.get((ctx.setup, ctx.split), [])
    if not setups:
        return None
    found: dict[str, Any] = {"metric": ctx.metric, "size": ctx.size}
    for token in (t for t in (row, *col) if t):
        base, _, minus = token.partition(DIFF)
        if base in labels.retriever and "retriever" not in found:
            found["retriever"] = labels.retriever[base]
            found["kind"] = f"minus {minus}" if minus else "mean"
        elif token in labels.size and ctx.setup == "dataset":
            found["size"] = labels.size[token]
        elif token == AVG or token in labels.field:
            found["field"] = labels.field.get(token)
            found["avg"] = token == AVG
        elif token in labels.metric[(ctx.setup, ctx.split)]:
            found["metric"] = labels.metric[(ctx.setup, ctx.split)][token]
        else:
            return None  # a label that names nothing of a setup: not a cell of one
    if "retriever" not in found or found["metric"] is None:
        return None
    chosen = [s for s in setups if found["size"] in (None, s.pool_size)]
    if len(chosen) != 1 or found["metric"] not in chosen[0].metrics:
        return None
    return _Target(
        chosen[0],
        found["retriever"],
        found["kind"],
        found["metric"],
        found.get("field"),
        bool(found.get("avg", False)),
    )


def _interval_row(labels: _Labels, table: str, t: _Target) -> dict[str, Any] | None:
    """The intervals row behind a cell (None: none, or not one alone)."""
    hits = []
    for row in labels.rows(table):
        if row.get("retriever") != t.retriever or row.get("metric") != t.metric:
            continue
        if row.get("kind", t.kind) != t.kind:
            continue
        if t.setup.setup == "dataset" and row.get("size") not in (None, t.setup.pool_size):
            continue
        if (t.field is not None or t.avg) and row.get("field") != (AVG if t.avg else t.field):
            continue
        hits.append(row)
    return hits[0] if len(hits) == 1 else None


def _plain(v: Any) -> Any:
    """A JSON value of a frame cell (NA and NaN as None)."""
    import pandas as pd

    if v is None or (not isinstance(v, list | tuple | dict) and bool(pd.isna(v))):
        return None
    if hasattr(v, "item"):
        return v.item()
    return v


def _detail(row: dict[str, Any] | None) -> str:
    """A cell's tooltip: its intervals row, every column but the keys."""
    if row is None:
        return ""
    keys = {"table", "kind", "retriever", "metric", "setup", "split", "size", "field"}
    parts = []
    for k, v in row.items():
        if k in keys or v is None:
            continue
        parts.append(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}")
    return "; ".join(parts)


def _table(labels: _Labels, table: Table, ctx: Context | None, link: QueriesLink
           ) -> dict[str, Any]:  # fmt: skip
    rows = []
    for r in table.rows:
        cells = []
        for col in table.columns:
            cell = table.cells.get((r, col))
            target = _resolve(labels, ctx, r, col) if cell is not None else None
            interval = _interval_row(labels, table.name, target) if target else None
            href = None
            if target is not None:
                href = link(target.setup.key, target.retriever, target.metric, target.field)
            cells.append(
                {
                    "text": table.text(r, col),
                    "html": inline_markdown(table.text(r, col)),
                    "value": None if cell is None or math.isnan(cell.mean) else cell.mean,
                    "href": href,
                    "detail": _detail(interval),
                    "interval": interval,
                }
            )
        rows.append({"label": r, "rule": r in table.rule_before, "cells": cells})
    return {
        "name": table.name,
        "title": table.title,
        "row_header": table.row_header,
        "groups": _groups(table),
        "columns": [s for _, s in table.columns],
        "rows": rows,
        "notes": [inline_markdown(n) for n in table.notes],
    }


def _groups(table: Table) -> list[dict[str, Any]]:
    """The header's first line for grouped columns: (group, span) in order."""
    if not table.grouped:
        return []
    spans: list[dict[str, Any]] = []
    for g, _ in table.columns:
        if spans and spans[-1]["text"] == g:
            spans[-1]["span"] += 1
        else:
            spans.append({"text": g, "span": 1})
    return spans


# -- a score output: its per-pool means --------------------------------------------------


def _score_sections(result: Result, link: QueriesLink) -> list[dict[str, Any]]:
    """One table per setup: rows retrievers, columns the pools (repetitions) by measure,
    cells the stored per-pool means (x100)."""
    from mdcr.measures.registry import label as metric_label
    from mdcr.scoring.tables import Cell, Table

    if result.per_pool is None:
        return []
    per_pool = result.per_pool.astype({"pool_id": str})
    tables = []
    for setup in result.setups.values():
        block = per_pool[per_pool["pool_id"].isin(setup.pool_ids)]
        if block.empty:
            continue
        pools = [p for p in setup.pool_ids if p in set(block["pool_id"])]
        columns = [(p.rsplit("/", 1)[-1], metric_label(m)) for p in pools for m in setup.metrics]
        cells: dict[tuple[str, tuple[str, str]], Cell] = {}
        for pool, retriever, metric, value in zip(
            block["pool_id"], block["retriever"], block["metric"], block["value"], strict=True
        ):
            col = (str(pool).rsplit("/", 1)[-1], metric_label(str(metric)))
            cells[(str(retriever), col)] = Cell(float(value))
        rows = [name for name in setup.retrievers if any((name, c) in cells for c in columns)]
        table = Table(
            name=setup.key,
            title=f"{setup.label}: mean per pool (per_pool.parquet), ×100",
            row_header="Retriever",
            rows=rows,
            columns=columns,
            cells=cells,
        )
        labels = {metric_label(m): m for m in setup.metrics}
        model = _table(_Labels(result), table, None, link)
        for row, name in zip(model["rows"], rows, strict=True):
            for cell, (_, sub) in zip(row["cells"], columns, strict=True):
                cell["href"] = link(setup.key, name, labels[sub], None)
        tables.append(model)
    heading = "Per-pool means (a score output: no report tables)"
    return [{"heading": heading, "intro": [], "tables": tables, "subsections": []}]
