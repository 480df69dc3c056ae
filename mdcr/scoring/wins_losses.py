"""The "Where the encoders win and lose" section of the pools report and of
benchmark-score's report: each retriever's per-query difference against the baseline (the
report's ``baseline``, BM25 by default), by the query's field, by its year and by its
number of positives, as plots, and the largest wins and losses with the queries' titles.

On pools a unit is a query of a setup (a dataset-level pool size, or a field): its value
is the mean over the repetitions it was scored in, as the significance tests pair them
(:func:`mdcr.scoring.aggregate.query_means`). On a benchmark a unit is a query of a split
(its field's, on its whole candidate list). The difference is the retriever's value minus
the baseline's on the same unit, for the first measure (MAP). The facts come from
:mod:`mdcr.scoring.per_query`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from mdcr.scoring.document import Section
    from mdcr.scoring.report_context import Context

BASELINE = "bm25"
# Bins of the number of positives: (low, high), high None for no upper bound.
POSITIVE_BINS: tuple[tuple[int, int | None], ...] = ((0, 4), (5, 9), (10, 19), (20, 49), (50, None))
SHOWN = 3  # largest wins and largest losses shown per retriever
TITLE_CHARS = 70
UNIT_KEYS = ["setup", "split", "pool_size", "field", "query_id"]


def positives_bin(n: object) -> str:
    """The label of the bin holding ``n`` positives ("?" where unknown)."""
    if n is None or n is pd.NA or (isinstance(n, float) and np.isnan(n)):
        return "?"
    for low, high in POSITIVE_BINS:
        if int(n) >= low and (high is None or int(n) <= high):  # type: ignore[call-overload]
            return f"{low}–{high}" if high is not None else f"{low}+"
    return "?"


def differences(rows: pd.DataFrame, metric: str, baseline: str = BASELINE) -> pd.DataFrame:
    """One row per (retriever, unit): UNIT_KEYS, retriever, value, base (the baseline's
    value), diff, year, n_positives, title (field "" where unknown); the baseline itself
    and units it did not score are left out."""
    sub = rows[rows["metric"] == metric]
    # unknown fields as "" (one key type for the merges below), pool sizes as integers
    sub = sub.assign(
        field=sub["field"].astype(object).where(sub["field"].notna(), ""),
        pool_size=sub["pool_size"].astype("Int64"),
    )
    facts = (
        sub.sort_values(["pool_id"], kind="stable")
        .drop_duplicates(UNIT_KEYS)[[*UNIT_KEYS, "year", "n_positives", "title"]]
        .reset_index(drop=True)
    )
    units = (
        sub.groupby(["retriever", *UNIT_KEYS], dropna=False, sort=True)["value"]
        .mean()
        .reset_index()
    )
    base = units[units["retriever"] == baseline].drop(columns="retriever")
    others = units[units["retriever"] != baseline]
    out = others.merge(base.rename(columns={"value": "base"}), on=UNIT_KEYS, how="inner")
    out["diff"] = out["value"] - out["base"]
    return out.merge(facts, on=UNIT_KEYS, how="left")


def _group_means(diffs: pd.DataFrame, by: str, order: Sequence[str]) -> pd.DataFrame:
    """retriever x level: the mean difference (x100) over the units of each level."""
    table = diffs.groupby(["retriever", by], sort=False)["diff"].mean().unstack(by) * 100
    return table.reindex(columns=[o for o in order if o in table.columns])


def plot_wins_losses(
    diffs: pd.DataFrame,
    retrievers: Sequence[str],
    metric_name: str,
    baseline: str,
    folder: Path,
    stem: str,
    title: str,
) -> list[Path]:
    """Three panels of grouped bars (query field, query year, positives): per retriever,
    the mean per-query difference against ``baseline`` (x100), a line at 0."""
    from mdcr.contracts.paper import field_abbreviation
    from mdcr.scoring.plots import _pyplot, _save
    from mdcr.scoring.published import field_order

    plt = _pyplot()
    d = diffs.assign(
        field=diffs["field"].replace("", "?"),
        year=diffs["year"].map(lambda y: "?" if pd.isna(y) else str(int(y))),
        positives=diffs["n_positives"].map(positives_bin),
    )
    bins = [positives_bin(lo) for lo, _ in POSITIVE_BINS] + ["?"]
    panels = [
        ("query field", "field", [*field_order([f for f in d["field"].unique() if f != "?"]), "?"]),
        ("query year", "year", sorted(d["year"].unique())),
        ("positives", "positives", bins),
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(13.0, 3.8), squeeze=False)
    width = 0.8 / max(1, len(retrievers))
    for ax, (label, col, order) in zip(axes[0], panels, strict=True):
        table = _group_means(d, col, order)
        x = np.arange(len(table.columns))
        for i, r in enumerate(retrievers):
            vals = (
                table.loc[r].to_numpy(dtype=float) if r in table.index else np.full(len(x), np.nan)
            )
            ax.bar(x + (i - (len(retrievers) - 1) / 2) * width, vals, width, label=r)
        ticks = [field_abbreviation(str(c)) if col == "field" else str(c) for c in table.columns]
        ax.set_xticks(x)
        ax.set_xticklabels(ticks, rotation=45 if col == "field" else 0, ha="right")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xlabel(label)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel(f"{metric_name} − {baseline} per query (x100)")
    axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title)
    fig.tight_layout()
    paths = _save(fig, folder, stem)
    plt.close(fig)
    return paths


def _cell(text: object) -> str:
    s = (
        ""
        if text is None or text is pd.NA or (isinstance(text, float) and np.isnan(text))
        else str(text)
    )
    s = s if len(s) <= TITLE_CHARS else s[: TITLE_CHARS - 1] + "…"
    return s.replace("|", "\\|").replace("\n", " ")


def _unit_label(r: pd.Series) -> str:
    from mdcr.contracts.paper import field_abbreviation, size_label
    from mdcr.scoring.per_query import MDCR_SETUP

    if r["setup"] == MDCR_SETUP:
        return f"MDCR {field_abbreviation(str(r['field']))}" if r["field"] else "MDCR"
    if r["setup"] == "field":
        return f"field {field_abbreviation(str(r['field']))}"
    if pd.notna(r["pool_size"]):
        return f"{r['setup']} {size_label(int(r['pool_size']))}"
    return str(r["setup"])


def extremes_lines(
    diffs: pd.DataFrame, retrievers: Sequence[str], metric_name: str, baseline: str
) -> list[str]:
    """A Markdown table: per retriever its largest wins and losses against ``baseline``."""
    lines = [
        f"| retriever | | query | setup | year | positives | {metric_name} | {baseline} | "
        "difference |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in retrievers:
        mine = diffs[diffs["retriever"] == r].sort_values(
            ["diff", "query_id"], ascending=[False, True], kind="stable"
        )
        wins = mine[mine["diff"] > 0].head(SHOWN)
        losses = mine[mine["diff"] < 0].iloc[::-1].head(SHOWN)
        for kind, part in (("win", wins), ("loss", losses)):
            for _, u in part.iterrows():
                year = "" if pd.isna(u["year"]) else str(int(u["year"]))
                pos = "" if pd.isna(u["n_positives"]) else str(int(u["n_positives"]))
                title = _cell(u["title"]) or f"`{u['query_id']}`"
                lines.append(
                    f"| {r} | {kind} | {title} | {_unit_label(u)} | {year} | {pos} | "
                    f"{u['value'] * 100:.1f} | {u['base'] * 100:.1f} | {u['diff'] * 100:+.1f} |"
                )
    return lines


def _count_lines(diffs: pd.DataFrame, retrievers: Sequence[str], baseline: str) -> list[str]:
    out = []
    for r in retrievers:
        d = diffs.loc[diffs["retriever"] == r, "diff"]
        out.append(
            f"- `{r}` against `{baseline}`: better on {int((d > 0).sum())}, equal on "
            f"{int((d == 0).sum())}, worse on {int((d < 0).sum())} of {len(d)} queries."
        )
    return out


POOLS_UNITS = (
    "a query of a dataset-level pool size or of a field, averaged over its repetitions, as "
    "the significance tests pair them"
)
BENCHMARK_UNITS = "a query of the benchmark, ranked among its whole candidate list"


def wins_losses_section(
    c: Context,
    rows: pd.DataFrame,
    splits: Sequence[str],
    *,
    on_benchmark: bool = False,
    plot_prefix: str = "",
) -> Section | None:
    """The section for the reported ``splits``, against ``c.cfg.baseline`` (None when the
    baseline is not reported or no other retriever is); ``rows``: per-query rows with
    their facts (:func:`mdcr.scoring.per_query.pools_rows` or, ``on_benchmark``,
    :func:`mdcr.scoring.per_query.benchmark_values_rows`); plots named
    ``<plot_prefix>wins_losses_<split>``."""
    from mdcr.measures.registry import label as metric_label
    from mdcr.scoring.document import Section

    baseline = c.cfg.baseline
    others = [r for r in c.retrievers if r != baseline]
    if baseline not in c.retrievers or not others or not c.metrics:
        return None
    metric = c.metrics[0]
    name = metric_label(metric)
    field_note = (
        "the query's field"
        if on_benchmark
        else "the pool's, on dataset-level pools the query paper's first field"
    )
    s = Section(
        "Where the encoders win and lose",
        intro=[
            f"Per-query {name} of each retriever minus `{baseline}`'s on the same query "
            f"({BENCHMARK_UNITS if on_benchmark else POOLS_UNITS}), by the query's field, "
            "year and number of positives (the mean difference x100 per group; field: "
            f"{field_note}; `?`: a fact the inputs do not hold). Every query's values and "
            "facts: `mdcr export --per-query`."
        ],
    )
    where = "MDCR " if on_benchmark else ""
    for split in splits:
        diffs = differences(rows[rows["split"] == split], metric, baseline)
        if diffs.empty:
            continue
        shown = [r for r in others if r in set(diffs["retriever"])]
        sub = Section(split)
        sub.intro = _count_lines(diffs, shown, baseline)
        sub.plots = c.rel(
            plot_wins_losses(
                diffs,
                shown,
                name,
                baseline,
                c.out / "plots",
                f"{plot_prefix}wins_losses_{split}",
                f"{name} against {baseline} per query, {where}{split} split",
            )
        )
        sub.body = [
            f"Largest wins and losses against `{baseline}` ({name} x100, {SHOWN} each):",
            "",
            *extremes_lines(diffs, shown, name, baseline),
        ]
        s.subsections.append(sub)
    return s if s.subsections else None
