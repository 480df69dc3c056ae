"""A model's run must cover every split a benchmark builds from; the hint names the command
that searches the missing pools, in the syntax the user typed."""

from __future__ import annotations

from pathlib import Path

import pytest

import mdcr.index.bm25.search  # noqa: F401  (registers the bm25 stage)
from mdcr.benchmark.coverage import no_split_hint, require_splits
from mdcr.core.errors import InputDataError
from mdcr.core.hints import typed_in


def test_a_bm25_run_without_val_pools_says_which_command_searches_them() -> None:
    with typed_in("cli", "benchmark"):
        msg = no_split_hint("bm25", Path("/s/bm25/x"), "val")
    assert msg == "this BM25 run ('/s/bm25/x') has no val pools; run `mdcr bm25 --splits val,test`"
    assert "on_short" not in msg


def test_a_run_missing_a_splits_pools_is_refused_with_the_hint() -> None:
    pools = {("val", "Art"): "v1", ("test", "Art"): "t1"}
    require_splits("bm25", "r", pools, {"v1", "t1"})
    with typed_in("file"), pytest.raises(InputDataError, match="has no val pools") as info:
        require_splits("bm25", "r", pools, {"t1"})
    assert 'splits = ["val", "test"]' in str(info.value)
