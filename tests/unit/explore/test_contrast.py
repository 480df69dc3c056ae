"""The rank correlation of two top-k lists (τ_h) equals scipy.stats.weightedtau on the
lists' union built as DiffIR builds it, query by query; and the shared words."""

from __future__ import annotations

import numpy as np
import pytest

from mdcr.explore.contrast import (
    list_values,
    weighted_tau,
    weighted_tau_codes,
    weighted_tau_many,
)
from mdcr.explore.words import Piece, pieces, shared_in, words

scipy_stats = pytest.importorskip("scipy.stats")


def _lists(
    rng: np.random.Generator, n: int, k_max: int = 15, b_min: int = 1
) -> tuple[list[list[str]], list[list[str]]]:
    """Pairs of top-k lists of varied lengths and overlaps (from none to all)."""
    lists_a, lists_b = [], []
    for _ in range(n):
        k = int(rng.integers(1, k_max + 1))
        papers = [f"p{i}" for i in rng.permutation(int(rng.integers(k, 2 * k + 1)))]
        lists_a.append(papers[:k])
        b_len = int(rng.integers(b_min, k + 1))
        lists_b.append([str(p) for p in rng.permutation(papers)[:b_len]])
    return lists_a, lists_b


@pytest.mark.parametrize(("n", "k_max", "b_min"), [(1500, 15, 1), (300, 60, 0), (12, 500, 0)])
def test_weighted_tau_equals_scipy_on_the_union_of_two_top_k_lists(
    n: int, k_max: int, b_min: int
) -> None:
    lists_a, lists_b = _lists(np.random.default_rng(7), n, k_max, b_min)
    got = weighted_tau_many(lists_a, lists_b)
    compared = 0
    for a, b, value in zip(lists_a, lists_b, got, strict=True):
        union, x, y = list_values(a, b)
        assert sorted(union) == sorted(set(a) | set(b))
        want = scipy_stats.weightedtau(x, y).statistic if len(union) > 1 else float("nan")
        if np.isnan(want):
            assert np.isnan(value), (a, b)
            continue
        assert value == pytest.approx(want, abs=1e-12), (a, b)
        compared += 1
    assert compared > 0.85 * n


def test_weighted_tau_codes_reads_each_row_skipping_the_gaps() -> None:
    a = np.array([[3, -1, 1, 2, -1], [5, 6, 7, -1, -1]])
    b = np.array([[-1, 2, 1, 3, 4], [7, -1, -1, 6, 9]])
    want = weighted_tau_many(
        [["3", "1", "2"], ["5", "6", "7"]], [["2", "1", "3", "4"], ["7", "6", "9"]]
    )
    assert weighted_tau_codes(a, b) == pytest.approx(want, abs=1e-15)
    assert weighted_tau_codes(a[:, :0], b[:, :0]).shape == (2,)  # no papers: NaN
    assert np.isnan(weighted_tau_codes(a[:, :0], b[:, :0])).all()


def test_weighted_tau_of_known_lists() -> None:
    assert weighted_tau(["a", "b", "c"], ["a", "b", "c"]) == pytest.approx(1.0)
    assert weighted_tau(["a", "b", "c"], ["c", "b", "a"]) == pytest.approx(-1.0)
    assert weighted_tau(["a"], ["b"]) == pytest.approx(-1.0)  # each misses the other's only
    assert np.isnan(weighted_tau(["a"], ["a"]))  # one paper: no pair to compare
    # A swap at the top costs more than the same swap at the bottom (the weights).
    top = weighted_tau(list("abcdef"), list("bacdef"))
    bottom = weighted_tau(list("abcdef"), list("abcdfe"))
    assert -1 < top < bottom < 1
    # Lists with nothing in common are far below lists sharing their top.
    assert weighted_tau(list("abc"), list("xyz")) < weighted_tau(list("abc"), list("abz"))
    assert weighted_tau_many([], []).shape == (0,)


def test_words_shared_with_the_query_are_marked_as_written() -> None:
    query = words("The effect of Nitrogen on air pollutants, a study")
    assert query == {"effect", "nitrogen", "air", "pollutants", "study"}  # no stop words
    assert pieces("Air quality and nitrogen-dioxide", query) == [
        Piece("Air", True),
        Piece(" quality and "),
        Piece("nitrogen", True),
        Piece("-dioxide"),
    ]
    assert "".join(p.text for p in pieces("of the air, again", query)) == "of the air, again"
    assert len(words("Air and AIR pollutants of the city") & query) == 2
    title, abstract = "Air and AIR", "pollutants of the city; nitrogen-air study"
    assert shared_in(pieces(title, query), pieces(abstract, query)) == 4
    assert len(words(f"{title} {abstract}") & query) == 4
