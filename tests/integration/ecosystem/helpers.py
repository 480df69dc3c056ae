"""Shared builders: the MDCR-format fixture imported, small pools, the MiniLM wrapped by
MTEB's sentence-transformers wrapper (offline, from the packaged weights), and a tiny
random sentence-transformers model with MiniLM's tokenizer for the checks that do not
depend on the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mdcr.benchmark.importer import SPEC as IMPORT
from mdcr.benchmark.importer import ImportConfig
from mdcr.core.inputs import resolve_inputs
from mdcr.core.store import Store

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "mdcr_format_fixture"


def import_fixture(home: Path) -> Path:
    cfg = ImportConfig(source=str(FIXTURE))
    return Store(home).execute(IMPORT, cfg, resolve_inputs(cfg), quiet=True).path


def minilm_for_mteb(prompts: dict[str, str] | None = None) -> Any:
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    from mdcr.encoders.models.hf import minilm_path

    return SentenceTransformerEncoderWrapper(
        SentenceTransformer(minilm_path(), device="cpu"), model_prompts=prompts
    )


# MiniLM's tokenizer files, copied beside the tiny model's weights.
TOKENIZER_FILES = (
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


def make_tiny_sentence_transformer(folder: Path, *, seed: int = 0) -> Path:
    """A sentence-transformers model folder: a random 2-layer BERT (hidden 256) that reads
    with MiniLM's WordPiece tokenizer (its 30,522 tokens, so the synthetic corpus's English
    words are words, not [UNK]), mean pooling, then unit length, as MiniLM. Its vectors are
    a random projection of a paper's tokens: lexical, so relevant papers rank high for
    some queries and low for others, and encoding costs a small part of MiniLM's. For
    checks that two paths compute the same numbers, which holds for any weights."""
    import shutil

    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import BertConfig, BertModel

    from mdcr.encoders.models.hf import minilm_path

    bert = folder / "bert"
    bert.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        shutil.copy(Path(minilm_path()) / name, bert / name)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=512,
        max_position_embeddings=512,
    )
    model = BertModel(config)
    # Positions (and the one token type) are the same for every paper: random, they give
    # all papers nearly one vector (cosines 0.97-1.0 on the synthetic corpus, closer than
    # float16 tells apart, so mdcr's stored vectors would rank otherwise than MTEB's
    # float32 ones). Zeroed, a vector is a mix of the paper's own tokens: cosines spread
    # 0.5-0.75 (MiniLM's: -0.05 to 0.3), and float16 moves few ranks (600 papers, 8
    # queries: 298 of 4,800, MiniLM 143), each past a near tie, so a pool's means agree
    # with MTEB's to its 5 decimals.
    with torch.no_grad():
        model.embeddings.position_embeddings.weight.zero_()
        model.embeddings.token_type_embeddings.weight.zero_()
    model.save_pretrained(bert)
    t = Transformer(str(bert), max_seq_length=256)
    modules = [t, Pooling(t.get_embedding_dimension(), pooling_mode="mean"), Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(folder / "st"))
    return folder / "st"


def sentence_transformer_for_mteb(folder: Path) -> Any:
    """The sentence-transformers model saved in ``folder`` (as
    :func:`make_tiny_sentence_transformer` saves one), on the CPU, wrapped by MTEB's
    sentence-transformers wrapper as :func:`minilm_for_mteb` wraps MiniLM."""
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    return SentenceTransformerEncoderWrapper(SentenceTransformer(str(folder), device="cpu"))


def mteb_scores(model: Any, tasks: list[Any]) -> dict[str, dict[str, dict[str, float]]]:
    """{task: {split: scores}} of ``mteb.evaluate`` (no result cache)."""
    import mteb

    res = mteb.evaluate(model, tasks, cache=None, show_progress_bar=False)
    return {
        tr.task_name: {split: dict(rows[0]) for split, rows in tr.scores.items()}
        for tr in res.task_results
    }
