"""Length-sorted batches under a token budget: the part of fast encoding that needs no model.

Transformer cost grows with the padded length of a batch, so papers are sorted by token
count (longest first, which also surfaces an out-of-memory batch at once) and packed
greedily until ``batch size x padded length`` would exceed the token budget. Compared with
a fixed batch padded to 512 tokens, this spends compute on real tokens only.
"""

from __future__ import annotations

from collections.abc import Sequence

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
