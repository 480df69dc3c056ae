"""Adding an encoder record is one registration next to its definition, and so is adding
an encoder family: `mdcr encode --encoder` takes either from there."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from mdcr.cli import main
from mdcr.core.errors import ConfigError
from mdcr.core.manifests import read_manifest
from mdcr.encoders.base import EncoderOptions, PaperText
from mdcr.encoders.registry import (
    FAMILIES,
    EncoderFamily,
    build_encoder,
    identify_encoder,
    lookup,
    valid_specs,
)
from mdcr.encoders.store import EmbeddingStore
from mdcr.retrievers.builtin import ENCODER_RECORDS, HF_OPTIONS, EncoderRecord, builtin_names
from tests.unit.encoders.fixtures import make_tiny_bert, write_corpus


def _encode(corpus: Path, home: Path, encoder: str, capsys: pytest.CaptureFixture[str]) -> Path:
    args = ["encode", "--corpus", str(corpus), "--encoder", encoder, "--home", str(home)]
    assert main([*args, "--device", "cpu", "-q"]) == 0
    return Path(capsys.readouterr().out.strip().splitlines()[-1])


def _texts(corpus: Path, ids: Sequence[str]) -> list[PaperText]:
    rows = pq.read_table(corpus / "papers.parquet").to_pylist()
    by_id = {r["paper_id"]: r for r in rows}
    return [PaperText(i, by_id[i]["title"], by_id[i]["abstract"]) for i in ids]


@pytest.fixture
def tiny_record(tmp_path: Path) -> Iterator[EncoderRecord]:
    folder = make_tiny_bert(tmp_path / "tiny-bert")
    # The whole of adding an encoder of a known family:
    record = ENCODER_RECORDS.register(
        EncoderRecord(
            name="t-tiny",
            label="Tiny",
            description="a tiny random BERT, mean pooling, cosine",
            family="hf",
            model_id=str(folder),
            pooling="mean",
            metric="cos",
            max_length=40,
            input_format="sep",
            layers="last",
            options=HF_OPTIONS,
            dim=32,
        )
    )
    yield record
    ENCODER_RECORDS.unregister("t-tiny")


def test_a_record_registered_once_encodes_from_the_command_line(
    tiny_record: EncoderRecord, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = write_corpus(tmp_path / "corpus", 12)
    assert lookup("t-tiny") == (tiny_record, "") and "t-tiny" in valid_specs()
    assert "t-tiny" not in builtin_names()  # registered at run time: never a built-in
    out = _encode(tmp_path / "corpus", tmp_path / "home", "t-tiny", capsys)
    assert out.parent == tmp_path / "home" / "encode"
    manifest = read_manifest(out)
    assert manifest is not None
    # The record's defaults were built with and hashed; its family identified it.
    assert manifest["identity"]["option_defaults"] == {
        "pooling": "mean",
        "metric": "cos",
        "max_length": 40,
        "input_format": "sep",
        "layers": "last",
    }
    assert manifest["identity"]["encoder"] == identify_encoder(f"hf:{tiny_record.model_id}")
    store = EmbeddingStore(out)
    assert len(store) == 12 and (store.identity["name"], store.identity["dim"]) == ("t-tiny", 32)
    got = store.vectors(store.rows(ids)).astype(np.float32)
    # Independently: the same model as an hf: spec with the record's options, unit vectors.
    options = EncoderOptions(pooling="mean", metric="cos", max_length=40, device="cpu")
    hf_any = build_encoder(f"hf:{tiny_record.model_id}", options)
    direct = np.asarray(hf_any.encode(_texts(tmp_path / "corpus", ids)))
    direct = direct / np.linalg.norm(direct, axis=1, keepdims=True)
    np.testing.assert_allclose(got, direct, atol=2e-3)


class ToyEncoder:
    """Letter counts of the title, folded into ``dim`` buckets."""

    metric = "ip"

    def __init__(self, dim: int) -> None:
        self.name, self.dim = f"toy:{dim}", dim

    def encode(self, texts: Sequence[PaperText]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)
        for row, text in enumerate(texts):
            for ch in (text.title or "").lower():
                if ch.isalpha():
                    out[row, (ord(ch) - ord("a")) % self.dim] += 1.0
        return out


class ToyFamily(EncoderFamily):
    """``toy:<dim>``: a family of its own, with its own spec prefix."""

    name = "t-toy"
    prefix = "toy:"
    usage = "toy:<dim>"
    record = EncoderRecord(
        name="toy:<dim>", label="Toy", description="letter counts", family="t-toy"
    )

    def accepts(self, arg: str) -> bool:
        return arg.isdigit() and int(arg) > 0

    def build(self, record: EncoderRecord, arg: str, options: EncoderOptions) -> Any:
        return ToyEncoder(int(arg))

    def identify(self, record: EncoderRecord, arg: str, options: EncoderOptions) -> dict[str, Any]:
        return {"toy": int(arg), "version": "1"}


@pytest.fixture
def toy_family() -> Iterator[EncoderFamily]:
    family = FAMILIES.register(ToyFamily())  # the whole of adding an encoder family
    yield family
    FAMILIES.unregister("t-toy")


def test_a_family_registered_once_builds_and_encodes(
    toy_family: EncoderFamily, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = write_corpus(tmp_path / "corpus", 9)
    assert lookup("toy:6") == (toy_family.record, "6") and "toy:<dim>" in valid_specs()
    with pytest.raises(ConfigError, match="unknown encoder 'toy:x'"):
        lookup("toy:x")
    with pytest.raises(ConfigError, match="'toy:6' does not take option\\(s\\) pooling"):
        build_encoder("toy:6", EncoderOptions(pooling="mean"))
    out = _encode(tmp_path / "corpus", tmp_path / "home", "toy:6", capsys)
    manifest = read_manifest(out)
    assert manifest is not None and manifest["identity"]["encoder"] == {"toy": 6, "version": "1"}
    store = EmbeddingStore(out)
    assert (store.identity["name"], store.identity["dim"]) == ("toy:6", 6)
    got = store.vectors(store.rows(ids)).astype(np.float32)
    want = ToyEncoder(6).encode(_texts(tmp_path / "corpus", ids)).astype(np.float16)
    np.testing.assert_array_equal(got, want.astype(np.float32))
    # Another argument is another encoder: its own identity, so its own output.
    assert _encode(tmp_path / "corpus", tmp_path / "home", "toy:5", capsys) != out


def test_a_taken_prefix_and_a_record_of_an_unknown_family_are_one_line_errors() -> None:
    class Clash(ToyFamily):
        name = "t-clash"
        prefix = "hf:"

    with pytest.raises(ConfigError, match="prefix 'hf:' is taken by 'hf-any'"):
        FAMILIES.register(Clash())
    record = ENCODER_RECORDS.register(
        EncoderRecord(name="t-orphan", label="O", description="x", family="t-nowhere")
    )
    try:
        with pytest.raises(ConfigError, match="unknown encoder family 't-nowhere'; valid: ") as e:
            build_encoder("t-orphan")
        assert "hf, hf-any, mem, minilm, py, random, specter2" in str(e.value)
    finally:
        ENCODER_RECORDS.unregister(record.name)


def test_every_builtin_record_names_a_registered_family() -> None:
    from mdcr.retrievers.builtin import builtin_encoders

    assert {r.family for r in builtin_encoders()} == {
        "hf",
        "specter2",
        "aspire",
        "minilm",
        "random",
    }
    assert {r.family for r in builtin_encoders()} <= set(FAMILIES.names())


def test_a_family_must_say_how_it_identifies_its_encoders() -> None:
    """``identify`` has no default (a family that forgot its weights would reuse vectors
    after they changed): a family without it cannot be made, and every registered family
    implements both ``build`` and ``identify`` itself."""

    class Forgetful(EncoderFamily):
        name = "t-forgetful"

        def build(self, record: EncoderRecord, arg: str, options: EncoderOptions) -> Any:
            return ToyEncoder(3)

    with pytest.raises(TypeError, match=r"abstract method.*identify"):
        Forgetful()  # type: ignore[abstract]
    families = FAMILIES.items().values()
    assert {"hf", "minilm", "specter2", "aspire", "random", "hf-any", "mem", "py"} <= {
        f.name for f in families
    }
    assert [f.name for f in families if type(f).__abstractmethods__] == []
