"""Query and document roles: an asymmetric encoder's query papers are encoded once more as
queries, and search and benchmark ranking use those query vectors; a symmetric encoder
encodes each paper once."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mdcr.core.inputs import resolve_inputs
from mdcr.core.store import Store
from mdcr.encoders.base import PaperText
from mdcr.encoders.registry import EncoderOptions, build_encoder
from mdcr.encoders.stage import SPEC, EncodeConfig
from mdcr.encoders.store import EmbeddingStore
from tests.integration.encoders.fixtures import write_corpus, write_pools

ROLE_MODULE = """
import numpy as np

class TwoTower:
    '''Documents: a vector from the title's length; queries: another from the lengths.'''
    name = "two-tower"
    dim = 3
    metric = "ip"
    asymmetric = True

    def encode(self, texts, role="document"):
        if role == "query":
            return np.array([[1.0, 2.0, query_weight(t)] for t in texts], dtype=np.float32)
        return np.array([[len(t.title), len(t.abstract) % 7, 1.0] for t in texts], np.float32)

def query_weight(t):
    return 0.5 + (len(t.title) * 31 + len(t.abstract)) % 97 / 97
"""


@pytest.fixture()
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "role_enc_mod.py").write_text(ROLE_MODULE)
    write_corpus(tmp_path / "corpus", 40)
    ids = [f"p{i:04d}" for i in range(40)]
    pools = write_pools(
        tmp_path / "pools",
        {"dataset/test/30/r0": ids[:30]},
        {"dataset/test/30/r0": {"p0035": ids[:3], "p0005": ids[10:12]}},
    )
    return {"home": tmp_path / "home", "corpus": tmp_path / "corpus", "pools": pools}


def _encode(world: dict[str, Path], encoder: str, quiet: bool = True) -> Path:
    cfg = EncodeConfig(corpus=str(world["corpus"]), encoder=encoder, targets=(str(world["pools"]),))
    return Store(world["home"]).execute(SPEC, cfg, resolve_inputs(cfg), quiet=quiet).path


def test_an_asymmetric_encoder_stores_query_vectors_and_search_uses_them(
    world: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from mdcr.index.dense import SPEC as SEARCH
    from mdcr.index.dense import SearchConfig

    out = _encode(world, "py:role_enc_mod:TwoTower", quiet=False)
    log = capsys.readouterr().err
    assert "querys" not in log and "30 papers as documents" in log
    assert "2 papers as queries" in log
    counts = json.loads((out / "manifest.json").read_text())["info"]["counts"]
    # The 30 pool papers as documents (p0035, a query only, is no candidate anywhere),
    # and the queries p0005 (also a pool paper) and p0035 as queries.
    assert counts["papers"] == 30 + 2 and counts["encoded"] == 32
    docs, queries = EmbeddingStore(out), EmbeddingStore(out, role="query")
    assert queries.ids.to_pylist() == ["p0005", "p0035"]
    qv = queries.vectors(np.arange(2))
    assert qv[:, :2].tolist() == [[1, 2], [1, 2]] and qv[0, 2] != qv[1, 2]
    assert not np.allclose(docs.vectors(docs.rows(["p0005"])), qv[0])
    cfg = SearchConfig(pools=str(world["pools"]), embeddings=str(out), k=5)
    run = Store(world["home"]).execute(SEARCH, cfg, resolve_inputs(cfg), quiet=True).path
    runs = pd.read_parquet(run / "runs.parquet")
    for q, g in runs.groupby("query_id"):
        qv = queries.vectors(queries.rows([q])).astype(np.float64)[0]
        dv = docs.vectors(docs.rows(list(g["paper_id"]))).astype(np.float64)
        np.testing.assert_allclose(g["score"].to_numpy(), dv @ qv, rtol=1e-9)
        assert q not in set(g["paper_id"])


def test_a_symmetric_encoder_encodes_each_paper_once(world: dict[str, Path]) -> None:
    out = _encode(world, "random")
    counts = json.loads((out / "manifest.json").read_text())["info"]["counts"]
    assert counts["papers"] == counts["encoded"] == 31
    assert not list(out.glob("query_*"))
    assert EmbeddingStore(out, role="query").ids.equals(EmbeddingStore(out).ids)


def test_query_and_document_prompts_match_sentence_transformers_roles(
    tmp_path: Path, tiny_bert: Path
) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    t = Transformer(str(tiny_bert), max_seq_length=48)
    model = SentenceTransformer(
        modules=[t, Pooling(t.get_embedding_dimension(), pooling_mode="mean"), Normalize()],
        prompts={"query": "query: ", "document": "passage: "},
    )
    model.save(str(tmp_path / "st"))
    enc = build_encoder(f"hf:{tmp_path / 'st'}", EncoderOptions(device="cpu"))
    assert enc.asymmetric  # type: ignore[attr-defined]
    texts = [PaperText("a", "Protein folding", "The cell and the gene."), PaperText("b", "", "x")]
    strings = [f"{p.title}[SEP]{p.abstract}" for p in texts]
    np.testing.assert_allclose(
        enc.encode(texts, role="query"),
        model.encode_query(strings),
        atol=2e-5,  # type: ignore[call-arg]
    )
    np.testing.assert_allclose(enc.encode(texts), model.encode_document(strings), atol=2e-5)
    # An explicit prompt wins; the same prompt for both roles makes the encoder symmetric.
    same = build_encoder(
        f"hf:{tmp_path / 'st'}",
        EncoderOptions(device="cpu", query_prompt="document", document_prompt="document"),
    )
    assert not same.asymmetric  # type: ignore[attr-defined]
    np.testing.assert_allclose(same.encode(texts), model.encode_document(strings), atol=2e-5)


def test_benchmark_ranking_uses_query_vectors(
    world: dict[str, Path], tmp_path: Path, capsys
) -> None:
    from mdcr.cli import main

    fixture = Path(__file__).resolve().parents[2] / "data" / "mdcr_format_fixture"
    home = tmp_path / "bench-home"
    argv = ["evaluate", "--encoder", "py:role_enc_mod:TwoTower", "--benchmark", str(fixture)]
    assert main([*argv, "--home", str(home), "-q", "--scores-out", str(tmp_path / "s.json")]) == 0
    scores = json.loads((tmp_path / "s.json").read_text())
    (out,) = [p for p in (home / "encode").iterdir() if not p.name.startswith(".")]
    docs, queries = EmbeddingStore(out), EmbeddingStore(out, role="query")
    some = list(scores.items())[:50]
    qids, cands = zip(*(k.split("_", 1) for k, _ in some), strict=True)
    dv = docs.vectors(docs.rows(list(cands))).astype(np.float64)
    qv = queries.vectors(queries.rows(list(qids))).astype(np.float64)
    assert len({tuple(v) for v in qv}) > 1  # the query vectors are used, not the documents'
    np.testing.assert_allclose([v for _, v in some], (dv * qv).sum(axis=1), rtol=1e-9)
