"""The sweep's inner loop, compiled with numba: one query, every grid point, one pass.

Documents are taken in blocks of consecutive document numbers. Within a block, each
query term's postings (an inverted index: documents ascending, with frequencies) add
Lucene's float32 term score at every grid point into a double accumulator per document
(a term score depends only on the query term, tf and the norm byte, so it is computed
once per distinct triple and reused: 1.5x faster at 42 grid points). Then the block's
matched documents, in document-number order, enter one bounded min-heap per grid point
(k entries, the smallest score on top; an equal score never displaces an earlier
document, which is the (score desc, document number asc) rule). Only the postings of the
query's terms are read (a forward index read every posting of the pool: 3x slower on
long queries), the accumulators hold one block, and the loop releases the GIL, so
queries run on all cores.

Once every heap holds k documents, a first pass over a block's postings sums each
document's largest term score over the grid: a bound of its score at every grid point
(float32 term scores summed exactly in double, then rounded, which is monotone). A
document whose bound does not exceed the smallest k-th score of all heaps cannot enter
any heap, so only the others get the 42-wide second pass. Exact, as tests check against
the unpruned pass and Lucene; 1.5x faster at 100k papers and 2.5x at 1M (top 500).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mdcr.errors import require

TF_CAP = 8  # term frequencies below this share cached term scores
CACHE_ROWS = 32_768  # distinct (query term, tf, norm byte) triples cached per query
BLOCK = 1024  # documents whose accumulators are held at once (x grid points x 8 bytes)


def _sift_down(scores: Any, docs: Any, size: int) -> None:
    """Restore the min-heap (by score, then by document number descending) from the root."""
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            return
        small = left
        right = left + 1
        if right < size and (
            scores[right] < scores[left]
            or (scores[right] == scores[left] and docs[right] > docs[left])
        ):
            small = right
        if scores[small] < scores[i] or (scores[small] == scores[i] and docs[small] > docs[i]):
            scores[i], scores[small] = scores[small], scores[i]
            docs[i], docs[small] = docs[small], docs[i]
            i = small
        else:
            return


def _sift_up(scores: Any, docs: Any, i: int) -> None:
    while i > 0:
        parent = (i - 1) // 2
        if scores[i] < scores[parent] or (scores[i] == scores[parent] and docs[i] > docs[parent]):
            scores[i], scores[parent] = scores[parent], scores[i]
            docs[i], docs[parent] = docs[parent], docs[i]
            i = parent
        else:
            return


def _grid_top(
    q_terms: Any,  # int64 term id of each query term
    weights: Any,  # float32 per query term: count * idf
    inv_ptr: Any,  # int64 per term + 1: its slice of the postings
    inv_docs: Any,  # int32 document number of each posting (ascending within a term)
    inv_tfs: Any,  # float32 frequency of each posting
    norms: Any,  # uint8 norm byte per document
    tables: Any,  # float32 (256, grid points): Lucene's normInverse per norm byte
    heap_scores: Any,  # float32 (grid points, k): output heaps
    heap_docs: Any,  # int64 (grid points, k)
    sizes: Any,  # int64 (grid points,): entries used in each heap
    tf_cap: int,
    cache_rows: int,
    block: int,
    prune: bool,
) -> None:
    # One function on purpose: numba compiles it into one loop nest whose scratch arrays
    # (acc, bound, the score cache) stay in registers and the cache across the two passes
    # of each block; split into jitted helpers, those arrays would cross calls and the
    # passes could no longer share a block's state without being passed it every document.
    n_grid = tables.shape[1]
    k = heap_scores.shape[1]
    n_q = len(q_terms)
    one = np.float32(1.0)
    cursor = np.empty(n_q, dtype=np.int64)
    stop = np.empty(n_q, dtype=np.int64)
    ends = np.empty(n_q, dtype=np.int64)
    for j in range(n_q):
        cursor[j] = inv_ptr[q_terms[j]]
        ends[j] = inv_ptr[q_terms[j] + 1]
    acc = np.zeros((block, n_grid), dtype=np.float64)
    bound = np.zeros(block, dtype=np.float64)
    hit = np.zeros(block, dtype=np.bool_)
    keep = np.zeros(block, dtype=np.bool_)
    term = np.empty(n_grid, dtype=np.float32)
    # A term score depends only on (query term, tf, norm byte): computed once per distinct
    # triple (for tf < TF_CAP, up to CACHE_ROWS of them) and reused, the same float32 value,
    # with its largest value over the grid (for the bound).
    slot_of = np.full(n_q * tf_cap * 256, -1, dtype=np.int32)
    cache = np.empty((cache_rows, n_grid), dtype=np.float32)  # float32 values, as Lucene's
    cache_max = np.empty(cache_rows, dtype=np.float32)
    used = 0
    n_docs = len(norms)
    full = False  # every heap holds k documents
    for lo in range(0, n_docs, block):
        hi = min(lo + block, n_docs)
        # Pass 1: which documents match, and (once every heap is full) an upper bound of
        # their score at every grid point: the sum of each term's largest score.
        for j in range(n_q):
            p = cursor[j]
            end = ends[j]
            if not (prune and full):
                while p < end and inv_docs[p] < hi:
                    hit[inv_docs[p] - lo] = True
                    p += 1
                stop[j] = p
                continue
            w = weights[j]
            while p < end and inv_docs[p] < hi:
                d = inv_docs[p] - lo
                nb = norms[lo + d]
                tf = inv_tfs[p]
                hit[d] = True
                slot = -1
                itf = int(tf)
                if itf < tf_cap:
                    key = (j * tf_cap + itf) * 256 + nb
                    slot = slot_of[key]
                    if slot < 0 and used < cache_rows:
                        slot = used
                        used += 1
                        slot_of[key] = slot
                        row = tables[nb]
                        top = np.float32(0.0)
                        for g in range(n_grid):
                            v = w - w / (one + tf * row[g])
                            cache[slot, g] = v
                            top = max(top, v)
                        cache_max[slot] = top
                if slot >= 0:
                    bound[d] += np.float64(cache_max[slot])
                else:
                    row = tables[nb]
                    top = np.float32(0.0)
                    for g in range(n_grid):
                        top = max(top, w - w / (one + tf * row[g]))
                    bound[d] += np.float64(top)
                p += 1
            stop[j] = p
        # A document whose bound cannot beat the k-th score of any heap is left out: its
        # score is at most the bound everywhere, and an equal score never enters.
        floor = np.float32(np.inf)
        if prune and full:
            for g in range(n_grid):
                floor = min(floor, heap_scores[g, 0])
        for d in range(hi - lo):
            keep[d] = hit[d] and (not (prune and full) or np.float32(bound[d]) > floor)
            hit[d] = False
            bound[d] = 0.0
        # Pass 2: every grid point's score of the documents kept. (The cache fill is
        # written out in both passes: as a numba function, even inlined, it was 5x slower.)
        for j in range(n_q):
            w = weights[j]
            for p in range(cursor[j], stop[j]):
                d = inv_docs[p] - lo
                if not keep[d]:
                    continue
                nb = norms[lo + d]
                tf = inv_tfs[p]
                slot = -1
                itf = int(tf)
                if itf < tf_cap:
                    key = (j * tf_cap + itf) * 256 + nb
                    slot = slot_of[key]
                    if slot < 0 and used < cache_rows:
                        slot = used
                        used += 1
                        slot_of[key] = slot
                        row = tables[nb]
                        top = np.float32(0.0)
                        for g in range(n_grid):
                            v = w - w / (one + tf * row[g])
                            cache[slot, g] = v
                            top = max(top, v)
                        cache_max[slot] = top
                if slot >= 0:
                    for g in range(n_grid):
                        acc[d, g] += np.float64(cache[slot, g])
                else:
                    row = tables[nb]
                    for g in range(n_grid):
                        term[g] = w - w / (one + tf * row[g])
                    for g in range(n_grid):
                        acc[d, g] += np.float64(term[g])
            cursor[j] = stop[j]
        for d in range(hi - lo):
            if not keep[d]:
                continue
            keep[d] = False
            doc = lo + d
            for g in range(n_grid):
                s = np.float32(acc[d, g])
                acc[d, g] = 0.0
                size = sizes[g]
                if size < k:
                    heap_scores[g, size] = s
                    heap_docs[g, size] = doc
                    sizes[g] = size + 1
                    _sift_up(heap_scores[g], heap_docs[g], size)
                elif s > heap_scores[g, 0]:
                    heap_scores[g, 0] = s
                    heap_docs[g, 0] = doc
                    _sift_down(heap_scores[g], heap_docs[g], k)
        if not full:
            full = True
            for g in range(n_grid):
                if sizes[g] < k:
                    full = False


_compile = require("numba").njit(cache=True, nogil=True)
_sift_down = _compile(_sift_down)
_sift_up = _compile(_sift_up)
_grid_top = _compile(_grid_top)


def grid_top(
    q_terms: np.ndarray,
    weights: np.ndarray,
    inv_ptr: np.ndarray,
    inv_docs: np.ndarray,
    inv_tfs: np.ndarray,
    norms: np.ndarray,
    tables_by_norm: np.ndarray,
    k: int,
    *,
    tf_cap: int = TF_CAP,
    cache_rows: int = CACHE_ROWS,
    block: int = BLOCK,
    prune: bool = True,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per grid point: (document numbers, float32 scores) of the top ``k`` documents with a
    positive score, by (score desc, document number asc). ``tf_cap``, ``cache_rows`` and
    ``block`` bound the cache of term scores and the accumulators, ``prune`` skips the
    documents whose bound cannot enter a heap (the results depend on none of them)."""
    n_grid = tables_by_norm.shape[1]
    heap_scores = np.zeros((n_grid, k), dtype=np.float32)
    heap_docs = np.zeros((n_grid, k), dtype=np.int64)
    sizes = np.zeros(n_grid, dtype=np.int64)
    _grid_top(
        np.asarray(q_terms, dtype=np.int64), weights, inv_ptr, inv_docs, inv_tfs, norms,
        tables_by_norm, heap_scores, heap_docs, sizes, tf_cap, cache_rows, max(1, block), prune,
    )  # fmt: skip
    out = []
    for g in range(n_grid):
        s, d = heap_scores[g, : sizes[g]], heap_docs[g, : sizes[g]]
        order = np.lexsort((d, -s))
        out.append((d[order], s[order]))
    return out
