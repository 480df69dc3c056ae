"""Result tables: rows x (column group, sub-column) built from a long DataFrame, rendered
as Markdown, CSV and LaTeX (booktabs).

One builder covers every layout of the paper: Table 1 (rows: models; groups: pool sizes;
sub-columns: metrics), Tables 2/7/8 (rows: models; columns: fields + AVG), Table 3
(rows: fields; groups: models; sub-columns: MAP, R@5) and Table 4 (rows: models; groups:
candidate types). Displayed values are x100 with one decimal, like the paper; the CSV keeps
the full-precision values (0-1 scale).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from mdcr.measures.registry import DIGITS, PERCENT

DASH = "–"
UNRESOLVED_MARK = "°"  # too few queries to tell a cell from its column's best
Labeler = Mapping[Any, str] | Callable[[Any], str] | None


@dataclass
class Cell:
    mean: float
    std: float = math.nan
    mark: str = ""
    bold: bool = False
    low: float = math.nan  # a confidence interval, shown as [low, high] when set
    high: float = math.nan
    tied: bool | None = None  # tied with the column's best: bold and a dagger
    # not significantly worse than the column's best where the test cannot reach the
    # corrected level on the queries (mdcr.scoring.intervals.tie_groups): a ring, no dagger
    unresolved: bool = False
    note: str = ""  # text after the value (a difference's adjusted p)


@dataclass
class Table:
    """A rendered-ready table; ``columns`` are (group, sub) pairs, group "" for one level."""

    name: str
    title: str
    row_header: str
    rows: list[str]
    columns: list[tuple[str, str]]
    cells: dict[tuple[str, tuple[str, str]], Cell]
    notes: list[str] = field(default_factory=list)
    rule_before: set[str] = field(default_factory=set)  # rows preceded by a rule
    scale: float = PERCENT
    digits: int = DIGITS
    std_in_text: bool = True  # False: std only in the CSV (wide tables)
    files: bool = True  # False: shown in report.md only, not written under tables/
    companions: list[Table] = field(default_factory=list)  # shown right after this one

    @property
    def grouped(self) -> bool:
        return any(g for g, _ in self.columns)

    def col_label(self, col: tuple[str, str]) -> str:
        g, s = col
        return f"{g} {s}".strip() if g else s

    def _num(self, v: float) -> str:
        return DASH if v is None or math.isnan(v) else f"{v * self.scale:.{self.digits}f}"

    def text(self, row: str, col: tuple[str, str], latex: bool = False) -> str:
        c = self.cells.get((row, col))
        if c is None or math.isnan(c.mean):
            return DASH if not latex else "--"
        s = self._num(c.mean)
        if c.bold or c.tied:
            s = f"\\textbf{{{s}}}" if latex else f"**{s}**"
        if c.tied and not c.bold:
            s += "$^\\dagger$" if latex else "†"
        if c.unresolved:
            s += "$^\\circ$" if latex else UNRESOLVED_MARK
        if self.std_in_text and not math.isnan(c.std):
            s += f" $\\pm$ {self._num(c.std)}" if latex else f" ± {self._num(c.std)}"
        if not math.isnan(c.low):
            s += f" [{self._num(c.low)}, {self._num(c.high)}]"
        if c.mark:
            s += f"\\textsuperscript{{{c.mark}}}" if latex else f"<sup>{c.mark}</sup>"
        if c.note:
            s += f" {latex_escape(c.note) if latex else c.note}"
        return s

    def to_markdown(self) -> str:
        header = [self.row_header] + [self.col_label(c) for c in self.columns]
        lines = [
            "| " + " | ".join(header) + " |",
            "|" + "|".join(["---"] + ["---:"] * len(self.columns)) + "|",
        ]
        for r in self.rows:
            lines.append("| " + " | ".join([r] + [self.text(r, c) for c in self.columns]) + " |")
        return "\n".join(lines) + "\n"

    def to_csv(self) -> str:
        """Full-precision values (0-1 scale): a mean column per cell, plus std and sig
        columns where the table has them."""
        has_std = any(not math.isnan(c.std) for c in self.cells.values())
        has_mark = any(c.mark for c in self.cells.values())
        has_ci = any(not math.isnan(c.low) for c in self.cells.values())
        has_tied = any(c.tied is not None or c.unresolved for c in self.cells.values())
        header = [self.row_header]
        for c in self.columns:
            label = self.col_label(c)
            header.append(label)
            if has_std:
                header.append(f"{label} std")
            if has_mark:
                header.append(f"{label} sig")
            header += [f"{label} ci_low", f"{label} ci_high"] if has_ci else []
            header += [f"{label} tied"] if has_tied else []
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        for r in self.rows:
            out: list[str] = [r]
            for col in self.columns:
                cell = self.cells.get((r, col))
                out.append("" if cell is None or math.isnan(cell.mean) else repr(cell.mean))
                if has_std:
                    ok = cell is not None and not math.isnan(cell.std)
                    out.append(repr(cell.std) if ok and cell is not None else "")
                if has_mark:
                    out.append(cell.mark if cell is not None else "")
                out += _ci_fields(cell) if has_ci else []
                if has_tied:
                    out.append(_tied_field(cell))
            w.writerow(out)
        return buf.getvalue()

    def to_latex(self) -> str:
        n = len(self.columns)
        lines = [
            f"% {self.title}",
            "% requires \\usepackage{booktabs}",
            "\\begin{tabular}{l" + "r" * n + "}",
            "\\toprule",
        ]
        if self.grouped:
            spans: list[tuple[str, int, int]] = []
            for i, (g, _) in enumerate(self.columns, start=2):
                if spans and spans[-1][0] == g:
                    spans[-1] = (g, spans[-1][1], i)
                else:
                    spans.append((g, i, i))
            heads = [f"\\multicolumn{{{b - a + 1}}}{{c}}{{{latex_escape(g)}}}" for g, a, b in spans]
            lines.append(" & " + " & ".join(heads) + " \\\\")
            lines.append(" ".join(f"\\cmidrule(lr){{{a}-{b}}}" for _, a, b in spans))
        subs = [latex_escape(s) for _, s in self.columns]
        lines.append(latex_escape(self.row_header) + " & " + " & ".join(subs) + " \\\\")
        lines.append("\\midrule")
        for r in self.rows:
            if r in self.rule_before:
                lines.append("\\midrule")
            vals = [self.text(r, c, latex=True) for c in self.columns]
            lines.append(latex_escape(r) + " & " + " & ".join(vals) + " \\\\")
        lines += ["\\bottomrule", "\\end{tabular}"]
        return "\n".join(lines) + "\n"

    def write(self, folder: Path) -> list[Path]:
        """Write ``<name>.csv`` and ``<name>.tex`` into ``folder``; return the paths."""
        folder.mkdir(parents=True, exist_ok=True)
        paths = [folder / f"{self.name}.csv", folder / f"{self.name}.tex"]
        paths[0].write_text(self.to_csv())
        paths[1].write_text(self.to_latex())
        return paths


def _ci_fields(cell: Cell | None) -> list[str]:
    """A cell's interval bounds for the CSV (full precision; empty without one)."""
    if cell is None or math.isnan(cell.low):
        return ["", ""]
    return [repr(cell.low), repr(cell.high)]


def _tied_field(cell: Cell | None) -> str:
    """A cell's tied flag for the CSV: True, False, ``unresolved`` or empty."""
    if cell is not None and cell.unresolved:
        return "unresolved"
    return "" if cell is None or cell.tied is None else str(cell.tied)


def latex_escape(s: str) -> str:
    out = str(s)
    for a, b in (
        ("\\", "\\textbackslash{}"),
        ("&", "\\&"),
        ("%", "\\%"),
        ("_", "\\_"),
        ("#", "\\#"),
        ("$", "\\$"),
        ("{", "\\{"),
        ("}", "\\}"),
    ):
        out = out.replace(a, b)
    return out.replace("±", "$\\pm$")


def build_table(
    data: pd.DataFrame,
    *,
    name: str,
    title: str,
    row: str,
    col: str | None,
    sub: str,
    value: str = "mean",
    std: str | None = None,
    rows: Sequence[Any] | None = None,
    cols: Sequence[Any] | None = None,
    subs: Sequence[Any] | None = None,
    row_labels: Labeler = None,
    col_labels: Labeler = None,
    sub_labels: Labeler = None,
    row_header: str = "",
    marks: Mapping[tuple[Any, Any, Any], str] | None = None,
    bold_best: bool = False,
    no_bold_rows: Sequence[Any] = (),
    rule_before: Sequence[Any] = (),
) -> Table:
    """Pivot a long DataFrame into a :class:`Table`.

    ``row``, ``col`` (the column group; None for a one-level header) and ``sub`` name
    columns of ``data``; ``value`` (and optionally ``std``) hold the numbers. ``rows``,
    ``cols``, ``subs`` fix the order (default: sorted as they appear). ``marks`` maps
    (row, col, sub) keys (col "" when ``col`` is None) to a superscript. ``bold_best`` bolds
    the highest value of each column among the rows not in ``no_bold_rows``.
    """
    row_keys = list(rows) if rows is not None else _in_order(data[row])
    col_keys = [""] if col is None else (list(cols) if cols is not None else _in_order(data[col]))
    sub_keys = list(subs) if subs is not None else _in_order(data[sub])
    lookup = _values_by_key(data, row, col, sub, value, std)
    columns = [
        (_label(col_labels, c) if col is not None else "", _label(sub_labels, s))
        for c in col_keys
        for s in sub_keys
    ]
    raw_cols = [(c, s) for c in col_keys for s in sub_keys]
    row_names = [_label(row_labels, r) for r in row_keys]
    cells: dict[tuple[str, tuple[str, str]], Cell] = {}
    for r, rname in zip(row_keys, row_names, strict=True):
        for (c, s), cname in zip(raw_cols, columns, strict=True):
            if (r, c, s) in lookup:
                mean, sd = lookup[(r, c, s)]
                mark = (marks or {}).get((r, c, s), "")
                cells[(rname, cname)] = Cell(mean, sd, mark)
    if bold_best:
        skip = {_label(row_labels, r) for r in no_bold_rows}
        _bold_best(cells, columns, [rn for rn in row_names if rn not in skip])
    return Table(
        name=name,
        title=title,
        row_header=row_header,
        rows=row_names,
        columns=columns,
        cells=cells,
        rule_before={_label(row_labels, r) for r in rule_before},
    )


def _label(f: Labeler, k: Any) -> str:
    """A key's label: by the function or mapping ``f``, else the key as text."""
    if f is None:
        return str(k)
    return f(k) if callable(f) else f.get(k, str(k))


def _in_order(s: pd.Series) -> list[Any]:
    """A column's distinct values, in the order they first appear."""
    return list(dict.fromkeys(s.tolist()))


def _values_by_key(
    data: pd.DataFrame, row: str, col: str | None, sub: str, value: str, std: str | None
) -> dict[tuple[Any, Any, Any], tuple[float, float]]:
    """(row, col, sub) -> (value, std); col is "" without a column group, std NaN without
    a std column."""
    lookup: dict[tuple[Any, Any, Any], tuple[float, float]] = {}
    for rec in data.to_dict("records"):
        key = (rec[row], "" if col is None else rec[col], rec[sub])
        lookup[key] = (float(rec[value]), float(rec[std]) if std is not None else math.nan)
    return lookup


def _bold_best(
    cells: dict[tuple[str, tuple[str, str]], Cell],
    columns: list[tuple[str, str]],
    candidates: list[str],
) -> None:
    """Bold the highest value of each column among the ``candidates`` rows (ties all
    bold; a column with fewer than two values gets none)."""
    for cname in columns:
        vals = [
            (cells[(rn, cname)].mean, rn)
            for rn in candidates
            if (rn, cname) in cells and not math.isnan(cells[(rn, cname)].mean)
        ]
        if len(vals) > 1:
            best = max(v for v, _ in vals)
            for v, rn in vals:
                if v == best:
                    cells[(rn, cname)].bold = True
