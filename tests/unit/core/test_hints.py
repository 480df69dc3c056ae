"""Hints written in the syntax the user typed: command line, pipeline file or Python."""

from __future__ import annotations

import mdcr.benchmark.build
import mdcr.index.bm25.search
import mdcr.index.bm25.tune  # noqa: F401  (registers the bm25 stage)
from mdcr.core.hints import option, typed_in


def test_an_option_is_written_as_the_user_would_type_it() -> None:
    with typed_in("cli", "benchmark"):
        assert option("benchmark", "on_short", "warn") == "`--on-short warn`"
        assert option("bm25", "splits", ("val", "test")) == "`mdcr bm25 --splits val,test`"
    with typed_in("cli", "evaluate", set_flags={"encode": "--encode-set"}):
        assert option("encode", "revision", "abc") == "`--encode-set revision=abc`"
        assert option("bm25", "splits", ("val",)) == "`mdcr bm25 --splits val`"
    with typed_in("cli", "evaluate"):  # a command without such a flag: the stage's command
        assert option("encode", "revision", "abc") == "`mdcr encode --revision abc`"
    with typed_in("cli", "encode"):
        assert option("encode", "revision", "abc") == "`--revision abc`"
    with typed_in("file"):
        assert option("benchmark", "on_short", "warn") == (
            '`on_short = "warn"` in the benchmark step of the pipeline file'
        )
        assert option("bm25", "splits", ("val", "test")).startswith('`splits = ["val", "test"]`')
    assert option("benchmark", "on_short", "warn") == "`on_short='warn'` (benchmark stage)"


def test_a_key_or_folder_is_named_as_the_user_gave_it(tmp_path) -> None:
    from mdcr.core.hints import flag, given_as, key

    folder = tmp_path / "pools"
    cli = {"report.splits": "--split"}
    with typed_in("cli", "evaluate", {"encode": "--encode-set"}, cli, {folder: "--pools X"}):
        assert key("report", "splits") == "--split"
        assert key("encode", "max_length") == "--encode-set max_length"
        assert key("score", "depth") == "score.depth"  # a key evaluate does not give
        assert given_as(folder / ".." / "pools") == "--pools X"
        assert given_as(tmp_path) is None
        assert flag("--pools", "pools=") == "--pools"
    python = {"report.splits": "splits="}
    with typed_in("python", "evaluate", {"encode": "encode_options"}, python):
        assert key("report", "splits") == "splits="
        assert key("encode", "max_length") == "encode_options['max_length']"
        assert flag("--pools", "pools=") == "pools="
    with typed_in("cli", "report"):
        assert key("report", "splits") == "--splits"  # the stage command's own flag
    assert key("report", "splits") == "report.splits"  # a pipeline's key, or no context
