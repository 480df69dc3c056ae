"""The Python API: ``mdcr.evaluate`` on model objects gives the CLI's numbers, caches by
the model's weights and config, and returns tidy frames (summary, per pool)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pytest

import mdcr
from mdcr.cli import main
from mdcr.core.errors import ConfigError, EncoderError, InputDataError
from mdcr.evaluation.result import PER_POOL_COLUMNS, SUMMARY_COLUMNS
from tests.integration.encoders.fixtures import make_tiny_bert
from tests.integration.evaluation.test_evaluate import FIXTURE, _printed


def _encode_outputs(home: Path) -> int:
    return sum(1 for p in (home / "encode").iterdir() if not p.name.startswith("."))


def test_the_api_returns_the_cli_numbers(tmp_path: Path) -> None:
    """The summary holds the unrounded means (percent) of what the CLI prints rounded as
    the original scorer rounds: per field round(100 x mean, 4), AVG the rounded mean of
    those (so within 1e-4 of the unrounded AVG); the per-pool frame has the same fields."""
    result = mdcr.evaluate("random", benchmark=FIXTURE, home=tmp_path / "api")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):  # its own store: the CLI computes, not reads
        assert main(["evaluate", "--encoder", "random", "--benchmark", str(FIXTURE),
                     "--home", str(tmp_path / "cli"), "-q"]) == 0  # fmt: skip
    assert _encode_outputs(tmp_path / "cli") == 1  # encoded and scored again, apart
    out = buf.getvalue()
    printed = _printed(out)["random"]
    cli_report = Path(out.strip().splitlines()[-1].removeprefix("report: "))
    # the same output (fingerprint) in each store
    assert result.report_path.relative_to(tmp_path / "api") == cli_report.relative_to(
        tmp_path / "cli"
    )
    summary = result.summary
    assert tuple(summary.columns) == SUMMARY_COLUMNS
    assert tuple(result.per_pool.columns) == PER_POOL_COLUMNS
    rows = summary[(summary["retriever"] == "random") & (summary["split"] == "test")]
    assert set(rows["field"]) == set(printed) and set(rows["setup"]) == {"mdcr"}
    assert rows["std"].isna().all() and rows["pool_size"].isna().all()
    # the report's labels, as on pools (stored: map, ndcg, recall@5); the printout keeps
    # the original scorer's keys
    assert set(summary["measure"]) == set(result.per_pool["measure"]) == {"MAP", "nDCG", "R@5"}
    names = {"MAP": "map", "nDCG": "ndcg", "R@5": "recall_5"}
    for r in rows.itertuples(index=False):
        want = printed[r.field][names[r.measure]]
        if r.field == "AVG":
            assert r.n == 3 and abs(r.mean - want) <= 1e-4 + 1e-12
        else:
            assert r.n == 1 and float(np.round(r.mean, 4)) == want
    fields = rows[rows["field"] != "AVG"]
    per_pool = result.per_pool[result.per_pool["split"] == "test"]
    by_key = {(r.field, r.measure): r.mean for r in fields.itertuples(index=False)}
    assert len(per_pool) == len(by_key)
    for r in per_pool.itertuples(index=False):
        assert r.value == by_key[(r.field, r.measure)]
    assert (per_pool["n_queries"] > 0).all()


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
    first = mdcr.evaluate(model, benchmark=FIXTURE, home=home, name="tiny-st").summary
    assert set(first["retriever"]) == {"tiny-st"} and (first["field"] == "AVG").any()
    assert _encode_outputs(home) == 1
    again = mdcr.evaluate(model, benchmark=FIXTURE, home=home, name="tiny-st").summary
    assert again.equals(first) and _encode_outputs(home) == 1  # read from the store
    torch.manual_seed(1)
    with torch.no_grad():  # other weights: another model
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    changed = mdcr.evaluate(model, benchmark=FIXTURE, home=home, name="tiny-st").summary
    assert _encode_outputs(home) == 2
    assert not changed["mean"].equals(first["mean"])


class Bag:
    """An MTEB-style model: encode(list of str) -> array."""

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def encode(self, sentences: list[str]) -> np.ndarray:
        return np.array([[len(s), s.count("e") * self.scale, 1.0] for s in sentences], np.float32)


def test_any_object_with_encode_and_clear_errors(tmp_path: Path) -> None:
    df = mdcr.evaluate(Bag(1.0), benchmark=FIXTURE, home=tmp_path).summary
    (name,) = set(df["retriever"])  # no name, no card, no config: class and a short hash
    assert name.startswith("Bag-") and len(name) == len("Bag-") + 6
    other = mdcr.evaluate(Bag(3.0), benchmark=FIXTURE, home=tmp_path).summary  # attributes count
    assert _encode_outputs(tmp_path) == 2 and not other.equals(df)
    with pytest.raises(ConfigError, match="has no encode method") as info:
        mdcr.evaluate(object(), benchmark=FIXTURE, home=tmp_path)
    assert "\n" not in str(info.value)


LETTERS = "abcdefghijklmnopqrstuvwxyz"


class NumpyModel:
    """A model whose weights are numpy arrays, kept in a dict as a trained model may."""

    def __init__(self, seed: int) -> None:
        self.layers = {"proj": np.random.default_rng(seed).normal(size=(len(LETTERS), 8))}

    def encode(self, sentences: list[str]) -> np.ndarray:
        counts = np.array([[s.lower().count(c) for c in LETTERS] for s in sentences], float)
        return (counts @ self.layers["proj"]).astype(np.float32)


def test_a_model_with_numpy_weights_is_scored_again_when_a_weight_changes(
    tmp_path: Path,
) -> None:
    model = NumpyModel(0)
    home = tmp_path / "home"
    first = mdcr.evaluate(model, benchmark=FIXTURE, home=home).summary
    model.layers["proj"][4, 0] += 8.0  # one weight ("e" to the first dimension)
    changed = mdcr.evaluate(model, benchmark=FIXTURE, home=home).summary
    assert _encode_outputs(home) == 2  # not the cached vectors of the old weights
    assert not changed["mean"].equals(first["mean"])
    fresh = mdcr.evaluate(model, benchmark=FIXTURE, home=tmp_path / "fresh").summary
    assert changed.equals(fresh)  # the numbers of the changed weights, computed afresh


class Wrapper:
    """A model class that keeps a transformers model and its tokenizer in attributes."""

    def __init__(self, folder: Path) -> None:
        from transformers import AutoModel, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.backbone = AutoModel.from_pretrained(folder).eval()

    def encode(self, sentences: list[str]) -> np.ndarray:
        import torch

        batch = self.tokenizer(sentences, padding=True, truncation=True, max_length=64)
        with torch.no_grad():
            out = self.backbone(**batch.convert_to_tensors("pt")).last_hidden_state
        return out[:, 0].numpy()


def test_a_wrapper_of_a_transformers_model_is_scored_again_when_its_weights_change(
    tmp_path: Path,
) -> None:
    import torch

    model = Wrapper(make_tiny_bert(tmp_path / "tiny"))
    home = tmp_path / "home"
    first = mdcr.evaluate(model, benchmark=FIXTURE, home=home).summary
    again = mdcr.evaluate(model, benchmark=FIXTURE, home=home).summary
    assert again.equals(first) and _encode_outputs(home) == 1  # encoding changed no state
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.backbone.encoder.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    changed = mdcr.evaluate(model, benchmark=FIXTURE, home=home).summary
    assert _encode_outputs(home) == 2
    assert not changed["mean"].equals(first["mean"])
    assert changed.equals(mdcr.evaluate(model, benchmark=FIXTURE, home=tmp_path / "fresh").summary)


class Guarded(NumpyModel):
    """A model holding what cannot be hashed: a lock, or an open file."""

    def __init__(self, seed: int, held: object) -> None:
        super().__init__(seed)
        self.runtime = {"guard": held}


def test_a_model_whose_state_cannot_be_hashed_asks_for_a_cache_key(tmp_path: Path) -> None:
    import threading

    with (tmp_path / "log.txt").open("w") as log:
        for held, what in ((threading.Lock(), "_thread.lock"), (log, "TextIOWrapper")):
            with pytest.raises(ConfigError, match=r"cannot hash model\.runtime\['guard'\]") as info:
                mdcr.evaluate(Guarded(0, held), benchmark=FIXTURE, home=tmp_path)
            message = str(info.value)
            assert "\n" not in message and what in message and "cache_key=" in message
    model = Guarded(0, threading.Lock())
    keyed = mdcr.evaluate(model, benchmark=FIXTURE, home=tmp_path, cache_key="v1").summary
    plain = mdcr.evaluate(NumpyModel(0), benchmark=FIXTURE, home=tmp_path).summary
    assert keyed["mean"].equals(plain["mean"])
    assert _encode_outputs(tmp_path) == 2  # the key, not the state, names the output
    assert mdcr.evaluate(model, benchmark=FIXTURE, home=tmp_path, cache_key="v1").summary.equals(
        keyed
    )
    assert _encode_outputs(tmp_path) == 2  # the same key and behaviour: the cached output
    model.layers["proj"][4, 0] += 8.0  # the key stands in for the state, not the behaviour:
    moved = mdcr.evaluate(model, benchmark=FIXTURE, home=tmp_path, cache_key="v1").summary
    assert _encode_outputs(tmp_path) == 3 and not moved["mean"].equals(keyed["mean"])
    with pytest.raises(ConfigError, match="cache_key applies to a model object"):
        mdcr.evaluate("random", benchmark=FIXTURE, home=tmp_path, cache_key="v1")


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
    with pytest.raises(
        EncoderError, match=r"^encoder 'mem:Flaky-[0-9a-f]{6}@[0-9a-f]{16}' raised "
    ) as later:
        mdcr.evaluate(Flaky(), benchmark=FIXTURE, home=tmp_path)
    assert str(later.value).endswith(
        " raised ValueError: tokenizer exploded on 104 texts while encoding 104 papers of "
        "shard 0; fix its encode (--debug shows the traceback)"
    )
    assert isinstance(later.value.__cause__, ValueError)


def test_the_api_shows_the_clis_progress_bars_unless_told_not_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A notebook's four-minute encode is never silent: `mdcr.evaluate` shows the encode
    bar (quiet still hides the status lines); `progress=False` hides the bars too."""
    mdcr.evaluate("random", benchmark=FIXTURE, home=tmp_path / "a")
    err = capsys.readouterr().err
    assert "encode random: 100%" in err and "104/104" in err and "paper/s" in err
    assert "[encode" not in err and "store: " not in err  # quiet: no status lines
    mdcr.evaluate("random", benchmark=FIXTURE, home=tmp_path / "b", progress=False)
    assert "encode random" not in capsys.readouterr().err
    assert _encode_outputs(tmp_path / "b") == 1
