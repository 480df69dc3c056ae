"""Where heavy work runs: one device spec for encoders and search, in the spirit of HF datasets.

HF ``datasets`` moves a Faiss index with ``device=None`` (CPU), ``device=i`` (GPU i) or
``device=-1`` (all GPUs). Stage configs take the same choice as text, so the same code runs
in CPU-only CI and on a GPU machine:

- ``"auto"``: every visible GPU when there is one, else the CPU;
- ``"cpu"`` (or ``None``): the CPU;
- ``"cuda"``, ``"cuda:N"`` or an int ``N >= 0``: that GPU (``"cuda"`` is GPU 0);
- ``"all"`` or ``-1``: all visible GPUs.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from mdcr.core.errors import ConfigError

DEVICE_HELP = "'auto' (GPUs if present), 'cpu', 'cuda', 'cuda:N' or 'all' (every GPU)"
_CUDA_N = re.compile(r"^cuda:(\d+)$")
# Where Linux keeps the device nodes a GPU build of torch opens: /dev/nvidia0 ... (NVIDIA),
# /dev/kfd (ROCm, which torch also calls cuda), /dev/dxg (WSL 2).
DEVICE_NODES = Path("/dev")


@dataclass(frozen=True)
class Device:
    """A resolved device: the CPU (``gpus == ()``) or one or more CUDA GPUs."""

    gpus: tuple[int, ...] = ()

    @property
    def is_cuda(self) -> bool:
        return bool(self.gpus)

    @property
    def torch_device(self) -> str:
        """The torch device string of the first (or only) device."""
        return f"cuda:{self.gpus[0]}" if self.gpus else "cpu"

    def __str__(self) -> str:
        if not self.gpus:
            return "cpu"
        return ",".join(f"cuda:{g}" for g in self.gpus)


def no_gpu_device_nodes(dev: Path | None = None) -> bool:
    """True on a Linux machine without a GPU device node (``dev``: /dev): torch would see no
    GPU there, so it need not be imported (a second or two) to say so; a numpy encoder, BM25
    and Faiss on the CPU never load it."""
    dev = DEVICE_NODES if dev is None else dev
    if not sys.platform.startswith("linux") or not dev.is_dir():
        return False
    return not (any(dev.glob("nvidia[0-9]*")) or (dev / "kfd").exists() or (dev / "dxg").exists())


def cuda_device_count() -> int:
    """Number of visible CUDA GPUs according to torch (0 when torch is absent or CPU-only,
    and, without importing it, where the machine has no GPU device node)."""
    if "torch" not in sys.modules and no_gpu_device_nodes():
        return 0
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def check_device_spec(spec: str | int | None, where: str) -> None:
    """Raise a one-line ConfigError unless ``spec`` is a valid device spec (no GPU needed)."""
    if spec is None or isinstance(spec, int):
        if isinstance(spec, int) and spec < -1:
            raise ConfigError(f"{where}: device {spec} is not valid; use {DEVICE_HELP}")
        return
    if spec in ("auto", "cpu", "cuda", "all", "-1") or _CUDA_N.match(spec):
        return
    if spec.isdigit():
        return
    raise ConfigError(f"{where}: device '{spec}' is not valid; use {DEVICE_HELP}")


def resolve_device(spec: str | int | None, *, n_gpus: int | None = None) -> Device:
    """Turn a device spec into a :class:`Device`; ``n_gpus`` defaults to the visible count.

    A GPU that is asked for but not present is an error (never a silent CPU fallback); only
    ``"auto"`` falls back to the CPU.
    """
    check_device_spec(spec, "device")
    count = cuda_device_count() if n_gpus is None else n_gpus
    if spec is None or spec == "cpu":
        return Device()
    if spec == "auto":
        return Device(tuple(range(count)))
    if spec in ("all", -1, "-1"):
        wanted: tuple[int, ...] = tuple(range(count))
        if not wanted:
            raise ConfigError("device 'all' asks for every GPU but none is visible; use 'cpu'")
        return Device(wanted)
    if spec == "cuda":
        index = 0
    elif isinstance(spec, int):
        index = spec
    else:
        m = _CUDA_N.match(spec)
        index = int(m.group(1)) if m else int(spec)
    if index >= count:
        raise ConfigError(
            f"device '{spec}' asks for GPU {index} but {count} GPU(s) are visible; "
            "use 'cpu' or 'auto'"
        )
    return Device((index,))


# bf16/fp16: autocast over float32 weights (the default on CUDA: matmuls in half
# precision, layer norms and softmax in float32). *-weights: the weights themselves are
# cast and everything runs in half precision (less memory traffic, a little less exact).
PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16", "fp16", "bf16-weights", "fp16-weights")


def resolve_precision(precision: str, device: Device) -> str:
    """The precision ``auto`` means on ``device``: bf16 on a GPU that has it (else fp16),
    fp32 on the CPU. Other values stand for themselves."""
    if precision not in PRECISIONS:
        raise ConfigError(
            f"precision '{precision}' is not valid; valid options: {', '.join(PRECISIONS)}"
        )
    if precision != "auto":
        return precision
    if not device.is_cuda:
        return "fp32"
    import torch

    return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
