"""The random baseline and the real MiniLM."""

from __future__ import annotations

import numpy as np
import pytest

from mdcr.encoders.base import PaperText
from mdcr.encoders.models.random import RandomEncoder
from mdcr.encoders.registry import EncoderOptions, build_encoder


def test_random_vectors_depend_only_on_seed_and_paper_id() -> None:
    enc = RandomEncoder(dim=24, seed=7)
    texts = [PaperText(f"p{i}", "t", "a") for i in range(10)]
    full = enc.encode(texts)
    alone = enc.encode([PaperText("p3", "other title", "")])
    np.testing.assert_array_equal(alone[0], full[3])
    np.testing.assert_array_equal(enc.encode(texts[::-1]), full[::-1])
    np.testing.assert_allclose(np.linalg.norm(full, axis=1), 1.0, atol=1e-6)
    other = RandomEncoder(dim=24, seed=8).encode(texts)
    assert np.abs(other - full).max() > 0.1
    assert full.shape == (10, 24)
    # Near-orthogonal: a chance floor, not a hidden signal.
    gram = full @ full.T - np.eye(10)
    assert np.abs(gram).max() < 0.9


@pytest.mark.slow
def test_real_minilm_ranks_a_paraphrase_above_an_unrelated_text() -> None:
    enc = build_encoder("minilm", EncoderOptions(device="cpu"))
    assert (enc.dim, enc.metric) == (384, "cos")
    assert enc.identity["revision"].startswith("sha256:")  # type: ignore[attr-defined]
    query = PaperText(
        "q",
        "Deep learning for protein structure prediction",
        "We predict the 3D structure of proteins with neural networks.",
    )
    para = PaperText(
        "a",
        "Neural networks predict protein folding",
        "A deep model infers three-dimensional protein structures.",
    )
    other = PaperText(
        "b",
        "Monetary policy and inflation",
        "We study central bank interest rates in emerging markets.",
    )
    v = enc.encode([query, para, other])
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sim = v[1:] @ v[0]
    assert sim[0] > 0.5 > sim[1]
