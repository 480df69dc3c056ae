"""A ``py:`` encoder is identified by what it computes, not only by its source.

Three ways researchers commonly write an encoder escape a hash of its source files: weights
loaded from a file in ``__init__``, behaviour read from the environment, and helpers loaded
by a computed name and kept anywhere but a module global. Each case below changes only that
outside thing between two runs: the second run must get a new fingerprint and the new
numbers (never "up to date" with the old vectors), and a third run finds it up to date.
Through the CLI (``mdcr encode``, in this process, as a notebook would) and through
``mdcr run`` (a fresh process per run, as a terminal would; there the four cases are steps
of one pipeline whose outside values move one case at a time, so six processes serve them
all and each run also shows the other cases untouched).
"""

from __future__ import annotations

import json
import os
import re
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


# The cases of the terminal test: one step each in one pipeline (``id`` = the case).
TERMINAL_CASES = ["weights", "environment", "helper_dict", "helper_in_encode"]
PIPELINE_STEP = """
[[step]]
id = "{case}"
stage = "encode"
corpus = "{corpus}"
encoder = "py:stale_{case}:Enc"
"""


@pytest.fixture(scope="module")
def terminal_runs(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, tuple[str, Path]]]:
    """Six runs of ``mdcr run``, each a fresh process, of one pipeline with a step per case;
    per run, each case's (state, output folder) from the run's summary and status lines.

    The outside values move one case at a time: run 0 has every case at 3; run i (1 to 4)
    sets case i to 7; run 5 changes nothing. So between two consecutive runs only one
    case's outside input changes, as in a run of that case alone, and every other step of
    that run must be found up to date (no case is seen fresh because another's input
    moved). Each case gets its three runs (run 0, run i, run i + 1) from six processes
    rather than three processes of its own.
    """
    root = tmp_path_factory.mktemp("terminal")
    mods, shared = root / "mods", root / "shared"
    mods.mkdir()
    shared.mkdir()
    write_corpus(root / "corpus", 12)
    toml = root / "stale.toml"
    toml.write_text(
        f'[pipeline]\nname = "stale"\nhome = "{root / "home"}"\n'
        + "".join(PIPELINE_STEP.format(case=c, corpus=root / "corpus") for c in TERMINAL_CASES)
    )
    path = os.pathsep.join([str(REPO), str(mods), str(shared)])
    runs: list[dict[str, tuple[str, Path]]] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("STALE_TEST_SCALE", raising=False)
        setters = {case: _write_case(case, mods, shared) for case in TERMINAL_CASES}
        for setter in setters.values():
            setter(3)
        for changed in [None, *TERMINAL_CASES, None]:
            if changed is not None:
                setters[changed](7)
            env = dict(os.environ, PYTHONPATH=path)
            done = subprocess.run(
                [sys.executable, "-m", "mdcr.cli", "run", str(toml)],
                env=env,
                capture_output=True,
                text=True,
                cwd=root,
            )
            assert done.returncode == 0, done.stderr
            run = {}
            for case in TERMINAL_CASES:
                line = re.search(rf"^  {case} +(built|up to date) +(\S+)$", done.stdout, re.M)
                assert line is not None, done.stdout
                fresh = f"[{case}] up to date" not in done.stderr
                assert fresh is (f"[{case}] running" in done.stderr), done.stderr
                assert fresh is (line.group(1) == "built"), done.stdout
                run[case] = ("fresh" if fresh else "up to date", Path(line.group(2)))
            runs.append(run)
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("case", TERMINAL_CASES)
def test_a_changed_outside_input_is_a_new_fingerprint_through_mdcr_run(
    case: str, terminal_runs: list[dict[str, tuple[str, Path]]]
) -> None:
    """Each run a fresh process, as from a terminal."""
    changed_in = TERMINAL_CASES.index(case) + 1  # the run that sets this case to 7
    folders = []
    for i, (value, fresh) in zip(
        (0, changed_in, changed_in + 1), ((3, True), (7, True), (7, False)), strict=True
    ):
        state, folder = terminal_runs[i][case]
        assert (state == "fresh") is fresh, (i, state)
        folders.append(folder)
        assert _second_column(folder) == {float(value)}
    assert folders[0] != folders[1] == folders[2]
    for i, run in enumerate(terminal_runs):  # another case's change moves nothing here
        if i not in (0, changed_in):
            assert run[case] == ("up to date", folders[0 if i < changed_in else 1]), i
    manifest = json.loads((folders[1] / "manifest.json").read_text())
    identity = manifest["identity"]["encoder"]
    assert identity["probe"].startswith("sha256:") and identity["state"]["state"]
