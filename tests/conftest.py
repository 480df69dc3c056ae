"""The whole test session: a store of its own, never the repository's or the user's.

A test that gives no store (no ``--home``, no ``home=``) would otherwise use the one the
repository's ``mdcr.toml`` names, or the user's ``~/.cache/mdcr``; ``$MDCR_HOME`` points
it to a temporary folder instead. Tests of the store's discovery unset it themselves.
``$XDG_CACHE_HOME`` too: the record of stores written recently (``mdcr.core.recent``) lies in
the user cache folder, never the user's own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent


def _share_cores_among_workers() -> None:
    """Under pytest-xdist, each worker's OpenMP threads (torch, Faiss) are its share of the
    cores, unless ``$OMP_NUM_THREADS`` is set: otherwise every worker, and every process it
    starts, runs a thread per core, and on two cores two workers' threads spin against each
    other (the torch-heavy files took a quarter more CPU; README, "Tests"). Set here, on
    import, before any test imports torch; the processes the tests start inherit it. The
    number of threads never changes an output (a setting; tests check it)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers > 1:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        share = max(1, (cores or os.cpu_count() or 1) // workers)
        os.environ.setdefault("OMP_NUM_THREADS", str(share))


_share_cores_among_workers()


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
