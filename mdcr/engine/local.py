"""The local engine: every unit of work in this process, one after another."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")


class LocalEngine:
    """Runs ``fn(state, item)`` here, in order; ``setup`` is called once."""

    name = "local"
    in_process = True

    def __init__(self) -> None:
        self._info: dict[str, Any] = {"name": self.name}

    def map(
        self,
        fn: Callable[[S, T], R],
        items: Sequence[T],
        *,
        setup: Callable[[], S],
        gpus: float = 0.0,
    ) -> Iterator[R]:
        if not items:
            return
        state = setup()
        for item in items:
            yield fn(state, item)

    def info(self) -> dict[str, Any]:
        return self._info

    def worker_gpus(self, device: str) -> float:
        return 0.0  # the stage itself uses the devices its settings name

    def worker_cpus(self, gpus: float) -> int:
        return os.cpu_count() or 1
