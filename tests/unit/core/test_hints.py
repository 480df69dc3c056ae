"""Hints written in the syntax the user typed: command line, pipeline file or Python."""

from __future__ import annotations

from pathlib import Path

import mdcr.benchmark.build
import mdcr.index.bm25.search
import mdcr.index.bm25.tune  # noqa: F401  (registers the bm25 stage)
from mdcr.core.hints import no_split_hint, option, typed_in


def test_an_option_is_written_as_the_user_would_type_it() -> None:
    with typed_in("cli", "benchmark"):
        assert option("benchmark", "on_short", "warn") == "`--on-short warn`"
        assert option("bm25", "splits", ("val", "test")) == "`mdcr bm25 --splits val,test`"
    with typed_in("cli", "evaluate"):
        assert option("encode", "revision", "abc") == "`--encode-set revision=abc`"
    with typed_in("cli", "encode"):
        assert option("encode", "revision", "abc") == "`--revision abc`"
    with typed_in("file"):
        assert option("benchmark", "on_short", "warn") == (
            '`on_short = "warn"` in the benchmark step of the pipeline file'
        )
        assert option("bm25", "splits", ("val", "test")).startswith('`splits = ["val", "test"]`')
    assert option("benchmark", "on_short", "warn") == "`on_short='warn'` (benchmark stage)"


def test_a_bm25_run_without_val_pools_says_which_command_searches_them() -> None:
    with typed_in("cli", "benchmark"):
        msg = no_split_hint("bm25", Path("/s/bm25/x"), "val")
    assert msg == "this BM25 run ('/s/bm25/x') has no val pools; run `mdcr bm25 --splits val,test`"
    assert "on_short" not in msg


def test_a_run_missing_a_splits_pools_is_refused_with_the_hint() -> None:
    import pytest

    from mdcr.core.errors import InputDataError
    from mdcr.core.hints import require_splits

    pools = {("val", "Art"): "v1", ("test", "Art"): "t1"}
    require_splits("bm25", "r", pools, {"v1", "t1"})
    with typed_in("file"), pytest.raises(InputDataError, match="has no val pools") as info:
        require_splits("bm25", "r", pools, {"t1"})
    assert 'splits = ["val", "test"]' in str(info.value)
