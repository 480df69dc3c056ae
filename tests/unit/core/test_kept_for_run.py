"""What a stage keeps for the next stages of a run (the Ray engine's workers)."""

from __future__ import annotations

import pytest

from mdcr.core.stage import keep_for_run, keeping_for_run, take_kept


def test_outside_a_run_nothing_is_kept() -> None:
    closed: list[str] = []
    assert keep_for_run("workers", "a", closed.append) is False
    assert take_kept("workers") is None
    assert closed == []  # the caller closes what was not kept


def test_a_kept_thing_goes_to_the_next_stage_and_is_closed_when_the_run_ends() -> None:
    closed: list[str] = []
    with keeping_for_run():
        assert keep_for_run("workers", "a", closed.append) is True
        assert take_kept("workers") == "a"  # the taker owns it now
        assert take_kept("workers") is None
        assert keep_for_run("workers", "b", closed.append)
        assert keep_for_run("workers", "c", closed.append)  # one a name: b is closed
        assert closed == ["b"]
        with keeping_for_run():  # a run inside a run: the outer one closes
            assert take_kept("workers") == "c"
            keep_for_run("workers", "d", closed.append)
        assert closed == ["b"]
    assert closed == ["b", "d"]
    assert take_kept("workers") is None


def test_kept_things_are_closed_on_an_error() -> None:
    closed: list[str] = []
    with pytest.raises(RuntimeError), keeping_for_run():
        keep_for_run("workers", "a", closed.append)
        raise RuntimeError("a stage failed")
    assert closed == ["a"]
