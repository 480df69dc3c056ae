"""Models with a sentence-transformers config score as sentence-transformers itself encodes
them: every pooling mode, with and without Normalize and prompts; the real MiniLM through
``hf:`` equals ``minilm``; a model without a config has its choices said and recorded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mdcr.encoders.base import PaperText
from mdcr.encoders.registry import EncoderOptions, build_encoder

TEXTS = [
    PaperText("a", "Protein folding", "We study the cell and the gene with a neural network."),
    PaperText("b", "Graph retrieval", "A citation graph helps the query find the paper."),
    PaperText("c", "", "Cat sat on the mat."),
    PaperText("d", "Short", ""),
]


def _save_st(
    folder: Path,
    tiny_bert: Path,
    pooling: str,
    *,
    normalize: bool,
    prompt: str | None = None,
    include_prompt: bool = True,
) -> Path:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    t = Transformer(str(tiny_bert), max_seq_length=48)
    pool = Pooling(t.get_embedding_dimension(), pooling_mode=pooling, include_prompt=include_prompt)
    mods = [t, pool] + ([Normalize()] if normalize else [])
    kw = {"prompts": {"doc": prompt}, "default_prompt_name": "doc"} if prompt else {}
    SentenceTransformer(modules=mods, **kw).save(str(folder))
    return folder


def _reference(folder: Path) -> np.ndarray:
    """What sentence-transformers itself gives for title [SEP] abstract."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(folder), device="cpu")
    sep = st.tokenizer.sep_token
    return np.asarray(st.encode([f"{t.title}{sep}{t.abstract}" for t in TEXTS]))


@pytest.mark.parametrize("pooling", ["cls", "mean", "max", "lasttoken"])
@pytest.mark.parametrize("normalize", [False, True])
def test_every_pooling_mode_matches_sentence_transformers(
    tmp_path: Path, tiny_bert: Path, pooling: str, normalize: bool
) -> None:
    folder = _save_st(tmp_path / "m", tiny_bert, pooling, normalize=normalize)
    enc = build_encoder(f"hf:{folder}", EncoderOptions(device="cpu", batch_tokens=64))
    assert enc.metric == "cos"  # the config's similarity_fn_name is cosine either way
    assert enc.identity["max_length"] == 48  # type: ignore[attr-defined]
    expected = {"cls": "cls", "mean": "mean", "max": "max", "lasttoken": "last"}[pooling]
    assert enc.identity["pooling"] == expected  # type: ignore[attr-defined]
    got = enc.encode(TEXTS)
    ref = _reference(folder)
    if not normalize:  # mdcr normalises cosine models for search; compare directions
        ref = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    np.testing.assert_allclose(got, ref, atol=2e-5)


@pytest.mark.parametrize("include_prompt", [True, False])
def test_a_default_prompt_is_applied_as_sentence_transformers_applies_it(
    tmp_path: Path, tiny_bert: Path, include_prompt: bool
) -> None:
    folder = _save_st(
        tmp_path / "p",
        tiny_bert,
        "mean",
        normalize=True,
        prompt="passage: ",
        include_prompt=include_prompt,
    )
    enc = build_encoder(f"hf:{folder}", EncoderOptions(device="cpu"))
    assert enc.identity["prompt"] == "passage: "  # type: ignore[attr-defined]
    np.testing.assert_allclose(enc.encode(TEXTS), _reference(folder), atol=2e-5)
    plain = _save_st(tmp_path / "q", tiny_bert, "mean", normalize=True)
    assert not np.allclose(enc.encode(TEXTS), _reference(plain), atol=1e-3)


def test_last_token_pooling_with_left_and_right_padding() -> None:
    import torch

    from mdcr.encoders.models.hf import last_token_pool

    hidden = torch.randn(3, 5, 4)
    right = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    left = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 1]])
    assert torch.equal(last_token_pool(hidden, right), hidden[[0, 1, 2], [2, 4, 0]])
    assert torch.equal(last_token_pool(hidden, left), hidden[[0, 1, 2], [4, 4, 4]])


def test_the_real_minilm_through_hf_equals_minilm() -> None:
    from mdcr.encoders.models.hf import minilm_path

    mine = build_encoder("minilm", EncoderOptions(device="cpu"))
    hf = build_encoder(f"hf:{minilm_path()}", EncoderOptions(device="cpu"))
    assert (hf.metric, hf.dim) == ("cos", 384)
    assert hf.identity["max_length"] == 256 and hf.identity["pooling"] == "mean"  # type: ignore[attr-defined]
    np.testing.assert_array_equal(hf.encode(TEXTS), mine.encode(TEXTS))


def test_without_a_config_the_choices_are_said_and_recorded(
    tmp_path: Path, tiny_bert: Path
) -> None:
    from mdcr.core.inputs import resolve_inputs
    from mdcr.core.store import Store
    from mdcr.encoders.stage import SPEC, EncodeConfig
    from tests.integration.encoders.fixtures import write_corpus

    write_corpus(tmp_path / "corpus", 5)
    cfg = EncodeConfig(
        corpus=str(tmp_path / "corpus"), encoder=f"hf:{tiny_bert}", max_length=64, device="cpu"
    )
    art = Store(tmp_path / "home").execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
    info = json.loads((art.path / "manifest.json").read_text())["info"]
    assert "has no sentence-transformers config" in info["choices"]
    assert "pooling cls, metric ip, input_format sep" in info["choices"]
    assert "max_length" not in info["choices"]  # given, so not a choice mdcr made
