"""The closed-form chance expectations against exhaustive enumeration and Monte Carlo."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from mdcr.measures.chance import expected_ap, expected_ndcg, expected_recall
from mdcr.measures.registry import expected as expected_metric


def _metrics_of(rel: np.ndarray, r: int, depth: int, k: int) -> tuple[float, float, float]:
    """AP@depth, nDCG@depth and R@k of one 0/1 ranking, written out directly."""
    top = rel[:depth]
    hits = np.cumsum(top)
    ranks = np.arange(1, len(top) + 1)
    ap = float(np.sum(top * hits / ranks)) / r
    dcg = float(np.sum(top / np.log2(ranks + 1)))
    ideal = float(np.sum(1 / np.log2(np.arange(1, min(r, depth) + 1) + 1)))
    return ap, dcg / ideal, float(rel[:k].sum()) / r


@pytest.mark.parametrize(
    ("n", "m", "r", "depth", "k"),
    [(5, 2, 2, 3, 2), (6, 3, 4, 6, 4), (7, 1, 1, 4, 3), (4, 4, 4, 10, 2)],
)
def test_exact_by_enumerating_every_ranking(n: int, m: int, r: int, depth: int, k: int) -> None:
    totals = np.zeros(3)
    count = 0
    for pos in itertools.combinations(range(n), m):  # every placement of the relevant ones
        rel = np.zeros(n)
        rel[list(pos)] = 1
        totals += _metrics_of(rel, r, depth, k)
        count += 1
    ap, ndcg, rec = totals / count
    assert expected_ap(n, m, r, depth) == pytest.approx(ap, abs=1e-12)
    assert expected_ndcg(n, m, r, depth) == pytest.approx(ndcg, abs=1e-12)
    assert expected_recall(n, m, r, k) == pytest.approx(rec, abs=1e-12)


def test_monte_carlo_large_pool() -> None:
    n, m, r, depth, k = 2000, 25, 29, 500, 30
    rng = np.random.default_rng(12345)
    sims = 4000
    vals = np.empty((sims, 3))
    base = np.zeros(n)
    base[:m] = 1
    for i in range(sims):
        vals[i] = _metrics_of(rng.permutation(base), r, depth, k)
    mean = vals.mean(axis=0)
    se = vals.std(axis=0, ddof=1) / np.sqrt(sims)
    expected = [
        expected_ap(n, m, r, depth),
        expected_ndcg(n, m, r, depth),
        expected_recall(n, m, r, k),
    ]
    for got, want, s in zip(mean, expected, se, strict=True):
        assert abs(got - want) < 4 * s


def test_known_values_and_edges() -> None:
    # one relevant among n, full depth: E[1/position] = H_n / n
    assert expected_ap(4, 1, 1, 500) == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)
    assert expected_ap(3, 3, 3, 500) == pytest.approx(1.0)  # everything relevant
    assert expected_ap(1, 1, 1, 500) == 1.0
    assert expected_ap(10, 0, 3, 500) == 0.0
    assert expected_recall(100, 5, 5, 30) == pytest.approx(0.3)
    assert expected_recall(20, 5, 10, 30) == pytest.approx(0.5)  # capped: min(k, n) / n
    assert expected_metric("recall@30", 100, 5, 5) == pytest.approx(0.3)
    assert expected_metric("map@500", 4, 1, 1) == expected_ap(4, 1, 1, 500)
