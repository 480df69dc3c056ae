"""The exact search's host operations: float64 dot products of (query, pool row) pairs with
numpy's bits, compiled (numba) where that is provably the same, and the compiled order of
each query's candidates.

A score is defined by numpy: the products of a query and a pool row (float16 x float16
products are exact in float32), summed in float64 by numpy's pairwise sum over the row
(:func:`_dots`). :class:`HostScorer` computes it, the host's
:class:`~mdcr.index.exact.PairScorer`.

Every finite float16 value is an integer multiple of 2^-24, so the product of two is an
exact multiple of 2^-48 (and exact in float32 and float64). If ``sum |q_i x_i| < 2^5``,
which holds when ``|q| |x| < 32`` (Cauchy-Schwarz), every partial sum of a dot product is
an integer multiple of 2^-48 below 2^53 of them, so float64 holds it exactly: the float64
sum *is* the exact dot product, in any order. (A zero's sign is order-free too: a sum of
zeros is -0.0 only when every term is, and both sums start from +0.0.) A loop the compiler
may reassociate and vectorise therefore gives numpy's bits, only faster (about 2x per
candidate, measured in ``scripts/bench_search.py``). Unit vectors (cosine, MiniLM-style
encoders) always qualify; larger norms, or a numba-less install, take numpy's sums. Only
the dot product may be reassociated (``fastmath`` flags ``reassoc`` and ``contract``, never
``nsz`` or ``nnan``).

:func:`rank_groups` orders each query's candidates by (score desc, id asc): an insertion
sort where they come nearly sorted (in the backend's order, which the exact scores change
only within rounding), else two stable merge sorts; without numba, numpy runs the merge
sorts.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

# |q| |x| must stay below 2^5; 31 leaves room for the float32 rounding of the norms.
EXACT_NORM_PRODUCT = 31.0
COMPILED_BLOCK = 2  # queries whose candidate rows are gathered at once: they stay in the caches

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


def _dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot products in float64, the same bits for the same pair of rows.

    float16 x float16 products are exact in float32 (22 significant bits), so they are
    formed in float32 and summed in float64 (numpy's pairwise sum over each contiguous
    row); other dtypes are multiplied in float64.
    """
    if a.dtype == np.float16 and b.dtype == np.float16:
        prod = a.astype(np.float32)
        prod *= b
        return np.add.reduce(prod, axis=-1, dtype=np.float64)
    prod64 = a.astype(np.float64)
    prod64 *= b
    return np.add.reduce(prod64, axis=-1)


def _compiled_dots(rows32: np.ndarray, owner: np.ndarray, q64: np.ndarray, out: np.ndarray) -> None:
    """``out[t]``: the exact dot product of float32 row ``t`` (float16 values) with
    ``q64[owner[t]]``, summed in float64 in whatever order the compiler likes."""
    for t in range(rows32.shape[0]):
        q = q64[owner[t]]
        acc = 0.0  # numpy's reduction starts from +0.0 too: all -0.0 terms sum to +0.0
        for j in range(rows32.shape[1]):
            acc += rows32[t, j] * q[j]
        out[t] = acc


def _ordered(ids: np.ndarray, scores: np.ndarray, lo: int, hi: int, adaptive: bool) -> np.ndarray:
    """Positions ``lo`` to ``hi - 1`` by (score desc, id asc), equal keys in place order;
    -0.0 and +0.0 tie. ``adaptive``: first an insertion sort, given up (for the merge sorts)
    once it has moved more than a few entries per candidate."""
    m = hi - lo
    if adaptive:
        sc, rr, pos = scores[lo:hi].copy(), ids[lo:hi].copy(), np.arange(lo, hi)
        budget, moved, t = 4 * m + 64, 0, 1
        while t < m and moved <= budget:
            s_t, r_t, p_t = sc[t], rr[t], pos[t]
            u = t - 1
            while u >= 0 and (sc[u] < s_t or (sc[u] == s_t and rr[u] > r_t)):
                sc[u + 1], rr[u + 1], pos[u + 1] = sc[u], rr[u], pos[u]
                u -= 1
            sc[u + 1], rr[u + 1], pos[u + 1] = s_t, r_t, p_t
            moved += t - 1 - u
            t += 1
        if t >= m:
            return pos
    by_id = np.argsort(ids[lo:hi], kind="mergesort")
    by_score = np.argsort(-scores[lo:hi][by_id], kind="mergesort")
    return lo + by_id[by_score]


def _firsts(ids: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """``pos`` without the positions whose id an earlier one has."""
    seq = ids[pos]
    by = np.argsort(seq, kind="mergesort")
    first = np.ones(len(seq), dtype=np.bool_)
    first[1:] = seq[by][1:] != seq[by][:-1]
    keep = np.empty(len(seq), dtype=np.bool_)
    keep[by] = first
    return pos[keep]


def _rank_groups(
    ids: np.ndarray, scores: np.ndarray, starts: np.ndarray, k: int, dedup: bool,
    adaptive: bool, order: np.ndarray, lengths: np.ndarray,
) -> int:  # fmt: skip
    """Per group ``g`` (positions ``starts[g]`` to ``starts[g + 1] - 1``): its first ``k``
    positions by (score desc, id asc), with ``dedup`` only each id's first; written one
    group after the other to ``order``, how many to ``lengths``. Returns the total."""
    at = 0
    for g in range(len(starts) - 1):
        pos = _ordered(ids, scores, starts[g], starts[g + 1], adaptive)
        if dedup:
            pos = _firsts(ids, pos)
        top = min(k, len(pos))
        order[at : at + top] = pos[:top]
        lengths[g] = top
        at += top
    return at


if numba is not None:
    _compiled_dots = numba.njit(nogil=True, cache=True, fastmath={"reassoc", "contract"})(
        _compiled_dots
    )
    _ordered = numba.njit(nogil=True, cache=True)(_ordered)
    _firsts = numba.njit(nogil=True, cache=True)(_firsts)
    _rank_groups = numba.njit(nogil=True, cache=True)(_rank_groups)


def exact_dots(rows32: np.ndarray, owner: np.ndarray, q64: np.ndarray) -> np.ndarray:
    """Exact float64 scores of float32 rows (float16 values) against ``q64[owner]``; only
    where :func:`compiled_rescoring` holds."""
    out = np.empty(len(rows32), dtype=np.float64)
    _compiled_dots(
        np.ascontiguousarray(rows32), np.ascontiguousarray(owner, dtype=np.int64), q64, out
    )
    return out


def rank_groups(
    ids: np.ndarray, scores: np.ndarray, starts: np.ndarray, k: int, *, dedup: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The top ``k`` of each group of candidates (group ``g``: positions ``starts[g]`` to
    ``starts[g + 1] - 1`` of ``ids`` and float64 ``scores``) by (score desc, id asc), with
    ``dedup`` each id's best only (a document's best sentence pair: of equal scores, the
    first). Returns the positions, group after group, and the length of each group's."""
    order = np.empty(len(ids), dtype=np.int64)
    lengths = np.empty(len(starts) - 1, dtype=np.int64)
    total = _rank_groups(
        np.ascontiguousarray(ids, dtype=np.int64), np.ascontiguousarray(scores),
        np.ascontiguousarray(starts, dtype=np.int64), k, dedup, numba is not None, order,
        lengths,
    )  # fmt: skip
    return order[:total], lengths


class _Rows:
    """Gathers pool rows as float32 for the exact re-scoring. float16 values convert to
    float32 exactly, so every source gives the same bits. Fastest first: torch's
    ``index_select`` on the float16 rows plus its conversion; the backend's own float32
    copy (``backend.vectors32``: Faiss on the CPU); else numpy on the float16 rows. Rows
    land in a buffer kept per thread (fresh arrays of this size cost more in page faults
    than the gather itself), so a result is valid until the thread's next call.
    """

    def __init__(self, db: np.ndarray, vectors32: np.ndarray | None) -> None:
        self.db = db
        self.vectors32 = vectors32
        self._local = threading.local()
        self._db16: Any = None
        if db.dtype == np.float16 and db.flags.c_contiguous and db.flags.writeable:
            try:
                import torch
            except ImportError:
                pass
            else:
                self._db16 = torch.from_numpy(db)

    def float32(self, rows: np.ndarray) -> np.ndarray:
        m, dim = len(rows), self.db.shape[1]
        if self._db16 is not None:
            import torch

            b16, b32 = getattr(self._local, "torch", (None, None))
            if b16 is None or b32 is None or len(b16) < m:
                b16 = torch.empty((m, dim), dtype=torch.float16)
                b32 = torch.empty((m, dim), dtype=torch.float32)
                self._local.torch = (b16, b32)
            torch.index_select(self._db16, 0, torch.from_numpy(rows), out=b16[:m])
            b32[:m].copy_(b16[:m])
            return np.asarray(b32[:m].numpy())
        buf = getattr(self._local, "numpy", None)
        if buf is None or len(buf) < m:
            buf = self._local.numpy = np.empty((m, dim), dtype=np.float32)
        if self.vectors32 is not None:
            return np.take(self.vectors32, rows, axis=0, out=buf[:m])
        out: np.ndarray = buf[:m]
        out[...] = self.db[rows]
        return out


class HostScorer:
    """Exact dot products of (query, pool row) pairs on the host, on the caller's threads:
    compiled where :func:`compiled_rescoring` holds (``compiled``), else numpy's sums.

    ``db_sq``: the pool's squared norms (l2), as :func:`_dots` computes them.
    """

    parallel = True

    def __init__(
        self,
        db: np.ndarray,
        queries: np.ndarray,
        vectors32: np.ndarray | None,
        *,
        compiled: bool,
        db_sq: np.ndarray | None,
    ) -> None:
        self.rows = _Rows(db, vectors32)
        self.db = db
        # float16 queries convert to float32 exactly: numpy's products are formed there.
        self.q_src = np.asarray(queries, dtype=np.float32) if db.dtype == np.float16 else queries
        self.q64 = np.asarray(queries, dtype=np.float64)
        self.compiled = compiled
        self.db_sq = db_sq
        self.extra: dict[str, int] = {}

    def pair_dots(
        self, qrows: np.ndarray, owner: np.ndarray, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """See :class:`~mdcr.index.exact.PairScorer`; the compiled kernel takes the rows
        of two queries at a time (they stay in the caches), numpy's sums one query's."""
        out = np.empty(len(rows), dtype=np.float64)
        starts = np.searchsorted(owner, np.arange(len(qrows) + 1))
        step = COMPILED_BLOCK if self.compiled else 1
        for j in range(0, len(qrows), step):
            at = slice(int(starts[j]), int(starts[min(j + step, len(qrows))]))
            if at.start == at.stop:
                continue
            if self.compiled:
                gathered = self.rows.float32(rows[at])
                out[at] = exact_dots(gathered, qrows[owner[at]], self.q64)
            else:
                out[at] = self._numpy_dots(int(qrows[j]), rows[at])
        return out, None if self.db_sq is None else self.db_sq[rows]

    def _numpy_dots(self, qi: int, rows: np.ndarray) -> np.ndarray:
        """Query ``qi`` against pool ``rows``: :func:`_dots`'s bits (from gathered float32
        rows when the pool is float16: the same values)."""
        q = self.q_src[qi]
        if self.db.dtype != np.float16 or q.dtype != np.float32:
            return _dots(np.asarray(self.db[rows]), q[None, :])
        prod = self.rows.float32(np.asarray(rows, dtype=np.int64))
        prod *= q
        return np.add.reduce(prod, axis=-1, dtype=np.float64)


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
