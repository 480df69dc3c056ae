"""Stage ``report``: paper-style tables, significance tests, plots and the paper comparison.

Input: one or more ``score`` outputs (on the same pools). Output folder::

    report.md                  every table, the inputs' fingerprints, methods, plots
    tables/<name>.csv|.tex     each table (CSV: full precision, 0-1; LaTeX: booktabs, x100)
    plots/<name>.png|.svg      metric vs pool size, per-field bars, per-query AP boxes
    significance.parquet       every paired comparison: effect, direction, p, adjusted p

Layouts follow the paper: Table 1 (dataset-level: rows retrievers; per pool size MAP, nDCG,
R@k as mean ± std over repetitions) and Tables 2, 7, 8 (field-level: rows retrievers;
columns the fields' abbreviations and their macro average AVG), one per metric. Each table
has the analytic expected-chance row and, when it was scored, the random encoder's row.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mdcr.config import input_path, param
from mdcr.errors import ConfigError, InputDataError, ManifestMismatchError
from mdcr.stage import StageContext, StageSpec, register

if TYPE_CHECKING:
    import pandas as pd

PAPER_ORDER = ("bm25", "scibert", "specter", "scincl", "aspire-bm", "aspire-cs")
CHANCE_ROW = "expected chance"
RANDOM = "random"
SPLITS = ("val", "test")
DETAIL_LIMIT = 80  # comparisons listed in report.md per table; all are in the CSV
_MD_ONLY = {"paper_comparison_summary"}  # a subset of paper_comparison, shown in report.md


@dataclass(frozen=True)
class ReportConfig:
    scores: tuple[str, ...] = input_path(help="score stage outputs (same pools)", multiple=True)
    benchmark: tuple[str, ...] = input_path(
        (),
        help="benchmark-score outputs whose MDCR tables (Tables 3 and 4 layouts) go in the report",
        multiple=True,
    )
    splits: tuple[str, ...] = param(("test",), help="splits to report: test, val")
    stat_tests: tuple[str, ...] = param(
        ("fisher", "student"),
        help="paired tests: fisher (randomization), student (t-test); the first marks tables",
    )
    correction: Literal["holm", "bonferroni"] = param(
        "holm", help="multiple-comparison correction within each table"
    )
    alpha: float = param(0.05, help="significance level after correction")
    permutations: int = param(10000, help="permutations of the Fisher randomization test")
    seed: int = param(42, help="seed of the randomization test's permutations")
    paper_comparison: bool = param(True, help="compare with the paper's published numbers")
    chance_rows: bool = param(True, help="add the analytic expected-chance row to tables")
    title: str = param("mdcr evaluation report", help="the report's title")

    def validate(self) -> None:
        from mdcr.eval.significance import STAT_TESTS

        for s in self.splits:
            if s not in SPLITS:
                raise ConfigError(f"report.splits: {s!r} is not valid; valid: val, test")
        if not self.splits:
            raise ConfigError("report.splits: empty; valid: val, test")
        for t in self.stat_tests:
            if t not in STAT_TESTS:
                raise ConfigError(
                    f"report.stat_tests: {t!r} is not valid; valid: {', '.join(STAT_TESTS)}"
                )
        if not self.stat_tests:
            raise ConfigError("report.stat_tests: empty; valid: fisher, student")
        if not 0 < self.alpha < 1:
            raise ConfigError(f"report.alpha: must be between 0 and 1, got {self.alpha}")
        if self.permutations < 100:
            raise ConfigError(f"report.permutations: must be >= 100, got {self.permutations}")


# ----------------------------------------------------------------------------- inputs


@dataclass
class Scores:
    per_query: pd.DataFrame
    per_pool: pd.DataFrame
    chance: pd.DataFrame
    sources: list[dict[str, Any]]

    @property
    def pool_meta(self) -> pd.DataFrame:
        import pandas as pd

        from mdcr.eval.aggregate import POOL_KEYS

        frames = [self.per_pool[["pool_id", *POOL_KEYS]]]
        if not self.chance.empty:
            frames.append(self.chance[["pool_id", *POOL_KEYS]])
        return pd.concat(frames).drop_duplicates("pool_id").reset_index(drop=True)


def load_scores(folders: list[Path]) -> Scores:
    """Read and merge score outputs; they must share their pools and not overlap."""
    import pandas as pd

    from mdcr.store import read_manifest

    pq_frames, pp_frames, ch_frames, sources = [], [], [], []
    for folder in folders:
        for name in ("per_query.parquet", "per_pool.parquet"):
            if not (folder / name).is_file():
                raise InputDataError(f"no {name} in '{folder}'; point to a score stage output")
        manifest = read_manifest(folder) or {}
        info = manifest.get("info", {})
        sources.append(
            {
                "path": str(folder),
                "fingerprint": manifest.get("fingerprint", "(no manifest)"),
                "pools_fingerprint": info.get("pools_fingerprint"),
                "runs": info.get("retriever_runs", []),
                "depth": info.get("depth"),
                "recall_k": info.get("recall_k"),
            }
        )
        pq_frames.append(pd.read_parquet(folder / "per_query.parquet"))
        pp_frames.append(pd.read_parquet(folder / "per_pool.parquet"))
        if (folder / "chance.parquet").is_file():
            ch_frames.append(pd.read_parquet(folder / "chance.parquet"))
    pools = {s["pools_fingerprint"] for s in sources if s["pools_fingerprint"]}
    if len(pools) > 1:
        raise ManifestMismatchError(
            "report.scores: the score outputs were made on different pools "
            f"({', '.join(sorted(pools))}); report retrievers scored on the same pools"
        )
    per_pool = pd.concat(pp_frames, ignore_index=True)
    dup = per_pool.duplicated(["retriever", "pool_id", "metric"])
    if dup.any():
        r = per_pool[dup].iloc[0]
        raise InputDataError(
            f"report.scores: retriever '{r['retriever']}' is scored twice on pool "
            f"'{r['pool_id']}'; pass each retriever's scores once"
        )
    chance = (
        pd.concat(ch_frames, ignore_index=True).drop_duplicates(["pool_id", "metric"])
        if ch_frames
        else pd.DataFrame(
            columns=[
                "pool_id",
                "setup",
                "split",
                "field",
                "size",
                "rep",
                "metric",
                "value",
                "n_queries",
            ]
        )
    )
    return Scores(pd.concat(pq_frames, ignore_index=True), per_pool, chance, sources)


def order_retrievers(names: list[str]) -> list[str]:
    """The paper's models in its order, then others alphabetically, then random."""
    known = [n for n in PAPER_ORDER if n in names]
    others = sorted(n for n in set(names) if n not in PAPER_ORDER and n != RANDOM)
    return known + others + ([RANDOM] if RANDOM in names else [])


def letters_for(retrievers: list[str]) -> dict[str, str]:
    abc = string.ascii_lowercase
    return {r: abc[i] if i < len(abc) else f"r{i + 1}" for i, r in enumerate(retrievers)}


def field_order(fields: list[str]) -> list[str]:
    from mdcr.eval.published import field_abbreviations

    paper = list(field_abbreviations())
    known = [f for f in paper if f in fields]
    return known + sorted(f for f in set(fields) if f not in paper)


# ----------------------------------------------------------------------------- sections


@dataclass
class Section:
    """A part of report.md: intro text, tables (each with its notes), text, plots."""

    heading: str
    intro: list[str] = field(default_factory=list)
    tables: list[Any] = field(default_factory=list)  # in report.md and tables/
    file_tables: list[Any] = field(default_factory=list)  # only in tables/
    body: list[str] = field(default_factory=list)
    significance: list[pd.DataFrame] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)


@dataclass
class Context:
    cfg: ReportConfig
    retrievers: list[str]
    letters: dict[str, str]
    metrics: list[str]
    out: Path


def _significance(
    c: Context, units: pd.DataFrame, cell_keys: list[str], table: str
) -> pd.DataFrame:
    from mdcr.eval.significance import correct, pairwise_tests

    comps = pairwise_tests(
        units, cell_keys, c.retrievers, c.cfg.stat_tests, c.cfg.permutations, c.cfg.seed
    )
    comps.insert(0, "table", table)
    return correct(comps, ["table"], c.cfg.correction, c.cfg.alpha)


def _sig_lines(c: Context, corrected: pd.DataFrame) -> list[str]:
    from mdcr.eval.significance import summary_line

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


def dataset_section(
    c: Context, split: str, agg: pd.DataFrame, chance: pd.DataFrame, units: pd.DataFrame
) -> Section | None:
    import numpy as np
    import pandas as pd

    from mdcr.eval.metrics import metric_label
    from mdcr.eval.plots import plot_ap_boxes, plot_pool_size
    from mdcr.eval.published import size_label
    from mdcr.eval.significance import winner_letters
    from mdcr.eval.tables import build_table

    a = agg[(agg["setup"] == "dataset") & (agg["split"] == split)]
    if a.empty:
        return None
    sizes = sorted(int(s) for s in a["size"].unique())
    rows = [r for r in c.retrievers if r in set(a["retriever"])]
    data = a[["retriever", "size", "metric", "mean", "std"]].copy()
    ch = chance[(chance["setup"] == "dataset") & (chance["split"] == split)]
    if c.cfg.chance_rows and not ch.empty:
        chance_rows = ch[["size", "metric", "mean"]].assign(retriever=CHANCE_ROW, std=np.nan)
        data = pd.concat([data, chance_rows], ignore_index=True)
        rows.append(CHANCE_ROW)
    name = f"dataset_{split}"
    u = units[(units["setup"] == "dataset") & (units["split"] == split)]
    sig = _significance(
        c, u[["retriever", "size", "metric", "query_id", "value"]], ["size", "metric"], name
    )
    marks = {
        (r, size, m): v
        for (size, m, r), v in winner_letters(
            sig, ["size", "metric"], c.letters, c.cfg.stat_tests[0]
        ).items()
    }
    metrics = [m for m in c.metrics if m in set(a["metric"])]
    table = build_table(
        data,
        name=name,
        title=f"Dataset-level results, {split} split",
        row="retriever",
        col="size",
        sub="metric",
        std="std",
        rows=rows,
        cols=sizes,
        subs=metrics,
        col_labels=lambda s: size_label(int(s)),
        sub_labels=metric_label,
        row_header="Retriever",
        marks=marks,
        bold_best=True,
        no_bold_rows=[CHANCE_ROW],
        rule_before=[RANDOM, CHANCE_ROW] if rows else [],
    )
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
    s.tables.append(table)
    s.significance.append(sig)
    chance_plot = ch[["size", "metric", "mean"]] if c.cfg.chance_rows and not ch.empty else None
    s.plots += plot_pool_size(
        a,
        chance_plot,
        metrics,
        [r for r in rows if r != CHANCE_ROW],
        metric_label,
        size_label,
        c.out / "plots",
        f"pool_size_{split}",
        f"Metrics against pool size ({split} split)",
    )
    ap = _box_metric(metrics)
    box = u[u["metric"] == ap].rename(columns={"size": "panel"})
    s.plots += plot_ap_boxes(
        box,
        sizes,
        lambda p: f"pool {size_label(int(p))}",
        [r for r in rows if r != CHANCE_ROW],
        _per_query_label(ap),
        c.out / "plots",
        f"per_query_{ap.split('@')[0]}_dataset_{split}",
        f"Per-query {_per_query_label(ap)} per retriever (dataset-level, {split})",
    )
    return s


def _box_metric(metrics: list[str]) -> str:
    return next((m for m in metrics if m.startswith("map@")), metrics[0])


def _per_query_label(metric: str) -> str:
    """AP for MAP's per-query values; the metric's label otherwise."""
    from mdcr.eval.metrics import metric_label

    return "AP" if metric.startswith("map@") else metric_label(metric)


def field_sections(
    c: Context, split: str, agg: pd.DataFrame, chance: pd.DataFrame, units: pd.DataFrame
) -> list[Section]:
    import numpy as np
    import pandas as pd

    from mdcr.eval.aggregate import macro_over
    from mdcr.eval.metrics import metric_label
    from mdcr.eval.plots import plot_ap_boxes, plot_field_bars
    from mdcr.eval.published import field_abbreviation, size_label
    from mdcr.eval.significance import winner_letters
    from mdcr.eval.tables import build_table

    a_all = agg[(agg["setup"] == "field") & (agg["split"] == split)]
    sections = []
    sizes = sorted(int(s) for s in a_all["size"].unique())
    for size in sizes:
        a = a_all[a_all["size"] == size]
        suffix = f"_{size_label(size)}" if len(sizes) > 1 else ""
        fields = field_order([str(f) for f in a["field"].unique()])
        s = Section(f"Field-level results ({split} split, pools of {size_label(size)})")
        reps = a.groupby("field")["n_reps"].max()
        s.intro.append(
            "Mean over repetitions, ×100; AVG is the macro average over the fields "
            f"(the paper's Tables 2, 7 and 8). Repetitions per field: {int(reps.min())}"
            + (f" to {int(reps.max())}" if reps.max() != reps.min() else "")
            + ". Standard deviations are in the CSV files."
        )
        ch = chance[
            (chance["setup"] == "field") & (chance["split"] == split) & (chance["size"] == size)
        ]
        metrics = [m for m in c.metrics if m in set(a["metric"])]
        bars_data = []
        for metric in metrics:
            am = a[a["metric"] == metric][["retriever", "field", "mean", "std"]]
            avg = macro_over(am, "field", ["retriever"])
            incomplete = avg.loc[~avg["complete"], "retriever"].tolist()
            avg.loc[~avg["complete"], "mean"] = np.nan
            data = pd.concat([am, avg[["retriever", "mean"]].assign(field="AVG", std=np.nan)])
            rows = [r for r in c.retrievers if r in set(am["retriever"])]
            if c.cfg.chance_rows and not ch.empty:
                cm = ch[ch["metric"] == metric][["field", "mean"]]
                cavg = cm["mean"].mean() if len(cm) == len(fields) else np.nan
                data = pd.concat(
                    [
                        data,
                        cm.assign(retriever=CHANCE_ROW, std=np.nan),
                        pd.DataFrame(
                            {
                                "retriever": [CHANCE_ROW],
                                "field": ["AVG"],
                                "mean": [cavg],
                                "std": [np.nan],
                            }
                        ),
                    ]
                )
                rows.append(CHANCE_ROW)
            name = f"field_{split}{suffix}_{metric.split('@')[0]}"
            u = units[
                (units["setup"] == "field")
                & (units["split"] == split)
                & (units["size"] == size)
                & (units["metric"] == metric)
            ]
            u = u[["retriever", "field", "query_id", "value"]]
            pooled = u.assign(query_id=u["field"].astype(str) + "\x1f" + u["query_id"], field="AVG")
            pooled = pooled[~pooled["retriever"].isin(incomplete)]
            sig = _significance(c, pd.concat([u, pooled], ignore_index=True), ["field"], name)
            sig.insert(1, "metric", metric)
            marks = {
                (r, "", f): v
                for (f, r), v in winner_letters(
                    sig, ["field"], c.letters, c.cfg.stat_tests[0]
                ).items()
            }
            table = build_table(
                data,
                name=name,
                title=f"Field-level {metric_label(metric)}, {split} split, pools of "
                f"{size_label(size)}",
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
            if incomplete:
                table.notes.append(
                    f"AVG of {', '.join(incomplete)} for {metric_label(metric)} is left out: "
                    "not every field was scored."
                )
            s.tables.append(table)
            s.significance.append(sig)
            bars_data.append(data.assign(metric=metric))
        bars = pd.concat(bars_data, ignore_index=True)
        plot_rows = [r for r in c.retrievers if r in set(a["retriever"])]
        for metric in metrics:
            s.plots += plot_field_bars(
                bars,
                metric,
                plot_rows,
                [*fields, "AVG"],
                field_abbreviation,
                metric_label,
                c.out / "plots",
                f"fields_{split}{suffix}_{metric.split('@')[0]}",
                f"Field-level {metric_label(metric)} ({split} split)",
            )
        ap = _box_metric(metrics)
        box = units[
            (units["setup"] == "field")
            & (units["split"] == split)
            & (units["size"] == size)
            & (units["metric"] == ap)
        ].assign(panel="all")
        s.plots += plot_ap_boxes(
            box,
            ["all"],
            lambda p: "all fields",
            plot_rows,
            _per_query_label(ap),
            c.out / "plots",
            f"per_query_{ap.split('@')[0]}_field_{split}{suffix}",
            f"Per-query {_per_query_label(ap)} per retriever (field-level, {split})",
        )
        sections.append(s)
    return sections


def paper_section(c: Context, agg: pd.DataFrame) -> Section:
    """Ours next to the paper's numbers for the models and setups the paper has."""
    import pandas as pd

    from mdcr.eval.aggregate import macro_over
    from mdcr.eval.published import (
        citation,
        compare_with_paper,
        field_abbreviation,
        model_ids,
        size_label,
    )
    from mdcr.eval.tables import build_table

    s = Section("Comparison with the paper")
    s.intro.append(f"Source of the published numbers: {citation()}")
    t = agg[agg["split"] == "test"]
    ds = t[t["setup"] == "dataset"]
    ours = [ds.assign(column=ds["size"].map(lambda v: size_label(int(v))))]
    fl = t[t["setup"] == "field"]
    if not fl.empty:
        ours.append(fl.assign(column=fl["field"].map(field_abbreviation)))
        avg = macro_over(fl, "field", ["retriever", "size", "metric"])
        avg = avg[avg["complete"]]
        ours.append(avg.assign(setup="field", column="AVG"))
    mine = pd.concat(ours, ignore_index=True)
    mine = mine.assign(value=mine["mean"] * 100, size=mine["size"].astype("float64"))
    cells, corr = compare_with_paper(
        mine[["setup", "retriever", "column", "size", "metric", "value"]]
    )
    paper_ids = set(model_ids().values())
    present = [r for r in c.retrievers if r in paper_ids]
    if cells.empty:
        if not present:
            s.body.append(
                "No paper models in this report: the paper evaluates "
                + ", ".join(PAPER_ORDER)
                + f"; this report has {', '.join(c.retrievers)}."
            )
        else:
            have = sorted(
                {
                    f"{st} {size_label(int(z))}"
                    for st, z in t[["setup", "size"]].drop_duplicates().itertuples(index=False)
                }
            )
            s.body.append(
                f"No comparable setup: {', '.join(present)} {'is' if len(present) == 1 else 'are'}"
                " in the paper, but the paper's setups are dataset-level pools of 200k, 500k, "
                "1M and 2M and field-level pools of 100k (test split; MAP and nDCG at depth "
                "500, R@30); this report has " + (", ".join(have) or "no test pools") + "."
            )
        return s
    missing = [m for m in PAPER_ORDER if m not in present]
    if missing:
        s.body.append(
            f"Partial comparison: {', '.join(present)} matched; the paper's "
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in this report."
        )
    long = cells.melt(
        id_vars=["table", "column", "metric", "model"],
        value_vars=["ours", "paper", "delta"],
        var_name="what",
    )
    long["key"] = _cell_key(long, with_model=True)

    def comparison(frame: pd.DataFrame, name: str, title: str) -> Any:
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

    full = comparison(long, "paper_comparison", "Ours vs the paper (x100)")
    shown = set(
        _cell_key(cells[(cells["table"] == "table1") | (cells["column"] == "AVG")], with_model=True)
    )
    short = comparison(long[long["key"].isin(shown)], "paper_comparison_summary", "")
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
    s.tables += [short, rho]
    s.file_tables.append(full)
    valid = corr["spearman"].dropna()
    if len(valid):
        s.body.append(
            f"Spearman ρ of the model ordering (columns with ≥ 3 models): mean "
            f"{valid.mean():.2f} over {len(valid)} columns, min {valid.min():.2f}."
        )
    else:
        s.body.append("Spearman ρ needs at least three matched models per column; n/a here.")
    return s


def _cell_key(frame: pd.DataFrame, with_model: bool) -> pd.Series:
    key = frame["table"] + " " + frame["column"] + " " + frame["metric"]
    return key + " " + frame["model"] if with_model else key


# ----------------------------------------------------------------------------- report.md


def _inputs_lines(scores: Scores) -> list[str]:
    lines = [
        "| score output | fingerprint | pools fingerprint | depth | R@k |",
        "|---|---|---|---:|---:|",
    ]
    for src in scores.sources:
        lines.append(
            f"| `{src['path']}` | `{src['fingerprint']}` | `{src['pools_fingerprint']}` | "
            f"{src['depth']} | {src['recall_k']} |"
        )
    lines += [
        "",
        "| retriever | run fingerprint | run folder | pools | queries | queries without results |",
        "|---|---|---|---:|---:|---:|",
    ]
    for src in scores.sources:
        for r in src["runs"]:
            lines.append(
                f"| {r.get('retriever')} | `{r.get('fingerprint')}` | `{r.get('path')}` | "
                f"{r.get('pools', '')} | {r.get('queries', '')} | "
                f"{r.get('queries_without_results', '')} |"
            )
    return lines


def _setup_lines(per_pool: pd.DataFrame) -> list[str]:
    from mdcr.eval.published import field_abbreviation, size_label

    lines = [
        "| split | setup | pool size | field | repetitions | queries per pool |",
        "|---|---|---:|---|---:|---:|",
    ]
    meta = per_pool.drop_duplicates("pool_id")
    for (split, setup, size, fld), g in meta.groupby(
        ["split", "setup", "size", "field"], dropna=False, sort=True
    ):
        nq = f"{g['n_queries'].min()}" + (
            f"–{g['n_queries'].max()}" if g["n_queries"].max() != g["n_queries"].min() else ""
        )
        fl = "–" if fld is None or fld != fld else field_abbreviation(str(fld))
        size_text = size_label(int(size))  # type: ignore[call-overload]
        lines.append(f"| {split} | {setup} | {size_text} | {fl} | {len(g)} | {nq} |")
    return lines


def _methods_lines(c: Context, scores: Scores) -> list[str]:
    from mdcr.eval.metrics import metric_label, parse_metric

    depth = sorted({parse_metric(m)[1] for m in c.metrics if not m.startswith("recall")})
    try:
        ranx_version = metadata.version("ranx")
    except metadata.PackageNotFoundError:  # pragma: no cover
        ranx_version = "?"
    tests = {
        "fisher": f"Fisher's randomization test ({c.cfg.permutations} permutations, "
        f"seed {c.cfg.seed}; exact when 2^n ≤ permutations)",
        "student": "the paired t-test (ranx / scipy)",
    }
    chance_note = (
        "The `random` encoder's row is the empirical chance floor."
        if RANDOM in c.retrievers
        else "No `random` retriever was scored; the expected-chance row is the chance floor."
    )
    return [
        f"- Metrics: {', '.join(metric_label(m) + f' (`{m}`)' for m in c.metrics)}, computed "
        f"with ranx {ranx_version} from each query's ranking in rank order"
        + (f" (top {depth[0]})" if len(depth) == 1 else "")
        + "; every query in the qrels is scored, and one with no retrieved positive scores 0.",
        "- Aggregation: a pool's value is the mean over its queries; a pool size's or a "
        "field's value is the mean over its repetitions (± the sample standard deviation); "
        "AVG is the macro average over fields.",
        f"- Baselines: {chance_note} The expected-chance row is the exact expectation of "
        "each metric under a uniformly random ranking of the pool (closed forms in "
        "`mdcr/eval/chance.py`), averaged over the queries and repetitions.",
        "- Significance: paired per query (a query's value averaged over the repetitions), "
        "two-sided, with "
        + " and ".join(tests[t] for t in c.cfg.stat_tests)
        + f"; {c.cfg.correction} correction over the comparisons of each table, "
        f"α = {c.cfg.alpha}. Field AVG comparisons pool the queries of all fields.",
    ]


def benchmark_lines(folders: list[Path], splits: tuple[str, ...], ctx: StageContext) -> list[str]:
    """The MDCR benchmark's sections (benchmark-score outputs), for the report's splits.

    Their tables are copied into ``tables/`` and their report.md sections are included
    one heading level down, each under the fingerprint of the output it comes from.
    """
    import shutil

    from mdcr.store import read_manifest

    out: list[str] = []
    for folder in folders:
        manifest = read_manifest(folder)
        source = folder / "report.md"
        if manifest is None or not source.is_file():
            raise InputDataError(
                f"'{folder}' is not a benchmark-score output (no manifest or report.md); "
                "point report.benchmark to a benchmark-score step"
            )
        out += [
            "## MDCR benchmark",
            "",
            f"From `{folder}` (benchmark-score `{manifest['fingerprint']}`).",
            "",
        ]
        keep = True
        for line in source.read_text().splitlines():
            if line.startswith("# "):
                continue
            if line.startswith("## "):
                name = line[3:].strip()
                keep = name not in SPLITS or name in splits
            if keep:
                out.append("#" + line if line.startswith("#") else line)
        out.append("")
        for table in sorted((folder / "tables").glob("*")):
            if any(f"_{s}_" in table.name for s in splits):
                shutil.copyfile(table, ctx.output(f"tables/{table.name}"))
    return out


def run_report(cfg: ReportConfig, ctx: StageContext) -> None:
    import pandas as pd

    from mdcr.eval.aggregate import over_reps, query_means
    from mdcr.eval.metrics import metric_sort_key

    folders = ctx.inputs.get("scores") or []
    if not folders:
        raise ConfigError("report.scores: no score outputs given; name at least one")
    scores = load_scores(folders)
    pool_meta = scores.pool_meta
    keep = scores.per_pool["split"].isin(cfg.splits)
    per_pool = scores.per_pool[keep]
    if per_pool.empty:
        have = ", ".join(sorted(scores.per_pool["split"].dropna().unique())) or "none"
        raise InputDataError(
            f"report.splits: no scored pools in {', '.join(cfg.splits)}; scored splits: {have}"
        )
    pools = set(per_pool["pool_id"])
    per_query = scores.per_query[scores.per_query["pool_id"].isin(pools)]
    retrievers = order_retrievers(sorted(per_pool["retriever"].unique()))
    metrics = sorted(per_pool["metric"].unique(), key=metric_sort_key)
    c = Context(cfg, retrievers, letters_for(retrievers), metrics, ctx.out)

    agg = over_reps(per_pool)
    chance = scores.chance[scores.chance["pool_id"].isin(pools)]
    chance_agg = (
        over_reps(chance.assign(retriever=CHANCE_ROW)) if not chance.empty else agg.iloc[:0]
    )
    units = query_means(per_query, pool_meta)

    sections: list[Section] = []
    for split in [s for s in SPLITS if s in cfg.splits]:
        ds = dataset_section(c, split, agg, chance_agg, units)
        if ds is not None:
            sections.append(ds)
        sections += field_sections(c, split, agg, chance_agg, units)
    if cfg.paper_comparison:
        if "test" in cfg.splits:
            sections.append(paper_section(c, agg))
        else:
            sections.append(
                Section(
                    "Comparison with the paper",
                    ["The paper reports test splits; add test to splits."],
                )
            )

    sig = (
        pd.concat([x for s in sections for x in s.significance], ignore_index=True)
        if any(s.significance for s in sections)
        else pd.DataFrame()
    )
    lines = [f"# {cfg.title}", ""]
    lines += [
        "Values are metric × 100 with one decimal, as in the paper. Retrievers: "
        + ", ".join(f"`{r}`" for r in retrievers)
        + ".",
        "",
        "## Inputs",
        "",
        *_inputs_lines(scores),
        "",
        "## Setups",
        "",
        *_setup_lines(per_pool),
        "",
        "## Methods",
        "",
        *_methods_lines(c, scores),
        "",
    ]
    from mdcr.eval.metrics import metric_label
    from mdcr.eval.published import field_abbreviation, size_label

    fmt = {
        "size": lambda v: size_label(int(v)),
        "metric": metric_label,
        "field": lambda v: field_abbreviation(str(v)),
    }
    for s in sections:
        lines += [f"## {s.heading}", "", *s.intro, ""]
        for t in s.tables:
            files = "" if t.name in _MD_ONLY else f" (`tables/{t.name}.csv`, `.tex`)"
            if t.title or files:
                lines += [f"**{t.title}**{files}", ""]
            lines += [t.to_markdown(), ""]
            if t.notes:
                lines += [*t.notes, ""]
        if s.body:
            lines += [*s.body, ""]
        for p in s.plots:
            if p.suffix == ".png":
                rel = p.relative_to(ctx.out)
                lines += [f"![{p.stem}]({rel.as_posix()})", ""]
        if s.significance:
            lines += ["<details><summary>Pairwise comparisons</summary>", ""]
            for sg in s.significance:
                keys = ["size", "metric"] if "size" in sg.columns else ["metric", "field"]
                lines += _detail_table(c, sg, keys, fmt)
                lines.append("")
            lines += ["</details>", ""]
    all_tables = [
        t for s in sections for t in [*s.tables, *s.file_tables] if t.name not in _MD_ONLY
    ]
    for t in all_tables:
        for path in t.write(ctx.out / "tables"):
            ctx.output(path.relative_to(ctx.out).as_posix())
    for s in sections:
        for p in s.plots:
            ctx.output(p.relative_to(ctx.out).as_posix())
    if not sig.empty:
        sig.to_parquet(ctx.output("significance.parquet", rows=len(sig)), index=False)
        sig.to_csv(ctx.output("tables/significance.csv"), index=False)
    lines += benchmark_lines(ctx.inputs.get("benchmark") or [], cfg.splits, ctx)
    (ctx.out / "report.md").write_text("\n".join(lines).rstrip() + "\n")
    ctx.output("report.md")
    ctx.record("tables", [t.name for t in all_tables])
    ctx.record("retrievers", retrievers)
    ctx.record("score_inputs", [s["fingerprint"] for s in scores.sources])
    if not sig.empty:
        ctx.record(
            "significant",
            {
                f"{t}|{test}": f"{int(g['significant'].sum())}/{int(g['p_value'].notna().sum())}"
                for (t, test), g in sig.groupby(["table", "test"], sort=True)
            },
        )


SPEC = register(
    StageSpec(
        name="report",
        version="1",
        config=ReportConfig,
        run=run_report,
        help="paper-style tables, significance tests, plots and the paper comparison",
        main_output="report.md",
    )
)
