"""Exact k-nearest-neighbour backends behind one interface: Faiss (CPU or GPU) and torch.

A backend is built over one pool's float16 vectors and answers ``search(queries, k)``
with approximate float32 scores (higher is better: the inner product, or minus the
squared L2 distance) and row indices, best first. "Approximate" only in rounding: every
backend computes every score (exact search); :mod:`mdcr.index.exact` re-scores the
candidates in float64 and fixes the order, so all backends return identical runs.

- :class:`FaissBackend`: on the CPU, the pool converted once into float32 rows (on all
  cores) that ``faiss.knn`` searches in place, the routine ``IndexFlatIP``/``IndexFlatL2``
  run. On GPU (when ``faiss.get_num_gpus() > 0``) a ``GpuIndexFlat`` stores the vectors
  as float16 (a 2M x 768 pool takes 3 GB), sharded over the GPUs asked for. Faiss's GPU
  k-selection stops at k = 2048; wider searches go to the torch backend on the same GPU,
  or to CPU Faiss without CUDA torch.
- :class:`TorchBackend`: for CUDA torch without faiss-gpu. The pool is cut into chunks
  (spread over the GPUs); each query batch is multiplied with each chunk in float16 with
  float32 accumulation and output, a per-chunk top-k is kept, and the chunk results are
  merged with one more top-k. No full query x pool matrix exists at any time. On the CPU
  (``device="cpu"``, used by CI to test the same code) it runs in float32. On CUDA the
  exact re-scoring runs there too (:mod:`mdcr.index.exact_device`): candidate rows are
  gathered from its chunks (views of one tensor on one GPU), and only their float64
  scores come back to the host.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, Protocol

import numpy as np

from mdcr.core.errors import ConfigError, MissingDependencyError, require
from mdcr.retrievers.device import Device

SearchMetric = Literal["ip", "l2"]
FAISS_GPU_MAX_K = 2048
_ADD_CHUNK = 65_536
_FILL_BLOCK = 1_024  # rows converted to float32 at once (3 MiB at 768 dimensions)


class Backend(Protocol):
    """Exact top-k over one set of vectors."""

    name: str

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(scores float32 (nq, k), rows int64 (nq, k))``, best first, higher is better."""
        ...


def faiss_gpu_count() -> int:
    """GPUs Faiss can use (0 without faiss-gpu or without faiss at all)."""
    try:
        import faiss
    except ImportError:
        return 0
    return int(faiss.get_num_gpus()) if hasattr(faiss, "get_num_gpus") else 0


def torch_cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def choose_backend(backend: str, device: Device) -> str:
    """The backend that ``"auto"`` means here, or a check that the one asked for works.

    auto: Faiss when the device is the CPU or Faiss sees a GPU; torch on CUDA without
    faiss-gpu; torch on the CPU only if Faiss is missing.
    """
    has_faiss = True
    try:
        require("faiss")
    except MissingDependencyError:
        has_faiss = False
    if backend == "faiss":
        if not has_faiss:
            require("faiss")
        if device.is_cuda and faiss_gpu_count() == 0:
            raise ConfigError(
                "search.backend 'faiss' on a GPU needs faiss-gpu, which is not installed; "
                "use backend 'torch' or 'auto', or device 'cpu'"
            )
        return "faiss"
    if backend == "torch":
        require("torch")
        return "torch"
    if backend != "auto":
        raise ConfigError(f"search.backend '{backend}' is not valid; use auto, faiss or torch")
    if device.is_cuda:
        if has_faiss and faiss_gpu_count() > 0:
            return "faiss"
        return "torch"
    return "faiss" if has_faiss else "torch"


def make_backend(name: str, vectors: np.ndarray, metric: SearchMetric, device: Device) -> Backend:
    if name == "faiss":
        return FaissBackend(vectors, metric, device)
    return TorchBackend(vectors, metric, device)


class FaissBackend:
    """Faiss flat (exact) index; GPU with float16 storage when the device is a GPU."""

    def __init__(self, vectors: np.ndarray, metric: SearchMetric, device: Device) -> None:
        faiss = require("faiss")
        self.metric = metric
        self.device = device
        self.dim = int(vectors.shape[1])
        self.n = int(vectors.shape[0])
        self._vectors = vectors
        self._wide: Backend | None = None
        self.gpu = device.is_cuda and faiss.get_num_gpus() > 0
        self.max_norm = 0.0  # the largest L2 norm, as mdcr.index.exact.max_norm computes it
        # On the CPU, the float32 rows searched (the exact re-scoring gathers from them too).
        self.vectors32: np.ndarray | None = None
        if not self.gpu:
            self.name = "faiss-cpu"
            self.vectors32, self.max_norm = _float32_rows(vectors)
            return
        self._resources: list[Any] = []
        if len(device.gpus) == 1:
            res = faiss.StandardGpuResources()
            self._resources.append(res)
            cfg = faiss.GpuIndexFlatConfig()
            cfg.useFloat16 = vectors.dtype == np.float16  # float32 stores stay float32
            cfg.device = device.gpus[0]
            cls = faiss.GpuIndexFlatIP if metric == "ip" else faiss.GpuIndexFlatL2
            self.index = cls(res, self.dim, cfg)
        else:
            cpu_index = (
                faiss.IndexFlatIP(self.dim) if metric == "ip" else faiss.IndexFlatL2(self.dim)
            )
            co = faiss.GpuMultipleClonerOptions()
            co.useFloat16 = vectors.dtype == np.float16
            co.shard = True
            self.index = faiss.index_cpu_to_gpus_list(cpu_index, co=co, gpus=list(device.gpus))
        self.name = f"faiss-gpu({device})"
        for start in range(0, self.n, _ADD_CHUNK):
            chunk = np.ascontiguousarray(vectors[start : start + _ADD_CHUNK], dtype=np.float32)
            if len(chunk):
                self.max_norm = max(self.max_norm, max_norm32(chunk))
            self.index.add(chunk)

    def _wide_backend(self) -> Backend:
        """Where searches with k above Faiss's GPU limit go."""
        if self._wide is None:
            if torch_cuda_available():
                self._wide = TorchBackend(self._vectors, self.metric, self.device)
            else:
                self._wide = FaissBackend(self._vectors, self.metric, Device())
        return self._wide

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, self.n)
        if self.gpu and k > FAISS_GPU_MAX_K:
            return self._wide_backend().search(queries, k)
        q = np.ascontiguousarray(queries, dtype=np.float32)
        if self.vectors32 is not None:
            # Faiss's brute-force search over our float32 rows: the routine that
            # IndexFlatIP / IndexFlatL2.search runs over its own copy, so the same results.
            faiss = require("faiss")
            kind = faiss.METRIC_INNER_PRODUCT if self.metric == "ip" else faiss.METRIC_L2
            dist, rows = faiss.knn(q, self.vectors32, k, metric=kind)
        else:
            dist, rows = self.index.search(q, k)
        scores = dist if self.metric == "ip" else -dist
        return scores.astype(np.float32, copy=False), rows.astype(np.int64, copy=False)


def _chunk_max_norm(part: Any, squared: Any) -> float:
    """The largest L2 norm of a chunk of a torch backend's rows on a GPU, from the squared
    norms there (float32 sums in another order than numpy's: the bound keeps its 2x margin
    over such rounding). On the CPU the norm comes with the rows (:func:`_float32_rows`)."""
    if not len(part):
        return 0.0
    sq = squared if squared is not None else part.float().pow(2).sum(dim=1)
    return float(sq.max().sqrt().item())


def max_norm32(rows: np.ndarray) -> float:
    """The largest L2 norm of float32 ``rows`` (row sums as numpy's pairwise sum)."""
    return float(np.sqrt((rows * rows).sum(axis=1).max())) if len(rows) else 0.0


def _float32_rows(vectors: np.ndarray) -> tuple[np.ndarray, float]:
    """``vectors`` as a C-contiguous float32 array, converted block by block on all cores
    (float16 converts to float32 exactly), and their largest L2 norm (:func:`max_norm32`
    per block, while the block is in the cache: the maximum of the same per-row sums).

    Faiss's ``IndexFlat.add`` copies float32 rows into a vector it zero-fills first: for a
    float16 pool that was a conversion to float32, a zero fill and a copy, all on one core
    (200k x 768: 1.2 s, against 0.3 s for the raw ``add`` of float32 vectors). Here the
    rows are written once, in parallel, and searched where they lie.

    The rows live in an anonymous memory map, not a numpy allocation: numpy asks the
    kernel for huge pages on large arrays, and where memory is fragmented (after a search,
    on a busy machine) each huge-page fault waits for compaction; measured at 200k x 768,
    one conversion took 1.3-3.3 s that way against 0.44 s with ordinary pages.
    """
    import mmap
    import os
    from concurrent.futures import ThreadPoolExecutor

    n_values = int(np.prod(vectors.shape))
    memory = mmap.mmap(-1, max(1, n_values * 4))
    rows = np.frombuffer(memory, dtype=np.float32, count=n_values).reshape(vectors.shape)

    def fill(start: int) -> float:
        block = rows[start : start + _FILL_BLOCK]
        block[...] = vectors[start : start + _FILL_BLOCK]
        return max_norm32(block)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        norm = max(pool.map(fill, range(0, len(rows), _FILL_BLOCK)), default=0.0)
    return rows, norm


class TorchBackend:
    """Chunked matmul + per-chunk top-k + merge, on CUDA (float16) or the CPU (float32).

    ``rescore_on_device``: whether :func:`mdcr.index.exact.exact_topk` re-scores the candidates
    here, where the rows are (:mod:`mdcr.index.exact_device`), instead of on the host. By
    default on CUDA; on the CPU it is the same code, which the tests run (the host's
    compiled re-scoring is faster there). A setting: the results are the same bits.
    """

    def __init__(
        self,
        vectors: np.ndarray,
        metric: SearchMetric,
        device: Device,
        *,
        chunk_rows: int | None = None,
        rescore_on_device: bool | None = None,
    ) -> None:
        import torch

        self.metric = metric
        self.n = int(vectors.shape[0])
        self.dim = int(vectors.shape[1])
        self.cuda = device.is_cuda
        self.rescore_on_device = self.cuda if rescore_on_device is None else rescore_on_device
        devices = [torch.device(f"cuda:{g}") for g in device.gpus] or [torch.device("cpu")]
        self.out_device = devices[0]
        # float16 on CUDA for float16 stores; a float32 store keeps its range in float32.
        half = self.cuda and vectors.dtype == np.float16
        self.dtype = torch.float16 if half else torch.float32
        # Rows per chunk: each query batch's scores against one chunk are one matrix
        # (1,024 x 262,144 float32: 1 GiB), and on the CPU each chunk's top-k costs about
        # 0.25 s of CPU per 1,024 queries whatever its width: fewer, wider chunks.
        rows = chunk_rows or 262_144
        self.chunks: list[tuple[int, Any, Any]] = []  # (start row, vectors, squared norms)
        # The largest L2 norm, for the exact re-ranking's error bound (FaissBackend's
        # too): taken while the rows are built, where they are, never by a second pass.
        self.max_norm = 0.0
        # On one device the chunks are views of one tensor of all rows, which the exact
        # re-ranking gathers candidate rows from with one index_select. On the CPU that
        # tensor is Faiss's float32 rows: converted on all cores, the norm taken per block.
        self._rows: Any = None
        if not self.cuda:
            rows32, self.max_norm = _float32_rows(vectors)
            self._rows = torch.from_numpy(rows32)
        elif len(devices) == 1:
            self._rows = torch.empty((self.n, self.dim), dtype=self.dtype, device=devices[0])
        for c, start in enumerate(range(0, self.n, rows)):
            dev = devices[c % len(devices)]
            if self.cuda:
                host = torch.from_numpy(np.ascontiguousarray(vectors[start : start + rows]))
                if self._rows is not None:
                    part = self._rows[start : start + len(host)]
                    part.copy_(host)
                else:
                    part = host.to(dev).to(self.dtype)
            else:
                part = self._rows[start : start + rows]
            norms = part.float().pow(2).sum(dim=1) if metric == "l2" else None
            if self.cuda:
                self.max_norm = max(self.max_norm, _chunk_max_norm(part, norms))
            self.chunks.append((start, part, norms))
        self.name = f"torch({device})"
        self._out_dtype_ok = self.cuda

    def _scores(self, q: Any, part: Any) -> Any:
        """``q @ part.T`` with float32 output (float16 inputs, float32 accumulation on CUDA)."""
        import torch

        if self.cuda and self._out_dtype_ok:
            try:
                return torch.mm(q, part.T, out_dtype=torch.float32)
            except (RuntimeError, TypeError):
                self._out_dtype_ok = False
        return q.float() @ part.float().T

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        with self._exact_matmul():
            vals, idx = self._search(queries, k)
        return vals.cpu().numpy().astype(np.float32, copy=False), idx.cpu().numpy()

    @contextmanager
    def _exact_matmul(self) -> Iterator[None]:
        """Inference mode, no TF32 and no reduced-precision float16 reductions: every
        float32 score within the bound :func:`mdcr.index.exact.error_bound` assumes."""
        import torch

        matmul = torch.backends.cuda.matmul
        saved = (matmul.allow_tf32, matmul.allow_fp16_reduced_precision_reduction)
        matmul.allow_tf32 = False
        matmul.allow_fp16_reduced_precision_reduction = False
        try:
            with torch.inference_mode():
                yield
        finally:
            matmul.allow_tf32, matmul.allow_fp16_reduced_precision_reduction = saved

    def _search(self, queries: np.ndarray, k: int) -> tuple[Any, Any]:
        """:meth:`search`'s ``(scores, rows)`` as tensors on :attr:`out_device`."""
        import torch

        k = min(k, self.n)
        q_host = torch.from_numpy(np.ascontiguousarray(queries))
        best_s, best_i = [], []
        q_by_dev: dict[Any, tuple[Any, Any]] = {}
        for start, part, norms in self.chunks:
            dev = part.device
            if dev not in q_by_dev:
                qd = q_host.to(dev).to(self.dtype)
                q_by_dev[dev] = (qd, qd.float().pow(2).sum(dim=1, keepdim=True))
            qd, qnorm = q_by_dev[dev]
            s = self._scores(qd, part)
            if self.metric == "l2":
                s = 2.0 * s - norms.unsqueeze(0) - qnorm
            top = min(k, part.shape[0])
            vals, idx = torch.topk(s, top, dim=1)
            best_s.append(vals.to(self.out_device))
            best_i.append((idx + start).to(self.out_device))
        vals = torch.cat(best_s, dim=1)
        idx = torch.cat(best_i, dim=1)
        if len(self.chunks) > 1:
            vals, pos = torch.topk(vals, k, dim=1)
            idx = torch.gather(idx, 1, pos)
        return vals, idx

    def gather(self, rows: Any) -> Any:
        """The pool rows ``rows`` (an int64 tensor on :attr:`out_device`), in the backend's
        dtype, on :attr:`out_device`: one index_select on one device, else chunk by chunk."""
        import torch

        if self._rows is not None:
            return self._rows.index_select(0, rows)
        out = torch.empty((len(rows), self.dim), dtype=self.dtype, device=self.out_device)
        for start, part, _ in self.chunks:
            at = ((rows >= start) & (rows < start + len(part))).nonzero().squeeze(1)
            if at.numel():
                local = (rows.index_select(0, at) - start).to(part.device)
                out[at] = part.index_select(0, local).to(self.out_device)
        return out
