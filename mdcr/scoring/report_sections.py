"""The sections of the pools report: dataset-level (Table 1), field-level (Tables 2, 7, 8)
and the comparison with the paper, each with its significance tests and plots.

Each builder returns :class:`~mdcr.scoring.document.Section` objects of the one report model;
their pairwise comparisons go into the report's ``significance.parquet`` as well as into a
folded table of the section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mdcr.contracts.paper import field_abbreviation, size_label
from mdcr.scoring.aggregate import CHANCE_ROW
from mdcr.scoring.document import Section
from mdcr.scoring.published import field_order, paper_retrievers
from mdcr.scoring.report_context import Context

if TYPE_CHECKING:
    import pandas as pd

    from mdcr.scoring.tables import Table

RANDOM = "random"
DETAIL_LIMIT = 80  # comparisons listed in report.md per table; all are in the CSV


def _significance(
    c: Context, units: pd.DataFrame, cell_keys: list[str], table: str
) -> pd.DataFrame:
    from mdcr.scoring.significance import correct, pairwise_tests

    comps = pairwise_tests(
        units, cell_keys, c.retrievers, c.cfg.stat_tests, c.cfg.permutations, c.cfg.seed
    )
    comps.insert(0, "table", table)
    return correct(comps, ["table"], c.cfg.correction, c.cfg.alpha)


def _sig_lines(c: Context, corrected: pd.DataFrame) -> list[str]:
    from mdcr.scoring.significance import summary_line

    if corrected.empty:
        return ["Significance: no comparisons (fewer than two retrievers)."]
    names = {"fisher": "Fisher randomization test", "student": "paired t-test"}
    parts = [f"{names[t]}: {summary_line(corrected, t)}" for t in c.cfg.stat_tests]
    legend = ", ".join(f"{v} = {k}" for k, v in c.letters.items())
    return [
        f"Significance ({c.cfg.correction}-corrected over this table, α = {c.cfg.alpha}): "
        + "; ".join(parts)
        + ".",
        f"Superscripts ({names[c.cfg.stat_tests[0]]}) name the retrievers a value is "
        f"significantly better than: {legend}. Bold: the best value of a column.",
    ]


def _detail_table(
    c: Context, corrected: pd.DataFrame, cell_keys: list[str], fmt: dict[str, Any]
) -> list[str]:
    """A markdown list of comparisons: effect, direction, p and adjusted p of each test."""
    import numpy as np
    import pandas as pd

    if corrected.empty:
        return []
    tests = list(c.cfg.stat_tests)
    pair = [*cell_keys, "retriever_a", "retriever_b"]
    first = corrected[corrected["test"] == tests[0]].reset_index(drop=True)
    by_test = {
        t: corrected[corrected["test"] == t].set_index(pair)[["p_value", "p_adjusted"]]
        for t in tests
    }
    head = [*cell_keys, "A", "B", "n", "Δ (A−B) ×100", "direction"]
    head += [f"p {t} (adjusted)" for t in tests]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, row in enumerate(first.to_dict("records")):
        if i >= DETAIL_LIMIT:
            lines.append(f"\n({len(first) - i} more comparisons in tables/significance.csv)")
            break
        key = tuple(row[k] for k in pair)
        ps = []
        for t in tests:
            p, pa = by_test[t].loc[key] if key in by_test[t].index else (np.nan, np.nan)
            ps.append("–" if pd.isna(p) else f"{p:.3g} ({pa:.3g})")
        star = " *" if row["significant"] else ""
        cells = [fmt.get(k, str)(row[k]) for k in cell_keys]
        lines.append(
            "| "
            + " | ".join(
                [
                    *cells,
                    row["retriever_a"],
                    row["retriever_b"],
                    str(int(row["n_queries"])),
                    f"{row['diff'] * 100:+.2f}",
                    f"A {row['direction']} B{star}",
                    *ps,
                ]
            )
            + " |"
        )
    lines.append("")
    lines.append(f"`*`: significant under the {tests[0]} test after correction.")
    return lines


@dataclass(frozen=True)
class _Slice:
    """One section's rows of the aggregates, chance levels and per-query values, with the
    sizes, metrics and retrievers they hold (in the report's order)."""

    agg: pd.DataFrame
    chance: pd.DataFrame
    units: pd.DataFrame
    sizes: list[int]
    metrics: list[str]
    retrievers: list[str]


def _slice(c: Context, agg: pd.DataFrame, chance: pd.DataFrame, units: pd.DataFrame) -> _Slice:
    return _Slice(
        agg,
        chance,
        units,
        sorted(int(s) for s in agg["size"].unique()),
        [m for m in c.metrics if m in set(agg["metric"])],
        [r for r in c.retrievers if r in set(agg["retriever"])],
    )


def dataset_section(
    c: Context, split: str, agg: pd.DataFrame, chance: pd.DataFrame, units: pd.DataFrame
) -> Section | None:
    """Dataset-level results of one split (the paper's Table 1), with its plots."""
    a = agg[(agg["setup"] == "dataset") & (agg["split"] == split)]
    if a.empty:
        return None
    ch = chance[(chance["setup"] == "dataset") & (chance["split"] == split)]
    u = units[(units["setup"] == "dataset") & (units["split"] == split)]
    part = _slice(c, a, ch, u)
    table, sig, rows = _dataset_table(c, split, part)
    n_reps = a.groupby("size")["n_reps"].max().to_dict()
    s = Section(f"Dataset-level results ({split} split)")
    s.intro.append(
        "Mean over repetitions ± standard deviation (ddof=1), ×100. Pools: "
        + ", ".join(
            f"{size_label(int(k))} ({v} rep{'s' if v != 1 else ''})"  # type: ignore[call-overload]
            for k, v in sorted(n_reps.items())
        )
        + ". The paper's Table 1 layout."
    )
    table.notes.extend(_sig_lines(c, sig))
    s.tables += [table, *table.companions]
    s.plots += _dataset_plots(c, split, part, [r for r in rows if r != CHANCE_ROW])
    _finish(c, s, [sig])
    return s


def _dataset_table(c: Context, split: str, part: _Slice) -> tuple[Table, pd.DataFrame, list[str]]:
    """The dataset-level table (sizes x metrics), its comparisons and its rows."""
    import numpy as np
    import pandas as pd

    from mdcr.measures.registry import label as metric_label
    from mdcr.scoring.significance import winner_letters
    from mdcr.scoring.tables import build_table

    rows = list(part.retrievers)
    data = part.agg[["retriever", "size", "metric", "mean", "std"]].copy()
    ch = part.chance
    if c.cfg.chance_rows and not ch.empty:
        chance_rows = ch[["size", "metric", "mean"]].assign(retriever=CHANCE_ROW, std=np.nan)
        data = pd.concat([data, chance_rows], ignore_index=True)
        rows.append(CHANCE_ROW)
    name = f"dataset_{split}"
    sig = _significance(
        c,
        part.units[["retriever", "size", "metric", "query_id", "value"]],
        ["size", "metric"],
        name,
    )
    marks = {
        (r, size, m): v
        for (size, m, r), v in winner_letters(
            sig, ["size", "metric"], c.letters, c.cfg.stat_tests[0]
        ).items()
    }
    table = build_table(
        data,
        name=name,
        title=f"Dataset-level results, {split} split",
        row="retriever",
        col="size",
        sub="metric",
        std="std",
        rows=rows,
        cols=part.sizes,
        subs=part.metrics,
        col_labels=lambda s: size_label(int(s)),
        sub_labels=metric_label,
        row_header="Retriever",
        marks=marks,
        bold_best=True,
        no_bold_rows=[CHANCE_ROW],
        rule_before=[RANDOM, CHANCE_ROW] if rows else [],
    )
    table.companions = _intervals(c, table, sig, part.units, ["size", "metric"], split)
    return table, sig, rows


def _intervals(
    c: Context, table: Table, sig: pd.DataFrame, units: pd.DataFrame, keys: list[str], split: str
) -> list[Table]:
    """The table's tied groups, MDE note and intervals (:mod:`mdcr.scoring.table_intervals`)."""
    from mdcr.measures.registry import label as metric_label
    from mdcr.scoring.table_intervals import annotate

    if c.values is None:
        return []
    v = c.values[c.values["split"] == split]
    if keys[0] == "size":
        v = v[v["setup"] == "dataset"]
        col = lambda k: (size_label(int(k[0])), metric_label(k[1]))  # noqa: E731
        return [annotate(c, table, sig, units, v, keys, col)]
    v = v[(v["setup"] == "field") & v["size"].isin(units.attrs["sizes"])]
    v = v[v["metric"] == units.attrs["metric"]]
    col = lambda k: ("", field_abbreviation(str(k[0])))  # noqa: E731
    return [annotate(c, table, sig, units, v, keys, col, avg=True)]


def _dataset_plots(c: Context, split: str, part: _Slice, retrievers: list[str]) -> list[str]:
    """Metrics against pool size, and the per-query AP boxes per pool size."""
    from mdcr.measures.registry import label as metric_label
    from mdcr.scoring.plots import plot_ap_boxes, plot_pool_size

    ch = part.chance
    chance_plot = ch[["size", "metric", "mean"]] if c.cfg.chance_rows and not ch.empty else None
    plots = c.rel(
        plot_pool_size(
            part.agg,
            chance_plot,
            part.metrics,
            retrievers,
            metric_label,
            size_label,
            c.out / "plots",
            f"pool_size_{split}",
            f"Metrics against pool size ({split} split)",
        )
    )
    ap = _box_metric(part.metrics)
    box = part.units[part.units["metric"] == ap].rename(columns={"size": "panel"})
    return plots + c.rel(
        plot_ap_boxes(
            box,
            part.sizes,
            lambda p: f"pool {size_label(int(p))}",
            retrievers,
            _per_query_label(ap),
            c.out / "plots",
            f"per_query_{ap.split('@')[0]}_dataset_{split}",
            f"Per-query {_per_query_label(ap)} per retriever (dataset-level, {split})",
        )
    )


def _box_metric(metrics: list[str]) -> str:
    """The per-query boxes show the first measure in table order (MAP, when scored)."""
    return metrics[0]


def _per_query_label(metric: str) -> str:
    """AP for MAP's per-query values; the metric's label otherwise."""
    from mdcr.measures.registry import per_query_label

    return per_query_label(metric)


def field_sections(
    c: Context, split: str, agg: pd.DataFrame, chance: pd.DataFrame, units: pd.DataFrame
) -> list[Section]:
    """Field-level results of one split, one section per field pool size (the paper's
    Tables 2, 7 and 8), each with a table per metric and its plots."""
    a_all = agg[(agg["setup"] == "field") & (agg["split"] == split)]
    sizes = sorted(int(s) for s in a_all["size"].unique())
    sections = []
    for size in sizes:
        a = a_all[a_all["size"] == size]
        ch = chance[
            (chance["setup"] == "field") & (chance["split"] == split) & (chance["size"] == size)
        ]
        u = units[(units["setup"] == "field") & (units["split"] == split) & (units["size"] == size)]
        suffix = f"_{size_label(size)}" if len(sizes) > 1 else ""
        sections.append(_field_section(c, split, size, suffix, _slice(c, a, ch, u)))
    return sections


def _field_section(c: Context, split: str, size: int, suffix: str, part: _Slice) -> Section:
    """The field-level section of one pool size: a table per metric, bars and boxes."""
    import pandas as pd

    a = part.agg
    fields = field_order([str(f) for f in a["field"].unique()])
    s = Section(f"Field-level results ({split} split, pools of {size_label(size)})")
    sigs: list[pd.DataFrame] = []
    reps = a.groupby("field")["n_reps"].max()
    s.intro.append(
        "Mean over repetitions, ×100; AVG is the macro average over the fields "
        f"(the paper's Tables 2, 7 and 8). Repetitions per field: {int(reps.min())}"
        + (f" to {int(reps.max())}" if reps.max() != reps.min() else "")
        + ". Standard deviations are in the CSV files."
    )
    bars_data = []
    for metric in part.metrics:
        table, sig, data = _field_table(c, split, size, suffix, part, fields, metric)
        s.tables += [table, *table.companions]
        sigs.append(sig)
        bars_data.append(data.assign(metric=metric))
    bars = pd.concat(bars_data, ignore_index=True)
    s.plots += _field_plots(c, split, suffix, part, fields, bars)
    _finish(c, s, sigs)
    return s


def _field_data(
    c: Context, am: pd.DataFrame, ch: pd.DataFrame, metric: str, fields: list[str]
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """One metric's cells: each field and the macro AVG per retriever (AVG left out for a
    retriever not scored on every field), plus the chance row. Returns the cells, the rows
    and the retrievers whose AVG is left out."""
    import numpy as np
    import pandas as pd

    from mdcr.scoring.aggregate import field_average

    cm = ch[ch["metric"] == metric][["field", "mean"]]
    with_chance = c.cfg.chance_rows and not ch.empty
    avg = field_average(am, len(fields), cm if with_chance else None)
    ours = avg[avg["retriever"] != CHANCE_ROW]
    incomplete = ours.loc[~ours["complete"], "retriever"].tolist()
    data = pd.concat([am, ours[["retriever", "mean"]].assign(field="AVG", std=np.nan)])
    rows = [r for r in c.retrievers if r in set(am["retriever"])]
    if with_chance:
        chance_avg = avg[avg["retriever"] == CHANCE_ROW][["retriever", "mean"]]
        data = pd.concat(
            [
                data,
                cm.assign(retriever=CHANCE_ROW, std=np.nan),
                chance_avg.assign(field="AVG", std=np.nan),
            ]
        )
        rows.append(CHANCE_ROW)
    return data, rows, incomplete


def _field_significance(
    c: Context, part: _Slice, metric: str, name: str, incomplete: list[str]
) -> pd.DataFrame:
    """Pairwise comparisons per field and over all fields' queries pooled (as AVG), the
    retrievers not scored on every field left out of the pooled ones."""
    import pandas as pd

    u = part.units[part.units["metric"] == metric]
    u = u[["retriever", "field", "query_id", "value"]]
    pooled = u.assign(query_id=u["field"].astype(str) + "\x1f" + u["query_id"], field="AVG")
    pooled = pooled[~pooled["retriever"].isin(incomplete)]
    both = pd.concat([u, pooled], ignore_index=True)
    sig = _significance(c, both, ["field"], name)
    sig.insert(1, "metric", metric)
    sig.attrs["units"] = both
    return sig


def _field_table(
    c: Context, split: str, size: int, suffix: str, part: _Slice, fields: list[str], metric: str
) -> tuple[Table, pd.DataFrame, pd.DataFrame]:
    """One metric's field-level table, its comparisons and its cells."""
    from mdcr.measures.registry import label as metric_label
    from mdcr.scoring.significance import winner_letters
    from mdcr.scoring.tables import build_table

    am = part.agg[part.agg["metric"] == metric][["retriever", "field", "mean", "std"]]
    data, rows, incomplete = _field_data(c, am, part.chance, metric, fields)
    name = f"field_{split}{suffix}_{metric.split('@')[0]}"
    sig = _field_significance(c, part, metric, name, incomplete)
    marks = {
        (r, "", f): v
        for (f, r), v in winner_letters(sig, ["field"], c.letters, c.cfg.stat_tests[0]).items()
    }
    table = build_table(
        data,
        name=name,
        title=f"Field-level {metric_label(metric)}, {split} split, pools of {size_label(size)}",
        row="retriever",
        col=None,
        sub="field",
        rows=rows,
        subs=[*fields, "AVG"],
        sub_labels=field_abbreviation,
        row_header="Retriever",
        marks=marks,
        bold_best=True,
        no_bold_rows=[CHANCE_ROW],
        rule_before=[RANDOM, CHANCE_ROW],
    )
    # the CSV keeps the std over repetitions of each field; the text leaves it out
    table.std_in_text = False
    for r, f, sd in am[["retriever", "field", "std"]].itertuples(index=False):
        cell = table.cells.get((str(r), ("", field_abbreviation(str(f)))))
        if cell is not None:
            cell.std = float(sd)
    table.notes.extend(_sig_lines(c, sig))
    units = sig.attrs.pop("units")
    units.attrs.update(sizes=part.sizes, metric=metric)
    table.companions = _intervals(c, table, sig, units, ["field"], split)
    if incomplete:
        table.notes.append(
            f"AVG of {', '.join(incomplete)} for {metric_label(metric)} is left out: "
            "not every field was scored."
        )
    return table, sig, data


def _field_plots(
    c: Context, split: str, suffix: str, part: _Slice, fields: list[str], bars: pd.DataFrame
) -> list[str]:
    """A bar chart per metric over the fields, and the per-query AP boxes of all fields."""
    from mdcr.measures.registry import label as metric_label
    from mdcr.scoring.plots import plot_ap_boxes, plot_field_bars

    plots: list[str] = []
    for metric in part.metrics:
        plots += c.rel(
            plot_field_bars(
                bars,
                metric,
                part.retrievers,
                [*fields, "AVG"],
                field_abbreviation,
                metric_label,
                c.out / "plots",
                f"fields_{split}{suffix}_{metric.split('@')[0]}",
                f"Field-level {metric_label(metric)} ({split} split)",
            )
        )
    ap = _box_metric(part.metrics)
    box = part.units[part.units["metric"] == ap].assign(panel="all")
    return plots + c.rel(
        plot_ap_boxes(
            box,
            ["all"],
            lambda p: "all fields",
            part.retrievers,
            _per_query_label(ap),
            c.out / "plots",
            f"per_query_{ap.split('@')[0]}_field_{split}{suffix}",
            f"Per-query {_per_query_label(ap)} per retriever (field-level, {split})",
        )
    )


def _not_compared_lines(c: Context, models: dict[str, str]) -> list[str]:
    """Retrievers named like one of the paper's models that are not that built-in entry."""
    from mdcr.retrievers.builtin_entry import describe

    names = [r for r in c.retrievers if r in paper_retrievers() and r not in models]
    if not names:
        return []
    return [
        "Not compared with the paper, as they are not the paper's model at its default "
        "setup (a retriever is matched by its built-in entry, never by its name): "
        + "; ".join(f"`{r}` ({describe(c.entries.get(r))})" for r in names)
        + "."
    ]


def paper_section(c: Context, agg: pd.DataFrame) -> Section:
    """Ours next to the paper's numbers for the models and setups the paper has."""
    from mdcr.scoring.published import citation, compare_with_paper, paper_models

    s = Section("Comparison with the paper")
    s.intro.append(f"Source of the published numbers: {citation()}")
    models = paper_models({r: c.entries.get(r) for r in c.retrievers})
    s.intro += _not_compared_lines(c, models)
    t = agg[agg["split"] == "test"]
    mine = _ours_as_paper_cells(t)
    cells, corr = compare_with_paper(
        mine[["setup", "retriever", "column", "size", "metric", "value"]], models
    )
    present = [r for r in c.retrievers if r in models]
    if cells.empty:
        s.body.append(_nothing_to_compare(c, t, present))
        return s
    from mdcr.retrievers.builtin import paper_names

    missing = [m for m in paper_retrievers() if paper_names().get(m) not in models.values()]
    if missing:
        s.body.append(
            f"Partial comparison: {', '.join(present)} matched; the paper's "
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in this report."
        )
    _add_paper_tables(c, s, cells, corr)
    return s


def _ours_as_paper_cells(t: pd.DataFrame) -> pd.DataFrame:
    """Our test-split means in the paper's cells: a column per dataset pool size, field and
    the field AVG (complete retrievers only), values x100."""
    import pandas as pd

    from mdcr.scoring.aggregate import macro_over

    ds = t[t["setup"] == "dataset"]
    ours = [ds.assign(column=ds["size"].map(lambda v: size_label(int(v))))]
    fl = t[t["setup"] == "field"]
    if not fl.empty:
        ours.append(fl.assign(column=fl["field"].map(field_abbreviation)))
        avg = macro_over(fl, "field", ["retriever", "size", "metric"])
        avg = avg[avg["complete"]]
        ours.append(avg.assign(setup="field", column="AVG"))
    mine = pd.concat(ours, ignore_index=True)
    return mine.assign(value=mine["mean"] * 100, size=mine["size"].astype("float64"))


def _nothing_to_compare(c: Context, t: pd.DataFrame, present: list[str]) -> str:
    """Why no cell can be compared: no paper model, or none of the paper's setups."""
    if not present:
        return (
            "No paper models in this report: the paper evaluates "
            + ", ".join(paper_retrievers())
            + f"; this report has {', '.join(c.retrievers)}."
        )
    have = sorted(
        {
            f"{st} {size_label(int(z))}"
            for st, z in t[["setup", "size"]].drop_duplicates().itertuples(index=False)
        }
    )
    return (
        f"No comparable setup: {', '.join(present)} {'is' if len(present) == 1 else 'are'}"
        " in the paper, but the paper's setups are dataset-level pools of 200k, 500k, "
        "1M and 2M and field-level pools of 100k (test split; MAP and nDCG at depth "
        "500, R@30); this report has " + (", ".join(have) or "no test pools") + "."
    )


def _comparison_table(frame: pd.DataFrame, name: str, title: str) -> Table:
    """Ours, the paper's and their difference per cell (values already x100)."""
    from mdcr.scoring.tables import build_table

    t = build_table(
        frame,
        name=name,
        title=title,
        row="key",
        col=None,
        sub="what",
        value="value",
        rows=list(dict.fromkeys(frame["key"])),
        subs=["ours", "paper", "delta"],
        sub_labels={"ours": "ours", "paper": "paper", "delta": "Δ"},
        row_header="table column metric model",
    )
    t.scale = 1.0  # already x100
    return t


def _add_paper_tables(c: Context, s: Section, cells: pd.DataFrame, corr: pd.DataFrame) -> None:
    """The comparison (its summary shown, all cells in a file) and the rank correlations."""
    from mdcr.scoring.tables import build_table

    long = cells.melt(
        id_vars=["table", "column", "metric", "model"],
        value_vars=["ours", "paper", "delta"],
        var_name="what",
    )
    long["key"] = _cell_key(long, with_model=True)
    full = _comparison_table(long, "paper_comparison", "Ours vs the paper (x100)")
    shown = set(
        _cell_key(
            cells[(cells["table"] == "table1") | (cells["column"] == "AVG")],
            with_model=True,
        )
    )
    short = _comparison_table(long[long["key"].isin(shown)], "paper_comparison_summary", "")
    corr_long = corr.assign(
        key=_cell_key(corr, with_model=False) + " (n=" + corr["n_models"].astype(str) + ")",
        what="rho",
    )
    rho = build_table(
        corr_long,
        name="paper_rank_correlation",
        title="Spearman rank correlation of the model ordering, ours vs paper",
        row="key",
        col=None,
        sub="what",
        value="spearman",
        rows=list(dict.fromkeys(corr_long["key"])),
        subs=["rho"],
        sub_labels={"rho": "Spearman ρ"},
        row_header="table column metric",
    )
    rho.scale, rho.digits = 1.0, 2
    s.intro.append(
        "Δ = ours − paper (×100). The first table shows the dataset-level cells and the "
        "field-level AVG (every cell is in tables/paper_comparison.csv); the second the "
        "Spearman rank correlation of the model ordering per column."
    )
    short.files = False  # a part of paper_comparison, shown in report.md
    s.tables += [short, rho]
    c.file_tables.append(full)
    valid = corr["spearman"].dropna()
    if len(valid):
        s.body.append(
            f"Spearman ρ of the model ordering (columns with ≥ 3 models): mean "
            f"{valid.mean():.2f} over {len(valid)} columns, min {valid.min():.2f}."
        )
    else:
        s.body.append("Spearman ρ needs at least three matched models per column; n/a here.")


def _cell_key(frame: pd.DataFrame, with_model: bool) -> pd.Series:
    key = frame["table"] + " " + frame["column"] + " " + frame["metric"]
    return key + " " + frame["model"] if with_model else key


# ----------------------------------------------------------------------------- report.md


def _finish(c: Context, s: Section, sigs: list[pd.DataFrame]) -> None:
    """Fold a section's pairwise comparisons under it and keep them for the parquet."""
    from mdcr.measures.registry import label as metric_label

    fmt = {
        "size": lambda v: size_label(int(v)),
        "metric": metric_label,
        "field": lambda v: field_abbreviation(str(v)),
    }
    c.significance += sigs
    if not sigs:
        return
    s.details_title = "Pairwise comparisons"
    for sg in sigs:
        keys = ["size", "metric"] if "size" in sg.columns else ["metric", "field"]
        s.details += [*_detail_table(c, sg, keys, fmt), ""]
