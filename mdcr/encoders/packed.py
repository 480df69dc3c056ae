"""Unpadded forward passes: no layer computes on padding.

A padded batch of papers of 120 to 200 tokens spends up to 40% of its matmuls on padding;
packed, the sequences of a batch lie end to end in one row (:func:`mdcr.encoders.batching.
pack_batch`), the linear layers and feed-forward blocks see real tokens only, and the
attention runs per sequence from ``cu_seqlens``. transformers 5 lets a model's attention
be swapped by name (``AttentionInterface``) and passes the standard packed-sequence
keywords (``cu_seq_lens_q``, ``max_length_q``, ...) down to it; BERT-like models take
``position_ids``, so each packed sequence gets its own positions. Nothing beyond torch is
needed:

- ``varlen``: ``torch.nn.attention.varlen.varlen_attn`` (FlashAttention over
  ``cu_seqlens``), on CUDA in bf16/fp16;
- ``nested``: ``scaled_dot_product_attention`` on nested (jagged) tensors, on any device
  and precision (torch picks its flash or memory-efficient kernel on CUDA);
- ``loop``: ``scaled_dot_product_attention`` sequence by sequence, the last resort (causal
  models on the CPU, where nested SDPA has no causal kernel).

Only a model whose attention is ``sdpa`` and can be swapped is packed (the others run
padded). The runner checks the first packed batch against the padded forward
(:func:`agreement`) and falls back (the next kernel, then padding) if it differs, raises,
or the model does not take packed input, saying why in its stats.

While a packed batch runs, the model's config names the kernel's attention function
(``mdcr_packed_<kernel>``, :func:`packed_mode`; restored afterwards, so the model's state,
and its digest, are as before); a padded call in that mode goes to transformers' SDPA.
"""

from __future__ import annotations

import inspect
import itertools
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

KERNELS = ("varlen", "nested", "loop")
PREFIX = "mdcr_packed_"
# Per-token cosine between packed and padded token vectors the check asks for.
AGREE_FP32 = 0.99999
AGREE_HALF = 0.999

# Whether the attention functions are registered.
_REGISTERED: list[bool] = []


def kernels_for(device_type: str, half: bool) -> list[str]:
    """The kernels to try, best first, for a device and a compute precision (each runner
    tries them in turn on its first packed batch: whether one fits depends on the model
    too, a causal one, say)."""
    return list(KERNELS) if device_type == "cuda" and half else ["nested", "loop"]


def not_packable(model: Any) -> str | None:
    """Why ``model`` cannot run packed batches, or None when it can."""
    config = getattr(model, "config", None)
    impl = getattr(config, "_attn_implementation", None)
    if impl != "sdpa" and not str(impl).startswith(PREFIX):
        return f"its attention is {impl}, not sdpa"
    if not getattr(model, "_supports_attention_backend", False):
        return "its attention cannot be swapped"
    if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
        return "it is a decoder"
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "its forward cannot be inspected"
    if "position_ids" not in params:
        return "its forward takes no position_ids"
    return None


def register() -> None:
    """Name each kernel's attention function in transformers' attention dispatch."""
    import functools

    from transformers import AttentionInterface

    if _REGISTERED:
        return
    # Said by the CPU's nested SDPA, which works; nothing for the user to do.
    warnings.filterwarnings("ignore", "The PyTorch API of nested tensors", UserWarning)
    for name in KERNELS:
        AttentionInterface.register(PREFIX + name, functools.partial(packed_attention, name))
    _REGISTERED.append(True)


@contextmanager
def packed_mode(model: Any, kernel: str) -> Iterator[None]:
    """The model's attention is :func:`packed_attention` with ``kernel`` while inside."""
    config = model.config
    before = config._attn_implementation
    config._attn_implementation = PREFIX + kernel
    try:
        yield
    finally:
        config._attn_implementation = before


def packed_attention(
    kernel: str,
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """Attention per packed sequence (``cu_seq_lens_q`` given) with ``kernel``, else
    transformers' SDPA.

    ``query``, ``key``, ``value``: ``(1, heads, total, head_dim)``; the output is
    ``(1, total, heads, head_dim)``, as transformers' attention functions return it.
    """
    cu = kwargs.get("cu_seq_lens_q")
    if cu is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(  # type: ignore[no-any-return]
            module,
            query,
            key,
            value,
            attention_mask,
            dropout=dropout,
            scaling=scaling,
            is_causal=is_causal,
            **kwargs,
        )
    if kwargs.get("sliding_window") or kwargs.get("softcap"):  # the check then falls back
        raise NotImplementedError("packed attention has no sliding window or softcap")
    longest = int(kwargs["max_length_q"])
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", False))
    # (1, heads, total, d) -> (total, heads, d): the projections' own layout, contiguous.
    q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))
    if k.shape[1] != q.shape[1]:  # grouped key/value heads
        k, v = (t.repeat_interleave(q.shape[1] // t.shape[1], dim=1) for t in (k, v))
    return attend(kernel, q, k, v, cu, longest, scaling, causal).unsqueeze(0), None


def attend(
    kernel: str,
    q: Any,
    k: Any,
    v: Any,
    cu: Any,
    longest: int,
    scale: float | None,
    causal: bool = False,
) -> Any:
    """Attention within each sequence of ``cu`` (``(total, heads, d)``), bidirectional
    unless ``causal``."""
    import torch

    if kernel == "varlen" and q.is_cuda and q.dtype in (torch.float16, torch.bfloat16):
        from torch.nn.attention.varlen import varlen_attn

        cu32 = cu.to(torch.int32)
        window = (-1, 0) if causal else (-1, -1)
        return varlen_attn(q, k, v, cu32, cu32, longest, longest, scale=scale, window_size=window)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if kernel == "loop":
        pieces = []
        for a, b in itertools.pairwise(cu.tolist()):
            qs, ks, vs = (t[a:b].transpose(0, 1) for t in (q, k, v))
            pieces.append(sdpa(qs, ks, vs, scale=scale, is_causal=causal).transpose(0, 1))
        return torch.cat(pieces)
    offsets = cu.to(torch.int64)
    nq, nk, nv = (
        torch.nested.nested_tensor_from_jagged(t, offsets, max_seqlen=longest).transpose(1, 2)
        for t in (q, k, v)
    )
    out = sdpa(nq, nk, nv, scale=scale, is_causal=causal)
    return out.transpose(1, 2).values()


def agreement(padded: Any, packed: Any, mask: Any) -> float:
    """The least cosine between the packed and the padded vector of any real token."""
    import torch

    real = mask.bool()
    a, b = padded[real].double(), packed[real].double()
    cos = torch.nn.functional.cosine_similarity(a, b, dim=-1, eps=1e-12)
    return float(cos.min()) if cos.numel() else 1.0
