"""A unit of work for the Ray engine test: importable by Ray's worker processes."""

from __future__ import annotations

from mdcr.core.errors import InputDataError


def add_or_fail(state: int, item: int) -> int:
    if item == 2:
        raise InputDataError("paper 2 is bad; fix it")
    return state + item
