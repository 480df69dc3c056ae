"""A ``py:`` encoder's module as the user has it.

- one that imports torch (whose ``torch.classes`` has the relative ``__file__``
  ``_classes.py``) is imported and identified from any working folder, torch not imported
  before;
- run from the user's own script, an encoder whose module imports ``multiprocessing`` (which
  names the running script ``__mp_main__`` too) is identified by its own code alone, as
  from the command line: the script is not the encoder's code;
- in Python, a module the user imported (and changed: ``m.SCALE = 3``) is scored as held,
  the same on every call, never reloaded; the number is that of a module whose file says
  ``SCALE = 3``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mdcr
from mdcr.encoders.identity import _is_user_file, _library_dirs

REPO = Path(__file__).resolve().parents[3]
BENCH = REPO / "tests" / "data" / "mdcr_format_fixture"

TORCH_MODULE = """
import numpy as np
import torch

class Enc:
    name, dim, metric = "torchy", 2, "ip"

    def encode(self, texts):
        return torch.tensor([[len(t.title), 1.0] for t in texts]).numpy().astype(np.float32)
"""


def _python(code: Path, cwd: Path, *args: str) -> str:
    """What ``python *args`` prints, run in ``cwd`` with the user's ``code`` folder (and the
    repository) on its path; it must succeed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), str(REPO)])}
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_a_module_that_imports_torch_is_identified_from_any_folder(tmp_path: Path) -> None:
    code, elsewhere = tmp_path / "code", tmp_path / "elsewhere"
    code.mkdir()
    elsewhere.mkdir()
    (code / "torchy_mod.py").write_text(textwrap.dedent(TORCH_MODULE))
    script = (
        "import sys; assert 'torch' not in sys.modules\n"
        "from mdcr.encoders.registry import identify_encoder\n"
        "ident = identify_encoder('py:torchy_mod:Enc')\n"
        "print(ident['files'])\n"
    )
    assert _python(code, elsewhere, "-c", script) == "['torchy_mod']"


MP_MODULE = """
import multiprocessing

import numpy as np

class Enc:
    name, dim, metric = "mp", 2, "ip"

    def encode(self, texts):
        return np.array([[len(t.title), 1.0] for t in texts], dtype=np.float32)
"""


def test_the_users_script_is_not_the_code_of_the_encoder_it_scores(tmp_path: Path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "mp_mod.py").write_text(textwrap.dedent(MP_MODULE))
    (code / "score_it.py").write_text(
        "import sys\n"
        "assert 'multiprocessing' not in sys.modules\n"
        "from mdcr.encoders.registry import identify_encoder\n"
        "print(identify_encoder('py:mp_mod:Enc')['files'])\n"
        "assert sys.modules['__mp_main__'] is sys.modules['__main__']\n"
    )
    assert _python(code, tmp_path, str(code / "score_it.py")) == "['mp_mod']"


def test_a_relative_file_is_never_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "_classes.py").write_text("")  # even where the folder holds such a file
    libraries = _library_dirs()
    assert not _is_user_file(Path("_classes.py"), libraries)
    assert _is_user_file(tmp_path / "_classes.py", libraries)
    assert _is_user_file(tmp_path / "deleted.py", libraries)  # hashing it will say so


SCALED = """
import zlib

import numpy as np

SCALE = {scale}


class Enc:
    name, dim, metric = "scaled", 32, "cos"

    def encode(self, papers):
        out = np.zeros((len(papers), self.dim), dtype=np.float32)
        for i, p in enumerate(papers):
            for j, w in enumerate(f"{{p.title}} {{p.abstract}}".lower().split()):
                out[i, zlib.crc32(w.encode()) % self.dim] += 1.0 + SCALE * (j < 5)
        return out
"""


def _avg_map(result: object) -> float:
    s = result.summary  # type: ignore[attr-defined]
    return float(s[(s["measure"] == "MAP") & (s["field"] == "AVG")]["mean"].iloc[0])


def test_the_module_the_user_holds_is_scored_as_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "held_mod.py").write_text(textwrap.dedent(SCALED.format(scale=1)))
    (tmp_path / "held_three.py").write_text(textwrap.dedent(SCALED.format(scale=3)))
    monkeypatch.syspath_prepend(str(tmp_path))
    import held_mod  # type: ignore[import-not-found]

    held_mod.SCALE = 3
    home = tmp_path / "home"
    first = _avg_map(mdcr.evaluate("py:held_mod:Enc", benchmark=BENCH, home=home))
    second = _avg_map(mdcr.evaluate("py:held_mod:Enc", benchmark=BENCH, home=home))
    assert held_mod.SCALE == 3  # never reloaded
    fresh = _avg_map(mdcr.evaluate("py:held_three:Enc", benchmark=BENCH, home=tmp_path / "h3"))
    assert first == second == fresh
    held_mod.SCALE = 1
    assert _avg_map(mdcr.evaluate("py:held_mod:Enc", benchmark=BENCH, home=home)) != first
    del sys.modules["held_mod"], sys.modules["held_three"]
