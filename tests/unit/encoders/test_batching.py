"""Length-sorted batching under a token budget."""

from __future__ import annotations

import numpy as np

from mdcr.encoders.batching import pad_batch, plan_batches


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
