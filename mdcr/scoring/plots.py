"""Report figures (matplotlib, Agg backend), each saved as PNG and SVG.

- each metric against pool size per retriever (the paper's main finding: BM25 degrades
  more slowly than the encoders as the pool grows), with the analytic chance level;
- per-field bars per retriever;
- per-query AP box plots per retriever.

Outputs are deterministic: no dates in the files and a fixed SVG id salt.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mdcr.core.errors import require

_SAVE_META = {"png": {"Software": None}, "svg": {"Date": None}}


def _pyplot() -> Any:
    mpl = require("matplotlib")
    mpl.use("Agg")
    mpl.rcParams["svg.hashsalt"] = "mdcr"
    mpl.rcParams["svg.fonttype"] = "path"
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, folder: Path, stem: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "svg"):
        p = folder / f"{stem}.{ext}"
        fig.savefig(
            p, dpi=120 if ext == "png" else None, bbox_inches="tight", metadata=_SAVE_META[ext]
        )
        paths.append(p)
    return paths


def plot_pool_size(
    agg: pd.DataFrame,
    chance: pd.DataFrame | None,
    metrics: Sequence[str],
    retrievers: Sequence[str],
    metric_label: Callable[[str], str],
    size_label: Callable[[int], str],
    folder: Path,
    stem: str,
    title: str,
) -> list[Path]:
    """One panel per metric: mean (x100) against pool size, error bars = std over reps.

    ``agg``: retriever, size, metric, mean, std. ``chance``: size, metric, mean (or None).
    """
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.6), squeeze=False)
    sizes = sorted(agg["size"].unique())
    for ax, metric in zip(axes[0], metrics, strict=True):
        for r in retrievers:
            g = agg[(agg["retriever"] == r) & (agg["metric"] == metric)].sort_values("size")
            if g.empty:
                continue
            err = np.nan_to_num(g["std"].to_numpy(dtype=float) * 100)
            ax.errorbar(g["size"], g["mean"] * 100, yerr=err, marker="o", capsize=3, label=r)
        if chance is not None and not chance.empty:
            c = chance[chance["metric"] == metric].sort_values("size")
            if not c.empty:
                ax.plot(c["size"], c["mean"] * 100, ls="--", color="grey", label="expected chance")
        if len(sizes) > 1:
            ax.set_xscale("log")
        ax.set_xticks(sizes)
        ax.set_xticklabels([size_label(int(s)) for s in sizes])
        ax.minorticks_off()
        ax.set_xlabel("pool size")
        ax.set_ylabel(f"{metric_label(metric)} (x100)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    paths = _save(fig, folder, stem)
    plt.close(fig)
    return paths


def plot_field_bars(
    agg: pd.DataFrame,
    metric: str,
    retrievers: Sequence[str],
    fields: Sequence[str],
    field_label: Callable[[str], str],
    metric_label: Callable[[str], str],
    folder: Path,
    stem: str,
    title: str,
) -> list[Path]:
    """Grouped bars: one group per field, one bar per retriever. ``agg``: retriever, field,
    metric, mean."""
    plt = _pyplot()
    width = 0.8 / max(1, len(retrievers))
    fig, ax = plt.subplots(
        figsize=(max(6.0, 0.55 * len(fields) * max(1, len(retrievers)) ** 0.5 + 2), 3.8)
    )
    x = np.arange(len(fields))
    sub = agg[agg["metric"] == metric].set_index(["retriever", "field"])["mean"]
    for i, r in enumerate(retrievers):
        vals = [float(sub.get((r, f), math.nan)) * 100 for f in fields]
        ax.bar(x + (i - (len(retrievers) - 1) / 2) * width, vals, width, label=r)
    ax.set_xticks(x)
    ax.set_xticklabels([field_label(f) for f in fields], rotation=45, ha="right")
    ax.set_ylabel(f"{metric_label(metric)} (x100)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(title)
    fig.tight_layout()
    paths = _save(fig, folder, stem)
    plt.close(fig)
    return paths


def plot_ap_boxes(
    units: pd.DataFrame,
    panels: Sequence[Any],
    panel_label: Callable[[Any], str],
    retrievers: Sequence[str],
    metric_name: str,
    folder: Path,
    stem: str,
    title: str,
) -> list[Path]:
    """Box plots of per-query values (x100) per retriever, one panel per ``panels`` level.

    ``units``: panel, retriever, value (one row per query).
    """
    plt = _pyplot()
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(max(3.0, 0.7 * len(retrievers) + 1.5) * len(panels), 3.8),
        squeeze=False,
        sharey=True,
    )
    for ax, panel in zip(axes[0], panels, strict=True):
        sub = units[units["panel"] == panel]
        data = [sub.loc[sub["retriever"] == r, "value"].to_numpy() * 100 for r in retrievers]
        ax.boxplot(data, showfliers=True, flierprops={"markersize": 2})
        ax.set_xticks(range(1, len(retrievers) + 1))
        ax.set_xticklabels(retrievers, rotation=45, ha="right")
        ax.set_title(panel_label(panel), fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel(f"per-query {metric_name} (x100)")
    fig.suptitle(title)
    fig.tight_layout()
    paths = _save(fig, folder, stem)
    plt.close(fig)
    return paths
