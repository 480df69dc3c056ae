"""Expected measure values of a random ranking: the analytic chance floor of a pool.

A query has ``n`` candidates (the pool without the query itself), ``m`` of them relevant,
and ``r`` relevant papers in its qrels (``r >= m``; measures divide by ``r``). A random
ranking is a uniformly random permutation of the ``n`` candidates, cut at depth ``d``;
write ``d' = min(d, n)`` and ``H_j = 1 + 1/2 + ... + 1/j``.

Each position holds a relevant paper with probability ``m/n``, and two distinct positions
both do with probability ``m(m-1) / (n(n-1))``. Linearity of expectation then gives
closed forms:

- Recall@k: ``E = (m / r) * min(k, n) / n``.
- AP@d = ``(1/r) * sum_{i<=d'} rel_i * (1/i) * sum_{j<=i} rel_j``, so
  ``E = (m / (r n)) * [H_{d'} + (m-1)/(n-1) * (d' - H_{d'})]``
  (the second term is 0 when n = 1).
- nDCG@d: ``E = (m/n) * sum_{i<=d'} 1/log2(i+1)  /  sum_{i<=min(r,d)} 1/log2(i+1)``
  (the ideal DCG is fixed by the qrels, so the expectation passes through the ratio).

The MAP of a random ranking is the mean of these per-query expectations. Every formula
here has the signature of :data:`mdcr.measures.registry.ChanceFormula`:
``(n, m, r, cut-off) -> expectation``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=65536)
def _harmonic(j: int) -> float:
    return float(np.sum(1.0 / np.arange(1, j + 1))) if j > 0 else 0.0


@lru_cache(maxsize=65536)
def expected_ap(n: int, m: int, r: int, depth: int) -> float:
    """E[AP@depth] of a random permutation of ``n`` candidates with ``m`` relevant."""
    if n <= 0 or m <= 0 or r <= 0:
        return 0.0
    d = min(depth, n)
    h = _harmonic(d)
    pair = (m - 1) / (n - 1) if n > 1 else 0.0
    return m / (r * n) * (h + pair * (d - h))


@lru_cache(maxsize=65536)
def expected_recall(n: int, m: int, r: int, k: int) -> float:
    """E[Recall@k] of a random permutation of ``n`` candidates with ``m`` relevant."""
    if n <= 0 or m <= 0 or r <= 0:
        return 0.0
    return (m / r) * min(k, n) / n


@lru_cache(maxsize=65536)
def expected_ndcg(n: int, m: int, r: int, depth: int) -> float:
    """E[nDCG@depth] (binary gains) of a random permutation of ``n`` candidates."""
    if n <= 0 or m <= 0 or r <= 0:
        return 0.0
    d = min(depth, n)
    dcg = (m / n) * float(np.sum(1.0 / np.log2(np.arange(2, d + 2))))
    ideal = float(np.sum(1.0 / np.log2(np.arange(2, min(r, depth) + 2))))
    return dcg / ideal
