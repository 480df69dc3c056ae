"""Length-sorted batching under a token budget, padded or packed end to end."""

from __future__ import annotations

import numpy as np

from mdcr.encoders.batching import pack_batch, pad_batch, plan_batches, plan_packed


def test_every_item_once_and_within_budget() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 300, size=1000)
    batches = plan_batches(lengths, 4096, max_batch=64, multiple_of=8)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(1000))
    for b in batches:
        padded = -(-int(lengths[b].max()) // 8) * 8
        assert len(b) <= 64
        assert len(b) * padded <= 4096
    # Longest first, so lengths never increase along the plan.
    seq = lengths[flat]
    assert np.all(seq[:-1] >= seq[1:])


def test_ties_are_deterministic_and_oversized_items_run_alone() -> None:
    lengths = [5, 5, 5, 900, 5]
    batches = plan_batches(lengths, 20)
    assert [b.tolist() for b in batches] == [[3], [0, 1, 2, 4]]
    assert plan_batches([], 100) == []


def test_pad_batch() -> None:
    ids, mask = pad_batch([[1, 2, 3], [4]], pad_id=0, multiple_of=4)
    assert ids.tolist() == [[1, 2, 3, 0], [4, 0, 0, 0]]
    assert mask.tolist() == [[1, 1, 1, 0], [1, 0, 0, 0]]


def test_packed_batches_hold_every_item_once_within_the_budget() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 300, size=1000)
    batches = plan_packed(lengths, 4096, max_batch=64)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(1000))
    for b in batches:
        assert len(b) <= 64 and (lengths[b].sum() <= 4096 or len(b) == 1)
    seq = lengths[flat]
    assert np.all(seq[:-1] >= seq[1:])  # longest first, as the padded plan
    assert [b.tolist() for b in plan_packed([5, 5, 900, 5], 12)] == [[2], [0, 1], [3]]


def test_pack_batch_lays_sequences_end_to_end() -> None:
    p = pack_batch([[7, 8, 9], [4], [5, 6]], [[0, 0, 1], [0], [1, 1]], position_offset=2)
    assert p.ids.tolist() == [7, 8, 9, 4, 5, 6]
    assert p.types is not None and p.types.tolist() == [0, 0, 1, 0, 1, 1]
    assert p.positions.tolist() == [2, 3, 4, 2, 2, 3]
    assert p.cu_seqlens.tolist() == [0, 3, 4, 6] and p.max_len == 3
    assert p.scatter.tolist() == [0, 1, 2, 3, 6, 7]  # row * 3 + position within
    assert p.mask.tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]]
