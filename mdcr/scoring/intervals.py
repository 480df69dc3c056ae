"""The statistics of a result table: bootstrap confidence intervals that resample the
independent unit, differences against a baseline, tied groups that are findings, and the
minimum detectable effect of the test the tables use. Pure functions of per-query values;
:mod:`mdcr.scoring.table_intervals` puts them on the tables.

**The unit is the query.** The paper samples its queries once and repeats the pool
sampling; mdcr's pools do the same (a split's queries are drawn once, and every
repetition and pool size scores the same queries), so a query's values in the
repetitions of a setup are not independent draws: they move together. A cell's statistic
is a weighted sum of pool means (a pool size's or a field's value: the mean over its
repetitions of each pool's mean over its queries; the field AVG the mean over fields of
those; on MDCR a field's mean, and the macro average over fields). The bootstrap
resamples queries with replacement, each with all its values: the pools of a stratum
(a field; the whole cell otherwise) that hold the same queries are one cluster design, a
query's value in it the mean over those pools (each pool weighted as the table weighs
it); pools whose queries differ stay strata of their own. With every repetition on the
same queries this is the bootstrap of the per-query means, the units the paired tests
use, and ``scipy.stats.bootstrap`` of them to the draw. The same seed draws the same
indices for every cell of a setup, so a query moves together across pool sizes and
measures too. A difference between two retrievers resamples the same queries for both
(paired): the statistic is linear, so it is the bootstrap of the per-query differences.

Methods (``percentile`` or ``bca``; ``bca`` by default): per-query AP and recall are
bounded and skewed (many zeros), where the percentile interval's coverage falls short; the
bias-corrected and accelerated interval (Efron 1987; DiCiccio & Efron 1996) corrects the
median bias and the skew and is second-order accurate. Its acceleration comes from the
jackknife (leave one query out), closed-form for a weighted sum of means. Both follow
``scipy.stats.bootstrap`` to the draw: resample indices are ``rng.integers(0, n, (b, n))``
from ``numpy.random.default_rng(seed)``, the statistic the mean of the drawn values, the
quantiles linear. :func:`bootstrap_intervals` draws many data sets at once with the same
indices (the simulation tests of docs/scoring.md use it); each row is what
:func:`bootstrap_interval` gives that data set alone.

Determinism: one NumPy generator, seeded, drawn in a fixed order (block of resamples, then
stratum), never in threads: the same seed gives the same interval on every machine and
thread count.

**Tied groups.** A retriever is *tied* with its column's best only where that is a
finding: the comparison with the best is not significant after the table's correction,
*and* the test could have found it significant on that many queries. A test on n paired
queries has a smallest attainable p (Fisher's randomization test, exact: 2/2^n; sampled:
1/(permutations + 1); the t-test: none above 0); where it exceeds α/m (the level of the
correction's strictest step: Bonferroni's, Holm's first) no data can separate the two,
and the retriever is *unresolved*, not tied (:func:`tie_groups`).

**Minimum detectable effect** (MDE): the smallest true mean difference the paired test at
level α' = α/m detects with power 1 − β, from the paired t-test's exact power (the
noncentral t with n − 1 degrees of freedom; Cohen 1988, §2.5; in IR, Sakai 2016, *Topic
set size design*): the randomization test's power tends to the t-test's as n grows
(Hoeffding 1952). Where the test cannot reach α' on n queries, there is none: "not
reachable".
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
# The tied-group classes of a retriever in a column (intervals.parquet's ``tie_group``).
BEST, TIED, SEPARATED, UNRESOLVED = "best", "tied", "separated", "unresolved"


@dataclass(frozen=True)
class Interval:
    """A statistic and its bootstrap confidence interval."""

    estimate: float
    low: float
    high: float


@dataclass(frozen=True)
class IntervalOptions:
    """How intervals are drawn: resamples, seed, method, confidence."""

    resamples: int = 2000
    seed: int = 42
    method: str = "bca"
    confidence: float = CONFIDENCE


def check_method(method: str, where: str) -> None:
    if method not in INTERVAL_METHODS:
        raise ConfigError(
            f"{where}: {method!r} is not an interval method; valid: {', '.join(INTERVAL_METHODS)}"
        )


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
    stratum's values (one per query) with replacement (see the module docstring).

    With one stratum and weight 1 this is ``scipy.stats.bootstrap`` of the mean with
    ``rng=np.random.default_rng(seed)`` and the same method, to the draw.
    """
    rows = [np.asarray(g, dtype=np.float64).reshape(1, -1) for g in strata]
    out = bootstrap_intervals(
        rows, weights, resamples=resamples, seed=seed, method=method, confidence=confidence
    )
    return Interval(float(out[0, 0]), float(out[0, 1]), float(out[0, 2]))


def bootstrap_intervals(
    strata: Sequence[np.ndarray],
    weights: Sequence[float] | None = None,
    *,
    resamples: int = 2000,
    seed: int = 42,
    method: str = "bca",
    confidence: float = CONFIDENCE,
) -> np.ndarray:
    """:func:`bootstrap_interval` of D data sets at once: each stratum a (D, n_s) array,
    row d the values of data set d. Returns (D, 3): estimate, low, high; every row drawn
    with the same indices, so each is what that data set alone gives (to the last bits:
    NumPy's vectorised powers may round differently from its scalar ones)."""
    check_method(method, "interval method")
    groups = [np.atleast_2d(np.asarray(g, dtype=np.float64)) for g in strata]
    n_sets = groups[0].shape[0] if groups else 1
    if not groups or any(g.shape[1] == 0 for g in groups):
        return np.full((n_sets, 3), math.nan)
    w = np.ones(len(groups)) / len(groups) if weights is None else np.asarray(weights, float)
    estimate = sum(wi * g.mean(axis=1) for wi, g in zip(w, groups, strict=True))
    out = np.column_stack([estimate, estimate, estimate])
    spread = ~np.all([np.all(g == g[:, :1], axis=1) for g in groups], axis=0)
    live = np.flatnonzero(spread)  # no spread: nothing to resample, a point interval
    if not len(live):
        return out
    kept = [g[live] for g in groups]
    theta_b = _resampled(kept, w, resamples, seed)
    alpha = (1 - confidence) / 2
    if method == "percentile":
        probs = np.tile([alpha, 1 - alpha], (len(live), 1))
    else:
        probs = _bca_levels(kept, w, estimate[live], theta_b, alpha)
    for row, d in enumerate(live):
        if not np.isnan(probs[row]).any():  # NaN levels (no jackknife spread): a point
            out[d, 1:] = np.quantile(theta_b[row], probs[row])
    return out


def _resampled(groups: list[np.ndarray], w: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The statistic of every data set on ``resamples`` bootstrap resamples, (D, B): drawn
    block by block and, in a block, stratum by stratum, from one seeded generator (the
    block size depends on the queries alone, so the draws do not depend on D)."""
    rng = np.random.default_rng(seed)
    n_sets = groups[0].shape[0]
    total = sum(g.shape[1] for g in groups)
    block = max(1, _BLOCK_ELEMENTS // total)
    out = np.empty((n_sets, resamples))
    for start in range(0, resamples, block):
        b = min(block, resamples - start)
        acc = np.zeros((n_sets, b))
        for wi, g in zip(w, groups, strict=True):
            idx = rng.integers(0, g.shape[1], (b, g.shape[1]))
            step = max(1, _BLOCK_ELEMENTS // idx.size)  # data sets per gather
            for lo in range(0, n_sets, step):
                acc[lo : lo + step] += wi * g[lo : lo + step, idx].mean(axis=-1)
        out[:, start : start + b] = acc
    return out


def _bca_levels(
    groups: list[np.ndarray],
    w: np.ndarray,
    estimate: np.ndarray,
    theta_b: np.ndarray,
    alpha: float,
) -> np.ndarray:
    """BCa's adjusted quantile levels per data set, (D, 2) (Efron & Tibshirani 1993, eq.
    14.10 and 14.15), as scipy computes them; the jackknife leaves out one query of one
    stratum at a time. NaN where the jackknife has no spread."""
    from scipy.special import ndtr, ndtri

    b = theta_b.shape[1]
    below = np.count_nonzero(theta_b < estimate[:, None], axis=1)
    below += np.count_nonzero(theta_b <= estimate[:, None], axis=1)
    z0 = ndtri(below / (2 * b))
    jack = []
    for wi, g in zip(w, groups, strict=True):
        if g.shape[1] < 2:
            continue  # a one-query stratum has no leave-one-out mean
        loo = (g.sum(axis=1, keepdims=True) - g) / (g.shape[1] - 1)
        jack.append(estimate[:, None] - wi * g.mean(axis=1, keepdims=True) + wi * loo)
    levels = np.full((len(estimate), 2), math.nan)
    if not jack or sum(j.shape[1] for j in jack) < 2:
        return levels
    theta_i = np.concatenate(jack, axis=1)
    n = float(theta_i.shape[1])
    u = (n - 1) * (theta_i.mean(axis=1, keepdims=True) - theta_i)
    den = np.sum(u**2, axis=1) / n**2
    ok = den != 0
    a_hat = np.full(len(estimate), math.nan)
    a_hat[ok] = (np.sum(u[ok] ** 3, axis=1) / n**3) / 6 / den[ok] ** 1.5
    z_alpha = ndtri(alpha)
    for col, z in enumerate((z_alpha, -z_alpha)):
        num = z0 + z
        levels[ok, col] = ndtr(z0[ok] + num[ok] / (1 - a_hat[ok] * num[ok]))
    return levels


# ------------------------------------------------------------------- the query as the unit


def query_strata(
    part: pd.DataFrame, strata_keys: Sequence[str]
) -> tuple[list[np.ndarray], list[float]]:
    """A cell's values (columns ``strata_keys``, ``pool_id``, ``query_id``, ``value``) as
    the bootstrap resamples them: per stratum (the levels of ``strata_keys``, each weighted
    equally: 1/F per field) the pools that hold the same queries become one array of
    per-query values (a query's mean over those pools; queries in id order), weighted by
    their share of the stratum's pools (1/R per repetition); pools of other queries make
    arrays of their own. Returns the arrays and their weights."""
    outer = (
        sorted(part.groupby(list(strata_keys), sort=True, dropna=False), key=lambda kv: str(kv[0]))
        if strata_keys
        else [((), part)]
    )
    arrays: list[np.ndarray] = []
    weights: list[float] = []
    for _, stratum in outer:
        queries = stratum.groupby("pool_id", sort=True)["query_id"].agg(frozenset)
        designs: dict[frozenset, list[str]] = {}
        for pool, held in queries.items():
            designs.setdefault(held, []).append(str(pool))
        for pools in sorted(designs.values()):
            rows = stratum[stratum["pool_id"].isin(pools)]
            per_query = rows.groupby("query_id", sort=True)["value"].mean()
            arrays.append(per_query.to_numpy(np.float64))
            weights.append(len(pools) / len(queries) / len(outer))
    return arrays, weights


def cell_intervals(
    values: pd.DataFrame,
    cell_keys: Sequence[str],
    strata_keys: Sequence[str],
    options: IntervalOptions,
) -> pd.DataFrame:
    """The interval of every cell of ``values`` (columns ``cell_keys``, ``strata_keys``,
    ``pool_id``, ``query_id``, ``value``): its estimate (the weighted mean of the pools'
    means, as the tables aggregate), ``ci_low``, ``ci_high`` and ``n_queries`` (the
    queries resampled)."""
    rows = []
    cols = [*cell_keys, "estimate", "ci_low", "ci_high", "n_queries"]
    if values.empty:
        return pd.DataFrame(columns=cols)
    for cell, part in values.groupby(list(cell_keys), sort=True, dropna=False):
        cell = cell if isinstance(cell, tuple) else (cell,)
        arrays, weights = query_strata(part, strata_keys)
        iv = bootstrap_interval(
            arrays,
            weights,
            resamples=options.resamples,
            seed=options.seed,
            method=options.method,
            confidence=options.confidence,
        )
        n_queries = sum(len(a) for a in arrays)
        rows.append([*cell, iv.estimate, iv.low, iv.high, n_queries])
    return pd.DataFrame(rows, columns=cols)


def paired_differences(values: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Each retriever's per-query value minus the baseline's on the same query of the same
    pool (every column but retriever and value names it); the baseline itself and queries
    the baseline lacks are left out. Columns as ``values``, ``value`` the difference."""
    keys = [k for k in values.columns if k not in ("retriever", "value")]
    base = values[values["retriever"] == baseline].drop(columns="retriever")
    others = values[values["retriever"] != baseline]
    joined = others.merge(base, on=keys, suffixes=("", "_base"), how="inner")
    out = joined.assign(value=joined["value"] - joined["value_base"])
    return out.drop(columns="value_base")[values.columns]


# ------------------------------------------------------------ tied groups and the MDE


def smallest_p_value(test: str, n: int, permutations: int) -> float:
    """The smallest two-sided p ``test`` can give on ``n`` paired queries
    (:mod:`mdcr.scoring.significance`): Fisher's randomization test 2/2^n where it
    enumerates every sign flip, 1/(permutations + 1) where it samples them; the t-test 0
    (n ≥ 2). NaN where there is no test (n < 1; the t-test n < 2)."""
    if test == "fisher":
        if n < 1:
            return math.nan
        if n <= 20 and 2**n <= permutations:
            return 2.0 / 2**n
        return 1.0 / (permutations + 1)
    if test == "student":
        return 0.0 if n >= 2 else math.nan
    raise ConfigError(f"unknown stat test '{test}'; valid: fisher, student")


def corrected_alpha(alpha: float, n_comparisons: int) -> float:
    """The per-comparison level of a family of ``n_comparisons``: α/m (Bonferroni's, and
    the level of Holm's first and strictest step)."""
    return alpha / max(1, n_comparisons)


def family_levels(
    corrected: pd.DataFrame, alpha: float, family_keys: Sequence[str] = ("table",)
) -> pd.Series:
    """Each comparison's α/m: m the comparisons of its family (``family_keys`` and test)
    with a p-value, as :func:`mdcr.scoring.significance.correct` corrects them."""
    keys = [k for k in family_keys if k in corrected] + ["test"]
    m = corrected.groupby(keys, dropna=False, sort=False)["p_value"].transform("count")
    return alpha / m.clip(lower=1)


def reachable(
    corrected: pd.DataFrame,
    alpha: float,
    permutations: int,
    family_keys: Sequence[str] = ("table",),
) -> pd.Series:
    """Whether each comparison's test can reach its family's α/m on its queries."""
    levels = family_levels(corrected, alpha, family_keys)
    smallest = [
        smallest_p_value(str(t), int(n), permutations)
        for t, n in zip(corrected["test"], corrected["n_queries"], strict=True)
    ]
    return pd.Series(np.asarray(smallest) <= levels.to_numpy(), index=corrected.index)


def tie_groups(
    corrected: pd.DataFrame,
    means: pd.DataFrame,
    cell_keys: Sequence[str],
    test: str,
    *,
    alpha: float,
    permutations: int,
) -> dict[tuple, str]:
    """Each (cell..., retriever)'s place beside its cell's best: ``best`` (the highest
    mean; equal means all best), ``separated`` (significantly worse than a best under ``test``
    after correction), ``tied`` (not significantly worse, where the test can reach the
    corrected level on the pair's queries: a finding), ``unresolved`` (not significantly
    worse, where it cannot: too few queries to tell).

    ``means``: ``cell_keys``, retriever, mean (the table's values). ``corrected``: the
    corrected pairwise comparisons of :func:`mdcr.scoring.significance.correct` (with
    ``table`` naming the family).
    """
    keys = list(cell_keys)
    first = corrected[corrected["test"] == test] if len(corrected) else corrected
    pairs: dict[tuple, tuple[bool, bool]] = {}
    if len(first):
        can = reachable(first, alpha, permutations)
        for r, ok in zip(first.to_dict("records"), can, strict=True):
            cell = tuple(r[k] for k in keys)
            a, b = r["retriever_a"], r["retriever_b"]
            worse = (b, a) if r["diff"] > 0 else (a, b) if r["diff"] < 0 else None
            for lower, upper in ((a, b), (b, a)):
                shown = bool(r["significant"]) and worse == (lower, upper)
                pairs[(*cell, upper, lower)] = (shown, bool(ok))
    out: dict[tuple, str] = {}
    valid = means.dropna(subset=["mean"])
    for cell, part in valid.groupby(keys, sort=True, dropna=False) if keys else [((), valid)]:
        cell = cell if isinstance(cell, tuple) else (cell,)
        top = part["mean"].max()  # means equal but for rounding are all best
        best = part.loc[part["mean"] >= top - 1e-12 * max(1.0, abs(top)), "retriever"].tolist()
        for name in part["retriever"]:
            if name in best:
                out[(*cell, name)] = BEST
                continue
            found = [pairs.get((*cell, b, name), (False, False)) for b in best]
            if any(sig for sig, _ in found):
                out[(*cell, name)] = SEPARATED
            elif all(ok for _, ok in found):
                out[(*cell, name)] = TIED
            else:
                out[(*cell, name)] = UNRESOLVED
    return out


def paired_test_power(effect: float, n: int, alpha: float) -> float:
    """The power of the two-sided paired t-test at level ``alpha`` on ``n`` pairs for a
    true standardised mean difference ``effect`` (mean / sd): the noncentral t."""
    from scipy import stats

    df = n - 1
    crit = stats.t.isf(alpha / 2, df)
    nc = effect * math.sqrt(n)
    lower = float(stats.nct.cdf(-crit, df, nc))  # the wrong tail: negligible, at times NaN
    return float(stats.nct.sf(crit, df, nc)) + (lower if math.isfinite(lower) else 0.0)


def minimum_detectable_effect(differences: np.ndarray, alpha: float, power: float = POWER) -> float:
    """The smallest true mean difference a two-sided paired test at level ``alpha``
    (already corrected) detects with ``power``: ``e · sd(differences)`` with ``e`` the
    standardised effect the paired t-test's exact power reaches ``power`` at
    (:func:`paired_test_power`). NaN for fewer than two pairs."""
    from scipy.optimize import brentq

    d = np.asarray(differences, dtype=np.float64)
    n = len(d)
    if n < 2:
        return math.nan
    high = 1.0
    while paired_test_power(high, n, alpha) < power:
        high *= 2
    effect = brentq(lambda e: paired_test_power(e, n, alpha) - power, 0.0, high, xtol=1e-12)
    return float(effect * np.std(d, ddof=1))
