"""The one report model and its one renderer, shared by every report mdcr writes.

A :class:`Report` is a title, preamble lines and :class:`Section` objects, each holding
intro text, :class:`~mdcr.scoring.tables.Table` objects, body text, plots and folded details.
:func:`write_report` renders ``report.md``, writes every table as CSV and LaTeX under
``tables/`` and saves the model itself as ``report.json``, so that a report that includes
another (the pools report includes the MDCR benchmark's) reads its model, never its
Markdown.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.scoring.tables import Cell, Table

if TYPE_CHECKING:
    from mdcr.core.stage import StageContext

REPORT_MD = "report.md"
REPORT_JSON = "report.json"
TABLES = "tables"


@dataclass
class Section:
    """A part of a report: intro text, tables (each with its notes), text, plots, details.

    ``plots`` are paths relative to the report folder (PNG shown, others listed in the
    manifest only). ``details`` are Markdown lines folded under ``details_title``.
    """

    heading: str
    intro: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    plots: list[str] = field(default_factory=list)
    details_title: str = ""
    details: list[str] = field(default_factory=list)
    subsections: list[Section] = field(default_factory=list)


@dataclass
class Report:
    title: str
    preamble: list[str] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    # Tables written under tables/ but not shown in report.md (full-size versions).
    file_tables: list[Table] = field(default_factory=list)


# -- rendering -----------------------------------------------------------------------------


def _section_lines(s: Section, level: int) -> list[str]:
    lines = ["#" * level + f" {s.heading}", ""]
    if s.intro:
        lines += [*s.intro, ""]
    for t in s.tables:
        files = f" (`{TABLES}/{t.name}.csv`, `.tex`)" if t.files else ""
        if t.title or files:
            lines += [f"**{t.title}**{files}", ""]
        lines += [t.to_markdown(), ""]
        if t.notes:
            lines += [*t.notes, ""]
    if s.body:
        lines += [*s.body, ""]
    for p in s.plots:
        if p.endswith(".png"):
            lines += [f"![{Path(p).stem}]({p})", ""]
    if s.details:
        lines += [
            f"<details><summary>{s.details_title}</summary>",
            "",
            *s.details,
            "</details>",
            "",
        ]
    for sub in s.subsections:
        lines += _section_lines(sub, level + 1)
    return lines


def render_markdown(report: Report) -> str:
    lines = [f"# {report.title}", ""]
    if report.preamble:
        lines += [*report.preamble, ""]
    for s in report.sections:
        lines += _section_lines(s, 2)
    return "\n".join(lines).rstrip() + "\n"


def all_tables(report: Report) -> list[Table]:
    """Every table of the report that is written to files, in report order."""

    def walk(sections: list[Section]) -> list[Table]:
        out: list[Table] = []
        for s in sections:
            out += [t for t in s.tables if t.files]
            out += walk(s.subsections)
        return out

    return walk(report.sections) + [t for t in report.file_tables if t.files]


def all_plots(report: Report) -> list[str]:
    def walk(sections: list[Section]) -> list[str]:
        return [p for s in sections for p in [*s.plots, *walk(s.subsections)]]

    return walk(report.sections)


def write_report(report: Report, ctx: StageContext) -> None:
    """Write report.md, report.json and tables/ into the running stage's output; a report
    made from what is not reproducible (an encoder that is not deterministic) says so
    first."""
    from mdcr.core.stage import UNREPRODUCIBLE

    reasons = ctx.info.get(UNREPRODUCIBLE) or []
    if reasons:
        report.preamble = [
            *(
                f"**Not reproducible**: {reason}; its numbers here are one draw, and "
                "encoding again would give others."
                for reason in reasons
            ),
            *report.preamble,
        ]
    for t in all_tables(report):
        for path in t.write(ctx.out / TABLES):
            ctx.output(path.relative_to(ctx.out).as_posix())
    for p in all_plots(report):
        ctx.output(p)
    (ctx.out / REPORT_MD).write_text(render_markdown(report))
    ctx.output(REPORT_MD)
    (ctx.out / REPORT_JSON).write_text(json.dumps(report_to_dict(report), indent=1) + "\n")
    ctx.output(REPORT_JSON)


# -- the model as JSON ---------------------------------------------------------------------


def _num(v: float) -> float | None:
    return None if v is None or math.isnan(v) else float(v)


def _table_to_dict(t: Table) -> dict[str, Any]:
    return {
        "name": t.name,
        "title": t.title,
        "row_header": t.row_header,
        "rows": list(t.rows),
        "columns": [list(c) for c in t.columns],
        "cells": [
            [row, list(col), _num(c.mean), _num(c.std), c.mark, c.bold, *_cell_extra(c)]
            for (row, col), c in t.cells.items()
        ],
        "notes": list(t.notes),
        "rule_before": sorted(t.rule_before),
        "scale": t.scale,
        "digits": t.digits,
        "std_in_text": t.std_in_text,
        "files": t.files,
    }


def _nan(v: float | None) -> float:
    return math.nan if v is None else float(v)


def _cell_extra(c: Cell) -> list[dict[str, Any]]:
    """A cell's interval, tied flags and note, as a 7th entry only where one is set."""
    if math.isnan(c.low) and c.tied is None and not c.unresolved and not c.note:
        return []
    extra = {"low": _num(c.low), "high": _num(c.high), "tied": c.tied, "note": c.note}
    return [{**extra, "unresolved": True} if c.unresolved else extra]


def _cell_from_list(entry: list[Any]) -> Cell:
    mean, std, mark, bold = entry[2:6]
    cell = Cell(_nan(mean), _nan(std), str(mark), bool(bold))
    if len(entry) > 6:
        extra = entry[6]
        cell.low, cell.high = _nan(extra["low"]), _nan(extra["high"])
        cell.tied, cell.note = extra["tied"], str(extra["note"])
        cell.unresolved = bool(extra.get("unresolved", False))
    return cell


def _table_from_dict(d: dict[str, Any]) -> Table:
    cells = {(str(e[0]), (str(e[1][0]), str(e[1][1]))): _cell_from_list(e) for e in d["cells"]}
    return Table(
        name=d["name"],
        title=d["title"],
        row_header=d["row_header"],
        rows=list(d["rows"]),
        columns=[(str(g), str(s)) for g, s in d["columns"]],
        cells=cells,
        notes=list(d["notes"]),
        rule_before=set(d["rule_before"]),
        scale=float(d["scale"]),
        digits=int(d["digits"]),
        std_in_text=bool(d["std_in_text"]),
        files=bool(d["files"]),
    )


def _section_to_dict(s: Section) -> dict[str, Any]:
    return {
        "heading": s.heading,
        "intro": s.intro,
        "tables": [_table_to_dict(t) for t in s.tables],
        "body": s.body,
        "plots": s.plots,
        "details_title": s.details_title,
        "details": s.details,
        "subsections": [_section_to_dict(x) for x in s.subsections],
    }


def _section_from_dict(d: dict[str, Any]) -> Section:
    return Section(
        heading=d["heading"],
        intro=list(d["intro"]),
        tables=[_table_from_dict(t) for t in d["tables"]],
        body=list(d["body"]),
        plots=list(d["plots"]),
        details_title=d["details_title"],
        details=list(d["details"]),
        subsections=[_section_from_dict(x) for x in d["subsections"]],
    )


def report_to_dict(report: Report) -> dict[str, Any]:
    return {
        "title": report.title,
        "preamble": report.preamble,
        "sections": [_section_to_dict(s) for s in report.sections],
        "file_tables": [_table_to_dict(t) for t in report.file_tables],
    }


def read_report(folder: Path) -> Report:
    """The report model a stage saved in ``folder`` (``report.json``)."""
    from mdcr.core.errors import InputDataError

    path = folder / REPORT_JSON
    if not path.is_file():
        raise InputDataError(f"no {REPORT_JSON} in '{folder}'; point to a report-writing output")
    d = json.loads(path.read_text())
    return Report(
        title=d["title"],
        preamble=list(d["preamble"]),
        sections=[_section_from_dict(s) for s in d["sections"]],
        file_tables=[_table_from_dict(t) for t in d["file_tables"]],
    )
