"""Confidence intervals, differences against a baseline, tied groups and the minimum
detectable effect, from a seeded paired bootstrap over queries.

The statistic of a table cell is a weighted sum of stratum means: a dataset-level pool
size's value is the mean over its repetitions of each pool's mean over its queries (the
strata are the repetitions, each weighted 1/R), a field's value likewise, the field AVG
the mean over fields of those (strata: (field, repetition), weight 1/(F·R_f)); on MDCR a
field's value is the mean of its queries (one stratum) and the macro average the mean over
fields (strata: the fields, 1/F). The bootstrap resamples queries with replacement within
each stratum and recomputes that statistic, so the interval is centred on exactly the
number the table prints. A difference between two retrievers resamples the same queries
for both (paired): the statistic is linear, so it is the bootstrap of the per-query
differences.

Methods (``percentile`` or ``bca``; ``bca`` by default): per-query AP and recall are
bounded and skewed (many zeros), where the percentile interval's coverage falls short; the
bias-corrected and accelerated interval (Efron 1987; DiCiccio & Efron 1996) corrects the
median bias and the skew and is second-order accurate. Its acceleration comes from the
jackknife, which for a weighted sum of means is closed-form (no extra resampling). Both
follow ``scipy.stats.bootstrap`` to the draw: resample indices are
``rng.integers(0, n, (b, n))`` from ``numpy.random.default_rng(seed)``, the quantiles are
linear; a test checks the intervals against scipy's on the same values and seed.

Determinism: one NumPy generator, seeded, drawn in a fixed order (block of resamples, then
stratum), never in threads: the same seed gives the same interval on every machine and
thread count.

Minimum detectable effect (MDE): the smallest true mean difference a paired two-sided test
at level α' detects with power 1 − β, by the normal approximation
``(z_{1−α'/2} + z_{1−β}) · sd_diff / √n`` (e.g. Chow, Shao & Wang 2008, *Sample Size
Calculations in Clinical Research*, §3.1; in IR, Sakai 2016, *Topic set size design*),
with sd_diff the sample standard deviation of the paired per-query differences and α' the
corrected level: α/m for a family of m comparisons (Bonferroni's, Holm's first step).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mdcr.core.errors import ConfigError

INTERVAL_METHODS = ("bca", "percentile")
CONFIDENCE = 0.95
POWER = 0.8
# Resample indices drawn per block (resamples x queries): bounds the memory, and, being a
# constant, keeps the draw order (and so the interval) the same everywhere.
_BLOCK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class Interval:
    """A statistic and its bootstrap confidence interval."""

    estimate: float
    low: float
    high: float


def check_method(method: str, where: str) -> None:
    if method not in INTERVAL_METHODS:
        raise ConfigError(
            f"{where}: {method!r} is not an interval method; valid: {', '.join(INTERVAL_METHODS)}"
        )


def _ndtri(p: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(p))


def _ndtr(z: float) -> float:
    from scipy.special import ndtr

    return float(ndtr(z))


def bootstrap_interval(
    strata: Sequence[np.ndarray],
    weights: Sequence[float] | None = None,
    *,
    resamples: int = 2000,
    seed: int = 42,
    method: str = "bca",
    confidence: float = CONFIDENCE,
) -> Interval:
    """The bootstrap interval of ``sum(w_s * mean(strata[s]))``, resampling each
    stratum's values with replacement (see the module docstring).

    With one stratum and weight 1 this is ``scipy.stats.bootstrap`` of the mean with
    ``rng=np.random.default_rng(seed)`` and the same method, to the draw.
    """
    check_method(method, "interval method")
    groups = [np.asarray(g, dtype=np.float64) for g in strata]
    w = np.ones(len(groups)) / len(groups) if weights is None else np.asarray(weights, float)
    if not groups or any(len(g) == 0 for g in groups):
        return Interval(math.nan, math.nan, math.nan)
    estimate = float(sum(wi * g.mean() for wi, g in zip(w, groups, strict=True)))
    if all(np.all(g == g[0]) for g in groups):  # no spread: nothing to resample
        return Interval(estimate, estimate, estimate)
    theta_b = _resampled(groups, w, resamples, seed)
    alpha = (1 - confidence) / 2
    if method == "percentile":
        probs = [alpha, 1 - alpha]
    else:
        probs = _bca_levels(groups, w, estimate, theta_b, alpha)
        if any(math.isnan(p) for p in probs):
            return Interval(estimate, estimate, estimate)
    low, high = np.quantile(theta_b, probs)
    return Interval(estimate, float(low), float(high))


def _resampled(groups: list[np.ndarray], w: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The statistic on ``resamples`` bootstrap resamples, drawn block by block and, in a
    block, stratum by stratum, from one seeded generator."""
    rng = np.random.default_rng(seed)
    total = sum(len(g) for g in groups)
    block = max(1, _BLOCK_ELEMENTS // total)
    out = np.empty(resamples)
    for start in range(0, resamples, block):
        b = min(block, resamples - start)
        acc = np.zeros(b)
        for wi, g in zip(w, groups, strict=True):
            idx = rng.integers(0, len(g), (b, len(g)))
            acc += wi * g[idx].mean(axis=-1)
        out[start : start + b] = acc
    return out


def _bca_levels(
    groups: list[np.ndarray], w: np.ndarray, estimate: float, theta_b: np.ndarray, alpha: float
) -> list[float]:
    """BCa's adjusted quantile levels (Efron & Tibshirani 1993, eq. 14.10 and 14.15), as
    scipy computes them; the jackknife leaves out one query of one stratum at a time."""
    b = len(theta_b)
    below = np.count_nonzero(theta_b < estimate) + np.count_nonzero(theta_b <= estimate)
    z0 = _ndtri(below / (2 * b))
    jack = []
    for wi, g in zip(w, groups, strict=True):
        if len(g) < 2:
            continue  # a one-query stratum has no leave-one-out mean
        loo = (g.sum() - g) / (len(g) - 1)
        jack.append(estimate - wi * g.mean() + wi * loo)
    theta_i = np.concatenate(jack) if jack else np.empty(0)
    n = float(len(theta_i))
    if n < 2:
        return [math.nan, math.nan]
    u = (n - 1) * (theta_i.mean() - theta_i)
    den = np.sum(u**2) / n**2
    if den == 0:
        return [math.nan, math.nan]
    a_hat = (np.sum(u**3) / n**3) / 6 / den**1.5
    z_alpha = _ndtri(alpha)
    levels = []
    for z in (z_alpha, -z_alpha):
        num = z0 + z
        levels.append(_ndtr(z0 + num / (1 - a_hat * num)))
    return levels


def minimum_detectable_effect(differences: np.ndarray, alpha: float, power: float = POWER) -> float:
    """``(z_{1−α/2} + z_{power}) · sd(differences) / √n``: the smallest true mean
    difference a two-sided paired test at level ``alpha`` detects with ``power`` (normal
    approximation; ``alpha`` already corrected). NaN for fewer than two pairs."""
    d = np.asarray(differences, dtype=np.float64)
    if len(d) < 2:
        return math.nan
    z = _ndtri(1 - alpha / 2) + _ndtri(power)
    return float(z * np.std(d, ddof=1) / math.sqrt(len(d)))


def corrected_alpha(alpha: float, n_comparisons: int) -> float:
    """The per-comparison level of a family of ``n_comparisons``: α/m (Bonferroni's, and
    the level of Holm's first and strictest step)."""
    return alpha / max(1, n_comparisons)


# ----------------------------------------------------------------------------- frames


@dataclass(frozen=True)
class IntervalOptions:
    """How intervals are drawn: resamples, seed, method, confidence."""

    resamples: int = 2000
    seed: int = 42
    method: str = "bca"
    confidence: float = CONFIDENCE


def _strata(frame: pd.DataFrame, levels: Sequence[str]) -> tuple[list[np.ndarray], list[float]]:
    """A cell's values split by the nested ``levels`` (sorted), each stratum weighted so
    that every level is averaged equally: 1/F per field, then 1/R per repetition of it."""
    if not levels:
        return [frame["value"].to_numpy(np.float64)], [1.0]
    groups: list[np.ndarray] = []
    weights: list[float] = []
    outer = sorted(frame.groupby(levels[0], sort=True, dropna=False), key=lambda kv: str(kv[0]))
    for _, part in outer:
        sub_groups, sub_weights = _strata(part, levels[1:])
        groups += sub_groups
        weights += [wi / len(outer) for wi in sub_weights]
    return groups, weights


def cell_intervals(
    values: pd.DataFrame,
    cell_keys: Sequence[str],
    levels: Sequence[str],
    options: IntervalOptions,
) -> pd.DataFrame:
    """The interval of every cell of ``values`` (columns ``cell_keys``, ``levels``,
    ``query_id``, ``value``): its estimate (the weighted mean of the levels' means, as
    the tables aggregate), ``ci_low``, ``ci_high`` and ``n_queries``."""
    rows = []
    cols = [*cell_keys, "estimate", "ci_low", "ci_high", "n_queries"]
    if values.empty:
        return pd.DataFrame(columns=cols)
    frame = values.sort_values([*levels, "query_id"], kind="stable")
    for cell, part in frame.groupby(list(cell_keys), sort=True, dropna=False):
        cell = cell if isinstance(cell, tuple) else (cell,)
        groups, weights = _strata(part, levels)
        iv = bootstrap_interval(
            groups,
            weights,
            resamples=options.resamples,
            seed=options.seed,
            method=options.method,
            confidence=options.confidence,
        )
        rows.append([*cell, iv.estimate, iv.low, iv.high, len(part)])
    return pd.DataFrame(rows, columns=cols)


def paired_differences(
    values: pd.DataFrame, baseline: str, pair_keys: Sequence[str]
) -> pd.DataFrame:
    """Each retriever's per-query value minus the baseline's on the same query
    (``pair_keys`` name a query: e.g. pool_id and query_id); the baseline itself and
    queries the baseline lacks are left out. Columns as ``values``, ``value`` the
    difference."""
    keys = [k for k in values.columns if k not in ("retriever", "value")]
    base = values[values["retriever"] == baseline].drop(columns="retriever")
    others = values[values["retriever"] != baseline]
    joined = others.merge(base, on=keys, suffixes=("", "_base"), how="inner")
    out = joined.assign(value=joined["value"] - joined["value_base"])
    return out.drop(columns="value_base")[values.columns]


def tied_with_best(
    corrected: pd.DataFrame,
    means: pd.DataFrame,
    cell_keys: Sequence[str],
    test: str,
) -> set[tuple]:
    """The (cell..., retriever) keys not significantly worse than their cell's best.

    ``means``: ``cell_keys``, retriever, mean (the table's values; the best is the highest,
    ties all best). ``corrected``: the corrected pairwise comparisons of
    :func:`mdcr.scoring.significance.correct`. A retriever is tied with the best unless the
    ``test`` comparison of the two is significant and the best has the higher mean on it.
    """
    keys = list(cell_keys)
    sig = corrected[(corrected["test"] == test) & corrected["significant"]]
    worse: set[tuple] = set()
    for r in sig.to_dict("records"):
        cell = tuple(r[k] for k in keys)
        if r["diff"] > 0:
            worse.add((*cell, r["retriever_a"], r["retriever_b"]))
        elif r["diff"] < 0:
            worse.add((*cell, r["retriever_b"], r["retriever_a"]))
    tied: set[tuple] = set()
    valid = means.dropna(subset=["mean"])
    for cell, part in valid.groupby(keys, sort=True, dropna=False) if keys else [((), valid)]:
        cell = cell if isinstance(cell, tuple) else (cell,)
        top = part["mean"].max()
        best = part.loc[part["mean"] == top, "retriever"].tolist()
        for name in part["retriever"]:
            if all((*cell, b, name) not in worse for b in best):
                tied.add((*cell, name))
    return tied
