"""An encoder's output is checked before it is stored: one-line errors naming the encoder,
the problem and the fix; nothing half-written counts as done."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mdcr.encoders.base import PaperText
from mdcr.encoders.stage import SPEC, EncodeConfig
from mdcr.encoders.store import checked_vectors
from mdcr.errors import ConfigError, InputDataError
from mdcr.store import Store, resolve_inputs
from tests.unit.encoders.fixtures import write_corpus

PAPERS = [PaperText(f"p{i}", "t", "a") for i in range(3)]


@pytest.mark.parametrize(
    ("result", "message"),
    [
        ([[0.0] * 4] * 3, "returned list; return a numpy array"),
        (np.zeros((2, 4), np.float32), r"shape \(2, 4\) for 3 papers"),
        (np.zeros((3, 5), np.float32), "declares dim 4"),
        (np.zeros((3, 4), np.int64), "returned int64 vectors"),
        (np.array([[0, 0, 0, 0], [np.nan, 0, 0, 0], [0, 0, 0, 0]], np.float32), "'p1'"),
        (np.array([[np.inf, 0, 0, 0]] * 3, np.float32), r"NaN or inf for 3 vector"),
        (np.full((3, 4), 1e6, np.float64), "beyond what float16 storage holds"),
    ],
)
def test_bad_single_vectors(result: object, message: str) -> None:
    with pytest.raises(InputDataError, match=message) as info:
        checked_vectors("py:m:E", result, PAPERS, 4, multi=False)
    assert "encoder 'py:m:E'" in str(info.value) and "\n" not in str(info.value)


def test_bad_multi_vectors() -> None:
    vecs = np.zeros((4, 2), np.float32)
    with pytest.raises(InputDataError, match="multi-vector but returned ndarray"):
        checked_vectors("x", vecs, PAPERS, 2, multi=True)
    with pytest.raises(InputDataError, match="4 integer offsets"):
        checked_vectors("x", (vecs, np.array([0, 4])), PAPERS, 2, multi=True)
    with pytest.raises(InputDataError, match="at least one vector"):
        checked_vectors("x", (vecs, np.array([0, 2, 2, 4])), PAPERS, 2, multi=True)
    bad = vecs.copy()
    bad[3, 0] = np.nan  # the last vector belongs to the last paper
    with pytest.raises(InputDataError, match="'p2'"):
        checked_vectors("x", (bad, np.array([0, 1, 2, 4])), PAPERS, 2, multi=True)
    ok, off = checked_vectors("x", (vecs, np.array([0, 1, 2, 4])), PAPERS, 2, multi=True)
    assert ok.shape == (4, 2) and off is not None and off.dtype == np.int64


BAD_MODULE = """
import numpy as np

class Exploding:
    name = "exploding"
    dim = 2
    metric = "ip"

    def encode(self, texts):
        out = np.ones((len(texts), 2), dtype=np.float32)
        out[-1, 0] = np.nan
        return out

class NeedsArgs:
    def __init__(self, path):
        self.path = path

class Raises:
    def __init__(self):
        raise ValueError("no weights here")

class FailsInEncode:
    name = "fails"
    dim = 2
    metric = "ip"

    def encode(self, texts):
        raise RuntimeError("the GPU fell off the bus\\nsecond line of the message")
"""


def test_the_encode_stage_refuses_bad_vectors_and_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "bad_vectors_mod.py").write_text(BAD_MODULE)
    write_corpus(tmp_path / "corpus", 6)
    home = tmp_path / "home"
    cfg = EncodeConfig(corpus=str(tmp_path / "corpus"), encoder="py:bad_vectors_mod:Exploding")
    with pytest.raises(InputDataError, match=r"NaN or inf for 1 vector.*'p0005'"):
        Store(home).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
    assert not [p for p in (home / "encode").iterdir() if not p.name.startswith(".")]
    for attr, message in (
        ("NeedsArgs", "needs argument\\(s\\) path to be built"),
        ("Raises", "building it failed \\(ValueError: no weights here\\)"),
    ):
        bad = EncodeConfig(corpus=str(tmp_path / "corpus"), encoder=f"py:bad_vectors_mod:{attr}")
        with pytest.raises(ConfigError, match=message) as info:
            Store(home).execute(SPEC, bad, resolve_inputs(bad), quiet=True)
        assert "\n" not in str(info.value)


LARGE_MODULE = """
import numpy as np

class Large:
    name = "large"
    dim = 3
    metric = "ip"

    def encode(self, texts):
        return np.array([[len(t.title) * 1e5, len(t.abstract) * 3e4, 1e6] for t in texts],
                        dtype=np.float32)
"""


def test_values_beyond_float16_need_float32_storage_and_then_search_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pandas as pd

    from mdcr.encoders.store import EmbeddingStore
    from mdcr.index.dense import SPEC as SEARCH
    from mdcr.index.dense import SearchConfig
    from tests.unit.encoders.fixtures import write_pools

    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "large_vectors_mod.py").write_text(LARGE_MODULE)
    write_corpus(tmp_path / "corpus", 30)
    ids = [f"p{i:04d}" for i in range(30)]
    pools = write_pools(
        tmp_path / "pools",
        {"dataset/test/25/r0": ids[:25]},
        {"dataset/test/25/r0": {"p0027": ids[:2]}},
    )
    home = tmp_path / "home"
    kw = {"corpus": str(tmp_path / "corpus"), "encoder": "py:large_vectors_mod:Large"}
    kw["targets"] = (str(pools),)  # type: ignore[assignment]
    cfg = EncodeConfig(**kw)  # type: ignore[arg-type]
    with pytest.raises(InputDataError, match="--encode-set storage=float32"):
        Store(home).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
    cfg = EncodeConfig(**kw, storage="float32")  # type: ignore[arg-type]
    out = Store(home).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True).path
    store = EmbeddingStore(out)
    assert store.dtype == np.float32 and np.load(out / "emb_00000.npy").dtype == np.float32
    search = SearchConfig(pools=str(pools), embeddings=str(out), k=10)
    run = Store(home).execute(SEARCH, search, resolve_inputs(search), quiet=True).path
    got = pd.read_parquet(run / "runs.parquet")
    q = store.vectors(store.rows(["p0027"])).astype(np.float64)[0]
    db = store.vectors(store.rows(ids[:25])).astype(np.float64)
    order = sorted(range(25), key=lambda i: (-(db[i] @ q), ids[i]))[:10]
    assert got["paper_id"].tolist() == [ids[i] for i in order]
    np.testing.assert_allclose(got["score"].to_numpy(), [db[i] @ q for i in order], rtol=1e-12)


def test_an_exception_inside_encode_is_one_line_naming_the_encoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mdcr.cli import main
    from mdcr.errors import EncoderError

    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "bad_vectors_mod.py").write_text(BAD_MODULE)
    write_corpus(tmp_path / "corpus", 6)
    argv = ["encode", "--corpus", str(tmp_path / "corpus"), "--home", str(tmp_path / "h")]
    argv += ["--encoder", "py:bad_vectors_mod:FailsInEncode", "-q"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == (
        "mdcr: error: encoder 'py:bad_vectors_mod:FailsInEncode' raised RuntimeError: the GPU "
        "fell off the bus while encoding 6 papers of shard 0; fix its encode (--debug shows "
        "the traceback)\n"
    )
    with pytest.raises(EncoderError) as info:  # --debug: the traceback, down to the encoder
        main([*argv, "--debug"])
    assert isinstance(info.value.__cause__, RuntimeError)
