"""GPU search equals CPU Faiss (torch backend always; Faiss GPU when installed): the same
rows and float64 bits, the torch backend re-scoring and ranking on the GPU."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from mdcr.index.backends import (
    Backend,
    FaissBackend,
    TorchBackend,
    faiss_gpu_count,
)
from mdcr.index.exact import SearchStats, exact_topk, exact_topk_multi
from mdcr.retrievers.device import resolve_device

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def _data(
    n: int, nq: int, d: int, seed: int, levels: bool, scale: float = 1.0
) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    db = (rng.integers(-2, 3, size=(n, d)) / 4.0) if levels else rng.standard_normal((n, d))
    db = (db * scale).astype(np.float16)
    q_rows = rng.choice(n, size=nq, replace=False)
    return db, db[q_rows].copy(), q_rows


def _same(a, b) -> None:  # type: ignore[no-untyped-def]
    """The same rows and the same float64 bits."""
    for (ra, sa), (rb, sb) in zip(a, b, strict=True):
        np.testing.assert_array_equal(ra, rb)
        assert np.array_equal(sa.view(np.int64), sb.view(np.int64))


def _cpu(db: np.ndarray, metric: str) -> Backend:
    """The reference: CPU Faiss where installed, else the torch backend on the CPU."""
    if importlib.util.find_spec("faiss"):
        return FaissBackend(db, metric, resolve_device("cpu"))  # type: ignore[arg-type]
    return TorchBackend(db, metric, resolve_device("cpu"))  # type: ignore[arg-type]


@pytest.mark.parametrize("metric", ["ip", "l2"])
@pytest.mark.parametrize(("levels", "scale"), [(False, 1 / 8), (True, 1.0), (False, 2.0)])
def test_torch_gpu_backend_equals_cpu_faiss(metric: str, levels: bool, scale: float) -> None:
    """Unit-scale vectors (no pair checked), ties (widening), and norms near 16 (every
    pair checked, a few left to the host): the CPU's rows and bits."""
    db, q, ex = _data(20_000, 64, 64, seed=1, levels=levels, scale=scale)
    cpu = _cpu(db, metric)
    gpu = TorchBackend(db, metric, resolve_device("cuda"), chunk_rows=6000)  # type: ignore[arg-type]
    assert gpu.rescore_on_device
    for k in (10, 500, 2500):
        stats = SearchStats()
        _same(
            exact_topk(gpu, db, q, ex, k, metric, batch=32, stats=stats),  # type: ignore[arg-type]
            exact_topk(cpu, db, q, ex, k, metric, batch=32),  # type: ignore[arg-type]
        )
        assert stats.extra["device_rescoring"] == 1


def test_torch_gpu_leaves_inexact_pairs_to_the_host() -> None:
    """Large values beside tiny ones: numpy's float64 sums round, the GPU proves most
    pairs inexact-free or not, and those it cannot are the host's: the same bits."""
    rng = np.random.default_rng(3)
    db = rng.standard_normal((5_000, 40)) * 4
    db[:, ::5] = rng.standard_normal((5_000, 8)) * 1e-4
    db = db.astype(np.float16)
    ex = rng.choice(5_000, size=32, replace=False)
    q = db[ex].copy()
    for metric in ("ip", "l2"):
        stats = SearchStats()
        gpu = TorchBackend(db, metric, resolve_device("cuda"))  # type: ignore[arg-type]
        _same(
            exact_topk(gpu, db, q, ex, 100, metric, stats=stats),  # type: ignore[arg-type]
            exact_topk(_cpu(db, metric), db, q, ex, 100, metric),  # type: ignore[arg-type]
        )
        assert stats.extra["host_rescored"] > 0


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_torch_gpu_multi_vector_equals_cpu(metric: str) -> None:
    rng = np.random.default_rng(4)
    counts = rng.integers(1, 8, size=3_000)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    sents = (rng.integers(-1, 2, size=(offsets[-1], 8)) / 2.0).astype(np.float16)  # ties
    q_docs = rng.choice(3_000, size=40, replace=False)
    parts = [sents[offsets[i] : offsets[i + 1]] for i in q_docs]
    q_off = np.concatenate([[0], np.cumsum([len(p) for p in parts])])
    doc_of = np.repeat(np.arange(3_000), counts)
    qs = np.concatenate(parts)
    gpu = TorchBackend(sents, metric, resolve_device("cuda"), chunk_rows=5000)  # type: ignore[arg-type]
    stats = SearchStats()
    runs = [
        exact_topk_multi(
            backend,
            sents,
            doc_of,
            qs,
            q_off,
            q_docs,
            100,
            metric,  # type: ignore[arg-type]
            margin=2,
            batch=64,
            stats=st,
        )
        for backend, st in ((gpu, stats), (_cpu(sents, metric), SearchStats()))
    ]
    _same(*runs)
    assert stats.extra["device_rescoring"] == 1 and stats.widened > 0


def test_torch_gpu_float32_store_ranks_on_the_host() -> None:
    db, q, ex = _data(10_000, 32, 48, seed=5, levels=True, scale=3.0)
    db32, q32 = db.astype(np.float32) * np.float32(1 + 2**-20), q.astype(np.float32)
    stats = SearchStats()
    gpu = TorchBackend(db32, "ip", resolve_device("cuda"))  # type: ignore[arg-type]
    _same(
        exact_topk(gpu, db32, q32, ex, 300, "ip", stats=stats),  # type: ignore[arg-type]
        exact_topk(_cpu(db32, "ip"), db32, q32, ex, 300, "ip"),  # type: ignore[arg-type]
    )
    assert "device_rescoring" not in stats.extra


@pytest.mark.skipif(faiss_gpu_count() == 0, reason="needs faiss-gpu")
def test_faiss_gpu_equals_cpu_including_k_above_2048() -> None:
    db, q, ex = _data(20_000, 64, 64, seed=2, levels=True)
    cpu = FaissBackend(db, "ip", resolve_device("cpu"))
    gpu = FaissBackend(db, "ip", resolve_device("cuda"))
    assert gpu.gpu
    for k in (100, 2500):
        _same(exact_topk(gpu, db, q, ex, k, "ip"), exact_topk(cpu, db, q, ex, k, "ip"))
