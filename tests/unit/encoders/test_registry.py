"""The encoder registry: exact names, prefixes, duplicates, option checks, py: encoders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mdcr.core.errors import ConfigError, InputDataError
from mdcr.encoders.base import Encoder, PaperText, encoder_identity
from mdcr.encoders.registry import (
    EncoderOptions,
    build_encoder,
    encoder_names,
    lookup,
)
from mdcr.retrievers.builtin import ENCODER_RECORDS, EncoderRecord


def test_builtin_names_match_the_architecture() -> None:
    assert encoder_names() == sorted(
        [
            "scibert",
            "specter",
            "scincl",
            "specter2-base",
            "specter2",
            "aspire-bm",
            "aspire-cs",
            "minilm",
            "random",
        ]
    )


def test_specter2_base_entry_and_its_published_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    from mdcr.encoders.registry import entry_for, identify_encoder
    from mdcr.scoring.published import published_mdcr

    entry = entry_for("specter2-base")
    assert entry is not None and entry.paper_name is None and entry.dim == 768
    monkeypatch.setattr(constants, "HF_HUB_CACHE", "/nonexistent")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    commit = "f" * 40
    ident = identify_encoder("specter2-base", EncoderOptions(revision=commit))
    assert ident == {"model_id": "allenai/specter2_base", "commit": commit}
    # Published rows go by the built-in entry a run records.
    base = {"builtin": "specter2-base", "model": ident, "options": {}}
    (card,) = published_mdcr(base)
    assert (card["map"], card["recall_5"], card["model"]) == (38.0, 32.4, "SPECTER2 base")
    (card,) = published_mdcr({"builtin": "specter2", "model": {}, "options": {}})
    assert (card["map"], card["recall_5"]) == (38.4, 33.0)


@pytest.mark.parametrize("spec", ["specter3", "SPECTER", "spec", "hf:", "py:mod", "py::x"])
def test_no_guessing_and_one_line_error(spec: str) -> None:
    with pytest.raises(ConfigError) as info:
        lookup(spec)
    msg = str(info.value)
    assert f"unknown encoder '{spec}'" in msg
    assert "scibert" in msg and "hf:<model id or path>" in msg and "\n" not in msg


def test_prefixes_resolve() -> None:
    assert lookup("hf:allenai/specter")[1] == "allenai/specter"
    assert lookup("py:my.module:Thing")[1] == "my.module:Thing"


def test_duplicate_registration_is_refused() -> None:
    again = EncoderRecord(name="random", label="R", description="again", family="random")
    with pytest.raises(ConfigError, match="encoder 'random' is registered already"):
        ENCODER_RECORDS.register(again)
    with pytest.raises(ConfigError, match="encoder 'bm25' is registered already"):
        ENCODER_RECORDS.register(
            EncoderRecord(name="bm25", label="B", description="x", family="random")
        )
    with pytest.raises(ConfigError, match="reserved"):
        ENCODER_RECORDS.register(
            EncoderRecord(name="hf:x", label="x", description="x", family="hf")
        )


def test_options_an_encoder_would_ignore_are_refused() -> None:
    with pytest.raises(ConfigError, match="'random' does not take option\\(s\\) pooling"):
        build_encoder("random", EncoderOptions(pooling="mean"))
    with pytest.raises(ConfigError, match="does not take option\\(s\\) dim"):
        build_encoder("minilm", EncoderOptions(dim=8))
    with pytest.raises(ConfigError, match="metric 'dot' is not valid"):
        build_encoder("hf:x", EncoderOptions(metric="dot"))


def test_random_encoder_through_the_registry() -> None:
    enc = build_encoder("random", EncoderOptions(dim=16, seed=3))
    assert isinstance(enc, Encoder)
    assert (enc.name, enc.dim, enc.metric) == ("random", 16, "cos")
    ident = encoder_identity(enc)
    assert ident["seed"] == 3 and ident["dim"] == 16 and ident["multi_vector"] is False


def test_missing_hf_model_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(InputDataError, match="could not load model") as info:
        build_encoder(f"hf:{tmp_path / 'nope'}", EncoderOptions(device="cpu"))
    assert "\n" not in str(info.value)


USER_MODULE = '''
import numpy as np

class Constant:
    """A user's encoder: every paper maps to the same vector, scaled by title length."""
    name = "constant"
    dim = 4
    metric = "ip"

    def __init__(self, options=None):
        self.scale = (options.dim or 1) if options is not None else 1

    def encode(self, texts):
        return np.array([[len(t.title) * self.scale] * 4 for t in texts], dtype=np.float32)

instance = Constant()

class NoMetric:
    name = "x"
    dim = 2
    def encode(self, texts):
        return np.zeros((len(texts), 2), np.float32)
'''


def test_py_encoders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "user_encoders_mod.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    texts = [PaperText("a", "abc", ""), PaperText("b", "x", "")]
    enc = build_encoder("py:user_encoders_mod:Constant", EncoderOptions(dim=2))
    assert np.asarray(enc.encode(texts))[:, 0].tolist() == [6.0, 2.0]
    obj = build_encoder("py:user_encoders_mod:instance")
    assert np.asarray(obj.encode(texts))[:, 0].tolist() == [3.0, 1.0]
    with pytest.raises(ConfigError, match="takes no options"):
        build_encoder("py:user_encoders_mod:instance", EncoderOptions(dim=2))
    with pytest.raises(ConfigError, match="lacks metric"):
        build_encoder("py:user_encoders_mod:NoMetric")
    with pytest.raises(ConfigError, match="cannot import module 'no_such_mod_xyz'"):
        build_encoder("py:no_such_mod_xyz:X")
    with pytest.raises(ConfigError, match="has no 'Missing'"):
        build_encoder("py:user_encoders_mod:Missing")


def test_an_encoders_own_defaults_are_what_it_builds_with_and_are_hashed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unset ``max_length`` or ``dim`` means the encoder's default, kept in its record:
    the encoder is built with it and the encode fingerprint hashes it, so a default edited
    there is a new output, never the vectors made under the old one."""
    import dataclasses

    from mdcr.core.store import Store
    from mdcr.encoders.registry import build_encoder, lookup, option_defaults
    from mdcr.encoders.stage import SPEC, EncodeConfig, identify_encode

    minilm = build_encoder("minilm")
    assert (minilm.max_length, minilm.pooling, minilm.metric) == (256, "mean", "cos")
    assert option_defaults("minilm") == lookup("minilm")[0].option_defaults()
    cfg = EncodeConfig(corpus="c", encoder="random")
    assert build_encoder("random").dim == 768
    assert identify_encode(cfg, {})["option_defaults"] == {"dim": 768, "seed": 0}
    # Given, an option is hashed as a parameter and its default is no longer filled in.
    assert identify_encode(dataclasses.replace(cfg, dim=64), {})["option_defaults"] == {"seed": 0}

    store = Store(tmp_path)
    before = store.plan(SPEC, cfg, {}).fingerprint
    from mdcr.retrievers.builtin import ENCODER_RECORDS

    record = ENCODER_RECORDS.get("random")
    monkeypatch.setitem(ENCODER_RECORDS._items, "random", dataclasses.replace(record, dim=32))
    assert build_encoder("random").dim == 32
    assert store.plan(SPEC, cfg, {}).fingerprint != before
    assert store.plan(SPEC, dataclasses.replace(cfg, dim=32), {}).fingerprint != before
