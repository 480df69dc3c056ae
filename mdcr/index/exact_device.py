"""Exact top-k where the vectors are: candidates re-scored and ranked on the torch backend's
device, only each query's final top k (rows and float64 scores) copied back.

The host path (:mod:`mdcr.index.exact`) defines a score: the float16 products of a query
and a pool row, formed exactly, summed in float64 by numpy's pairwise sum. This module
gives the same bits on the device, by an exactness argument rather than by numpy's order:

- A float16 x float16 product is exact in float64 (22 significant bits).
- Let ``G`` be a power of two dividing every product of a pair (the smallest of their
  lowest set bits; ``lowbit(x_i q_i) = lowbit(x_i) lowbit(q_i)``) and ``A = sum |p_i|``.
  Every partial sum, in any order, is a multiple of ``G`` of magnitude at most ``A``; if
  ``A < 2^53 G``, each is exact in float64, so any summation order (numpy's pairwise
  sum, a torch reduction on a GPU) gives the exact dot product: the same bits.
- ``|q| |x| < 32`` implies it for every pair (``G >= 2^-48``, ``A <= |q| |x|``): the
  host's condition for its compiled kernel, met by unit vectors, so no pair is checked.
  Otherwise every pair is checked on the device (``A`` as the float64 sum of ``|p_i|``
  enlarged by ``1 + 2^-30`` to cover that sum's rounding), and a pair that fails is
  scored on the host by numpy itself (``SearchStats.extra["host_rescored"]``). For
  float16 vectors a failure needs a dimension where both values are tiny beside a large
  sum: 82 of 2M pairs of random vectors of norm 15, 226 of 2M for vectors of norm 15
  sharing a mean direction (as CLS vectors do).

Float32 stores (or queries in another dtype than the pool) stay on the host: float32
products have up to 48 significant bits, their float64 sums round, and the bits are
numpy's order's alone.

The ranking runs on the device for a whole batch of queries with the host's arithmetic,
operation for operation: the cut at the k-th backend score minus ``2 eps`` (the query's
own row left out), the L2 form ``-(|x|^2 + |q|^2 - 2 q.x)``, the order (score desc, row
asc) by two stable sorts, and the widening check in float64. Sort keys are ``score +
0.0``, so -0.0 and +0.0 tie as in numpy's lexsort; a dot product that is exactly zero
is +0.0, as numpy's reduction (which starts from +0.0) gives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mdcr.index.exact_kernel import EXACT_NORM_PRODUCT, sentence_batches, sentence_rows

# A float64 sum of d <= 2^20 non-negative terms is within (d - 1) 2^-53 of the exact sum.
_SUM_SLACK = 1.0 + 2.0**-30
_SPAN = 2.0**53
_SLICE_VALUES = {"cuda": 1 << 25, "cpu": 1 << 20}  # pair x dimension values scored at once

HostDots = Callable[[np.ndarray, np.ndarray], np.ndarray]


def on_device(backend: Any, db: np.ndarray, queries: np.ndarray) -> bool:
    """Whether ``backend`` ranks on its device here: it says so (``rank_on_device``) and
    the pool and queries are float16."""
    return (
        bool(getattr(backend, "rank_on_device", False))
        and db.dtype == np.float16
        and queries.dtype == np.float16
    )


def needs_check(q_norm_max: float, db_norm_max: float) -> bool:
    """Whether pairs must be checked one by one: ``|q| |x|`` may reach 32."""
    return not bool(q_norm_max * db_norm_max < EXACT_NORM_PRODUCT)


def lowbit(v: torch.Tensor) -> torch.Tensor:
    """The lowest set bit of each ``|v|`` (float32 holding float16 values) as a float32
    power of two; +inf for zeros, so that a minimum passes over them."""
    a = v.float().abs()
    bits = a.view(torch.int32)
    # Clearing the lowest set mantissa bit leaves at least half the value: the difference
    # is exact. A power of two (no mantissa bit set) is its own lowest bit.
    low = a - (bits & (bits - 1)).view(torch.float32)
    low = torch.where((bits & 0x7FFFFF) == 0, a, low)
    return torch.where(a == 0, torch.inf, low)


@dataclass
class DeviceScorer:
    """float64 scores of (query, pool row) pairs on the backend's device, the host's bits.

    ``host_dots(query rows, pool rows)`` and ``host_sq(pool rows)`` give the host's
    float64 dot products and squared norms, for pairs whose exactness is not proven.
    """

    backend: Any
    queries: np.ndarray  # float16, all of them
    host_dots: HostDots
    host_sq: Callable[[np.ndarray], np.ndarray]
    check_dots: bool  # whether each query-row pair is checked (|q| |x| may reach 32)
    check_sq: bool  # whether each row's squared norm is (l2: |x|^2 may reach 32)
    l2: bool
    q_sq: np.ndarray | None  # the queries' squared norms (the host's), for l2
    host_rescored: int = 0

    def batch(self, qrows: np.ndarray) -> BatchQueries:
        """The queries ``qrows`` on the device, as :meth:`scores` takes them."""
        dev = self.backend.out_device
        q16 = torch.from_numpy(np.ascontiguousarray(self.queries[qrows])).to(dev)
        q_sq = None if self.q_sq is None else torch.from_numpy(self.q_sq[qrows]).to(dev)
        return BatchQueries(
            rows=qrows,
            q64=q16.double(),
            low=lowbit(q16) if self.check_dots else None,
            q_sq=q_sq,
        )

    def scores(self, q: BatchQueries, owner: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Scores of batch queries ``owner`` against pool ``rows`` (int64, on the device):
        the inner product, or for l2 ``-(|x|^2 + |q|^2 - 2 q.x)``."""
        out = torch.empty(len(rows), dtype=torch.float64, device=rows.device)
        step = max(1, _SLICE_VALUES[rows.device.type] // max(1, self.backend.dim))
        for s in range(0, len(rows), step):
            o, r = owner[s : s + step], rows[s : s + step]
            x = self.backend.gather(r)
            x_low = lowbit(x) if self.check_dots or (self.l2 and self.check_sq) else None
            q_low = None if q.low is None else q.low.index_select(0, o)
            dot, bad = _exact(x, q.q64.index_select(0, o), x_low, q_low)
            if bad is not None:  # the host's own sums for pairs not proven exact
                self.host_rescored += len(bad)
                qi = q.rows[o.index_select(0, bad).cpu().numpy()]
                got = self.host_dots(qi, r.index_select(0, bad).cpu().numpy())
                dot[bad] = torch.from_numpy(got).to(dot.device)
            if self.l2:
                assert q.q_sq is not None
                sq, bad = _exact(
                    x, x.double(), *((x_low, x_low) if self.check_sq else (None, None))
                )
                if bad is not None:
                    self.host_rescored += len(bad)
                    got = self.host_sq(r.index_select(0, bad).cpu().numpy())
                    sq[bad] = torch.from_numpy(got).to(sq.device)
                dot = -(sq + q.q_sq.index_select(0, o) - 2.0 * dot)
            out[s : s + step] = dot
        return out


def _exact(
    x: torch.Tensor, q64: torch.Tensor, x_low: torch.Tensor | None, q_low: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Row-wise dot products of ``x`` and ``q64``: float64 sums of exact products, and
    (when the lowest bits are given) the positions of pairs not proven exact, or None."""
    prod = torch.mul(x, q64)  # in float64 (x converts exactly): exact products
    dot = prod.sum(dim=1) + 0.0  # an exact zero is +0.0, as numpy's sum gives
    if x_low is None or q_low is None:
        return dot, None
    total = prod.abs_().sum(dim=1)
    grain = (x_low * q_low).amin(dim=1).double()
    bad = ~(total * _SUM_SLACK < grain * _SPAN)
    return dot, (bad.nonzero().squeeze(1) if bool(bad.any()) else None)


@dataclass
class BatchQueries:
    """A batch of queries on the device: their row numbers (host), float64 values, lowest
    set bits (when pairs are checked) and squared norms (l2)."""

    rows: np.ndarray
    q64: torch.Tensor
    low: torch.Tensor | None
    q_sq: torch.Tensor | None


def _by_score_then(key_order: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """Positions ordering each row of ``scores`` by score descending, ties in the order
    ``key_order`` gives (a permutation per row); -0.0 and +0.0 tie."""
    keyed = (scores + 0.0).gather(1, key_order)
    return key_order.gather(1, torch.argsort(keyed, dim=1, descending=True, stable=True))


def rank_batch(
    scorer: DeviceScorer,
    qrows: np.ndarray,
    exclude: np.ndarray,
    eps: np.ndarray,
    k: int,
    window: int,
    check_window: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Search queries ``qrows`` at ``window`` and rank their candidates exactly, on the
    device. Returns (rows, scores, lengths, widen) with the top k of query ``j`` in
    ``[j, :lengths[j]]``, as :func:`mdcr.index.exact_kernel.finish_queries` does."""
    backend = scorer.backend
    with backend.exact_matmul():
        approx, cand = backend.search_tensors(scorer.queries[qrows], window)
        dev = cand.device
        nq, width = cand.shape
        own = cand == torch.from_numpy(exclude).to(dev)[:, None]
        has_own = own.any(dim=1)
        m = width - has_own.long()
        own_at = torch.where(has_own, own.long().argmax(dim=1), width)
        # The k-th backend score with the query's own row left out (used where m > k).
        kth = torch.where(
            own_at < k, approx[:, min(k, width - 1)], approx[:, min(k - 1, width - 1)]
        )
        eps_d = torch.from_numpy(eps).to(dev)
        approx64 = approx.double()
        cut = kth.double() - 2.0 * eps_d
        keep = ~own & ((m <= k)[:, None] | (approx64 >= cut[:, None]))
        at_q, at_c = keep.nonzero(as_tuple=True)
        scores = torch.full((nq, width), -torch.inf, dtype=torch.float64, device=dev)
        batch = scorer.batch(qrows)
        scores[at_q, at_c] = scorer.scores(batch, at_q, cand[at_q, at_c])
        order = _by_score_then(torch.argsort(cand, dim=1), scores)[:, : min(k, width)]
        top_rows = cand.gather(1, order)
        top_scores = scores.gather(1, order)
        lengths = keep.sum(dim=1).clamp(max=k)
        last = top_scores.gather(1, (lengths - 1).clamp(min=0)[:, None]).squeeze(1)
        widen = (lengths > 0) & ~(last > approx64[:, -1] + eps_d)
        if not check_window:
            widen = torch.zeros_like(widen)
        return (
            top_rows.cpu().numpy(),
            top_scores.cpu().numpy(),
            lengths.cpu().numpy(),
            widen.cpu().numpy(),
        )


def rank_multi_batch(
    scorer: DeviceScorer,
    qrows: np.ndarray,
    owner: np.ndarray,
    n_owners: int,
    sentence_doc: torch.Tensor,
    n_docs: int,
    exclude: np.ndarray,
    eps: np.ndarray,
    k: int,
    window: int,
    check_window: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Multi-vector: query sentences ``qrows`` (of query documents ``owner``, 0 to
    ``n_owners - 1``, in order) search at ``window``; ``sentence_doc`` (on the device)
    gives each pool sentence's document, below ``n_docs``; a document's score is its best
    retrieved pair. Returns (docs, scores, lengths, retry) with query document ``j``'s top
    k at ``[starts[j] : starts[j] + lengths[j]]`` of the flat docs and scores
    (``starts`` the cumulative lengths), and ``retry[j]`` when its window must widen."""
    backend = scorer.backend
    with backend.exact_matmul():
        approx, cand = backend.search_tensors(scorer.queries[qrows], window)
        dev = cand.device
        n_sent, width = cand.shape
        owner_d = torch.from_numpy(owner).to(dev)
        batch = scorer.batch(qrows)
        sent = torch.arange(n_sent, device=dev).repeat_interleave(width)
        exact = scorer.scores(batch, sent, cand.reshape(-1))
        bound = approx[:, -1].double() + torch.from_numpy(eps).to(dev)
        docs = sentence_doc[cand].reshape(-1)
        of = owner_d.repeat_interleave(width)
        keep = docs != torch.from_numpy(exclude).to(dev)[of]
        docs, exact, of = docs[keep], exact[keep], of[keep]
        # Best retrieved pair per (query document, document): by score desc (stable),
        # then by (owner, document), firsts.
        pair = of * n_docs + docs
        by = torch.argsort(exact + 0.0, descending=True, stable=True)
        by = by[torch.argsort(pair[by], stable=True)]
        pair, exact = pair[by], exact[by]
        first = torch.ones_like(pair, dtype=torch.bool)
        first[1:] = pair[1:] != pair[:-1]
        pair, exact = pair[first], exact[first]
        # Rank per query document by (score desc, document asc): the pairs are in
        # document order within each owner already.
        by = torch.argsort(exact + 0.0, descending=True, stable=True)
        of = pair[by] // n_docs
        by = by[torch.argsort(of, stable=True)]
        pair, exact = pair[by], exact[by]
        of = pair // n_docs
        counts = torch.bincount(of, minlength=n_owners)
        starts = counts.cumsum(0) - counts
        in_top = torch.arange(len(pair), device=dev) - starts[of] < k
        lengths = counts.clamp(max=k)
        kth = exact[(starts + k - 1).clamp(max=max(0, len(exact) - 1))] if len(exact) else None
        worst = torch.full((n_owners,), -torch.inf, dtype=torch.float64, device=dev)
        worst = worst.scatter_reduce(0, owner_d, bound, reduce="amax")
        complete = counts >= k
        if kth is not None:
            complete &= kth > worst
        retry = ~complete if check_window else torch.zeros_like(complete)
        return (
            (pair[in_top] % n_docs).cpu().numpy(),
            exact[in_top].cpu().numpy(),
            lengths.cpu().numpy(),
            retry.cpu().numpy(),
        )


def device_rounds(
    scorer: DeviceScorer,
    exclude: np.ndarray,
    eps: np.ndarray,
    k: int,
    window: int,
    batch: int,
    stats: Any,
    results: list[tuple[np.ndarray, np.ndarray]],
) -> None:
    """:func:`mdcr.index.exact.exact_topk`'s rounds, each batch by :func:`rank_batch`:
    the window doubles for the queries whose top k may be incomplete, up to the pool."""
    n = scorer.backend.n
    pending = np.arange(len(scorer.queries))
    while pending.size:
        stats.max_window = max(stats.max_window, window)
        retry: list[np.ndarray] = []
        for b in range(0, pending.size, batch):
            part = pending[b : b + batch]
            rows, scores, lengths, widen = rank_batch(
                scorer, part, exclude[part], eps[part], k, window, window < n
            )
            for j, qi in enumerate(part):
                results[int(qi)] = (rows[j, : lengths[j]], scores[j, : lengths[j]])
            retry.append(part[widen])
        pending = np.concatenate(retry)
        if pending.size:
            stats.widened += int(pending.size)
            window = min(n, window * 2)
    stats.extra["device_ranking"] = 1
    stats.extra["host_rescored"] = scorer.host_rescored


@dataclass(frozen=True)
class MultiQueries:
    """What the multi-vector rounds share: each pool sentence's document, the query
    documents' sentence offsets and own documents, each query sentence's error bound."""

    sentence_doc: np.ndarray
    offsets: np.ndarray
    exclude: np.ndarray
    eps: np.ndarray
    k: int
    batch: int


def device_multi_rounds(
    scorer: DeviceScorer,
    multi: MultiQueries,
    window: int,
    stats: Any,
    results: list[tuple[np.ndarray, np.ndarray]],
) -> None:
    """:func:`mdcr.index.exact.exact_topk_multi`'s rounds, each batch of whole query
    documents by :func:`rank_multi_batch`."""
    n_sent = len(multi.sentence_doc)
    doc_of = torch.from_numpy(np.ascontiguousarray(multi.sentence_doc, dtype=np.int64))
    doc_of = doc_of.to(scorer.backend.out_device)
    n_docs = int(multi.sentence_doc.max()) + 1
    pending = np.arange(len(multi.offsets) - 1)
    while pending.size:
        retry: list[np.ndarray] = []
        for part in sentence_batches(pending, multi.offsets, multi.batch):
            stats.max_window = max(stats.max_window, window)
            qrows, owner = sentence_rows(multi.offsets, part)
            docs, scores, lengths, widen = rank_multi_batch(
                scorer, qrows, owner, len(part), doc_of, n_docs, multi.exclude[part],
                multi.eps[qrows], multi.k, window, window < n_sent,
            )  # fmt: skip
            docs = docs.astype(multi.sentence_doc.dtype, copy=False)
            ends = np.cumsum(lengths)
            for j, qi in enumerate(part):
                at = slice(int(ends[j] - lengths[j]), int(ends[j]))
                results[int(qi)] = (docs[at], scores[at])
            retry.append(part[widen])
        pending = np.concatenate(retry)
        if pending.size:
            stats.widened += int(pending.size)
            window = min(n_sent, window * 2)
    stats.extra["device_ranking"] = 1
    stats.extra["host_rescored"] = scorer.host_rescored
