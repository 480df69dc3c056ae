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

A setup has thousands of queries, so :func:`weighted_tau_codes` evaluates the index for
all of them at once in numpy, in time linear in k but for the pairs of papers both lists
hold (see there); ``tests/unit/explore/test_contrast.py`` checks it equal to
``scipy.stats.weightedtau`` query by query, for k from 1 to 500.
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
_BLOCK_CELLS = 1 << 20  # list slots (rows x both lists' lengths) per numpy block
_PAIR_CELLS = 1 << 22  # shared-paper pairs per block of the pairwise count


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
    -1 for no paper (a list's papers are distinct; a row's papers are read in column order,
    skipping the -1s).

    The index is a sum over pairs of elements of the union; a pair's weight is w_i + w_j
    and its terms are symmetric, so it is the sum over the elements of w_i times the
    element's row sum over its partners. With the union built as :func:`list_values`
    builds it (a paper of one list only tied last in the other), those row sums are counts
    along the two lists: cumulative sums, linear in k. Only one count is pairwise: among
    the papers both lists hold, the pairs the two lists order differently
    (:func:`_shared_below`), quadratic in the number of shared papers."""
    a, b = _packed(np.asarray(a)), _packed(np.asarray(b))
    out = np.full(len(a), np.nan)
    rows = max(1, _BLOCK_CELLS // max(1, a.shape[1] + b.shape[1]))
    for start in range(0, len(a), rows):
        stop = min(start + rows, len(a))
        out[start:stop] = _codes_block(a[start:stop], b[start:stop])
    return out


def _packed(codes: np.ndarray) -> np.ndarray:
    """Each row's codes (>= 0) moved to its front in their order, the -1s after them."""
    order = np.argsort(codes < 0, axis=1, kind="stable")
    return np.take_along_axis(codes, order, axis=1)


def _before(mask: np.ndarray) -> np.ndarray:
    """For each slot, how many slots before it in its row are set."""
    counts = np.cumsum(mask, axis=1)
    return counts - mask


def _codes_block(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """τ_h of a block of packed rows.

    Slots: a's slot s holds the paper a ranks s (from 0), b's slot t the paper b ranks t.
    The union's elements are S (in both lists), A (a only) and B (b only); x is minus the
    rank in a (B tied below a's last), y minus the rank in b (A tied below b's last). For
    an element i, c_i = sum over j of sign(x_i - x_j) sign(y_i - y_j), and the untied
    partners in x and in y:

    - i in A: c_i = -(S below i in a - S above i in a) - |B|; untied n-1 in x, n-|A| in y;
    - i in B: c_i = -(S below i in b - S above i in b) - |A|; untied n-|B| in x, n-1 in y;
    - i in S: c_i = (A below - A above, in a) + (B below - B above, in b) + (|S| - 1 - 2 D_i),
      D_i its partners in S that the two lists order the other way; untied n-1 in both.

    The weights follow the rank of each element in decreasing (x, y) order: a's slot s,
    then B in b's order; and in decreasing (y, x) order: b's slot t, then A in a's order.
    """
    ka = a.shape[1]
    valid_a, valid_b = a >= 0, b >= 0
    len_a, len_b = valid_a.sum(axis=1), valid_b.sum(axis=1)
    # Each a-slot's paper found in b: sort the two lists' codes together (stable, so at a
    # code both hold, a's slot comes first and b's next).
    joined = np.concatenate([a, b], axis=1)
    order = np.argsort(joined, axis=1, kind="stable")
    ordered = np.take_along_axis(joined, order, axis=1)
    row, at = np.nonzero((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0))
    slot_a, slot_b = order[row, at], order[row, at + 1] - ka
    in_b = np.full(a.shape, -1, dtype=np.int64)  # a-slot -> its b-slot, -1: not in b
    in_b[row, slot_a] = slot_b
    shared_a = in_b >= 0
    shared_b = np.zeros(b.shape, dtype=bool)
    shared_b[row, slot_b] = True
    only_a, only_b = valid_a & ~shared_a, valid_b & ~shared_b

    n_s = shared_a.sum(axis=1)[:, None]
    n_a, n_b = len_a[:, None] - n_s, len_b[:, None] - n_s
    n = len_a[:, None] + n_b
    s_above_a, a_above_a = _before(shared_a), _before(only_a)
    s_above_b, b_above_b = _before(shared_b), _before(only_b)
    s_below_a = n_s - s_above_a - shared_a
    a_below_a = n_a - a_above_a - only_a
    s_below_b = n_s - s_above_b - shared_b
    b_below_b = n_b - b_above_b - only_b

    t = np.where(shared_a, in_b, 0)  # the b-slot of each shared a-slot
    b_side = np.take_along_axis(b_below_b - b_above_b, t, axis=1)
    s_above_in_b = np.take_along_axis(s_above_b, t, axis=1)
    discordant = s_above_a + s_above_in_b - 2 * _shared_below(in_b, shared_a, s_above_a)
    c_shared = (a_below_a - a_above_a) + b_side + (n_s - 1 - 2 * discordant)
    c_a = np.where(shared_a, c_shared, np.where(only_a, -(s_below_a - s_above_a) - n_b, 0))
    c_b = np.where(only_b, -(s_below_b - s_above_b) - n_a, 0)
    ux_a, ux_b = np.where(valid_a, n - 1, 0), np.where(only_b, n - n_b, 0)
    uy_a = np.where(shared_a, n - 1, np.where(only_a, n - n_a, 0))
    uy_b = np.where(only_b, n - 1, 0)

    rank_a = np.arange(ka)[None, :]
    rank_b = np.arange(b.shape[1])[None, :]
    weights = (
        (  # decreasing (x, y): a's order, then B in b's order
            np.where(valid_a, 1.0 / (rank_a + 1.0), 0.0),
            np.where(only_b, 1.0 / (len_a[:, None] + b_above_b + 1.0), 0.0),
        ),
        (  # decreasing (y, x): b's order, then A in a's order
            np.where(
                shared_a,
                1.0 / (t + 1.0),
                np.where(only_a, 1.0 / (len_b[:, None] + a_above_a + 1.0), 0.0),
            ),
            np.where(only_b, 1.0 / (rank_b + 1.0), 0.0),
        ),
    )
    taus = []
    for w_a, w_b in weights:
        num = (w_a * c_a).sum(axis=1) + (w_b * c_b).sum(axis=1)
        den_x = (w_a * ux_a).sum(axis=1) + (w_b * ux_b).sum(axis=1)
        den_y = (w_a * uy_a).sum(axis=1) + (w_b * uy_b).sum(axis=1)
        den = np.sqrt(den_x * den_y)
        with np.errstate(invalid="ignore", divide="ignore"):
            taus.append(np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan))
    return (taus[0] + taus[1]) / 2


def _shared_below(in_b: np.ndarray, shared_a: np.ndarray, s_above_a: np.ndarray) -> np.ndarray:
    """For each shared a-slot, the shared papers above it in both lists (0 elsewhere).

    The shared papers of a row, in a's order, with their b-slots, are compared pair by
    pair; rows are taken in order of their number of shared papers, in blocks of at most
    :data:`_PAIR_CELLS` pairs."""
    counts = shared_a.sum(axis=1)
    slots = _packed(np.where(shared_a, in_b, -1))  # b-slots of the shared, in a's order
    below = np.zeros(in_b.shape, dtype=np.int64)  # by position among the shared
    by_count = np.argsort(counts, kind="stable")
    start = int(np.searchsorted(counts[by_count], 2))  # fewer than two: nothing to count
    while start < len(by_count):
        take = by_count[start : start + max(1, _PAIR_CELLS // int(counts[by_count[start]]) ** 2)]
        m = int(counts[take].max())
        take = take[: max(1, _PAIR_CELLS // (m * m))]  # the largest rows come last
        m = int(counts[take].max())
        s = slots[take, :m]
        earlier = np.tri(m, m, -1, dtype=bool)[None, :, :]  # column j before row i
        lower = (s[:, None, :] < s[:, :, None]) & (s[:, None, :] >= 0) & earlier
        below[take, :m] = lower.sum(axis=2)
        start += len(take)
    return np.where(shared_a, np.take_along_axis(below, s_above_a, axis=1), 0)
