"""SPECTER2's adapter, applied by mdcr, gives the vectors of the ``adapters`` library.

The library (1.3.0) pins transformers ~=4.57.6, so it runs in an environment of its own
(``.venv-adapters`` in the repository, made once from PyPI by ``make setup``, or here where
it is missing: adapters_env/build.py). There it builds a tiny BERT and a random seq_bn
adapter and computes reference vectors; here ``specter2`` is built from a Hugging Face
cache holding those two as allenai/specter2_base and allenai/specter2, offline, through the
real registry entry.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.integration.encoders.adapters_env.build import build, registry_unreachable

REPO = Path(__file__).resolve().parents[3]
ENV = REPO / ".venv-adapters"
SCRIPT = Path(__file__).parent / "adapters_env" / "make_reference.py"
PAPERS = [
    ["Protein folding", "the cell and the gene of a protein."],
    ["Graph", "a citation graph of the paper, the query."],
    ["", "cell cell cell gene"],
    ["A paper", ""],
]


def _adapters_python() -> Path:
    reason = build(ENV)
    if reason is not None:
        pytest.skip(f"needs the package registry to build {ENV.name} ({reason})")
    return ENV / "bin" / "python"


def _snapshot(cache: Path, repo: str, commit: str, source: Path) -> None:
    base = cache / ("models--" + repo.replace("/", "--"))
    shutil.copytree(source, base / "snapshots" / commit)
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(commit)


@pytest.mark.slow
def test_specter2_adapter_matches_the_adapters_library(tmp_path: Path) -> None:
    base, adapter = tmp_path / "base", tmp_path / "adapter"
    base.mkdir()
    (tmp_path / "papers.json").write_text(json.dumps(PAPERS))
    args = [str(base), str(adapter), str(tmp_path / "ref.npy"), str(tmp_path / "papers.json")]
    subprocess.run(
        [str(_adapters_python()), str(SCRIPT), *args],
        check=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
    )
    reference = np.load(tmp_path / "ref.npy")
    cache = tmp_path / "hub"
    _snapshot(cache, "allenai/specter2_base", "a" * 40, base)
    _snapshot(cache, "allenai/specter2", "b" * 40, adapter)
    code = f"""
import json, numpy as np
from pathlib import Path
from mdcr.encoders.base import PaperText, EncoderOptions
from mdcr.encoders.registry import build_encoder, identify_encoder
folder = Path({str(tmp_path)!r})
pairs = json.loads((folder / "papers.json").read_text())
papers = [PaperText(str(i), t, a) for i, (t, a) in enumerate(pairs)]
enc = build_encoder("specter2", EncoderOptions(device="cpu", max_length=64))
np.save(folder / "ours.npy", enc.encode(papers))
plain = build_encoder("specter2-base", EncoderOptions(device="cpu", max_length=64))
np.save(folder / "base.npy", plain.encode(papers))
facts = {{"identity": identify_encoder("specter2"), "adapter": enc.identity["adapter"]}}
print(json.dumps({{**facts, "metric": enc.metric}}))
"""
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout.strip().splitlines()[-1])
    assert info["identity"]["commit"] == "a" * 40
    assert info["identity"]["adapter"] == {"model_id": "allenai/specter2", "commit": "b" * 40}
    assert info["adapter"]["layers"] == 2 and info["metric"] == "l2"
    ours = np.load(tmp_path / "ours.npy")
    np.testing.assert_allclose(ours, reference, atol=1e-5, rtol=1e-5)
    # The adapter changes the vectors: without it they are the base model's.
    assert not np.allclose(np.load(tmp_path / "base.npy"), reference, atol=1e-3)


def test_an_unreachable_registry_is_a_reason_to_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    monkeypatch.setenv("PIP_NO_INPUT", "1")
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    reason = registry_unreachable()
    assert reason is not None and reason.startswith("pip could not fetch adapters==1.3.0")
