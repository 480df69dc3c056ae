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
    codes: dict[str, int] = {}
    width = max((len(x) for x in [*lists_a, *lists_b]), default=0)
    a = np.full((len(lists_a), width), -1, dtype=np.int64)
    b = np.full((len(lists_b), width), -1, dtype=np.int64)
    for out, lists in ((a, lists_a), (b, lists_b)):
        for i, papers in enumerate(lists):
            out[i, : len(papers)] = [codes.setdefault(p, len(codes)) for p in papers]
    return weighted_tau_codes(a, b)


def weighted_tau_codes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """τ_h of each pair of rows of ``a`` and ``b``: papers as integer codes in rank order,
    -1 after a list's end (a list's papers are distinct)."""
    out = np.full(len(a), np.nan)
    for start in range(0, len(a), _CHUNK):
        stop = min(start + _CHUNK, len(a))
        out[start:stop] = _codes_block(a[start:stop], b[start:stop])
    return out


def _codes_block(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The union of each pair of lists, as :func:`list_values` builds it, for a block."""
    valid_a, valid_b = a >= 0, b >= 0
    len_a, len_b = valid_a.sum(axis=1), valid_b.sum(axis=1)
    match = (a[:, :, None] == b[:, None, :]) & valid_a[:, :, None] & valid_b[:, None, :]
    in_b, pos_b = match.any(axis=2), match.argmax(axis=2)
    only_b = valid_b & ~match.any(axis=1)
    ranks_a = np.arange(1, a.shape[1] + 1)[None, :]
    ranks_b = np.arange(1, b.shape[1] + 1)[None, :]
    x = np.concatenate(
        [np.broadcast_to(-ranks_a, a.shape), np.broadcast_to(-(len_a + 1)[:, None], b.shape)],
        axis=1,
    ).astype(float)
    y = np.concatenate(
        [np.where(in_b, -(pos_b + 1), -(len_b + 1)[:, None]), np.broadcast_to(-ranks_b, b.shape)],
        axis=1,
    ).astype(float)
    valid = np.concatenate([valid_a, only_b], axis=1)
    return _tau_block(x, y, valid)


def _tau_block(x: np.ndarray, y: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """τ_h of each row's elements where ``valid`` (NaN with fewer than two).

    A pair's weight is w_i + w_j and its terms are symmetric, so a sum over the pairs is
    the sum over the elements of w_i times the element's row sum over its partners: the
    row sums do not depend on the ranking the weights come from."""
    both = valid[:, :, None] & valid[:, None, :]  # the diagonal's signs are 0
    sx = np.sign(x[:, :, None] - x[:, None, :])
    sy = np.sign(y[:, :, None] - y[:, None, :])
    concordant = (sx * sy * both).sum(axis=2)
    untied_x = ((sx != 0) & both).sum(axis=2)
    untied_y = ((sy != 0) & both).sum(axis=2)
    taus = []
    for first, second in ((x, y), (y, x)):
        w = _weights(first, second, valid)
        num = (w * concordant).sum(axis=1)
        den = np.sqrt((w * untied_x).sum(axis=1) * (w * untied_y).sum(axis=1))
        with np.errstate(invalid="ignore", divide="ignore"):
            taus.append(np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan))
    return (taus[0] + taus[1]) / 2


def _weights(first: np.ndarray, second: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Each element's hyperbolic weight 1/(r+1), r its 0-based rank in decreasing
    lexicographic order of (first, second), 0 for an element not ``valid``. (No two papers
    of a union tie in both lists, so the order is strict.)"""
    last = np.where(valid, 0.0, np.inf)  # elements not valid sort after the others
    order = np.lexsort((last - second, last - first), axis=-1)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(first.shape[1])[None, :], axis=1)
    return np.where(valid, 1.0 / (rank + 1.0), 0.0)
