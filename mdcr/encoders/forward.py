"""The parts of a forward pass that :class:`~mdcr.encoders.models.hf.TransformerRunner` puts
together: a tokenized piece (:class:`Prepared`, :func:`tokenize`), its batches on the host,
padded or packed
(:func:`padded_batch`, :func:`packed_batch`), a model on one device (:class:`Replica`),
the token vectors of a batch (:func:`token_vectors`) and the pooled rows that come back
(:class:`PooledBatch`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mdcr.encoders import packed
from mdcr.encoders.base import PaperText
from mdcr.encoders.batching import pack_batch, pad_batch

if TYPE_CHECKING:
    import torch


@dataclass
class Prepared:
    """A tokenized piece: token ids with special tokens, optional token types, extras."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None = None
    extra: Any = None


@dataclass
class HostBatch:
    """One forward pass's input, on the host: padded ``(b, L)`` ids, or packed ``(total,)``
    ids with their positions, ``cu_seqlens`` and places in the padded layout."""

    rows: np.ndarray  # indices into the piece
    ids: torch.Tensor
    mask: torch.Tensor  # (b, L), for pooling
    types: torch.Tensor | None
    packed: dict[str, Any] | None = None  # positions, cu, scatter (tensors), max_len (int)

    @property
    def computed(self) -> int:
        """Token positions the forward computes."""
        return int(self.ids.numel())


@dataclass
class PooledBatch:
    """The pooled output of one batch: rows ``start + rows`` of the input, and their piece."""

    start: int
    rows: np.ndarray  # indices into the piece
    vectors: np.ndarray  # float32; one row per paper (or per sentence for multi-vector)
    prepared: Prepared


@dataclass
class Replica:
    """The model on one device (the first is the runner's own model), and its compiled
    form when ``compile`` is on."""

    model: Any
    device: torch.device
    compiled: Any = None

    def drain(self) -> None:
        """Wait until the work queued on this device is done (nothing to do on the CPU)."""
        if self.device.type == "cuda":
            import torch

            torch.cuda.current_stream(self.device).synchronize()


# pool(hidden float32 (b, L, H), mask (b, L), rows in piece, prepared) -> (r, H) tensor
PoolFn = Callable[["torch.Tensor", "torch.Tensor", np.ndarray, Prepared], "torch.Tensor"]
PrepareFn = Callable[[Sequence[PaperText]], Prepared]
# call(replica, model keyword arguments) -> the model's output
CallFn = Callable[[Replica, dict[str, Any]], Any]


def available_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def tokenize(
    tokenizer: Any, first: list[str], second: list[str] | None, max_length: int
) -> tuple[list[list[int]], list[list[int]] | None]:
    """Token ids (and token types, for text pairs) exactly as ``tokenizer(first, second,
    truncation=True, max_length=max_length)`` gives them.

    A fast tokenizer's Rust backend is called directly, after the first text has gone
    through the tokenizer itself: that call sets the backend's truncation as the
    tokenizer would, and what the two give for it must agree, else the tokenizer does all
    of them. The backend holds the GIL for about 6 µs a paper where the tokenizer's Python
    side holds it for about 30 (of some 300 µs in all), so many threads can tokenize at
    once (:mod:`mdcr.encoders.feed`).
    """
    pairs = second is not None
    common: dict[str, Any] = {
        "truncation": True,
        "max_length": max_length,
        "padding": False,
        "return_attention_mask": False,
        "return_token_type_ids": pairs,
    }

    def slow(a: list[str], b: list[str] | None) -> tuple[list[list[int]], list[list[int]] | None]:
        enc = tokenizer(a, b, **common)
        return list(enc["input_ids"]), list(enc["token_type_ids"]) if pairs else None

    backend = getattr(tokenizer, "_tokenizer", None)
    if len(first) < 2 or not getattr(tokenizer, "is_fast", False) or backend is None:
        return slow(first, second)
    head_ids, head_types = slow(first[:1], second[:1] if second is not None else None)
    batch: list[Any] = list(zip(first, second, strict=True)) if second is not None else first
    encodings = backend.encode_batch(batch, add_special_tokens=True)
    ids = [e.ids for e in encodings]
    types = [e.type_ids for e in encodings] if pairs else None
    if ids[0] != head_ids[0] or (types is not None and head_types and types[0] != head_types[0]):
        return slow(first, second)
    return ids, types


def _pinned(t: torch.Tensor, pin: bool) -> torch.Tensor:
    return t.pin_memory() if pin else t


def padded_batch(
    prepared: Prepared, rows: np.ndarray, pad_id: int, *, multiple_of: int, pin: bool
) -> HostBatch:
    """Rows of a piece right-padded to their longest (rounded up to ``multiple_of``)."""
    import torch

    m = multiple_of
    ids, mask = pad_batch([prepared.input_ids[i] for i in rows], pad_id, multiple_of=m)
    types_t = None
    if prepared.token_type_ids is not None:
        types, _ = pad_batch([prepared.token_type_ids[i] for i in rows], 0, multiple_of=m)
        types_t = _pinned(torch.from_numpy(types), pin)
    return HostBatch(
        rows,
        _pinned(torch.from_numpy(ids), pin),
        _pinned(torch.from_numpy(mask), pin),
        types_t,
    )


def packed_batch(
    prepared: Prepared, rows: np.ndarray, *, position_offset: int, pin: bool
) -> HostBatch:
    """Rows of a piece laid end to end (:func:`mdcr.encoders.batching.pack_batch`)."""
    import torch

    types = prepared.token_type_ids
    p = pack_batch(
        [prepared.input_ids[i] for i in rows],
        None if types is None else [types[i] for i in rows],
        position_offset=position_offset,
    )
    extra = {
        "positions": _pinned(torch.from_numpy(p.positions), pin),
        "cu": _pinned(torch.from_numpy(p.cu_seqlens), pin),
        "scatter": _pinned(torch.from_numpy(p.scatter), pin),
        "max_len": p.max_len,
    }
    types_t = None if p.types is None else _pinned(torch.from_numpy(p.types), pin)
    return HostBatch(
        rows,
        _pinned(torch.from_numpy(p.ids), pin),
        _pinned(torch.from_numpy(p.mask), pin),
        types_t,
        extra,
    )


def _states(call: CallFn, replica: Replica, kwargs: dict[str, Any], layers: str) -> torch.Tensor:
    """Token vectors (float32): the final layer's, or the mean of every hidden state."""
    if layers == "all":
        states = call(replica, {**kwargs, "output_hidden_states": True}).hidden_states
        hidden = states[0].float()
        for s in states[1:]:
            hidden = hidden + s.float()
        return hidden / len(states)
    return call(replica, kwargs).last_hidden_state.float()  # type: ignore[no-any-return]


def token_vectors(
    call: CallFn, replica: Replica, batch: HostBatch, *, layers: str, kernel: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token vectors ``(b, L, H)`` float32 of a batch on ``replica`` (a packed batch's,
    attended by ``kernel``, laid out padded) and the mask."""
    dev = replica.device
    nb = dev.type == "cuda"
    mask = batch.mask.to(dev, non_blocking=nb)
    kwargs: dict[str, Any] = {"input_ids": batch.ids.to(dev, non_blocking=nb)}
    if batch.types is not None:
        kwargs["token_type_ids"] = batch.types.to(dev, non_blocking=nb)
    extra = batch.packed
    if extra is None:
        kwargs["attention_mask"] = mask
        return _states(call, replica, kwargs, layers), mask
    cu = extra["cu"].to(dev, non_blocking=nb)
    longest = int(extra["max_len"])
    kwargs = {k: v.unsqueeze(0) for k, v in kwargs.items()}
    kwargs.update(
        position_ids=extra["positions"].to(dev, non_blocking=nb).unsqueeze(0),
        cu_seq_lens_q=cu,
        cu_seq_lens_k=cu,
        max_length_q=longest,
        max_length_k=longest,
    )
    with packed.packed_mode(replica.model, kernel):
        flat = _states(call, replica, kwargs, layers)[0]
    out = flat.new_zeros((mask.shape[0] * mask.shape[1], flat.shape[-1]))
    out.index_copy_(0, extra["scatter"].to(dev, non_blocking=nb), flat)
    return out.view(mask.shape[0], mask.shape[1], -1), mask
