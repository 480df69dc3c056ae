"""The unit tier: pure functions, no store, no JVM, no other process.

Every test here runs with the expensive doors shut: running a stage in a store
(``Store.run``, which ``Store.execute`` calls), starting the Lucene JVM, starting a process
and connecting to Ray each fail the test, naming the tier it belongs in. A test that needs
one of them lives in ``tests/integration`` (``make test`` runs both tiers; ``make fast``
this one alone).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import pytest
import ray


def _shut(door: str) -> Any:
    def refuse(*_args: Any, **_kwargs: Any) -> NoReturn:
        raise AssertionError(
            f"a unit test may not {door}: move the test to tests/integration "
            "(the unit tier is pure functions, no store, no JVM, no other process)"
        )

    return refuse


@contextmanager
def _doors_shut() -> Iterator[None]:
    from mdcr.core.store import Store
    from mdcr.index.lucene import indexes, java

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Store, "run", _shut("run a stage in a store (Store.run, Store.execute)"))
        for module in (java, indexes):
            mp.setattr(module, "start_jvm", _shut("start the Lucene JVM"))
        mp.setattr(subprocess.Popen, "__init__", _shut("start another process"))
        mp.setattr(ray, "init", _shut("start or join a Ray cluster"))
        yield


# Hooks of a conftest apply to the tests under its folder only; the doors are shut while a
# unit test's fixtures are set up and while it runs, and open again for the next test.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _doors_shut():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _doors_shut():
        return (yield)
