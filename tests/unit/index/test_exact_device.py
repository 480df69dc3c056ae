"""The exact re-ranking on a torch backend's device gives the host path's rows and float64
bits: the same code as on a GPU, run here on the CPU (``rescore_on_device=True``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mdcr.index import exact as exact_module
from mdcr.index.backends import FaissBackend, TorchBackend
from mdcr.index.exact import SearchStats, _dots, exact_topk, exact_topk_multi
from mdcr.retrievers.device import Device

torch = pytest.importorskip("torch")
from mdcr.index.exact_device import lowbit  # noqa: E402 (needs torch)


def _data(n: int, nq: int, d: int, *, seed: int, levels: int | None, scale: float):
    """float16 pool and queries (half of them pool rows); with ``levels``, coarse values
    so that scores tie and the windows widen; two zero rows (exact zeros, signed zeros)."""
    rng = np.random.default_rng(seed)
    if levels:
        db = rng.integers(-levels, levels + 1, size=(n, d)) / 4.0
        db[n // 2 : n // 2 + 20] = db[:20]  # exact duplicates: ties, and -0.0 L2 scores
    else:
        db = rng.standard_normal((n, d)) / np.sqrt(d)
    db[3], db[4] = 0.0, -0.0
    db = (db * scale).astype(np.float16)
    q_rows = rng.choice(n, size=nq // 2, replace=False)
    other = rng.standard_normal((nq - nq // 2, d)) / np.sqrt(d) * scale
    if levels:
        other = np.round(other * 2) / 2
    other[0] = -np.abs(other[0])  # against the +0.0 row: every product is -0.0
    queries = np.concatenate([db[q_rows], other.astype(np.float16)])
    exclude = np.concatenate([q_rows, -np.ones(nq - nq // 2, dtype=np.int64)])
    return db, queries, exclude


def _same_bits(a, b) -> None:  # type: ignore[no-untyped-def]
    assert len(a) == len(b)
    for (ra, sa), (rb, sb) in zip(a, b, strict=True):
        assert ra.dtype == rb.dtype and sa.dtype == sb.dtype == np.float64
        np.testing.assert_array_equal(ra, rb)
        assert np.array_equal(sa.view(np.int64), sb.view(np.int64))


def _device(db: np.ndarray, metric: str, chunk_rows: int = 97) -> TorchBackend:
    return TorchBackend(db, metric, Device(), chunk_rows=chunk_rows, rescore_on_device=True)  # type: ignore[arg-type]


@pytest.mark.parametrize("metric", ["ip", "l2"])
@pytest.mark.parametrize("levels", [None, 2])
@pytest.mark.parametrize("scale", [1.0, 16.0])
def test_device_rescoring_gives_the_host_bits(
    metric: str, levels: int | None, scale: float
) -> None:
    """Rows and score bits equal Faiss's and the torch backend's host path, the query
    left out, ties across the window's edge widened as often; at scale 16 (|q| |x| up to
    256) every pair is checked for exactness."""
    db, queries, exclude = _data(700, 40, 16, seed=1, levels=levels, scale=scale)
    runs, widened = [], []
    for backend in (
        FaissBackend(db, metric, Device()),  # type: ignore[arg-type]
        TorchBackend(db, metric, Device(), chunk_rows=97),  # type: ignore[arg-type]
        _device(db, metric),
    ):
        stats = SearchStats()
        run = exact_topk(backend, db, queries, exclude, 50, metric, margin=3, batch=16, stats=stats)  # type: ignore[arg-type]
        runs.append(run)
        widened.append(stats.widened)
        on_device = bool(getattr(backend, "rescore_on_device", False))
        assert stats.extra.get("device_rescoring", 0) == int(on_device)
    _same_bits(runs[0], runs[1])
    _same_bits(runs[0], runs[2])
    assert widened[0] == widened[2]
    if levels:
        assert widened[0] > 0
    for (rows, _), ex in zip(runs[2], exclude, strict=True):
        assert ex not in rows and len(rows) == 50
    if metric == "l2" and levels:  # a duplicate of a query row scores -0.0, first
        tops = [s[0] for r, s in runs[2][:20] if len(r)]
        assert any(s == 0.0 and np.signbit(s) for s in tops)


def test_device_rescoring_edges_of_k_and_window() -> None:
    """k of 1, k past the window, k at and beyond the pool: the same as the host."""
    db, queries, exclude = _data(300, 20, 8, seed=2, levels=1, scale=1.0)
    host, dev = FaissBackend(db, "ip", Device()), _device(db, "ip", chunk_rows=64)
    for k in (1, 7, 299, 300, 1000):
        stats_h, stats_d = SearchStats(), SearchStats()
        a = exact_topk(host, db, queries, exclude, k, "ip", margin=0, stats=stats_h)
        b = exact_topk(dev, db, queries, exclude, k, "ip", margin=0, stats=stats_d)
        _same_bits(a, b)
        assert (stats_h.widened, stats_h.max_window) == (stats_d.widened, stats_d.max_window)
        assert [len(r) for r, _ in b] == [min(k, 300 - (ex >= 0)) for ex in exclude]


def _adversarial(n: int, nq: int, d: int, seed: int) -> tuple[np.ndarray, ...]:
    """Vectors whose float64 sums round: large values, and every fifth dimension tiny in
    both the query and the row (products of 2^-30 and below beside sums near 2^8)."""
    rng = np.random.default_rng(seed)
    db = rng.standard_normal((n, d)) * 4
    db[:, ::5] = rng.standard_normal((n, len(range(0, d, 5)))) * 1e-4
    db = db.astype(np.float16)
    q_rows = rng.choice(n, size=nq, replace=False)
    return db, db[q_rows].copy(), q_rows


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_pairs_not_proven_exact_are_scored_by_the_host(metric: str) -> None:
    """Where numpy's float64 sum is not the exact dot product, the device leaves the pair
    to the host: the same bits, the count in ``host_rescored``; every pair it keeps is the
    exact sum (math.fsum)."""
    db, queries, exclude = _adversarial(400, 12, 40, seed=3)
    prods = db[None].astype(np.float64) * queries[:, None].astype(np.float64)
    numpy_sums = _dots(np.broadcast_to(db, prods.shape), queries[:, None, :])
    exact = np.array([[math.fsum(p) for p in row] for row in prods])
    assert (numpy_sums != exact).sum() > 100  # numpy's sums round here: the case is real
    stats = SearchStats()
    host = exact_topk(FaissBackend(db, metric, Device()), db, queries, exclude, 30, metric)  # type: ignore[arg-type]
    dev = exact_topk(_device(db, metric), db, queries, exclude, 30, metric, stats=stats)  # type: ignore[arg-type]
    _same_bits(host, dev)
    assert stats.extra["host_rescored"] > 0

    # The check itself: a pair it passes is exact, a pair whose sum rounds fails it.
    from mdcr.index.exact_device import _exact

    x = torch.from_numpy(np.repeat(db[None], len(queries), 0).reshape(-1, db.shape[1]))
    q = torch.from_numpy(np.repeat(queries, len(db), 0))
    dot, bad = _exact(x.float(), q.double(), lowbit(x), lowbit(q))
    assert bad is not None
    ok = np.ones(len(x), dtype=bool)
    ok[bad.numpy()] = False
    assert np.array_equal(dot.numpy()[ok], exact.ravel()[ok])
    assert not ok[(numpy_sums != exact).ravel()].any()


def test_lowbit_of_every_float16_value() -> None:
    """The lowest set bit of each finite float16 value, against integer arithmetic: the
    largest power of two that divides the value (in units of 2^-24, the float16 grain)."""
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    values = bits.view(np.float16)
    values = values[np.isfinite(values)]
    got = lowbit(torch.from_numpy(values.copy())).numpy()
    units = np.abs(values.astype(np.float64)) * 2.0**24  # exact integers below 2^40
    ints = units.astype(np.int64)
    assert np.array_equal(ints, units)
    want = np.where(ints == 0, np.inf, (ints & -ints) * 2.0**-24)
    assert np.array_equal(got, want.astype(np.float32))


def test_float32_stores_and_mixed_dtypes_stay_on_the_host() -> None:
    """float32 sums of products round in numpy's order alone: a float32 store (or float32
    queries) is ranked on the host even when the backend would rank on its device."""
    db, queries, exclude = _data(500, 20, 12, seed=4, levels=2, scale=8.0)
    db32 = db.astype(np.float32) * np.float32(1.0 + 2.0**-20)  # beyond float16's grain
    q32 = queries.astype(np.float32) * np.float32(1.0 - 2.0**-21)
    for store, q in ((db32, q32), (db, q32)):
        stats = SearchStats()
        a = exact_topk(FaissBackend(store, "l2", Device()), store, q, exclude, 40, "l2")
        b = exact_topk(_device(store, "l2"), store, q, exclude, 40, "l2", stats=stats)
        _same_bits(a, b)
        assert "device_rescoring" not in stats.extra


def _multi(n_docs: int, nq: int, d: int, *, seed: int, levels: int | None, scale: float):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 6, size=n_docs)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    if levels:
        sents = rng.integers(-levels, levels + 1, size=(offsets[-1], d)) / 2.0
    else:
        sents = rng.standard_normal((offsets[-1], d)) / np.sqrt(d)
    sents = (sents * scale).astype(np.float16)
    q_docs = rng.choice(n_docs, size=nq, replace=False)
    parts = [sents[offsets[i] : offsets[i + 1]] for i in q_docs]
    q_off = np.concatenate([[0], np.cumsum([len(p) for p in parts])])
    doc_of = np.repeat(np.arange(n_docs), counts)
    return sents, doc_of, np.concatenate(parts), q_off, q_docs


@pytest.mark.parametrize("metric", ["ip", "l2"])
@pytest.mark.parametrize(("levels", "scale"), [(1, 0.25), (None, 1.0), (1, 8.0)])
def test_multi_vector_device_rescoring_gives_the_host_bits(
    metric: str, levels: int | None, scale: float
) -> None:
    """Best sentence pair per document: the same documents, bits and widening as the
    host path, batches of whole query documents (4 sentences)."""
    sents, doc_of, qs, q_off, q_docs = _multi(250, 15, 8, seed=5, levels=levels, scale=scale)
    stats_h, stats_d = SearchStats(), SearchStats()
    runs = [
        exact_topk_multi(
            backend,
            sents,
            doc_of,
            qs,
            q_off,
            q_docs,
            30,
            metric,  # type: ignore[arg-type]
            margin=2,
            batch=4,
            stats=stats,
        )
        for backend, stats in (
            (FaissBackend(sents, metric, Device()), stats_h),  # type: ignore[arg-type]
            (_device(sents, metric), stats_d),
        )
    ]
    _same_bits(*runs)
    assert stats_h.widened == stats_d.widened and stats_d.extra["device_rescoring"] == 1
    if levels:
        assert stats_d.widened > 0


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_device_rescoring_makes_no_pass_over_the_pool_on_the_host(
    metric: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The largest norm comes from the build and the squared norms (l2) from the device:
    no host pass over the pool (only the queries' squared norms are taken there)."""
    db, queries, exclude = _data(2_500, 17, 24, seed=7, levels=2, scale=4.0)
    backend = _device(db, metric, chunk_rows=1000)
    want = exact_topk(FaissBackend(db, metric, Device()), db, queries, exclude, 40, metric)  # type: ignore[arg-type]
    seen: list[int] = []
    real = exact_module.squared_norms

    def counted(vectors: np.ndarray, block: int = 1 << 16) -> np.ndarray:
        seen.append(len(vectors))
        return real(vectors, block)

    def no_pass(vectors: np.ndarray, block: int = 1 << 16) -> float:
        raise AssertionError("max_norm was computed again over the pool")

    monkeypatch.setattr(exact_module, "squared_norms", counted)
    monkeypatch.setattr(exact_module, "max_norm", no_pass)
    _same_bits(want, exact_topk(backend, db, queries, exclude, 40, metric))  # type: ignore[arg-type]
    assert seen == ([len(queries)] if metric == "l2" else [])


def test_gather_chunk_by_chunk_equals_one_index_select() -> None:
    """With several GPUs the chunks live apart and rows are gathered chunk by chunk; the
    same rows as one index_select over the whole."""
    db, _, _ = _data(1_000, 2, 16, seed=8, levels=None, scale=1.0)
    backend = _device(db, "ip", chunk_rows=130)
    rows = torch.from_numpy(np.random.default_rng(0).integers(0, 1_000, size=777))
    whole = backend.gather(rows)
    backend._rows = None  # as with several devices
    assert torch.equal(backend.gather(rows), whole)
    assert torch.equal(whole, torch.from_numpy(db.astype(np.float32))[rows])
