"""Exact top-k with the project's tie rule, on top of any backend.

Backends rank by float32 scores and break ties by their own internal order, and two
backends (or one backend on two machines) can round the same score differently. So:

1. Ask the backend for ``k' = k + 1 + margin`` candidates (the +1 leaves room to drop
   the query itself).
2. Re-score the candidates in float64 from the float16 store. Products of float16
   numbers are exact (even in float32) and each dot product is a pairwise float64 sum
   over one row, so a paper's score is the same bits whatever backend or candidate set
   produced it (L2 as ``-(|q|^2 + |x|^2 - 2 q.x)`` from such sums).
   Only candidates whose backend score is within ``2 eps`` of the k-th one (the query
   left out) can reach the top k, so only those are re-scored; rows are gathered from the
   backend's own float32 copy when it has one, on all cores.
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

Multi-vector (Aspire): the backend indexes sentence vectors; each query sentence asks for
its ``k'`` nearest sentences, a paper's partial score is its best retrieved pair, and an
unretrieved pair scores at most ``B = max over query sentences of (L + eps)``. If the k-th
partial score (without the query paper) is above ``B``, the top k and its scores are exact;
otherwise ``k'`` doubles.

Where the work runs: a backend whose rows live on a torch device and that says so
(``rank_on_device``: the torch backend on CUDA) does steps 2-4 there for a whole batch of
queries (:mod:`mdcr.index.exact_device`), and only each query's top k comes back: the
same rows and float64 bits, since wherever a float64 sum of the exact products is proven
exact (always for ``|q| |x| < 32``; else checked pair by pair) any order gives numpy's
bits, and a pair not proven exact is summed on the host by numpy. Everything else (Faiss,
the torch backend on the CPU, float32 stores) re-scores on the host: compiled
(:mod:`mdcr.index.exact_kernel`) where ``|q| |x| < 32``, else numpy, on all cores.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mdcr.index.backends import Backend, SearchMetric
from mdcr.index.exact_kernel import (
    compiled_rescoring,
    exact_dots,
    finish_queries,
    sentence_batches,
    sentence_rows,
)

_U32 = 2.0**-24  # unit roundoff of float32
COMPILED_BLOCK = 2  # queries whose candidate rows are gathered at once: they stay in the caches


@dataclass
class SearchStats:
    """What the search did: how often the candidate window had to be widened."""

    queries: int = 0
    widened: int = 0
    max_window: int = 0
    extra: dict[str, int] = field(default_factory=dict)


def squared_norms(vectors: np.ndarray, block: int = 1 << 16) -> np.ndarray:
    """float64 squared norm of each row, computed the way :func:`rescore` computes dots."""
    out = np.empty(len(vectors), dtype=np.float64)
    for s in range(0, len(vectors), block):
        part = np.asarray(vectors[s : s + block])
        out[s : s + block] = _dots(part, part)
    return out


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


def max_norm(vectors: np.ndarray, block: int = 1 << 16) -> float:
    """Largest L2 norm among ``vectors`` (float32 arithmetic, block by block)."""
    best = 0.0
    for s in range(0, len(vectors), block):
        part = np.asarray(vectors[s : s + block], dtype=np.float32)
        if len(part):
            best = max(best, float(np.sqrt((part * part).sum(axis=1).max())))
    return best


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


def _order(rows: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the top k by (score desc, row asc)."""
    return np.lexsort((rows, -scores))[:k]


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


def _scores_against(rows_of: _Rows, q: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """float64 dot products of one query with pool ``rows``: the same bits as :func:`_dots`
    (float32 products of float16 values are exact; their float64 pairwise sum per row)."""
    if rows_of.db.dtype != np.float16 or q.dtype != np.float32:
        return _dots(np.asarray(rows_of.db[rows]), q[None, :])
    prod = rows_of.float32(np.asarray(rows, dtype=np.int64))
    prod *= q
    return np.add.reduce(prod, axis=-1, dtype=np.float64)


def rescore(
    rows_of: _Rows,
    queries: np.ndarray,
    cand: np.ndarray,
    metric: SearchMetric,
    db_sq: np.ndarray | None,
    db_max_norm: float,
    threads: int | None = None,
) -> np.ndarray:
    """float64 scores of ``queries[i]`` against pool rows ``cand[i, j]``, shape ``cand.shape``.

    A pair's score depends only on the two vectors, never on which other candidates were
    gathered with it, so every backend gets the same bits. L2 uses
    ``-(|q|^2 + |x|^2 - 2 q.x)`` with ``db_sq`` the pool's :func:`squared_norms`. Runs on
    ``threads`` threads (default: all cores), gathering rows as ``rows_of`` says.
    """
    out = np.empty(cand.shape, dtype=np.float64)
    q_src = np.asarray(queries, dtype=np.float32) if rows_of.db.dtype == np.float16 else queries
    q_sq = squared_norms(queries) if metric == "l2" else None
    q64 = np.asarray(queries, dtype=np.float64)
    q_norm_max = float(np.linalg.norm(q64, axis=1).max()) if len(q64) else 0.0
    compiled = compiled_rescoring(rows_of.db, q_norm_max, db_max_norm)

    def work(js: np.ndarray) -> None:
        if compiled:
            for s in range(0, len(js), COMPILED_BLOCK):
                block = js[s : s + COMPILED_BLOCK]
                owner = np.repeat(np.arange(len(block)), cand.shape[1])
                rows = cand[block].ravel()
                sc = exact_dots(rows_of.float32(rows), owner, q64[block]).reshape(len(block), -1)
                if db_sq is not None and q_sq is not None:
                    sc = -(db_sq[cand[block]] + q_sq[block][:, None] - 2.0 * sc)
                out[block] = sc
            return
        for i in js:
            sc = _scores_against(rows_of, q_src[i], cand[i])
            if db_sq is not None and q_sq is not None:
                sc = -(db_sq[cand[i]] + q_sq[i] - 2.0 * sc)
            out[i] = sc

    workers = max(1, threads or os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(work, np.array_split(np.arange(len(cand)), workers * 4)))
    return out


@dataclass
class _Ranking:
    """What the exact ranking of single-vector queries needs, shared by their rounds."""

    src: _Rows
    q_src: np.ndarray  # the queries as the re-scoring reads them
    q64: np.ndarray
    exclude: np.ndarray
    eps: np.ndarray
    k: int
    n: int  # pool rows
    db_sq: np.ndarray | None
    q_sq: np.ndarray | None
    results: list[tuple[np.ndarray, np.ndarray]]
    last: np.ndarray  # per query: the last backend score of its window
    window: int = 0

    def finish(self, qi: int, approx_row: np.ndarray, rows: np.ndarray) -> bool:
        """Rank one query's candidates exactly; True when its window must widen."""
        keep = rows != self.exclude[qi]
        rows, approx_row = rows[keep], approx_row[keep]
        k = self.k
        if len(rows) > k:  # candidates below a_k - 2 eps cannot reach the top k
            cut = approx_row >= float(approx_row[k - 1]) - 2.0 * self.eps[qi]
            rows, approx_row = rows[cut], approx_row[cut]
        sc = _scores_against(self.src, self.q_src[qi], rows)
        if self.db_sq is not None and self.q_sq is not None:
            sc = -(self.db_sq[rows] + self.q_sq[qi] - 2.0 * sc)
        pos = _order(rows, sc, k)
        self.results[qi] = (rows[pos], sc[pos])
        return self.window < self.n and not sc[pos[-1]] > self.last[qi] + self.eps[qi]

    def finish_compiled(self, qis: np.ndarray, approx: np.ndarray, cand: np.ndarray) -> list[int]:
        """:meth:`finish` for a block of queries, compiled (:mod:`mdcr.index.exact_kernel`);
        returns the queries whose window must widen."""
        retry: list[int] = []
        for s in range(0, len(qis), COMPILED_BLOCK):  # bounds the gathered float32 rows
            at = slice(s, s + COMPILED_BLOCK)
            block = qis[at]
            rows, scores, lengths, widen = finish_queries(
                self.src.float32, self.q64[block], approx[at], cand[at], self.exclude[block],
                self.eps[block], self.k, self.db_sq,
                None if self.q_sq is None else self.q_sq[block], self.window < self.n,
            )  # fmt: skip
            for j, qi in enumerate(block):
                self.results[int(qi)] = (rows[j, : lengths[j]], scores[j, : lengths[j]])
            retry.extend(int(qi) for qi in block[widen])
        return retry


def _ranking_round(
    ranking: _Ranking,
    backend: Backend,
    queries: np.ndarray,
    pending: np.ndarray,
    *,
    batch: int,
    compiled: bool,
    pool: ThreadPoolExecutor,
    workers: int,
) -> list[int]:
    """Search ``pending`` queries at the current window, ``batch`` at a time, and rank each
    batch's candidates on the pool's threads; return the queries whose window must widen."""
    retry: list[int] = []
    for b in range(0, pending.size, batch):
        part = pending[b : b + batch]
        approx, cand = backend.search(queries[part], ranking.window)
        ranking.last[part] = approx[:, -1]
        chunks = np.array_split(np.arange(len(part)), min(workers * 4, len(part)))

        def work(
            js: np.ndarray,
            approx: np.ndarray = approx,
            cand: np.ndarray = cand,
            part: np.ndarray = part,
        ) -> list[int]:
            if compiled:
                return ranking.finish_compiled(part[js], approx[js], cand[js])
            return [int(part[j]) for j in js if ranking.finish(int(part[j]), approx[j], cand[j])]

        for found in pool.map(work, chunks):
            retry.extend(found)
    return retry


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
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Top ``k`` rows of ``db`` per query by (score desc, row asc), row ``exclude[i]`` left out.

    ``db`` and ``queries`` are the float16 vectors the backend was built from; ``exclude``
    holds each query's own row in ``db`` (-1 if it is not there). Returns per query
    ``(rows, float64 scores)`` in rank order.

    Only candidates that can still be in the top k are re-scored: with ``a_k`` the k-th
    backend score (the query left out), a candidate whose backend score is below
    ``a_k - 2 eps`` has an exact score below that of k others. The re-scoring gathers rows
    from the backend's float32 copy when it has one (``backend.vectors32``; the same bits
    as from the float16 store) and runs on ``threads`` threads (default: all cores), which
    keeps its cost small next to the search itself (``scripts/bench_search.py``).
    """
    stats = stats if stats is not None else SearchStats()
    n, nq = len(db), len(queries)
    results: list[tuple[np.ndarray, np.ndarray]] = [
        (np.zeros(0, np.int64), np.zeros(0, np.float64))
    ] * nq
    if n == 0 or nq == 0 or k <= 0:
        return results
    q64 = np.asarray(queries, dtype=np.float64)
    norm = built_max_norm(backend, db) if db_max_norm is None else db_max_norm
    q_norms = np.linalg.norm(q64, axis=1)
    eps = error_bound(q_norms, norm, db.shape[1], metric)
    compiled = compiled_rescoring(db, float(q_norms.max()), norm)
    stats.extra["compiled_rescoring"] = int(compiled)
    window = min(n, k + 1 + margin)
    pending = np.arange(nq)
    stats.queries += nq
    if _ranks_on_device(backend, db, queries):
        from mdcr.index.exact_device import device_rounds

        scorer = _device_scorer(backend, db, queries, metric, norm)
        device_rounds(scorer, exclude, eps, k, window, batch, stats, results)
        return results
    ranking = _Ranking(
        src=_Rows(db, getattr(backend, "vectors32", None)),
        q_src=np.asarray(queries, dtype=np.float32) if db.dtype == np.float16 else queries,
        q64=q64,
        exclude=exclude,
        eps=eps,
        k=k,
        n=n,
        db_sq=squared_norms(db) if metric == "l2" else None,
        q_sq=squared_norms(queries) if metric == "l2" else None,
        results=results,
        last=np.zeros(nq, dtype=np.float64),
        window=window,
    )
    workers = max(1, threads or os.cpu_count() or 1)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        while pending.size:
            stats.max_window = max(stats.max_window, ranking.window)
            retry = _ranking_round(
                ranking, backend, queries, pending,
                batch=batch, compiled=compiled, pool=pool, workers=workers,
            )  # fmt: skip
            pending = np.asarray(sorted(retry), dtype=np.int64)
            if pending.size:
                stats.widened += int(pending.size)
                ranking.window = min(n, ranking.window * 2)
    return results


def _ranks_on_device(backend: Backend, db: np.ndarray, queries: np.ndarray) -> bool:
    """Whether the backend re-scores and ranks where its rows are (a torch backend that
    says so, float16 vectors): :mod:`mdcr.index.exact_device`."""
    if not getattr(backend, "rank_on_device", False):
        return False
    from mdcr.index.exact_device import on_device

    return on_device(backend, db, queries)


def _device_scorer(
    backend: Backend,
    db: np.ndarray,
    queries: np.ndarray,
    metric: SearchMetric,
    db_max_norm: float,
) -> Any:
    """An :class:`~mdcr.index.exact_device.DeviceScorer` whose host fallback computes as
    :func:`_dots` does."""
    from mdcr.index.exact_device import DeviceScorer, needs_check

    q_norm = float(np.linalg.norm(np.asarray(queries, dtype=np.float64), axis=1).max())
    return DeviceScorer(
        backend=backend,
        queries=queries,
        host_dots=lambda qi, rows: _dots(db[rows], queries[qi]),
        host_sq=lambda rows: _dots(db[rows], db[rows]),
        check_dots=needs_check(q_norm, db_max_norm),
        check_sq=needs_check(db_max_norm, db_max_norm),
        l2=metric == "l2",
        q_sq=squared_norms(queries) if metric == "l2" else None,
    )


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
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Top ``k`` documents per query document by their best sentence pair.

    ``sentences`` (float16) are the pool's sentence vectors the backend was built from and
    ``sentence_doc`` the document row of each; query document ``i`` has the vectors
    ``query_sentences[query_offsets[i]:query_offsets[i + 1]]``. Returns per query
    ``(document rows, float64 scores)`` in rank order (ties by document row). Each search
    call takes whole query documents, up to ``batch`` query sentences (at least one
    document): Faiss's CPU search pays per call, 1.26x at 576 sentences per call against
    1,800 (``scripts/bench_search.py --sentences 9``).
    """
    stats = stats if stats is not None else SearchStats()
    n_sent, nq = len(sentences), len(query_offsets) - 1
    results: list[tuple[np.ndarray, np.ndarray]] = [
        (np.zeros(0, np.int64), np.zeros(0, np.float64))
    ] * nq
    if n_sent == 0 or nq == 0 or k <= 0:
        return results
    q64 = np.asarray(query_sentences, dtype=np.float64)
    norm = built_max_norm(backend, sentences) if db_max_norm is None else db_max_norm
    eps = error_bound(np.linalg.norm(q64, axis=1), norm, sentences.shape[1], metric)
    window = min(n_sent, k + 1 + margin)
    pending = np.arange(nq)
    stats.queries += nq
    if _ranks_on_device(backend, sentences, query_sentences):
        from mdcr.index.exact_device import MultiQueries, device_multi_rounds

        scorer = _device_scorer(backend, sentences, query_sentences, metric, norm)
        multi = MultiQueries(sentence_doc, query_offsets, exclude, eps, k, batch)
        device_multi_rounds(scorer, multi, window, stats, results)
        return results
    db_sq = squared_norms(sentences) if metric == "l2" else None
    while pending.size:
        retry: list[int] = []
        for part in sentence_batches(pending, query_offsets, batch):
            stats.max_window = max(stats.max_window, window)
            retry.extend(
                _multi_round(
                    backend,
                    sentences,
                    sentence_doc,
                    query_sentences,
                    query_offsets,
                    part,
                    exclude,
                    k,
                    metric,
                    window,
                    eps,
                    norm,
                    db_sq,
                    results,
                )
            )
        pending = np.asarray(retry, dtype=np.int64)
        if pending.size:
            stats.widened += int(pending.size)
            window = min(n_sent, window * 2)
    return results


def _multi_round(
    backend: Backend,
    sentences: np.ndarray,
    sentence_doc: np.ndarray,
    query_sentences: np.ndarray,
    query_offsets: np.ndarray,
    part: np.ndarray,
    exclude: np.ndarray,
    k: int,
    metric: SearchMetric,
    window: int,
    eps: np.ndarray,
    db_max_norm: float,
    db_sq: np.ndarray | None,
    results: list[tuple[np.ndarray, np.ndarray]],
) -> list[int]:
    """One search round for the query documents ``part``; returns those to widen."""
    n_sent = len(sentences)
    qrows, _ = sentence_rows(query_offsets, part)
    lens = query_offsets[part + 1] - query_offsets[part]
    approx, cand = backend.search(query_sentences[qrows], window)
    exact = rescore(
        _Rows(sentences, getattr(backend, "vectors32", None)),
        query_sentences[qrows],
        cand,
        metric,
        db_sq,
        db_max_norm,
    )
    bound = approx[:, -1].astype(np.float64) + eps[qrows]
    retry = []
    at = 0
    for j, qi in enumerate(part):
        block = slice(at, at + int(lens[j]))
        at += int(lens[j])
        docs = sentence_doc[cand[block]].ravel()
        sc = exact[block].ravel()
        keep = docs != exclude[qi]
        docs, sc = docs[keep], sc[keep]
        # Best retrieved pair per document: sort by (doc, score desc), take firsts.
        by_doc = np.lexsort((-sc, docs))
        docs, sc = docs[by_doc], sc[by_doc]
        first = np.ones(len(docs), dtype=bool)
        first[1:] = docs[1:] != docs[:-1]
        docs, sc = docs[first], sc[first]
        pos = _order(docs, sc, k)
        results[qi] = (docs[pos], sc[pos])
        if window < n_sent:
            complete = len(pos) == k and sc[pos[-1]] > float(bound[block].max())
            if not complete:
                retry.append(int(qi))
    return retry
