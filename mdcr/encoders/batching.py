"""Length-sorted batches under a token budget: the part of fast encoding that needs no model.

Transformer cost grows with the padded length of a batch, so papers are sorted by token
count (longest first, which also surfaces an out-of-memory batch at once) and packed
greedily until ``batch size x padded length`` would exceed the token budget. Compared with
a fixed batch padded to 512 tokens, this spends compute on real tokens only.

Unpadded (packed) batches go one step further: the sequences of a batch are laid end to
end in one row (:func:`pack_batch`), each with its own positions and its start in
``cu_seqlens``, so no layer computes on padding at all; the budget then counts real
tokens (:func:`plan_packed`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def plan_batches(
    lengths: Sequence[int] | np.ndarray,
    token_budget: int,
    *,
    max_batch: int = 1024,
    multiple_of: int = 1,
) -> list[np.ndarray]:
    """Group item indices into batches, each within ``token_budget`` padded tokens.

    Items are taken in order of length (descending; ties by index, so the plan is
    deterministic). A batch's padded length is its longest item rounded up to
    ``multiple_of``. An item longer than the budget gets a batch of its own.
    """
    lens = np.asarray(lengths, dtype=np.int64)
    if lens.size == 0:
        return []
    order = np.lexsort((np.arange(lens.size), -lens))
    batches: list[np.ndarray] = []
    start = 0
    n = lens.size
    while start < n:
        longest = int(lens[order[start]])
        padded = -(-max(longest, 1) // multiple_of) * multiple_of
        size = max(1, min(max_batch, token_budget // padded, n - start))
        batches.append(order[start : start + size])
        start += size
    return batches


def pad_batch(
    sequences: Sequence[Sequence[int]],
    pad_id: int,
    *,
    multiple_of: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad token id lists into ``(ids, attention_mask)`` int64 arrays."""
    longest = max((len(s) for s in sequences), default=1)
    width = -(-max(longest, 1) // multiple_of) * multiple_of
    ids = np.full((len(sequences), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(sequences), width), dtype=np.int64)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
    return ids, mask


def plan_packed(
    lengths: Sequence[int] | np.ndarray, token_budget: int, *, max_batch: int = 1024
) -> list[np.ndarray]:
    """Group item indices into packed batches, each within ``token_budget`` real tokens.

    Items are taken longest first (ties by index), as :func:`plan_batches` takes them, so
    the sequences of a batch have similar lengths (the attention kernels split work per
    sequence). An item longer than the budget gets a batch of its own.
    """
    lens = np.asarray(lengths, dtype=np.int64)
    if lens.size == 0:
        return []
    order = np.lexsort((np.arange(lens.size), -lens))
    sizes = np.maximum(lens[order], 1)
    batches: list[np.ndarray] = []
    start, n = 0, lens.size
    while start < n:
        # The most items from ``start`` whose tokens fit the budget (at least one).
        running = np.cumsum(sizes[start : start + max_batch])
        size = max(1, int(np.searchsorted(running, token_budget, "right")))
        batches.append(order[start : start + size])
        start += size
    return batches


@dataclass
class Packed:
    """Sequences laid end to end: ``ids``, ``types`` (or None) and ``positions`` of every
    real token, ``cu_seqlens`` (``b + 1`` offsets, int32), the longest sequence, and where
    each token sits in the ``(b, max_len)`` padded layout (``scatter``: ``row * max_len +
    position``) with that layout's attention ``mask``."""

    ids: np.ndarray
    types: np.ndarray | None
    positions: np.ndarray
    cu_seqlens: np.ndarray
    max_len: int
    scatter: np.ndarray
    mask: np.ndarray


def pack_batch(
    sequences: Sequence[Sequence[int]],
    types: Sequence[Sequence[int]] | None = None,
    *,
    position_offset: int = 0,
) -> Packed:
    """Lay token id lists end to end; positions restart at ``position_offset`` for each."""
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    total = int(lengths.sum())
    cu = np.zeros(len(sequences) + 1, dtype=np.int32)
    np.cumsum(lengths, out=cu[1:])
    starts = np.repeat(cu[:-1].astype(np.int64), lengths)
    within = np.arange(total, dtype=np.int64) - starts
    width = int(lengths.max()) if lengths.size else 0
    rows = np.repeat(np.arange(len(sequences), dtype=np.int64), lengths)
    flat = np.fromiter(itertools.chain.from_iterable(sequences), dtype=np.int64, count=total)
    type_ids = None
    if types is not None:
        type_ids = np.fromiter(itertools.chain.from_iterable(types), dtype=np.int64, count=total)
    mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
    return Packed(
        ids=flat,
        types=type_ids,
        positions=within + position_offset,
        cu_seqlens=cu,
        max_len=width,
        scatter=rows * width + within,
        mask=mask,
    )
