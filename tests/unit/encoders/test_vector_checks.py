"""An encoder's output is checked before it is stored: one-line errors naming the encoder,
the problem and the fix; nothing half-written counts as done."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.inputs import resolve_inputs
from mdcr.core.store import Store
from mdcr.encoders.base import PaperText
from mdcr.encoders.stage import SPEC, EncodeConfig
from mdcr.encoders.store import checked_vectors
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
        if texts[-1].paper_id.startswith("p"):  # the corpus's papers, not the probe's
            out[-1, 0] = np.nan
        return out

class ExplodingAlways(Exploding):
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
        if len(texts) > 1:  # a shard, not a probe paper (one per call)
            raise RuntimeError("the GPU fell off the bus\\nsecond line of the message")
        return np.ones((len(texts), 2), dtype=np.float32)
"""


def test_the_encode_stage_refuses_bad_vectors_and_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "bad_vectors_mod.py").write_text(BAD_MODULE)
    write_corpus(tmp_path / "corpus", 6)
    home = tmp_path / "home"
    cfg = EncodeConfig(corpus=str(tmp_path / "corpus"), encoder="py:bad_vectors_mod:Exploding")
    # met on the corpus's papers that the input probe encodes first: named, in one line
    with pytest.raises(
        InputDataError, match=r"NaN or inf for 1 vector.*'p000\d'.*papers of its inputs"
    ):
        Store(home).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
    assert not (home / "encode").exists()  # refused while planned: nothing written
    # met on the probe papers while the fingerprint is computed: said so, in one line
    always = EncodeConfig(
        corpus=str(tmp_path / "corpus"), encoder="py:bad_vectors_mod:ExplodingAlways"
    )
    with pytest.raises(InputDataError, match=r"NaN or inf.*on probe paper \d+: mdcr encodes fixed"):
        Store(home).execute(SPEC, always, resolve_inputs(always), quiet=True)
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


# --------------------------------------------------------------------------- degenerate vectors

DEGENERATE_MODULE = """
import os
import zlib

import numpy as np


def text_vector(t):
    '''A vector that differs between texts (a hash of the title and abstract).'''
    rng = np.random.default_rng(zlib.crc32((t.title + "|" + t.abstract).encode()))
    return rng.standard_normal(4).astype(np.float32)


class Base:
    dim = 4
    metric = "cos"

    def encode(self, texts):
        if os.environ.get("MDCR_TEST_NO_ENCODE") and len(texts) > 1:
            raise RuntimeError("encode was called")  # on a shard (a probe paper is allowed)
        return self.vectors(texts)


class NoDim(Base):
    name = "no-dim"
    dim = 0

    def vectors(self, texts):
        return np.zeros((len(texts), 0), np.float32)


class Zeros(Base):
    name = "zeros"

    def vectors(self, texts):
        return np.zeros((len(texts), 4), np.float32)


class Constant(Base):
    name = "constant"
    metric = "ip"

    def vectors(self, texts):
        return np.tile(np.array([0.5, -1.0, 2.0, 0.25], np.float32), (len(texts), 1))


class FewZeros(Base):
    name = "few-zeros"

    def vectors(self, texts):
        out = np.stack([text_vector(t) for t in texts])
        out[[t.paper_id in ("p0007", "p0123") for t in texts]] = 0.0
        return out
"""


def _degenerate_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "degenerate_mod.py").write_text(DEGENERATE_MODULE)
    write_corpus(tmp_path / "corpus", n)
    return tmp_path / "home"


def _encode(home: Path, corpus: Path, encoder: str, **kw: object) -> Path:
    cfg = EncodeConfig(corpus=str(corpus), encoder=encoder, **kw)  # type: ignore[arg-type]
    return Store(home).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True).path


def _finished(home: Path) -> list[Path]:
    if not (home / "encode").exists():  # stopped while planned (on the probe papers)
        return []
    return [p for p in (home / "encode").iterdir() if not p.name.startswith(".")]


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        ("NoDim", r"^encoder 'py:degenerate_mod:NoDim' has dim 0: vectors of no numbers"),
        (
            "Zeros",
            r"^encoder 'py:degenerate_mod:Zeros': 6 of 6 vectors are zero \(metric cos: no "
            r"direction; e\.g\. paper 'p0000'\); rankings from such vectors follow paper ids",
        ),
        (
            "Constant",
            r"^encoder 'py:degenerate_mod:Constant': 6 of 6 vectors are one and the same "
            r"vector for papers of different texts",
        ),
    ],
)
def test_degenerate_py_encoders_are_one_line_errors_and_leave_no_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attr: str, message: str
) -> None:
    home = _degenerate_world(tmp_path, monkeypatch, 6)
    with pytest.raises(InputDataError, match=message) as info:
        _encode(home, tmp_path / "corpus", f"py:degenerate_mod:{attr}")
    assert "\n" not in str(info.value)
    assert not _finished(home)


def test_a_resumed_degenerate_encode_fails_again_from_its_stored_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = _degenerate_world(tmp_path, monkeypatch, 6)
    corpus = tmp_path / "corpus"
    with pytest.raises(InputDataError, match="6 of 6 vectors are one and the same"):
        _encode(home, corpus, "py:degenerate_mod:Constant", shard_size=2)
    # The three finished shards stay in the work folder; the rerun reads them back (the
    # encoder is not called again) and stops the same way.
    monkeypatch.setenv("MDCR_TEST_NO_ENCODE", "1")
    with pytest.raises(InputDataError, match="6 of 6 vectors are one and the same"):
        _encode(home, corpus, "py:degenerate_mod:Constant", shard_size=2)
    assert not _finished(home)


def test_a_few_zero_vectors_are_a_counted_warning_and_the_output_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = _degenerate_world(tmp_path, monkeypatch, 300)
    cfg = EncodeConfig(
        corpus=str(tmp_path / "corpus"), encoder="py:degenerate_mod:FewZeros", shard_size=100
    )
    out = Store(home).execute(SPEC, cfg, resolve_inputs(cfg)).path
    err = capsys.readouterr().err
    assert (
        "[encode] warning: encoder 'py:degenerate_mod:FewZeros': 2 of 300 vectors are zero "
        "(metric cos: no direction; e.g. paper 'p0007'); kept" in err
    )
    info = json.loads((out / "manifest.json").read_text())["info"]
    assert info["degenerate_vectors"] == {"document": {"vectors": 300, "zero": 2, "shared": 0}}
    assert info["counts"]["papers"] == 300


class _ConstantModel:
    """An object with encode(list of str), as mdcr.evaluate takes one."""

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def encode(self, sentences: list[str]) -> np.ndarray:
        return np.ones((len(sentences), self.dim), np.float32)


class _NaNModel:
    def encode(self, sentences: list[str]) -> np.ndarray:
        out = np.ones((len(sentences), 3), np.float32)
        out[:, 0] = [len(s) for s in sentences]
        out[-1, 1] = np.nan
        return out


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (_ConstantModel(0), "has dim 0"),
        (_ConstantModel(3), r"5 of 5 vectors are zero|5 of 5 vectors are one and the same"),
        (_NaNModel(), r"NaN or inf for 1 vector"),
    ],
)
def test_in_memory_models_are_checked_too(tmp_path: Path, model: object, message: str) -> None:
    from mdcr.encoders.models.in_memory import register_model

    write_corpus(tmp_path / "corpus", 5)
    home = tmp_path / "home"
    with pytest.raises(InputDataError, match=message) as info:
        spec = register_model(model, name="mem-model")
        _encode(home, tmp_path / "corpus", spec)
    assert "\n" not in str(info.value)
    assert not (home / "encode").is_dir() or not _finished(home)


def test_the_api_stops_on_one_vector_for_every_paper(tmp_path: Path) -> None:
    import mdcr
    from tests.unit.evaluation.test_evaluate import FIXTURE

    with pytest.raises(InputDataError, match="vectors are one and the same vector"):
        mdcr.evaluate(_ConstantModel(3), benchmark=FIXTURE, home=tmp_path, name="constant")


def test_degenerate_counts_and_thresholds() -> None:
    from mdcr.encoders.degenerate import VectorCheck, count_shard

    rng = np.random.default_rng(0)
    ids = [f"q{i}" for i in range(100)]
    texts = np.arange(100, dtype=np.uint64)

    def verdict(vectors: np.ndarray, metric: str = "cos", hashes: np.ndarray = texts) -> object:
        check = VectorCheck()
        check.add(count_shard(vectors.astype(np.float16), None, ids, hashes, metric))
        return check.verdict("x", metric, "document")

    x = rng.standard_normal((100, 8))
    assert verdict(x) is None
    one_zero = x.copy()
    one_zero[5] = 0
    assert "1 of 100 vectors are zero" in str(verdict(one_zero))  # 1%: a warning
    assert verdict(one_zero, metric="l2") is None  # the origin is a point under l2
    zeros = np.zeros((100, 8))  # counted as zero vectors, not also as one shared vector
    check = VectorCheck()
    check.add(count_shard(zeros.astype(np.float16), None, ids, texts, "cos"))
    assert check.summary() == {"vectors": 100, "zero": 100, "shared": 0}
    check.add(count_shard(zeros.astype(np.float16), None, ids, texts, "l2"))  # under l2: shared
    assert check.summary() == {"vectors": 200, "zero": 100, "shared": 100}
    two_zero = one_zero.copy()
    two_zero[9] = -0.0
    with pytest.raises(InputDataError, match="2 of 100 vectors are zero"):
        verdict(two_zero)  # over 1%: an error
    shared = x.copy()
    shared[:50] = x[0]
    assert "50 of 100 vectors are one and the same" in str(verdict(shared, "l2"))
    shared[50] = x[0]
    with pytest.raises(InputDataError, match="51 of 100 vectors are one and the same"):
        verdict(shared, "l2")
    # Papers with the same text rightly share a vector.
    assert verdict(shared, "l2", hashes=np.zeros(100, np.uint64)) is None
    # Multi-vector: counted per vector, named by the paper that has it; over shards.
    vecs = rng.standard_normal((7, 4)).astype(np.float16)
    vecs[4] = 0
    part = count_shard(vecs, np.array([0, 2, 3, 7]), ["a", "b", "c"], texts[:3], "ip")
    assert (part.vectors, part.zero, part.zero_example) == (7, 1, "c")
    check = VectorCheck()
    for _ in range(3):
        check.add(count_shard(np.ones((4, 2), np.float16), None, ids[:4], texts[:4], "ip"))
    assert check.summary() == {"vectors": 12, "zero": 0, "shared": 12}


def test_an_exception_inside_encode_is_one_line_naming_the_encoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mdcr.cli import main
    from mdcr.core.errors import EncoderError

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
