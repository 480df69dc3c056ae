"""Paired significance tests between retrievers, per query, with multiple-comparison control.

Two tests, both two-sided, on the per-query values two retrievers got on the same queries:

- ``fisher``: Fisher's randomization test (Smucker et al., CIKM 2007), the test ranx's
  ``compare`` uses by default. Under the null the two systems' scores of a query are
  exchangeable, so each permutation swaps them per query (flips the sign of the paired
  difference). ranx's own implementation seeds numba's generator outside its parallel loop,
  so its p-values change from run to run and with the thread count (measured); this one
  draws permutations from a seeded NumPy generator and gives the same p-value everywhere.
  With 2**n <= n_permutations it enumerates all sign flips (an exact test). Sampled
  p-values are (hits + 1) / (n_permutations + 1), never 0.
- ``student``: the paired t-test, ranx's ``paired_student_t_test`` (scipy's ttest_rel).

Families: all the comparisons shown in one table are one family, corrected together with
Holm's step-down method (default) or Bonferroni.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mdcr.core.errors import ConfigError, require

STAT_TESTS = ("fisher", "student")
CORRECTIONS = ("holm", "bonferroni")
_CHUNK = 1024


def fisher_randomization_test(
    a: np.ndarray, b: np.ndarray, n_permutations: int = 10000, seed: int = 42
) -> float:
    """Two-sided p-value of Fisher's paired randomization test on the mean difference."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return float(fisher_p_values(d.reshape(1, -1), n_permutations, seed)[0])


def fisher_p_values(
    differences: np.ndarray, n_permutations: int = 10000, seed: int = 42
) -> np.ndarray:
    """:func:`fisher_randomization_test` of every row of ``differences`` (D, n): each row
    the paired differences of one data set, all tested with the same sign flips (the ones
    one call with ``seed`` draws), so row d is what that data set alone gives."""
    d = np.atleast_2d(np.asarray(differences, dtype=np.float64))
    n = d.shape[1]
    if n == 0:
        return np.full(d.shape[0], np.nan)
    observed = np.abs(d.mean(axis=1))
    threshold = observed - 1e-12 * np.maximum(1.0, observed)
    if n <= 20 and 2**n <= n_permutations:
        # Exact: every sign vector (including the identity) once.
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        means = np.abs(signs @ d.T) / n
        return np.mean(means >= threshold, axis=0)
    rng = np.random.default_rng(seed)
    total = d.sum(axis=1)
    hits = np.zeros(d.shape[0], dtype=np.int64)
    done = 0
    while done < n_permutations:
        c = min(_CHUNK, n_permutations - done)
        # Fair coin flips per query, 8 from each random byte.
        raw = rng.integers(0, 256, size=(c, (n + 7) // 8), dtype=np.uint8)
        flips = np.unpackbits(raw, axis=1, count=n).astype(np.float64)
        # Flipping a subset S changes the sum to total - 2 * sum(d[S]).
        means = np.abs(total - 2.0 * (flips @ d.T)) / n
        hits += np.count_nonzero(means >= threshold, axis=0)
        done += c
    return (hits + 1) / (n_permutations + 1)


def paired_t_test(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of the paired t-test (ranx's, i.e. scipy's ttest_rel).

    Identical samples (every difference 0) give 1.0; fewer than two pairs give NaN.
    """
    require("ranx")
    from ranx.statistical_tests import paired_student_t_test

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if len(a) < 2:
        return float("nan")
    d = a - b
    if np.all(d == d[0]):
        return 1.0 if d[0] == 0 else 0.0
    p, _ = paired_student_t_test(a, b, max_p=1.0)
    return float(p)


def holm(p: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values; NaN entries stay NaN and do not count."""
    p = np.asarray(p, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    m = len(valid)
    if m == 0:
        return out
    order = valid[np.argsort(p[valid], kind="stable")]
    stepped = (m - np.arange(m)) * p[order]
    out[order] = np.minimum(1.0, np.maximum.accumulate(stepped))
    return out


def bonferroni(p: Sequence[float] | np.ndarray) -> np.ndarray:
    """Bonferroni adjusted p-values; NaN entries stay NaN and do not count."""
    p = np.asarray(p, dtype=np.float64)
    m = int(np.count_nonzero(~np.isnan(p)))
    return np.minimum(1.0, p * m)


def adjust(p: Sequence[float] | np.ndarray, method: str) -> np.ndarray:
    if method == "holm":
        return holm(p)
    if method == "bonferroni":
        return bonferroni(p)
    raise ConfigError(f"unknown correction '{method}'; valid: {', '.join(CORRECTIONS)}")


def pairwise_tests(
    units: pd.DataFrame,
    cell_keys: Sequence[str],
    retrievers: Sequence[str],
    tests: Sequence[str] = STAT_TESTS,
    n_permutations: int = 10000,
    seed: int = 42,
) -> pd.DataFrame:
    """Every pair of ``retrievers`` (in the given order) in every cell, with every test.

    ``units`` has the ``cell_keys`` columns (e.g. size and metric), retriever, query_id and
    value. Pairs are compared on the queries both retrievers have in the cell. Returns the
    cell keys, retriever_a, retriever_b, n_queries, mean_a, mean_b, diff (mean_a - mean_b),
    direction, test, p_value.
    """
    for t in tests:
        if t not in STAT_TESTS:
            raise ConfigError(f"unknown stat test '{t}'; valid: {', '.join(STAT_TESTS)}")
    keys = list(cell_keys)
    rows = []
    for cell, frame in units.groupby(keys, dropna=False, sort=True) if keys else [((), units)]:
        cell = cell if isinstance(cell, tuple) else (cell,)
        series = {
            r: g.set_index("query_id")["value"] for r, g in frame.groupby("retriever", sort=False)
        }
        present = [r for r in retrievers if r in series]
        for ra, rb in itertools.combinations(present, 2):
            joined = pd.concat([series[ra], series[rb]], axis=1, join="inner").sort_index()
            a = joined.iloc[:, 0].to_numpy(dtype=np.float64)
            b = joined.iloc[:, 1].to_numpy(dtype=np.float64)
            diff = float(a.mean() - b.mean()) if len(a) else float("nan")
            direction = ">" if diff > 0 else "<" if diff < 0 else "="
            base = dict(zip(keys, cell, strict=True))
            base.update(
                retriever_a=ra,
                retriever_b=rb,
                n_queries=len(a),
                mean_a=float(a.mean()) if len(a) else float("nan"),
                mean_b=float(b.mean()) if len(b) else float("nan"),
                diff=diff,
                direction=direction,
            )
            for t in tests:
                p = (
                    fisher_randomization_test(a, b, n_permutations, seed)
                    if t == "fisher"
                    else paired_t_test(a, b)
                )
                rows.append({**base, "test": t, "p_value": p})
    cols = [
        *keys,
        "retriever_a",
        "retriever_b",
        "n_queries",
        "mean_a",
        "mean_b",
        "diff",
        "direction",
        "test",
        "p_value",
    ]
    return pd.DataFrame(rows, columns=cols)


def correct(
    comparisons: pd.DataFrame, family_keys: Sequence[str], method: str, alpha: float
) -> pd.DataFrame:
    """Add p_adjusted and significant, correcting within each family and test."""
    out = comparisons.copy()
    out["correction"] = method
    out["p_adjusted"] = np.nan
    if out.empty:
        out["significant"] = pd.Series(dtype=bool)
        return out
    for _, group in out.groupby([*family_keys, "test"], dropna=False, sort=False):
        out.loc[group.index, "p_adjusted"] = adjust(group["p_value"].to_numpy(), method)
    out["significant"] = (out["p_adjusted"] <= alpha).fillna(False).astype(bool)
    return out


def winner_letters(
    corrected: pd.DataFrame, cell_keys: Sequence[str], letters: dict[str, str], test: str
) -> dict[tuple, str]:
    """For each (cell..., retriever): the letters of the retrievers it beats significantly."""
    marks: dict[tuple, list[str]] = {}
    sig = corrected[(corrected["test"] == test) & corrected["significant"]]
    for r in sig.to_dict("records"):
        cell = tuple(r[k] for k in cell_keys)
        if r["diff"] > 0:
            win, lose = r["retriever_a"], r["retriever_b"]
        elif r["diff"] < 0:
            win, lose = r["retriever_b"], r["retriever_a"]
        else:
            continue
        marks.setdefault((*cell, win), []).append(letters[lose])
    return {k: "".join(sorted(v)) for k, v in marks.items()}


def summary_line(corrected: pd.DataFrame, test: str) -> str:
    """'k of N comparisons significant' for one test."""
    sub = corrected[corrected["test"] == test]
    n = int(sub["p_value"].notna().sum())
    k = int(sub["significant"].sum())
    return f"{k} of {n} comparisons significant"
