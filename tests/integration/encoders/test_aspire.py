"""Aspire multi-vector encoding: sentence splitting, truncation, spans and sentence means."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, BertModel

from mdcr.encoders.base import MultiVectorEncoder, PaperText, is_multi_vector
from mdcr.encoders.models.aspire import AspireEncoder, build_inputs, split_sentences

ABSTRACTS = [
    "We study the cat. The dog sat on a mat (e.g. Fig. 2). Results show a new model.",
    "Protein analysis of cell data.",
    "",
]


def test_split_sentences_offline() -> None:
    got = split_sentences(ABSTRACTS)
    assert got[0] == [
        "We study the cat.",
        "The dog sat on a mat (e.g. Fig. 2).",
        "Results show a new model.",
    ]
    assert got[1] == ["Protein analysis of cell data."]
    assert got[2] == []


def test_split_sentences_in_workers_equals_serial() -> None:
    many = [ABSTRACTS[i % 3] + f" Item {i} is here." for i in range(600)]
    assert split_sentences(many, workers=2) == split_sentences(many, workers=1)


def test_build_inputs_truncates_like_the_authors() -> None:
    title = [10, 11, 3]  # "t1 t2 [SEP]"
    sents = [[20, 21, 22], [30, 31, 32, 33], [40]]
    ids, starts, ends = build_inputs(title, sents, cls_id=2, sep_id=3, max_length=12)
    # 10 content tokens: title (3) + s1 (3) + s2 cut to 4; s3 dropped.
    assert ids == [2, 10, 11, 3, 20, 21, 22, 30, 31, 32, 33, 3]
    assert starts.tolist() == [4, 7] and ends.tolist() == [7, 11]
    ids, starts, ends = build_inputs(title, sents, cls_id=2, sep_id=3, max_length=9)
    assert ids == [2, 10, 11, 3, 20, 21, 22, 30, 3]
    assert starts.tolist() == [4, 7] and ends.tolist() == [7, 8]
    # No sentence survives: the title tokens (without [SEP]) stand in.
    ids, starts, ends = build_inputs(title, sents, cls_id=2, sep_id=3, max_length=5)
    assert ids == [2, 10, 11, 3, 3] and starts.tolist() == [1] and ends.tolist() == [3]
    ids, starts, ends = build_inputs([3], [], cls_id=2, sep_id=3, max_length=10)
    assert starts.tolist() == [0] and ends.tolist() == [1]


@pytest.mark.parametrize("layers", ["last", "all"])
def test_sentence_vectors_are_token_means(tiny_bert: Path, layers: str) -> None:
    texts = [PaperText(f"d{i}", f"the model {i}", a) for i, a in enumerate(ABSTRACTS * 3)]
    enc = AspireEncoder(
        str(tiny_bert),
        name="asp",
        max_length=64,
        layers=layers,  # type: ignore[arg-type]
        device="cpu",
        batch_tokens=64,
    )
    assert is_multi_vector(enc) and isinstance(enc, MultiVectorEncoder)
    vectors, offsets = enc.encode(texts)
    assert np.diff(offsets).tolist() == [3, 1, 1] * 3
    tok = AutoTokenizer.from_pretrained(tiny_bert)
    model = BertModel.from_pretrained(tiny_bert).eval()
    prepared = enc.prepare(texts)
    for i, t in enumerate(texts):
        ids = prepared.input_ids[i]
        # Independent check of the spans: each covers exactly its sentence's tokens.
        sents = split_sentences([t.abstract])[0]
        spans = list(zip(prepared.extra.starts[i], prepared.extra.ends[i], strict=True))
        for (s, e), sent in zip(spans, sents, strict=False):
            assert ids[s:e] == tok(sent, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_hidden_states=True)
        hidden = (
            torch.stack(out.hidden_states).mean(0)[0]
            if layers == "all"
            else (out.last_hidden_state[0])
        )
        ref = np.stack([hidden[s:e].mean(0).numpy() for s, e in spans])
        np.testing.assert_allclose(vectors[offsets[i] : offsets[i + 1]], ref, atol=2e-5)


def test_prefetched_chunks_keep_sentence_order(tiny_bert: Path) -> None:
    texts = [
        PaperText(f"d{i}", f"the model {i}", ABSTRACTS[i % 3] * (1 + i % 4)) for i in range(20)
    ]
    enc = AspireEncoder(str(tiny_bert), name="asp", max_length=96, device="cpu", batch_tokens=200)
    vectors, offsets = enc.encode(texts)
    enc.runner.prefetch, enc.runner.chunk_docs = True, 3
    v2, o2 = enc.encode(texts)
    np.testing.assert_array_equal(o2, offsets)
    np.testing.assert_allclose(v2, vectors, atol=1e-5)
