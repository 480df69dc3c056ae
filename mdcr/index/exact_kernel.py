"""Compiled exact re-scoring for the dense search (numba), used when it is provably exact.

Every finite float16 value is an integer multiple of 2^-24, so the product of two is an
exact multiple of 2^-48 (and exact in float32 and float64). If ``sum |q_i x_i| < 2^5``,
which holds when ``|q| |x| < 32`` (Cauchy-Schwarz), every partial sum of a dot product is
an integer multiple of 2^-48 below 2^53 of them, so float64 holds it exactly: the float64
sum *is* the exact dot product, in any order. (A zero's sign is order-free too: a sum of
zeros is -0.0 only when every term is, and both sums start from +0.0.) A loop the compiler
may reassociate and vectorise therefore gives the same bits as numpy's pairwise sum in
:func:`mdcr.index.exact._dots`, only faster (about 2x per candidate, measured in
``scripts/bench_search.py``). Unit vectors (cosine, MiniLM-style encoders) always qualify;
larger norms, or a numba-less install, take the numpy path, with the same result bits.

Only the dot product may be reassociated (``fastmath`` flags ``reassoc`` and ``contract``,
never ``nsz`` or ``nnan``); the L2 form, the cut and the ordering are compiled without
them and follow the numpy path operation for operation.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# |q| |x| must stay below 2^5; 31 leaves room for the float32 rounding of the norms.
EXACT_NORM_PRODUCT = 31.0

try:
    import numba
except ImportError:  # pragma: no cover - numba comes with the faiss and bm25 extras
    numba = None  # type: ignore[assignment]


def compiled_rescoring(db: np.ndarray, q_norm_max: float, db_norm_max: float) -> bool:
    """Whether the compiled kernels give exact scores here: float16 vectors, numba present
    and ``|q| |x| < 32``."""
    return (
        numba is not None
        and db.dtype == np.float16
        and bool(q_norm_max * db_norm_max < EXACT_NORM_PRODUCT)
    )


def _dots(rows32: np.ndarray, owner: np.ndarray, q64: np.ndarray, out: np.ndarray) -> None:
    """``out[t]``: the exact dot product of float32 row ``t`` (float16 values) with
    ``q64[owner[t]]``, summed in float64 in whatever order the compiler likes."""
    for t in range(rows32.shape[0]):
        q = q64[owner[t]]
        acc = 0.0  # numpy's reduction starts from +0.0 too: all -0.0 terms sum to +0.0
        for j in range(rows32.shape[1]):
            acc += rows32[t, j] * q[j]
        out[t] = acc


def _select(
    approx: np.ndarray, cand: np.ndarray, exclude: np.ndarray, eps: np.ndarray, k: int,
    rows: np.ndarray, counts: np.ndarray,
) -> int:  # fmt: skip
    """Per query: its candidates without its own row, only those whose backend score is at
    least the k-th one minus ``2 eps`` when there are more than ``k`` (no other can reach
    the top k). Written to ``rows`` query after query, ``counts`` per query; returns the
    total."""
    at = 0
    width = cand.shape[1]
    for j in range(cand.shape[0]):
        own = -1  # where the query's own row is among its candidates
        for t in range(width):
            if cand[j, t] == exclude[j]:
                own = t
        m = width - (own >= 0)
        cut = -np.inf
        if m > k:  # the k-th backend score with the query's own row left out
            kth = approx[j, k] if 0 <= own < k else approx[j, k - 1]
            cut = np.float64(kth) - 2.0 * eps[j]
        first = at
        for t in range(width):
            if t != own and (m <= k or np.float64(approx[j, t]) >= cut):
                rows[at] = cand[j, t]
                at += 1
        counts[j] = at - first
    return at


def _rank(
    rows: np.ndarray, counts: np.ndarray, scores: np.ndarray, k: int, db_sq: np.ndarray,
    q_sq: np.ndarray, l2: bool, last: np.ndarray, eps: np.ndarray, check: bool,
    out_rows: np.ndarray, out_scores: np.ndarray, out_len: np.ndarray, widen: np.ndarray,
) -> None:  # fmt: skip
    """Per query: the L2 form of its exact scores when ``l2``, the top ``k`` by (score desc,
    row asc), and ``widen[j]`` when ``check`` and the k-th score is not above the last
    backend score plus ``eps`` (a tie may cross the window's edge)."""
    at = 0
    for j in range(len(counts)):
        m = counts[j]
        r = rows[at : at + m]
        sc = scores[at : at + m].copy()
        at += m
        if l2:
            for t in range(m):
                sc[t] = -(db_sq[r[t]] + q_sq[j] - 2.0 * sc[t])
        # The candidates come in the backend's order, which the exact scores change only
        # within rounding: an insertion sort by (score desc, row asc) has little to move.
        order_rows = r.copy()
        for t in range(1, m):
            s_t, r_t = sc[t], order_rows[t]
            u = t - 1
            while u >= 0 and (sc[u] < s_t or (sc[u] == s_t and order_rows[u] > r_t)):
                sc[u + 1] = sc[u]
                order_rows[u + 1] = order_rows[u]
                u -= 1
            sc[u + 1] = s_t
            order_rows[u + 1] = r_t
        top = min(k, m)
        out_rows[j, :top] = order_rows[:top]
        out_scores[j, :top] = sc[:top]
        out_len[j] = top
        widen[j] = check and top > 0 and not sc[top - 1] > np.float64(last[j]) + eps[j]


if numba is not None:
    _dots = numba.njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})(_dots)
    _select = numba.njit(nogil=True, cache=True)(_select)
    _rank = numba.njit(nogil=True, cache=True)(_rank)


def exact_dots(rows32: np.ndarray, owner: np.ndarray, q64: np.ndarray) -> np.ndarray:
    """Exact float64 scores of float32 rows (float16 values) against ``q64[owner]``; only
    where :func:`compiled_rescoring` holds."""
    out = np.empty(len(rows32), dtype=np.float64)
    _dots(np.ascontiguousarray(rows32), np.ascontiguousarray(owner, dtype=np.int64), q64, out)
    return out


def finish_queries(
    gather: Callable[[np.ndarray], np.ndarray],
    q64: np.ndarray,
    approx: np.ndarray,
    cand: np.ndarray,
    exclude: np.ndarray,
    eps: np.ndarray,
    k: int,
    db_sq: np.ndarray | None,
    q_sq: np.ndarray | None,
    check: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``exact_topk``'s per-query step for a block of queries, compiled: select the
    candidates, gather their float32 rows (``gather(rows)``), score and rank them. Returns
    (rows, scores, lengths, widen) with the top ``k`` of query ``j`` in ``[j, :lengths[j]]``."""
    nq = len(cand)
    approx = np.ascontiguousarray(approx, dtype=np.float32)
    cand = np.ascontiguousarray(cand, dtype=np.int64)
    exclude = np.ascontiguousarray(exclude, dtype=np.int64)
    eps = np.ascontiguousarray(eps, dtype=np.float64)
    rows = np.empty(cand.size, dtype=np.int64)
    counts = np.empty(nq, dtype=np.int64)
    total = _select(approx, cand, exclude, eps, k, rows, counts)
    rows = rows[:total]
    scores = exact_dots(gather(rows), np.repeat(np.arange(nq), counts), q64)
    out_rows = np.empty((nq, k), dtype=np.int64)
    out_scores = np.empty((nq, k), dtype=np.float64)
    out_len = np.empty(nq, dtype=np.int64)
    widen = np.empty(nq, dtype=np.bool_)
    empty = np.zeros(0, dtype=np.float64)
    l2 = db_sq is not None and q_sq is not None
    _rank(
        rows, counts, scores, k, empty if db_sq is None else db_sq,
        empty if q_sq is None else q_sq, l2,
        np.ascontiguousarray(approx[:, -1]), eps, check, out_rows, out_scores, out_len, widen,
    )  # fmt: skip
    return out_rows, out_scores, out_len, widen


def sentence_batches(docs: np.ndarray, offsets: np.ndarray, batch: int) -> list[np.ndarray]:
    """``docs`` in order, cut into runs of at most ``batch`` sentences (at least one doc)."""
    ends = np.cumsum(offsets[docs + 1] - offsets[docs])
    out, lo = [], 0
    while lo < len(docs):
        base = ends[lo - 1] if lo else 0
        hi = max(lo + 1, int(np.searchsorted(ends, base + max(1, batch), side="right")))
        out.append(docs[lo:hi])
        lo = hi
    return out


def sentence_rows(offsets: np.ndarray, part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sentence rows of query documents ``part`` (``offsets`` their sentence
    offsets), in order, and the position in ``part`` of each one's document."""
    starts, lens = offsets[part], offsets[part + 1] - offsets[part]
    first_of = np.cumsum(lens) - lens
    rows = np.repeat(starts, lens) + (np.arange(int(lens.sum())) - np.repeat(first_of, lens))
    return rows, np.repeat(np.arange(len(part)), lens)
