"""The encoder options, declared once: one meaning of unset (None), the stage's fields, the
encoder's options and the command line derived from the declarations, and unset hashed as
None beside the encoder's defaults."""

from __future__ import annotations

import dataclasses

import pytest

from mdcr.cli import build_parser, main
from mdcr.core.config import from_mapping, params_of
from mdcr.core.errors import ConfigError
from mdcr.core.store import Store
from mdcr.encoders.stage import SPEC, EncodeConfig, identify_encode
from mdcr.retrievers.options import (
    ENCODER_OPTIONS,
    MODEL_OPTIONS,
    EncoderOptions,
    ModelOptions,
    RuntimeOptions,
)


def test_every_option_is_unset_as_none_and_reaches_the_stage_the_encoder_and_the_cli() -> None:
    for f in dataclasses.fields(ModelOptions):
        assert f.default is None, f.name  # one meaning of unset
    runtime = {f.name for f in dataclasses.fields(RuntimeOptions)}
    assert set(ENCODER_OPTIONS) == set(MODEL_OPTIONS) | runtime
    stage_fields = {f.name for f in dataclasses.fields(EncodeConfig)}
    assert set(ENCODER_OPTIONS) <= stage_fields
    cfg = EncodeConfig(corpus="c", encoder="hf:x", max_length=64, pooling="mean", seed=3)
    assert cfg.options() == EncoderOptions(max_length=64, pooling="mean", seed=3)
    assert cfg.options().given() == ["max_length", "pooling", "seed"]
    encode = build_parser()._subparsers._group_actions[0].choices["encode"]  # type: ignore[union-attr]
    flags = {s for a in encode._actions for s in a.option_strings}
    assert {"--" + name.replace("_", "-") for name in ENCODER_OPTIONS} <= flags


def test_an_unset_option_is_hashed_as_none_and_its_default_through_the_identity(
    tmp_path,
) -> None:
    """Unset is ``None`` in the parameters and the manifest; what the encoder then uses
    (its record's default) is hashed through the identity, so a default edited in a record
    is a new fingerprint, and a given value is hashed as given."""
    params = params_of(EncodeConfig(corpus="c", encoder="random"), hashed=True)
    assert {k: params[k] for k in MODEL_OPTIONS} == dict.fromkeys(MODEL_OPTIONS)
    unset = EncodeConfig(corpus="c", encoder="random")
    assert identify_encode(unset, {})["option_defaults"] == {"seed": 0, "dim": 768}
    seven = EncodeConfig(corpus="c", encoder="random", seed=7)
    assert seven.options().given() == ["seed"]
    assert identify_encode(seven, {})["option_defaults"] == {"dim": 768}
    assert params_of(seven, hashed=True)["seed"] == 7
    store = Store(tmp_path)
    assert store.plan(SPEC, seven, {}).fingerprint != store.plan(SPEC, unset, {}).fingerprint


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"max_length": 0}, "encode.max_length: 0 is not valid; use >= 1, or leave it unset"),
        ({"dim": -1}, "encode.dim: -1 is not valid; use >= 1"),
        ({"revision": ""}, "encode.revision: '' is not a revision; leave it unset"),
        ({"batch_tokens": 0}, "encode.batch_tokens: 0 is not valid; use >= 1, or leave it unset"),
        ({"pooling": "default"}, "encode.pooling: 'default' is not valid; valid options: 'cls'"),
    ],
)
def test_a_value_out_of_range_is_a_one_line_error(values: dict, message: str) -> None:
    encoder = "random" if "dim" in values else "hf:x"
    with pytest.raises(ConfigError, match=message):
        from_mapping(EncodeConfig, {"corpus": "c", "encoder": encoder, **values}, "encode")


def test_an_option_left_unset_on_the_command_line_is_none(tmp_path, capsys) -> None:
    corpus = tmp_path / "papers.parquet"
    argv = ["encode", "--corpus", str(corpus), "--encoder", "minilm", "--dim", "8"]
    assert main([*argv, "--home", str(tmp_path / "home")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [
        "mdcr: error: encoder 'minilm' does not take option(s) dim; its options: max_length, "
        "pooling, metric, input_format, layers"
    ]
