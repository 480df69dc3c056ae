"""Contrast measures of two retrievers on one query, to sort a setup's queries by: the
difference of a measure's stored values, and a rank correlation of the two top-k lists.

The rank correlation is Vigna's weighted Kendall's tau, τ_h: an exchange of the elements
ranked r and s (from 0) weighs 1/(r+1) + 1/(s+1) (additive hyperbolic weights), and the
value is the average of the index computed with the elements ranked by (x, y) and by
(y, x), as ``scipy.stats.weightedtau`` computes it with its defaults (S. Vigna, "A
weighted correlation index for rankings with ties", WWW 2015). It is taken over the union
of the two top-k lists, a paper missing from one list tied below that list's last rank,
as DiffIR builds its ``weightedtau`` measure (Jose, Nguyen, MacAvaney, Dalton, Yates,
"DiffIR: Exploring differences in ranking models' behavior", SIGIR 2021;
capreolus-ir/diffir, ``diffir/measure/unsupervised.py``). 1 is the same papers in the
same order; near 0 or below, the two lists share few papers, or not at their tops.

A setup has thousands of queries, so :func:`weighted_tau_many` evaluates the index for
all of them at once in numpy; ``tests/unit/explore/test_contrast.py`` checks it equal to
``scipy.stats.weightedtau`` query by query.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CONTRAST = "tau"  # the sort key of the rank correlation
CONTRAST_LABEL = "τ_h"
CONTRAST_SOURCE = (
    "τ_h@k: Vigna's weighted Kendall's tau (additive hyperbolic weights; S. Vigna, WWW 2015, "
    "as scipy.stats.weightedtau computes it) of the two top-k lists, over their union, a "
    "paper missing from one list tied below its last rank (DiffIR's weightedtau, Jose et "
    "al., SIGIR 2021). 1: the same papers in the same order; near 0 or below: little in "
    "common at the top."
)
_CHUNK = 2048  # queries per numpy block (memory: chunk x n x n floats)


def list_values(a: Sequence[str], b: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The union of two ranked lists and each list's values for it: minus the rank for a
    listed paper, minus (its length + 1) for a paper it does not list (tied last)."""
    union = list(dict.fromkeys([*a, *b]))
    pos_a = {p: i for i, p in enumerate(a)}
    pos_b = {p: i for i, p in enumerate(b)}
    x = np.array([-(pos_a[p] + 1) if p in pos_a else -(len(a) + 1) for p in union], float)
    y = np.array([-(pos_b[p] + 1) if p in pos_b else -(len(b) + 1) for p in union], float)
    return union, x, y


def weighted_tau(a: Sequence[str], b: Sequence[str]) -> float:
    """τ_h of two top-k lists (NaN when their union has fewer than two papers)."""
    return float(weighted_tau_many([a], [b])[0])


def weighted_tau_many(
    lists_a: Sequence[Sequence[str]], lists_b: Sequence[Sequence[str]]
) -> np.ndarray:
    """τ_h of each pair of top-k lists (``lists_a[i]`` against ``lists_b[i]``)."""
    if len(lists_a) != len(lists_b):
        raise ValueError(f"{len(lists_a)} lists against {len(lists_b)}; give pairs")
    out = np.full(len(lists_a), np.nan)
    for start in range(0, len(lists_a), _CHUNK):
        stop = min(start + _CHUNK, len(lists_a))
        out[start:stop] = _block(lists_a[start:stop], lists_b[start:stop])
    return out


def _block(lists_a: Sequence[Sequence[str]], lists_b: Sequence[Sequence[str]]) -> np.ndarray:
    """τ_h of a block of pairs, padded to the longest union (masked)."""
    pairs = [list_values(a, b)[1:] for a, b in zip(lists_a, lists_b, strict=True)]
    n = max((len(x) for x, _ in pairs), default=0)
    if n < 2:
        return np.full(len(pairs), np.nan)
    x = np.zeros((len(pairs), n))
    y = np.zeros((len(pairs), n))
    valid = np.zeros((len(pairs), n), dtype=bool)
    for i, (xi, yi) in enumerate(pairs):
        x[i, : len(xi)], y[i, : len(yi)], valid[i, : len(xi)] = xi, yi, True
    both = valid[:, :, None] & valid[:, None, :]
    upper = np.triu(np.ones((n, n), dtype=bool), 1)[None] & both  # pairs i < j
    sx = np.sign(x[:, :, None] - x[:, None, :])
    sy = np.sign(y[:, :, None] - y[:, None, :])
    concordance = sx * sy
    taus = [_tau(_weights(x, y, valid), concordance, sx, sy, upper) for x, y in ((x, y), (y, x))]
    return (taus[0] + taus[1]) / 2


def _weights(first: np.ndarray, second: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Each element's hyperbolic weight 1/(r+1), r its 0-based rank in decreasing
    lexicographic order of (first, second): the elements placed before it. (No two
    papers of a union tie in both lists, so the order is strict.)"""
    before = (first[:, None, :] > first[:, :, None]) | (
        (first[:, None, :] == first[:, :, None]) & (second[:, None, :] > second[:, :, None])
    )
    rank = (before & valid[:, None, :]).sum(axis=2)
    return 1.0 / (rank + 1.0)


def _tau(
    w: np.ndarray, concordance: np.ndarray, sx: np.ndarray, sy: np.ndarray, upper: np.ndarray
) -> np.ndarray:
    weight = (w[:, :, None] + w[:, None, :]) * upper
    num = (weight * concordance).sum(axis=(1, 2))
    dx = (weight * (sx != 0)).sum(axis=(1, 2))
    dy = (weight * (sy != 0)).sum(axis=(1, 2))
    den = np.sqrt(dx * dy)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
