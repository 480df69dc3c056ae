"""The whole test session: a store of its own, never the repository's or the user's.

A test that gives no store (no ``--home``, no ``home=``) would otherwise use the one the
repository's ``mdcr.toml`` names, or the user's ``~/.cache/mdcr``; ``$MDCR_HOME`` points
it to a temporary folder instead. Tests of the store's discovery unset it themselves.
``$XDG_CACHE_HOME`` too: the record of stores written recently (``mdcr.core.recent``) lies in
the user cache folder, never the user's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="session", autouse=True)
def _session_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MDCR_HOME", str(tmp_path_factory.mktemp("mdcr-home")))
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
        yield


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test is marked with its tier, the top folder it lives in: ``unit`` (pure
    functions, no store, no JVM, no other process; tests/unit/conftest.py holds it to that)
    or ``integration`` (stages, the CLI, the JVM, subprocesses).

    ``slow`` tests go first: under pytest-xdist (``make test``: ``--dist loadfile
    --no-loadscope-reorder``, a file's tests on one worker, so that a module fixture is
    built once) the files that hold them are handed out first, and no long test starts
    last while the other workers wait."""
    for item in items:
        tier = item.path.relative_to(_TESTS).parts[0]
        if tier in ("unit", "integration"):
            item.add_marker(tier)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable
