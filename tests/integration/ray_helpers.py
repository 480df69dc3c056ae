"""Units of work for the Ray engine tests: importable by Ray's worker processes."""

from __future__ import annotations

from mdcr.core.errors import InputDataError


def add_or_fail(state: int, item: int) -> int:
    if item == 2:
        raise InputDataError("paper 2 is bad; fix it")
    return state + item


def worker_and_state(state: int, item: int) -> list[int]:
    """The worker's process id and the state its stage's setup built there."""
    import os

    return [os.getpid(), state]
