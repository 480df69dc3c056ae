"""GPU search equals CPU Faiss (torch backend always; Faiss GPU when installed)."""

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
from mdcr.index.exact import exact_topk
from mdcr.retrievers.device import resolve_device

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def _data(n: int, nq: int, d: int, seed: int, levels: bool) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    db = (rng.integers(-2, 3, size=(n, d)) / 4.0) if levels else rng.standard_normal((n, d))
    db = db.astype(np.float16)
    q_rows = rng.choice(n, size=nq, replace=False)
    return db, db[q_rows].copy(), q_rows


def _same(a, b) -> None:  # type: ignore[no-untyped-def]
    for (ra, sa), (rb, sb) in zip(a, b, strict=True):
        np.testing.assert_array_equal(ra, rb)
        np.testing.assert_allclose(sa, sb, rtol=0, atol=1e-5)


@pytest.mark.parametrize("metric", ["ip", "l2"])
@pytest.mark.parametrize("levels", [False, True])
def test_torch_gpu_backend_equals_cpu_faiss(metric: str, levels: bool) -> None:
    db, q, ex = _data(20_000, 64, 64, seed=1, levels=levels)
    # The reference: CPU Faiss where installed, else the torch backend on the CPU.
    cpu: Backend = (
        FaissBackend(db, metric, resolve_device("cpu"))  # type: ignore[arg-type]
        if importlib.util.find_spec("faiss")
        else TorchBackend(db, metric, resolve_device("cpu"))  # type: ignore[arg-type]
    )
    gpu = TorchBackend(db, metric, resolve_device("cuda"), chunk_rows=6000)  # type: ignore[arg-type]
    for k in (10, 500, 2500):
        _same(
            exact_topk(gpu, db, q, ex, k, metric, batch=32),  # type: ignore[arg-type]
            exact_topk(cpu, db, q, ex, k, metric, batch=32),
        )  # type: ignore[arg-type]


@pytest.mark.skipif(faiss_gpu_count() == 0, reason="needs faiss-gpu")
def test_faiss_gpu_equals_cpu_including_k_above_2048() -> None:
    db, q, ex = _data(20_000, 64, 64, seed=2, levels=True)
    cpu = FaissBackend(db, "ip", resolve_device("cpu"))
    gpu = FaissBackend(db, "ip", resolve_device("cuda"))
    assert gpu.gpu
    for k in (100, 2500):
        _same(exact_topk(gpu, db, q, ex, k, "ip"), exact_topk(cpu, db, q, ex, k, "ip"))
