"""A ``py:`` encoder is identified by what it computes, not only by its source.

Three ways researchers commonly write an encoder escape a hash of its source files: weights
loaded from a file in ``__init__``, behaviour read from the environment, and helpers loaded
by a computed name and kept anywhere but a module global. Each case below changes only that
outside thing between two runs: the second run must get a new fingerprint and the new
numbers (never "up to date" with the old vectors), and a third run finds it up to date.
Through the CLI (``mdcr encode``, in this process, as a notebook would) and through
``mdcr run`` (a fresh process per run, as a terminal would).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from mdcr.cli import main
from mdcr.encoders.store import EmbeddingStore
from tests.integration.encoders.fixtures import write_corpus

REPO = Path(__file__).resolve().parents[3]

WEIGHTS = """
import pathlib
import numpy as np

class Enc:
    name, dim, metric = "{name}", 2, "ip"

    def __init__(self):
        self.w = np.load(pathlib.Path(__file__).parent / "W.npy")  # a path it computes

    def encode(self, texts):
        x = np.array([[len(t.abstract), 1.0] for t in texts], dtype=np.float32)
        return x * self.w
"""

ENVIRONMENT = """
import os
import numpy as np

class Enc:
    name, dim, metric = "{name}", 2, "ip"

    def encode(self, texts):
        scale = float(os.environ.get("STALE_TEST_SCALE", "1"))
        return np.array([[len(t.abstract), scale] for t in texts], dtype=np.float32)
"""

# Helpers by a computed name, outside the encoder's folder, kept in five places.
HELPER_NAME = 'NAME = "{name}" + "_helper"'
KEPT = {
    "global": "helper = importlib.import_module(NAME)\n\ndef scale(self):\n    return helper.SCALE",
    "dict": 'HELPERS = {{"h": importlib.import_module(NAME)}}\n\n'
    'def scale(self):\n    return HELPERS["h"].SCALE',
    "closure": "def _make():\n    m = importlib.import_module(NAME)\n    return lambda: m.SCALE\n\n"
    "_get = _make()\n\ndef scale(self):\n    return _get()",
    "attribute": "def scale(self):\n    return self.helper.SCALE",
    "in_encode": "def scale(self):\n    return importlib.import_module(NAME).SCALE",
}
HELPER_MODULE = """
import importlib
import numpy as np

{name_line}
{kept}

class Enc:
    name, dim, metric = "{name}", 2, "ip"
    scale = scale

    def __init__(self):
        if {attribute}:
            self.helper = importlib.import_module(NAME)

    def encode(self, texts):
        return np.array([[len(t.abstract), self.scale()] for t in texts], dtype=np.float32)
"""


def _write_case(case: str, mods: Path, shared: Path) -> Callable[[int], None]:
    """Write encoder ``stale_<case>`` and return what sets its outside value."""
    name = f"stale_{case}"
    if case == "weights":
        (mods / f"{name}.py").write_text(WEIGHTS.format(name=name))
        return lambda v: np.save(mods / "W.npy", np.array([1.0, v], dtype=np.float32))
    if case == "environment":
        (mods / f"{name}.py").write_text(ENVIRONMENT.format(name=name))
        return lambda v: os.environ.__setitem__("STALE_TEST_SCALE", str(v))
    how = case.removeprefix("helper_")
    (mods / f"{name}.py").write_text(
        HELPER_MODULE.format(
            name=name,
            name_line=HELPER_NAME.format(name=name),
            kept=KEPT[how].format(),
            attribute=how == "attribute",
        )
    )
    return lambda v: (shared / f"{name}_helper.py").write_text(f"SCALE = {v}\n")


CASES = ["weights", "environment", *(f"helper_{k}" for k in KEPT)]


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    for sub in ("mods", "shared"):
        (tmp_path / sub).mkdir()
        monkeypatch.syspath_prepend(str(tmp_path / sub))
    monkeypatch.delenv("STALE_TEST_SCALE", raising=False)
    write_corpus(tmp_path / "corpus", 12)
    return {"root": tmp_path, "mods": tmp_path / "mods", "shared": tmp_path / "shared"}


def _second_column(folder: Path) -> set[float]:
    store = EmbeddingStore(folder)
    return set(store.vectors(np.arange(len(store)))[:, 1].tolist())


@pytest.mark.parametrize("case", CASES)
def test_a_changed_outside_input_is_a_new_fingerprint_through_the_cli(
    case: str, project: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    set_value = _write_case(case, project["mods"], project["shared"])
    argv = ["encode", "--corpus", str(project["root"] / "corpus")]
    argv += ["--encoder", f"py:stale_{case}:Enc", "--home", str(project["root"] / "home")]
    folders = []
    for value, fresh in ((3, True), (7, True), (7, False)):
        set_value(value)
        assert main(argv) == 0
        out = capsys.readouterr()
        folders.append(Path(out.out.strip().splitlines()[-1]))
        assert ("up to date" not in out.err) is fresh, out.err
        assert _second_column(folders[-1]) == {float(value)}
    assert folders[0] != folders[1] == folders[2]


PIPELINE = """
[pipeline]
name = "stale"
home = "{home}"

[[step]]
stage = "encode"
corpus = "{corpus}"
encoder = "py:stale_{case}:Enc"
"""


@pytest.mark.slow
@pytest.mark.parametrize("case", ["weights", "environment", "helper_dict", "helper_in_encode"])
def test_a_changed_outside_input_is_a_new_fingerprint_through_mdcr_run(
    case: str, project: dict[str, Path]
) -> None:
    """Each run a fresh process, as from a terminal."""
    root = project["root"]
    set_value = _write_case(case, project["mods"], project["shared"])
    toml = root / "stale.toml"
    toml.write_text(PIPELINE.format(home=root / "home", corpus=root / "corpus", case=case))
    path = os.pathsep.join([str(REPO), str(project["mods"]), str(project["shared"])])
    folders = []
    for value, fresh in ((3, True), (7, True), (7, False)):
        set_value(value)
        env = dict(os.environ, PYTHONPATH=path, STALE_TEST_SCALE=str(value))
        done = subprocess.run(
            [sys.executable, "-m", "mdcr.cli", "run", str(toml)],
            env=env,
            capture_output=True,
            text=True,
            cwd=root,
        )
        assert done.returncode == 0, done.stderr
        assert ("up to date" not in done.stderr) is fresh, done.stderr
        folders.append(Path(done.stdout.strip().splitlines()[-1]))
        assert _second_column(folders[-1]) == {float(value)}
    assert folders[0] != folders[1] == folders[2]
    manifest = json.loads((folders[1] / "manifest.json").read_text())
    identity = manifest["identity"]["encoder"]
    assert identity["probe"].startswith("sha256:") and identity["state"]["state"]
