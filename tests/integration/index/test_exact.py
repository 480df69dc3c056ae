"""Exact dense search equals a numpy brute force: scores, order and ties, query excluded."""

from __future__ import annotations

import numpy as np
import pytest

from mdcr.index import exact as exact_module
from mdcr.index.backends import FaissBackend, TorchBackend, choose_backend
from mdcr.index.exact import (
    SearchStats,
    _dots,
    exact_topk,
    exact_topk_multi,
)
from mdcr.index.exact_kernel import compiled_rescoring, exact_dots, sentence_batches
from mdcr.index.runs import rank_candidates
from mdcr.retrievers.device import Device


def _data(n: int, nq: int, d: int, *, seed: int, levels: int | None) -> tuple[np.ndarray, ...]:
    """float16 pool and queries; with ``levels``, coarse values so that many scores tie."""
    rng = np.random.default_rng(seed)
    if levels:
        db = rng.integers(-levels, levels + 1, size=(n, d)) / 4.0
        db[n // 2 : n // 2 + 20] = db[:20]  # exact duplicates: guaranteed ties
    else:
        db = rng.standard_normal((n, d))
    db = db.astype(np.float16)
    q_rows = rng.choice(n, size=nq // 2, replace=False)  # half the queries are pool papers
    queries = np.concatenate([db[q_rows], rng.standard_normal((nq - nq // 2, d))])
    queries = queries.astype(np.float16)
    if levels:
        queries = (np.round(queries.astype(np.float32) * 2) / 2).astype(np.float16)
        queries[: nq // 2] = db[q_rows]
    exclude = np.concatenate([q_rows, -np.ones(nq - nq // 2, dtype=np.int64)])
    return db, queries, exclude


def _brute(db: np.ndarray, queries: np.ndarray, exclude: np.ndarray, k: int, metric: str):
    """Every score in float64, then the run contract's rule (rank_candidates)."""
    ids = np.array([f"d{i:05d}" for i in range(len(db))])  # id order == row order
    d64 = db.astype(np.float64)
    out = []
    for q, ex in zip(queries.astype(np.float64), exclude, strict=True):
        s = (d64 * q).sum(axis=1) if metric == "ip" else -((d64 - q) ** 2).sum(axis=1)
        r_ids, r_scores = rank_candidates(ids, s, k, exclude=ids[ex] if ex >= 0 else None)
        out.append((np.array([int(i[1:]) for i in r_ids]), r_scores))
    return out


def _backends(db: np.ndarray, metric: str):
    return [FaissBackend(db, metric, Device()), TorchBackend(db, metric, Device(), chunk_rows=97)]


@pytest.mark.parametrize("metric", ["ip", "l2"])
@pytest.mark.parametrize("levels", [None, 2])
def test_single_vector_equals_brute_force(metric: str, levels: int | None) -> None:
    db, queries, exclude = _data(700, 40, 16, seed=1, levels=levels)
    k = 50
    want = _brute(db, queries, exclude, k, metric)
    for backend in _backends(db, metric):
        stats = SearchStats()
        got = exact_topk(backend, db, queries, exclude, k, metric, margin=3, batch=16, stats=stats)  # type: ignore[arg-type]
        for (g_rows, g_sc), (w_rows, w_sc) in zip(got, want, strict=True):
            np.testing.assert_array_equal(g_rows, w_rows)
            if metric == "ip":
                np.testing.assert_array_equal(g_sc, w_sc)  # the same float64 bits
            else:  # -(|q|^2 + |x|^2 - 2 q.x) against -|q - x|^2: equal up to rounding
                np.testing.assert_allclose(g_sc, w_sc, rtol=1e-12, atol=1e-12)
        if levels:
            assert stats.widened > 0  # ties across the boundary forced wider searches


def test_torch_backend_equals_faiss_and_edge_cases() -> None:
    db, queries, exclude = _data(300, 20, 8, seed=2, levels=1)
    faiss_b, torch_b = _backends(db, "ip")
    for k in (1, 7, 299, 300, 1000):
        a = exact_topk(faiss_b, db, queries, exclude, k, "ip", margin=0)
        b = exact_topk(torch_b, db, queries, exclude, k, "ip", margin=0)
        for (ra, sa), (rb, sb), ex in zip(a, b, exclude, strict=True):
            np.testing.assert_array_equal(ra, rb)
            np.testing.assert_allclose(sa, sb, rtol=0, atol=1e-5)
            assert ex not in ra
            assert len(ra) == min(k, 300 - (ex >= 0))


def test_backend_raw_scores_agree() -> None:
    db, queries, _ = _data(500, 10, 32, seed=3, levels=None)
    for metric in ("ip", "l2"):
        fa, tb = _backends(db, metric)
        s1, r1 = fa.search(queries, 20)
        s2, _ = tb.search(queries, 20)
        np.testing.assert_allclose(s1, s2, atol=1e-3)
        ref = queries.astype(np.float64) @ db.astype(np.float64).T
        if metric == "l2":
            ref = -(
                (queries[:, None, :].astype(np.float64) - db[None].astype(np.float64)) ** 2
            ).sum(-1)
        np.testing.assert_allclose(s1, np.take_along_axis(ref, r1, 1), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_cpu_faiss_backend_is_a_raw_flat_index(metric: str) -> None:
    """The CPU backend converts the float16 pool into its own float32 rows (in blocks, on
    all cores) and searches them with Faiss's brute force: the same distances and rows,
    bit for bit, as an IndexFlat built by ``add`` of the float32 vectors; the same largest
    norm as :func:`exact.max_norm`; rows that are the float32 pool."""
    import faiss

    db, queries, _ = _data(2_500, 17, 24, seed=5, levels=2)  # 2.4 blocks, ties included
    backend = FaissBackend(db, metric, Device())  # type: ignore[arg-type]
    raw = faiss.IndexFlatIP(24) if metric == "ip" else faiss.IndexFlatL2(24)
    raw.add(db.astype(np.float32))
    dist, rows = raw.search(queries.astype(np.float32), 40)
    scores, got = backend.search(queries, 40)
    np.testing.assert_array_equal(got, rows)
    np.testing.assert_array_equal(scores, dist if metric == "ip" else -dist)
    assert backend.vectors32 is not None
    np.testing.assert_array_equal(backend.vectors32, db.astype(np.float32))
    assert backend.max_norm == exact_module.max_norm(db)
    empty = FaissBackend(db[:0], metric, Device())  # type: ignore[arg-type]
    assert empty.max_norm == 0.0 and empty.n == 0


def _multi_data(n_docs: int, nq: int, d: int, seed: int, levels: int | None):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 6, size=n_docs)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    if levels:
        sents = rng.integers(-levels, levels + 1, size=(offsets[-1], d)) / 2.0
    else:
        sents = rng.standard_normal((offsets[-1], d))
    sents = sents.astype(np.float16)
    q_docs = rng.choice(n_docs, size=nq, replace=False)
    q_parts = [sents[offsets[i] : offsets[i + 1]] for i in q_docs]
    q_off = np.concatenate([[0], np.cumsum([len(p) for p in q_parts])])
    return sents, offsets, np.concatenate(q_parts), q_off, q_docs


@pytest.mark.parametrize("levels", [None, 1])
def test_multi_vector_equals_brute_force(levels: int | None) -> None:
    sents, offsets, qs, q_off, q_docs = _multi_data(250, 15, 8, seed=4, levels=levels)
    doc_of = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    k = 30
    ids = np.array([f"d{i:05d}" for i in range(len(offsets) - 1)])
    want = []
    for i in range(len(q_docs)):
        q = qs[q_off[i] : q_off[i + 1]].astype(np.float64)
        pair = -((q[:, None, :] - sents[None].astype(np.float64)) ** 2).sum(-1)  # (s, m)
        best = np.full(len(ids), -np.inf)
        np.maximum.at(best, doc_of, pair.max(axis=0))
        r_ids, r_sc = rank_candidates(ids, best, k, exclude=ids[q_docs[i]])
        want.append((np.array([int(x[1:]) for x in r_ids]), r_sc))
    for backend in (FaissBackend(sents, "l2", Device()), TorchBackend(sents, "l2", Device())):
        stats = SearchStats()
        got = exact_topk_multi(
            backend, sents, doc_of, qs, q_off, q_docs, k, "l2", margin=2, batch=4, stats=stats
        )
        for (g_rows, g_sc), (w_rows, w_sc) in zip(got, want, strict=True):
            np.testing.assert_array_equal(g_rows, w_rows)
            np.testing.assert_allclose(g_sc, w_sc, rtol=0, atol=1e-9)
        assert stats.widened > 0


def test_auto_backend_on_cpu_is_faiss() -> None:
    assert choose_backend("auto", Device()) == "faiss"
    assert choose_backend("torch", Device()) == "torch"


@pytest.mark.parametrize(("faiss_gpus", "want"), [(0, "torch"), (1, "faiss"), (4, "faiss")])
def test_auto_backend_on_gpu(monkeypatch: pytest.MonkeyPatch, faiss_gpus: int, want: str) -> None:
    """On a GPU, auto is Faiss where Faiss sees GPUs (faiss-gpu), else torch; no GPU needed
    to check it: the count Faiss reports is set here."""
    from mdcr.core.errors import ConfigError
    from mdcr.index import backends

    monkeypatch.setattr(backends, "faiss_gpu_count", lambda: faiss_gpus)
    assert choose_backend("auto", Device((0,))) == want
    assert choose_backend("auto", Device((0, 1))) == want
    assert choose_backend("auto", Device()) == "faiss"  # the CPU: Faiss whatever the GPUs
    if faiss_gpus:
        assert choose_backend("faiss", Device((0,))) == "faiss"
    else:
        with pytest.raises(ConfigError, match="'faiss' on a GPU needs faiss-gpu"):
            choose_backend("faiss", Device((0,)))


def test_compiled_dots_are_the_numpy_bits_signed_zeros_and_subnormals_included() -> None:
    """The compiled dot product (reassociated, vectorised) equals numpy's pairwise float64
    sum bit for bit whenever |q| |x| < 32: the sums are exact in any order."""
    rng = np.random.default_rng(7)
    d = 96
    rows = rng.standard_normal((300, d)) / np.sqrt(d)
    rows[0] = 0.0  # +0.0 row: every product a signed zero
    rows[1] = -0.0
    rows[2, :] = 2.0**-24 * rng.integers(-3, 4, size=d)  # float16 subnormals
    rows[3, ::2] = 6e-5  # at the normal/subnormal boundary
    rows[4] = rows[5] * 0 - rows[5]  # exact cancellation against row 5 for some queries
    db = rows.astype(np.float16)
    queries = np.concatenate([db[:6], rng.standard_normal((6, d)) / np.sqrt(d)]).astype(np.float16)
    queries[6] = -np.abs(queries[6])  # all negative: products with +0.0 rows are -0.0
    cand = rng.integers(0, len(db), size=(len(queries), 40))
    cand[:, :6] = np.arange(6)
    q_norm = float(np.linalg.norm(queries.astype(np.float64), axis=1).max())
    assert compiled_rescoring(db, q_norm, 1.5)
    owner = np.repeat(np.arange(len(queries)), cand.shape[1])
    got = exact_dots(db[cand.ravel()].astype(np.float32), owner, queries.astype(np.float64))
    want = np.concatenate([_dots(db[c], q[None, :]) for c, q in zip(cand, queries, strict=True)])
    assert np.array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))  # zeros keep their sign
    products = db[cand[6, 0]].astype(np.float32) * queries[6].astype(np.float32)
    assert np.signbit(products).all() and not products.any()  # an all -0.0 sum was tested


def test_compiled_rescoring_needs_float16_and_norms_below_32() -> None:
    db = np.ones((4, 8), dtype=np.float16)
    assert compiled_rescoring(db, 1.0, 30.0)
    assert not compiled_rescoring(db, 1.0, 32.0)  # the sums may round: the numpy path
    assert not compiled_rescoring(db.astype(np.float32), 1.0, 1.0)
    assert not compiled_rescoring(db, float("nan"), 1.0)


@pytest.mark.parametrize("metric", ["ip", "l2"])
@pytest.mark.parametrize("scale", [1.0, 16.0])
def test_compiled_and_numpy_paths_write_the_same_runs(
    metric: str, scale: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both paths, on both backends, give the same rows and float64 bits; vectors of norm
    above the bound (scale 16: |q| |x| ~ 256) take the numpy path by themselves."""
    db, queries, exclude = _data(600, 40, 16, seed=9, levels=2)
    db = (db.astype(np.float32) * scale / 4).astype(np.float16)
    queries = (queries.astype(np.float32) * scale / 4).astype(np.float16)
    runs = []
    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(exact_module, "compiled_rescoring", lambda *a: False)
        for backend in _backends(db, metric):
            stats = SearchStats()
            run = exact_topk(backend, db, queries, exclude, 30, metric, margin=2, stats=stats)  # type: ignore[arg-type]
            runs.append(run)
            assert stats.extra["compiled_rescoring"] == int(compiled and scale == 1.0)
            assert stats.widened > 0  # ties at the boundary exercised the widening
    for other in runs[1:]:
        for (ra, sa), (rb, sb) in zip(runs[0], other, strict=True):
            np.testing.assert_array_equal(ra, rb)
            assert np.array_equal(sa.view(np.int64), sb.view(np.int64))


def test_multi_vector_compiled_and_numpy_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    sents, offsets, qs, q_off, q_docs = _multi_data(200, 12, 8, seed=5, levels=1)
    sents = (sents.astype(np.float32) / 4).astype(np.float16)
    qs = (qs.astype(np.float32) / 4).astype(np.float16)
    doc_of = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    runs = []
    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(exact_module, "compiled_rescoring", lambda *a: False)
        for metric in ("ip", "l2"):
            backend = FaissBackend(sents, metric, Device())  # type: ignore[arg-type]
            run = exact_topk_multi(backend, sents, doc_of, qs, q_off, q_docs, 25, metric, margin=2)  # type: ignore[arg-type]
            runs.append(run)
    for a, b in ((runs[0], runs[2]), (runs[1], runs[3])):
        for (ra, sa), (rb, sb) in zip(a, b, strict=True):
            np.testing.assert_array_equal(ra, rb)
            assert np.array_equal(sa.view(np.int64), sb.view(np.int64))


def test_multi_vector_batches_hold_whole_queries_up_to_the_sentence_budget() -> None:
    offsets = np.concatenate([[0], np.cumsum([3, 1, 5, 2, 2, 9, 1])])
    docs = np.array([0, 1, 2, 3, 4, 5, 6])
    got = [b.tolist() for b in sentence_batches(docs, offsets, 4)]
    assert got == [[0, 1], [2], [3, 4], [5], [6]]  # a 5- or 9-sentence query goes alone
    assert [b.tolist() for b in sentence_batches(docs[[1, 3, 6]], offsets, 100)] == [[1, 3, 6]]


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_the_largest_norm_is_taken_once_by_the_build(
    metric: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both backends take the pool's largest norm while building their rows, the same
    number :func:`exact.max_norm` gives on the CPU, and the exact re-ranking uses it: no
    second pass over the pool (a GPU run's 7.3 s of 9.7 s at 2M x 768 was that pass)."""
    db, queries, exclude = _data(2_500, 17, 24, seed=7, levels=2)
    backends = _backends(db, metric)
    for backend in backends:
        assert backend.max_norm == exact_module.max_norm(db), backend.name
    expected = [exact_topk(b, db, queries, exclude, 40, metric) for b in backends]

    def no_second_pass(vectors: np.ndarray, block: int = 1 << 16) -> float:
        raise AssertionError("max_norm was computed again over the pool")

    monkeypatch.setattr(exact_module, "max_norm", no_second_pass)
    for backend, before in zip(backends, expected, strict=True):
        again = exact_topk(backend, db, queries, exclude, 40, metric)
        for (r1, s1), (r2, s2) in zip(before, again, strict=True):
            np.testing.assert_array_equal(r1, r2)
            np.testing.assert_array_equal(s1, s2)
