"""Builders shared by the encoder and dense-search tests: a tiny offline BERT, small
corpus and pools tables, and embedding stores written directly."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

WORDS: list[str] = [
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "we",
    "for",
    "on",
    "with",
    "model",
    "data",
    "paper",
    "study",
    "results",
    "method",
    "this",
    "that",
    "are",
    "by",
    "from",
    "new",
    "learning",
    "neural",
    "network",
    "protein",
    "cell",
    "gene",
    "analysis",
    "show",
    "using",
    "based",
    "two",
    "our",
    "which",
    "be",
    "as",
    "it",
    "an",
    "at",
    "cat",
    "dog",
    "sat",
    "mat",
    "rug",
    "graph",
    "citation",
    "encoder",
    "retrieval",
    "pool",
    "query",
]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", ":", "(", ")"]


def make_tiny_bert(folder: Path, *, seed: int = 0, max_positions: int = 128) -> Path:
    """A random 2-layer BERT (hidden 32) with a ~100-token vocab, saved like a hub model;
    ``max_positions`` tokens at most (512: the length mdcr reads a hub model at by default)."""
    import torch
    from transformers import BertConfig, BertModel

    folder.mkdir(parents=True, exist_ok=True)
    vocab = SPECIALS + WORDS
    vocab += [f"w{i}" for i in range(100 - len(vocab))]
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=max_positions,
    )
    BertModel(config).save_pretrained(folder)
    return folder


def random_text(rng: np.random.Generator, n_words: int) -> str:
    words = rng.choice(WORDS, size=n_words)
    out, sentence = [], []
    for w in words:
        sentence.append(str(w))
        if len(sentence) >= rng.integers(4, 12):
            out.append(" ".join(sentence).capitalize() + ".")
            sentence = []
    if sentence:
        out.append(" ".join(sentence).capitalize() + ".")
    return " ".join(out)


def write_corpus(folder: Path, n: int, *, seed: int = 0, prefix: str = "p") -> list[str]:
    """papers.parquet with ``n`` papers of random text; returns the ids (sorted)."""
    rng = np.random.default_rng(seed)
    ids = [f"{prefix}{i:04d}" for i in range(n)]
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {
            "paper_id": ids,
            "title": [random_text(rng, int(rng.integers(2, 8))) for _ in ids],
            "abstract": [random_text(rng, int(rng.integers(5, 60))) for _ in ids],
            "year": [2019] * n,
            "fields": [["Computer Science"]] * n,
            "n_out": [3] * n,
            "n_in": [3] * n,
        }
    )
    pq.write_table(table, folder / "papers.parquet")
    return ids


def write_pools(
    folder: Path,
    pools: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, Sequence[str]]],
) -> Path:
    """pools, queries, qrels and pool_meta Parquet files in the pools stage's layout."""
    folder.mkdir(parents=True, exist_ok=True)
    prow = sorted((pid, p) for pid, papers in pools.items() for p in papers)
    pq.write_table(
        pa.table({"pool_id": [r[0] for r in prow], "paper_id": [r[1] for r in prow]}),
        folder / "pools.parquet",
    )
    qrow = sorted((pid, q, p) for pid, qs in qrels.items() for q, pos in qs.items() for p in pos)
    pq.write_table(
        pa.table(
            {
                "pool_id": [r[0] for r in qrow],
                "query_id": [r[1] for r in qrow],
                "paper_id": [r[2] for r in qrow],
                "relevance": pa.array([1] * len(qrow), pa.int32()),
            }
        ),
        folder / "qrels.parquet",
    )
    queries = sorted({q for qs in qrels.values() for q in qs})
    pq.write_table(
        pa.table(
            {
                "query_id": queries,
                "split": ["test"] * len(queries),
                "setup": ["dataset"] * len(queries),
                "field": pa.array([None] * len(queries), pa.string()),
                "year": [2019] * len(queries),
            }
        ),
        folder / "queries.parquet",
    )
    # pool_meta from pool ids shaped like the pools stage's ("setup/split/size-or-field/rN").
    meta = sorted(pools)
    parts = [m.split("/") for m in meta]
    pq.write_table(
        pa.table(
            {
                "pool_id": meta,
                "setup": [p[0] for p in parts],
                "split": [p[1] if len(p) > 1 else "test" for p in parts],
                "field": [p[2] if p[0] == "field" and len(p) > 2 else None for p in parts],
                "size": [len(set(pools[m])) for m in meta],
                "rep": [int(p[-1][1:]) if p[-1][1:].isdigit() else 0 for p in parts],
            }
        ),
        folder / "pool_meta.parquet",
    )
    return folder


def write_store(
    folder: Path,
    ids: Sequence[str],
    vectors: np.ndarray,
    *,
    metric: str,
    offsets: np.ndarray | None = None,
    shard_size: int = 50,
    name: str = "test",
) -> Path:
    """An embedding store written directly (ids sorted as the encode stage sorts them)."""
    from mdcr.encoders.store import ENCODER_JSON, write_shard

    folder.mkdir(parents=True, exist_ok=True)
    order = np.argsort(np.asarray(ids, dtype=str), kind="stable")
    ids_sorted = [ids[i] for i in order]
    multi = offsets is not None
    for s, start in enumerate(range(0, len(ids_sorted), shard_size)):
        docs = order[start : start + shard_size]
        if multi:
            assert offsets is not None
            parts = [vectors[offsets[d] : offsets[d + 1]] for d in docs]
            counts = [len(p) for p in parts]
            off = np.concatenate([[0], np.cumsum(counts)])
            write_shard(
                folder, s, ids_sorted[start : start + shard_size], np.concatenate(parts), off
            )
        else:
            write_shard(folder, s, ids_sorted[start : start + shard_size], vectors[docs])
    meta = {
        "identity": {"name": name},
        "name": name,
        "dim": int(vectors.shape[1]),
        "metric": metric,
        "multi_vector": multi,
    }
    (folder / ENCODER_JSON).write_text(json.dumps(meta))
    return folder
