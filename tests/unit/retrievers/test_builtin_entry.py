"""Built-in entries: a run is a built-in entry by what ran, never by the name it records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mdcr.contracts.outputs import run_info
from mdcr.core.inputs import resolve_inputs
from mdcr.core.store import Store
from mdcr.encoders.stage import SPEC as ENCODE
from mdcr.encoders.stage import EncodeConfig
from mdcr.index.dense import SPEC as SEARCH
from mdcr.index.dense import SearchConfig
from mdcr.retrievers.builtin import ENCODER_RECORDS, EncoderRecord, builtin_names, paper_names
from mdcr.retrievers.builtin_entry import (
    builtin_key,
    default_setup,
    entry_of,
    paper_model,
)
from tests.unit.encoders.fixtures import write_corpus, write_pools

IMPOSTOR = '''
import numpy as np

class Specter:
    """A user encoder that calls itself specter."""
    name, dim, metric = "specter", 4, "cos"

    def encode(self, texts):
        return np.array([[len(t.title), len(t.abstract), 1.0, 2.0] for t in texts], "float32")
'''


def _execute(home: Path, spec, cfg):  # type: ignore[no-untyped-def]
    cfg.validate()
    return Store(home).execute(spec, cfg, resolve_inputs(cfg), quiet=True).path


@pytest.fixture()
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "t22_impostor.py").write_text(IMPOSTOR)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    ids = write_corpus(tmp_path / "corpus", 40)
    pools = write_pools(
        tmp_path / "pools",
        {"dataset/test/30/r0": ids[:30]},
        {"dataset/test/30/r0": {"p0031": ids[:3]}},
    )
    return {"home": tmp_path / "home", "corpus": tmp_path / "corpus", "pools": pools}


def _encode(world: dict[str, Path], encoder: str, **kw: object) -> Path:
    cfg = EncodeConfig(
        corpus=str(world["corpus"]),
        encoder=encoder,
        targets=(str(world["pools"]),),
        **kw,  # type: ignore[arg-type]
    )
    return _execute(world["home"], ENCODE, cfg)


def _search(world: dict[str, Path], emb: Path) -> Path:
    cfg = SearchConfig(pools=str(world["pools"]), embeddings=str(emb), k=10, device="cpu")
    return _execute(world["home"], SEARCH, cfg)


def test_a_py_encoder_named_specter_is_not_specter(world: dict[str, Path]) -> None:
    emb = _encode(world, "py:t22_impostor:Specter")
    run = _search(world, emb)
    info = run_info(run)
    assert info is not None and info.retriever == "specter"  # the name it gave itself
    assert entry_of(emb) is None and entry_of(run) is None and info.builtin_entry is None
    assert paper_model(entry_of(run)) is None and builtin_key(entry_of(run)) is None


def test_a_builtin_run_records_its_entry_and_options(world: dict[str, Path]) -> None:
    emb = _encode(world, "random", dim=8)
    run = _search(world, emb)
    want = {"builtin": "random", "model": {}, "options": {"dim": 8}}
    assert entry_of(emb) == want and entry_of(run) == want
    info = json.loads((run / "manifest.json").read_text())["info"]
    assert info["builtin_entry"] == want  # recorded: survives the embeddings' removal
    assert builtin_key(want) == "random" and default_setup(want) is None  # options given
    plain = entry_of(_search(world, _encode(world, "random")))
    assert plain == {"builtin": "random", "model": {}, "options": {}}
    assert default_setup(plain) == "random" and paper_model(plain) is None  # not the paper's
    # The entry is what the manifest records, never derived again: an edited manifest
    # without it is no built-in entry.
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["info"]["builtin_entry"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert entry_of(run) is None and entry_of(emb) == want


def test_an_entry_registered_at_run_time_is_never_builtin() -> None:
    record = EncoderRecord(
        name="t22-mine",
        label="Mine",
        description="a user record",
        family="random",
        paper_name="Specter",
    )
    ENCODER_RECORDS.register(record)
    try:
        assert "t22-mine" not in builtin_names() and "t22-mine" not in paper_names()
        assert builtin_key({"builtin": "t22-mine"}) is None
    finally:
        ENCODER_RECORDS.unregister("t22-mine")
    assert {"specter", "scincl", "bm25", "minilm", "random"} <= builtin_names()
