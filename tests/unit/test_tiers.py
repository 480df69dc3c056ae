"""The unit tier holds itself to its rule: the doors tests/unit/conftest.py shuts are shut
here, and every test carries its tier's marker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import ray

from mdcr.core.store import Store
from mdcr.index.lucene import java
from tests.support.toy_stages import SOURCE, SourceConfig


def test_a_unit_test_carries_the_unit_marker(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("unit") is not None
    assert request.node.get_closest_marker("integration") is None


def test_running_a_stage_fails_naming_the_tier(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    with pytest.raises(AssertionError, match=r"may not run a stage.*tests/integration"):
        store.execute(SOURCE, SourceConfig(n=3), {}, quiet=True)
    assert not (tmp_path / "home" / SOURCE.name).exists()  # shut before anything is written


@pytest.mark.parametrize(
    ("door", "opening"),
    [
        ("start another process", lambda: subprocess.run([sys.executable, "-c", "1"])),
        ("start the Lucene JVM", lambda: java.start_jvm()),
        ("start or join a Ray cluster", lambda: ray.init(address="local")),
    ],
    ids=["process", "jvm", "ray"],
)
def test_each_door_is_shut(door: str, opening: object) -> None:
    with pytest.raises(AssertionError, match=f"a unit test may not {door}: move the test"):
        opening()  # type: ignore[operator]
