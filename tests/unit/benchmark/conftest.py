"""Benchmark tests write Lucene indexes to a temporary folder and never reach a model hub."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session", autouse=True)
def _isolated_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MDCR_INDEX_DIR", str(tmp_path_factory.mktemp("indexes")))
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield
