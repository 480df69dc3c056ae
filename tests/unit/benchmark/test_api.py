"""The Python API: ``mdcr.evaluate`` on model objects gives the CLI's numbers, caches by
the model's weights and config, and returns a DataFrame."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

import mdcr
from mdcr.cli import main
from mdcr.errors import ConfigError, EncoderError, InputDataError
from tests.unit.benchmark.test_evaluate import FIXTURE, _printed
from tests.unit.encoders.fixtures import make_tiny_bert


def _encode_outputs(home: Path) -> int:
    return sum(1 for p in (home / "encode").iterdir() if not p.name.startswith("."))


def test_the_api_returns_the_cli_numbers(tmp_path: Path) -> None:
    df = mdcr.evaluate("random", benchmark=FIXTURE, home=tmp_path / "api")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):  # its own store: the CLI computes, not reads
        assert main(["evaluate", "--encoder", "random", "--benchmark", str(FIXTURE),
                     "--home", str(tmp_path / "cli"), "-q"]) == 0  # fmt: skip
    assert _encode_outputs(tmp_path / "cli") == 1  # encoded and scored again, apart
    printed = _printed(buf.getvalue())["random"]
    rows = df[(df["retriever"] == "random") & (df["split"] == "test")]
    assert set(rows["field"]) == set(printed)
    for r in rows.itertuples(index=False):
        assert {"map": r.map, "ndcg": r.ndcg, "recall_5": r.recall_5} == printed[r.field]


def test_an_in_memory_sentence_transformer_is_cached_by_its_weights(tmp_path: Path) -> None:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    base = make_tiny_bert(tmp_path / "tiny")
    t = Transformer(str(base), max_seq_length=48)
    model = SentenceTransformer(
        modules=[t, Pooling(t.get_embedding_dimension(), pooling_mode="mean"), Normalize()]
    )
    home = tmp_path / "home"
    first = mdcr.evaluate(model, benchmark=FIXTURE, home=home, name="tiny-st")
    assert set(first["retriever"]) == {"tiny-st"} and (first["field"] == "AVG").any()
    assert _encode_outputs(home) == 1
    again = mdcr.evaluate(model, benchmark=FIXTURE, home=home, name="tiny-st")
    assert again.equals(first) and _encode_outputs(home) == 1  # read from the store
    torch.manual_seed(1)
    with torch.no_grad():  # other weights: another model
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    changed = mdcr.evaluate(model, benchmark=FIXTURE, home=home, name="tiny-st")
    assert _encode_outputs(home) == 2
    assert not changed[["map", "ndcg"]].equals(first[["map", "ndcg"]])


class Bag:
    """An MTEB-style model: encode(list of str) -> array."""

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def encode(self, sentences: list[str]) -> np.ndarray:
        return np.array([[len(s), s.count("e") * self.scale, 1.0] for s in sentences], np.float32)


def test_any_object_with_encode_and_clear_errors(tmp_path: Path) -> None:
    df = mdcr.evaluate(Bag(1.0), benchmark=FIXTURE, home=tmp_path)
    assert set(df["retriever"]) == {"Bag"}
    other = mdcr.evaluate(Bag(3.0), benchmark=FIXTURE, home=tmp_path)  # attributes count
    assert _encode_outputs(tmp_path) == 2 and not other.equals(df)
    with pytest.raises(ConfigError, match="has no encode method") as info:
        mdcr.evaluate(object(), benchmark=FIXTURE, home=tmp_path)
    assert "\n" not in str(info.value)


class Speaks:
    """An encode that returns a string."""

    def encode(self, sentences: list[str]) -> str:
        return "not a vector"


class Flaky:
    """An encode that works on one text (the probe) and raises on more."""

    def encode(self, sentences: list[str]) -> np.ndarray:
        if len(sentences) > 1:
            raise ValueError(f"tokenizer exploded on {len(sentences)} texts\nmore detail")
        return np.ones((1, 3), np.float32)


class Broken:
    def encode(self, sentences: list[str]) -> np.ndarray:
        raise KeyError("weights")


def test_a_model_whose_encode_returns_a_string_or_raises_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InputDataError) as info:
        mdcr.evaluate(Speaks(), benchmark=FIXTURE, home=tmp_path)
    assert str(info.value) == (
        "encoder 'Speaks': encode returned str; return an array (or list of lists) of floats, "
        "one row per text: (1, dim)"
    )
    with pytest.raises(EncoderError) as failed:
        mdcr.evaluate(Broken(), benchmark=FIXTURE, home=tmp_path)
    assert str(failed.value) == (
        "encoder 'Broken' raised KeyError: 'weights' while encoding a probe text; fix its "
        "encode (--debug shows the traceback)"
    )
    with pytest.raises(EncoderError, match=r"^encoder 'mem:Flaky@[0-9a-f]{16}' raised ") as later:
        mdcr.evaluate(Flaky(), benchmark=FIXTURE, home=tmp_path)
    assert str(later.value).endswith(
        " raised ValueError: tokenizer exploded on 104 texts while encoding 104 papers of "
        "shard 0; fix its encode (--debug shows the traceback)"
    )
    assert isinstance(later.value.__cause__, ValueError)
