"""HF encoders on a tiny offline BERT: input format, pooling, layers, batching, loading."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertModel

from mdcr.core.errors import ConfigError
from mdcr.encoders.base import PaperText
from mdcr.encoders.loading import model_revision
from mdcr.encoders.models.hf import HFEncoder
from mdcr.encoders.registry import EncoderOptions, build_encoder
from tests.integration.encoders.fixtures import random_text


def _papers(n: int, seed: int = 0, max_words: int = 60) -> list[PaperText]:
    rng = np.random.default_rng(seed)
    return [
        PaperText(
            f"p{i}",
            random_text(rng, int(rng.integers(1, 6))),
            random_text(rng, int(rng.integers(0, max_words))),
        )
        for i in range(n)
    ]


def _reference(folder: Path, texts: list[PaperText], **kw: object) -> list[torch.Tensor]:
    """Per-paper forward passes without batching or padding: the independent computation."""
    tok = AutoTokenizer.from_pretrained(folder)
    model = BertModel.from_pretrained(folder).eval()
    out = []
    with torch.no_grad():
        for t in texts:
            if kw.get("pair"):
                enc = tok(
                    t.title,
                    t.abstract,
                    truncation=True,
                    max_length=kw["max_length"],
                    return_tensors="pt",
                )
            else:
                enc = tok(
                    t.title + "[SEP]" + t.abstract,
                    truncation=True,
                    max_length=kw["max_length"],
                    return_tensors="pt",
                )
            res = model(**enc, output_hidden_states=True)
            if kw.get("layers") == "all":
                out.append(torch.stack(res.hidden_states).mean(0)[0])
            else:
                out.append(res.last_hidden_state[0])
    return out


def test_cls_pooling_title_sep_abstract_matches_unbatched(tiny_bert: Path) -> None:
    texts = _papers(40)
    enc = build_encoder(
        f"hf:{tiny_bert}", EncoderOptions(max_length=48, device="cpu", batch_tokens=256)
    )
    got = enc.encode(texts)
    ref = np.stack([h[0].numpy() for h in _reference(tiny_bert, texts, max_length=48)])
    assert got.shape == (40, 32) and got.dtype == np.float32
    assert enc.encode([]).shape == (0, 32)
    np.testing.assert_allclose(got, ref, atol=2e-5)
    # Order is the input order, whatever the length-sorted batches were.
    perm = np.random.default_rng(1).permutation(40)
    np.testing.assert_allclose(enc.encode([texts[i] for i in perm]), got[perm], atol=2e-5)


def test_mean_pooling_pair_format_and_cosine(tiny_bert: Path) -> None:
    texts = _papers(12, seed=2)
    enc = HFEncoder(
        str(tiny_bert),
        name="t",
        pooling="mean",
        metric="cos",
        max_length=40,
        input_format="pair",
        device="cpu",
    )
    got = enc.encode(texts)
    ref = np.stack(
        [h.mean(0).numpy() for h in _reference(tiny_bert, texts, max_length=40, pair=True)]
    )
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    np.testing.assert_allclose(got, ref, atol=2e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)


def test_mean_over_all_layers(tiny_bert: Path) -> None:
    texts = _papers(6, seed=3)
    enc = HFEncoder(
        str(tiny_bert), name="t", pooling="cls", layers="all", max_length=64, device="cpu"
    )
    ref = np.stack(
        [h[0].numpy() for h in _reference(tiny_bert, texts, max_length=64, layers="all")]
    )
    np.testing.assert_allclose(enc.encode(texts), ref, atol=2e-5)
    assert enc.identity["layers"] == "all"


def test_truncation_keeps_the_title(tiny_bert: Path) -> None:
    long = [PaperText("x", "the cat", "model data " * 200)]
    enc = HFEncoder(str(tiny_bert), name="t", max_length=16, device="cpu")
    prepared = enc.prepare(long)
    tok = AutoTokenizer.from_pretrained(tiny_bert)
    assert len(prepared.input_ids[0]) == 16
    assert tok.convert_ids_to_tokens(prepared.input_ids[0][:5]) == [
        "[CLS]",
        "the",
        "cat",
        "[SEP]",
        "model",
    ]
    assert prepared.input_ids[0][-1] == tok.sep_token_id


def test_bad_options(tiny_bert: Path) -> None:
    with pytest.raises(ConfigError, match="exceeds the model's 128 positions"):
        HFEncoder(str(tiny_bert), name="t", max_length=512, device="cpu")
    with pytest.raises(ConfigError, match="pooling 'median' is not valid; valid options: cls"):
        HFEncoder(str(tiny_bert), name="t", pooling="median", device="cpu")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="precision 'fp8'"):
        HFEncoder(str(tiny_bert), name="t", max_length=64, device="cpu", precision="fp8")


def test_revision_is_recorded(tiny_bert: Path, tmp_path: Path) -> None:
    enc = HFEncoder(str(tiny_bert), name="t", max_length=64, device="cpu")
    assert enc.identity["revision"].startswith("sha256:")
    commit = "0123456789abcdef0123456789abcdef01234567"
    snap = tmp_path / "models--x--y" / "snapshots" / commit
    shutil.copytree(tiny_bert, snap)
    assert model_revision(object(), str(snap)) == commit


def test_prefetched_chunks_keep_the_input_order(tiny_bert: Path) -> None:
    """The CUDA path's chunking and background tokenization, exercised on the CPU."""
    texts = _papers(50, seed=5)
    enc = HFEncoder(str(tiny_bert), name="t", max_length=64, device="cpu", batch_tokens=128)
    whole = enc.encode(texts)
    enc.runner.prefetch, enc.runner.chunk_docs = True, 7
    np.testing.assert_allclose(enc.encode(texts), whole, atol=1e-5)
