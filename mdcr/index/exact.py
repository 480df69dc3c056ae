"""Exact top-k with the project's tie rule, on top of any backend: one algorithm for every
backend, single- and multi-vector.

Backends rank by float32 scores and break ties by their own internal order, and two
backends (or one backend on two machines) can round the same score differently. So:

1. Ask the backend for ``k' = k + 1 + margin`` candidates (the +1 leaves room to drop
   the query itself).
2. Re-score the candidates in float64: a score is the float16 products of query and row,
   formed exactly, summed in float64 by numpy's pairwise sum over the row, so a paper's
   score is the same bits whatever backend or candidate set produced it (L2 as
   ``-(|x|^2 + |q|^2 - 2 q.x)`` from such sums). Only candidates whose backend score is
   within ``2 eps`` of the k-th one (the query left out) can reach the top k, so only
   those are re-scored.
3. Rank by (score desc, paper_id asc) without the query (``rank_candidates``'s rule; the
   pool is sorted by paper_id, so the row number is the paper_id order).
4. Check that nothing outside the ``k'`` candidates can belong in the top k: a paper the
   backend did not return has a float32 score at most the last returned one, ``L``, so its
   exact score is at most ``L + eps`` (``eps`` bounds float32 rounding of a length-d dot
   product). If the k-th exact score ``t`` is above ``L + eps``, the top k, ties at
   ``t`` included, is complete. Otherwise (a tie or near-tie across the boundary) the
   search is widened: ``k'`` doubles for that query, up to the whole pool.

Scores: ``"ip"``: the inner product; ``"l2"``: minus the squared Euclidean distance (the
same order as minus the distance, without a square root).

Multi-vector (Aspire) is the same algorithm over query documents: the backend indexes
sentence vectors, each query sentence asks for its ``k'`` nearest sentences, every
candidate is re-scored (no cut: a sentence's k-th neighbour says nothing of the k-th
document), a paper's score is its best retrieved pair, and an unretrieved pair scores at
most ``B = max over query sentences of (L + eps)``. If the k-th paper's score (without the
query paper) is above ``B``, the top k and its scores are exact; otherwise ``k'`` doubles.

What depends on where the pool's rows are is one operation, a :class:`PairScorer`: the
exact dot products of the candidates kept. On the host
(:class:`~mdcr.index.exact_kernel.HostScorer`): numpy's sums, or a compiled loop where
``|q| |x| < 32`` proves it the same bits, on all cores. On a torch backend's device
(:class:`~mdcr.index.exact_device.DeviceScorer`; the torch backend on CUDA): float64
products and sums there, each pair proven exact or left to numpy on the host. Everything
else (the cut, the L2 form, the order, the check) runs here, the same for every backend.
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from mdcr.index.backends import Backend, SearchMetric, max_norm32
from mdcr.index.exact_kernel import (
    HostScorer,
    _dots,
    compiled_rescoring,
    rank_groups,
    sentence_batches,
    sentence_rows,
)

_U32 = 2.0**-24  # unit roundoff of float32
Ranked = list[tuple[np.ndarray, np.ndarray]]


@dataclass
class SearchStats:
    """What the search did: how often the candidate window had to be widened."""

    queries: int = 0
    widened: int = 0
    max_window: int = 0
    extra: dict[str, int] = field(default_factory=dict)


class PairScorer(Protocol):
    """Exact float64 dot products of (query, pool row) pairs, where the pool's rows are."""

    parallel: bool  # whether parts of a batch may be scored on several threads at once

    @property
    def extra(self) -> dict[str, int]:
        """What it did, for :attr:`SearchStats.extra`."""
        ...

    def pair_dots(
        self, qrows: np.ndarray, owner: np.ndarray, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """For each pair ``t``: the dot product of query ``qrows[owner[t]]`` with pool row
        ``rows[t]`` (``owner`` non-decreasing), numpy's bits (:func:`_dots`); for l2 also
        the row's squared norm, else None."""
        ...


def squared_norms(vectors: np.ndarray, block: int = 1 << 16) -> np.ndarray:
    """float64 squared norm of each row, computed the way a score's dots are."""
    out = np.empty(len(vectors), dtype=np.float64)
    for s in range(0, len(vectors), block):
        part = np.asarray(vectors[s : s + block])
        out[s : s + block] = _dots(part, part)
    return out


def max_norm(vectors: np.ndarray, block: int = 1 << 16) -> float:
    """Largest L2 norm among ``vectors`` (float32 arithmetic, block by block)."""
    return max(
        (
            max_norm32(np.asarray(vectors[s : s + block], dtype=np.float32))
            for s in range(0, len(vectors), block)
        ),
        default=0.0,
    )


def built_max_norm(backend: Backend, db: np.ndarray) -> float:
    """The largest L2 norm of ``db``: the one its backend took while building its rows
    (``backend.max_norm``, where they are: no second pass over the pool), else
    :func:`max_norm`."""
    norm = getattr(backend, "max_norm", None)
    return float(norm) if norm is not None and (norm > 0 or len(db) == 0) else max_norm(db)


def error_bound(q_norms: np.ndarray, max_norm: float, dim: int, metric: SearchMetric) -> np.ndarray:
    """Upper bound on |float32 score - exact score| for each query (with a 2x safety margin).

    Inner product: gamma_d * sum|q_i x_i| <= gamma_d * |q| |x|; squared L2 computed as
    |q|^2 + |x|^2 - 2 q.x adds the norms' rounding: gamma_(d+3) * (|q| + |x|)^2.
    """
    gamma = 2.0 * (dim + 4) * _U32
    if metric == "ip":
        return gamma * q_norms * max_norm
    return gamma * (q_norms + max_norm) ** 2


@dataclass(frozen=True)
class _Queries:
    """What the rounds rank: query units (a query; a query document's sentence vectors),
    unit ``u`` the vectors ``vectors[offsets[u]:offsets[u + 1]]``."""

    vectors: np.ndarray
    offsets: np.ndarray
    exclude: np.ndarray  # per unit: the id it never retrieves (its own), -1 for none
    eps: np.ndarray  # per query vector: the error bound of its backend scores
    q_sq: np.ndarray | None  # per query vector: its squared norm (l2)
    doc_of: np.ndarray | None  # per pool row: the document it scores for (multi-vector)
    k: int
    n: int  # pool rows: the widest window


def exact_topk(
    backend: Backend,
    db: np.ndarray,
    queries: np.ndarray,
    exclude: np.ndarray,
    k: int,
    metric: SearchMetric,
    *,
    margin: int = 64,
    batch: int = 1024,
    db_max_norm: float | None = None,
    stats: SearchStats | None = None,
    threads: int | None = None,
) -> Ranked:
    """Top ``k`` rows of ``db`` per query by (score desc, row asc), row ``exclude[i]`` left out.

    ``db`` and ``queries`` are the float16 vectors the backend was built from; ``exclude``
    holds each query's own row in ``db`` (-1 if it is not there). Returns per query
    ``(rows, float64 scores)`` in rank order. Each search call takes ``batch`` queries;
    the host re-scores on ``threads`` threads (default: all cores), which keeps its cost
    small next to the search itself (``scripts/bench_search.py``).
    """
    offsets = np.arange(len(queries) + 1)
    return _exact_topk(
        backend, db, None, queries, offsets, exclude, k, metric, margin=margin, batch=batch,
        db_max_norm=db_max_norm, stats=stats, threads=threads,
    )  # fmt: skip


def exact_topk_multi(
    backend: Backend,
    sentences: np.ndarray,
    sentence_doc: np.ndarray,
    query_sentences: np.ndarray,
    query_offsets: np.ndarray,
    exclude: np.ndarray,
    k: int,
    metric: SearchMetric,
    *,
    margin: int = 64,
    batch: int = 1024,
    db_max_norm: float | None = None,
    stats: SearchStats | None = None,
    threads: int | None = None,
) -> Ranked:
    """Top ``k`` documents per query document by their best sentence pair.

    ``sentences`` (float16) are the pool's sentence vectors the backend was built from and
    ``sentence_doc`` the document row of each; query document ``i`` has the vectors
    ``query_sentences[query_offsets[i]:query_offsets[i + 1]]`` (at least one). Returns per
    query ``(document rows, float64 scores)`` in rank order (ties by document row). Each
    search call takes whole query documents, up to ``batch`` query sentences (at least one
    document): Faiss's CPU search pays per call, 1.26x at 576 sentences per call against
    1,800 (``scripts/bench_search.py --sentences 9``).
    """
    return _exact_topk(
        backend, sentences, sentence_doc, query_sentences, query_offsets, exclude, k, metric,
        margin=margin, batch=batch, db_max_norm=db_max_norm, stats=stats, threads=threads,
    )  # fmt: skip


def _exact_topk(
    backend: Backend,
    db: np.ndarray,
    doc_of: np.ndarray | None,
    queries: np.ndarray,
    offsets: np.ndarray,
    exclude: np.ndarray,
    k: int,
    metric: SearchMetric,
    *,
    margin: int,
    batch: int,
    db_max_norm: float | None,
    stats: SearchStats | None,
    threads: int | None,
) -> Ranked:
    """:func:`exact_topk` (``doc_of`` None: every row its own document) and
    :func:`exact_topk_multi`."""
    stats = stats if stats is not None else SearchStats()
    n, n_units = len(db), len(offsets) - 1
    results: Ranked = [(np.zeros(0, np.int64), np.zeros(0, np.float64))] * n_units
    if n == 0 or n_units == 0 or k <= 0:
        return results
    q_norms = np.linalg.norm(np.asarray(queries, dtype=np.float64), axis=1)
    q_norm = float(q_norms.max()) if len(q_norms) else 0.0
    norm = built_max_norm(backend, db) if db_max_norm is None else db_max_norm
    compiled = compiled_rescoring(db, q_norm, norm)
    stats.extra["compiled_rescoring"] = int(compiled)
    stats.queries += n_units
    l2 = metric == "l2"
    scorer = _scorer(backend, db, queries, l2=l2, compiled=compiled, q_norm=q_norm, norm=norm)
    units = _Queries(
        vectors=queries,
        offsets=offsets,
        exclude=exclude,
        eps=error_bound(q_norms, norm, db.shape[1], metric),
        q_sq=squared_norms(queries) if l2 else None,
        doc_of=doc_of,
        k=k,
        n=n,
    )
    workers = max(1, threads or os.cpu_count() or 1)
    _rounds(backend, scorer, units, min(n, k + 1 + margin), batch, workers, stats, results)
    stats.extra.update(scorer.extra)
    return results


def _scorer(
    backend: Backend,
    db: np.ndarray,
    queries: np.ndarray,
    *,
    l2: bool,
    compiled: bool,
    q_norm: float,
    norm: float,
) -> PairScorer:
    """Where the candidates are re-scored: where the backend's rows are when it says so
    (``rescore_on_device``: the torch backend on CUDA) and pool and queries are float16
    (float32 products round, and only numpy's order gives their sums' bits), else on the
    host (``compiled`` there: :func:`compiled_rescoring`)."""
    if getattr(backend, "rescore_on_device", False) and db.dtype == queries.dtype == np.float16:
        from mdcr.index.exact_device import DeviceScorer

        return DeviceScorer(backend, db, queries, l2=l2, q_norm=q_norm, db_norm=norm)
    db_sq = squared_norms(db) if l2 else None
    vectors32 = getattr(backend, "vectors32", None)
    return HostScorer(db, queries, vectors32, compiled=compiled, db_sq=db_sq)


def _rounds(
    backend: Backend,
    scorer: PairScorer,
    units: _Queries,
    window: int,
    batch: int,
    workers: int,
    stats: SearchStats,
    results: Ranked,
) -> None:
    """Search every unit at ``window``, then the ones whose top k may be incomplete at
    twice that, up to the whole pool. Each search call takes whole units up to ``batch``
    query vectors; its units are ranked in ``4 workers`` parts on as many threads where
    the scorer allows, else in one."""
    pending = np.arange(len(units.offsets) - 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        while pending.size:
            stats.max_window = max(stats.max_window, window)
            rank = functools.partial(_rank_units, units, scorer, window < units.n, results)
            retry: list[int] = []
            for part in sentence_batches(pending, units.offsets, batch):
                qrows, owner = sentence_rows(units.offsets, part)
                approx, cand = backend.search(units.vectors[qrows], window)
                row_at = np.searchsorted(owner, np.arange(len(part) + 1))
                pieces = min(4 * workers, len(part)) if scorer.parallel else 1
                jobs = []
                for piece in np.array_split(np.arange(len(part)), pieces):
                    a, b = int(piece[0]), int(piece[-1]) + 1
                    at = slice(int(row_at[a]), int(row_at[b]))
                    jobs.append((part[a:b], qrows[at], owner[at] - a, approx[at], cand[at]))
                for found in pool.map(rank, *zip(*jobs, strict=True)):
                    retry.extend(found)
            pending = np.asarray(retry, dtype=np.int64)
            if pending.size:
                stats.widened += int(pending.size)
                window = min(units.n, window * 2)


def _rank_units(
    units: _Queries,
    scorer: PairScorer,
    check: bool,
    results: Ranked,
    part: np.ndarray,
    qrows: np.ndarray,
    owner: np.ndarray,
    approx: np.ndarray,
    cand: np.ndarray,
) -> list[int]:
    """Rank the candidates of the units ``part`` exactly (query vectors ``qrows``, each of
    unit ``owner``, with the backend's ``approx`` scores and ``cand`` rows) into
    ``results``; return the units whose window must widen (``check``: it can)."""
    ids = cand if units.doc_of is None else units.doc_of[cand]
    keep = ids != units.exclude[part][owner][:, None]
    if units.doc_of is None:
        keep &= _may_reach_top_k(approx, keep, units.eps[qrows], units.k)
    pair_row = np.nonzero(keep)[0]
    rows, ids = cand[keep], ids[keep]
    scores, x_sq = scorer.pair_dots(qrows, pair_row, rows)
    if units.q_sq is not None and x_sq is not None:
        scores = -(x_sq + units.q_sq[qrows][pair_row] - 2.0 * scores)
    starts = np.searchsorted(owner[pair_row], np.arange(len(part) + 1))
    order, lengths = rank_groups(ids, scores, starts, units.k, dedup=units.doc_of is not None)
    top_ids, top_scores = ids[order], scores[order]
    ends = np.cumsum(lengths)
    for j, unit in enumerate(part):
        at = slice(int(ends[j] - lengths[j]), int(ends[j]))
        results[int(unit)] = (top_ids[at], top_scores[at])
    if not check:
        return []
    # An unretrieved pair scores at most the last backend score + eps of its query vector.
    bound = np.maximum.reduceat(
        approx[:, -1].astype(np.float64) + units.eps[qrows],
        np.searchsorted(owner, np.arange(len(part))),
    )
    kth = top_scores[np.maximum(ends - 1, 0)] if len(top_scores) else np.zeros(len(part))
    complete = (lengths == units.k) & (kth > bound)
    return [int(unit) for unit in part[~complete]]


def _may_reach_top_k(approx: np.ndarray, keep: np.ndarray, eps: np.ndarray, k: int) -> np.ndarray:
    """Per query (row): the candidates whose backend score is at least the k-th one's (of
    those kept: the query's own row left out) minus ``2 eps``; all when at most k are kept.
    Any other has an exact score below k others'."""
    width = approx.shape[1]
    kept = keep.sum(axis=1)
    own_at = np.where(kept < width, np.argmin(keep, axis=1), width)
    kth_at = np.minimum(np.where(own_at < k, k, k - 1), width - 1)
    kth = approx[np.arange(len(approx)), kth_at].astype(np.float64)
    cut = kth - 2.0 * eps
    return (kept <= k)[:, None] | (approx.astype(np.float64) >= cut[:, None])
