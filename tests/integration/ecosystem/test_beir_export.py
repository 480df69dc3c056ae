"""``mdcr export --format beir``: what BEIR's GenericDataLoader and MTEB's retrieval
loader read back equals what mdcr holds (pools and an MDCR benchmark)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pandas as pd

from mdcr.cli import main
from tests.integration.benchmark.helpers import make_corpus, make_pools
from tests.integration.ecosystem.helpers import import_fixture


def _export(kind: str, source: Path, out: Path) -> dict:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["export", "--format", "beir", f"--{kind}", str(source), "--out", str(out)])
    assert rc == 0
    return json.loads((out / "mdcr-export.json").read_text())


def _beir(folder: Path, split: str) -> tuple[dict, dict, dict]:
    from beir.datasets.data_loader import GenericDataLoader

    return GenericDataLoader(data_folder=str(folder)).load(split=split)


def _mteb(folder: Path, split: str) -> dict:
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalDatasetLoader

    return RetrievalDatasetLoader(str(folder), revision="local", split=split).load()


def test_mdcr_benchmark_is_read_back_by_beir_and_mteb(tmp_path: Path) -> None:
    bench = import_fixture(tmp_path / "home")
    index = _export("benchmark", bench, tmp_path / "out")
    rows = pd.read_parquet(bench / "benchmark.parquet").astype(str)
    assert index["kind"] == "mdcr" and len(index["folders"]) == rows["field"].nunique() == 3
    for name, entry in index["folders"].items():
        b = rows[rows["field"] == entry["field"]]
        pairs = b.drop_duplicates(["query_id", "paper_id"])  # a candidate counts once
        positives = set(
            map(tuple, b.loc[b["candidate_type"] == "true", ["query_id", "paper_id"]].values)
        )
        corpus, queries, qrels = _beir(tmp_path / "out" / name, "test")
        assert set(corpus) == set(b["paper_id"]) and set(queries) == set(b["query_id"])
        judged = {(q, d): r for q, docs in qrels.items() for d, r in docs.items()}
        assert len(judged) == len(pairs) == entry["counts"]["qrels"]["test"]
        assert {k for k, r in judged.items() if r == 1} == positives
        data = _mteb(tmp_path / "out" / name, "test")
        assert len(data["corpus"]) == len(corpus) and len(data["queries"]) == len(queries)
        assert data["relevant_docs"] == qrels
        # each query's candidate list, exactly its distinct candidates
        want = {q: sorted(set(g["paper_id"])) for q, g in b.groupby("query_id")}
        assert {q: sorted(v) for q, v in data["top_ranked"].items()} == want
        # a query reads as its paper: title, a space, abstract
        texts = pd.read_parquet(bench / "papers.parquet").set_index("paper_id")
        q0 = sorted(queries)[0]
        assert queries[q0] == f"{texts.loc[q0, 'title']} {texts.loc[q0, 'abstract']}".strip()


def test_pools_are_read_back_by_beir_and_mteb(tmp_path: Path) -> None:
    home = tmp_path / "home"
    corpus = make_corpus(tmp_path / "corpus", n_papers=2500)
    pools = make_pools(home, corpus, field_pool_size=300, fields=("Biology", "Medicine"))
    index = _export("pools", pools, tmp_path / "out")
    meta = pd.read_parquet(pools / "pool_meta.parquet").astype({"pool_id": str})
    members = pd.read_parquet(pools / "pools.parquet").astype(str)
    qrels_all = pd.read_parquet(pools / "qrels.parquet").astype({"pool_id": str})
    assert index["kind"] == "pools" and len(index["folders"]) == len(meta) > 1
    for name, entry in index["folders"].items():
        pool_id, (split,) = entry["pool_id"], entry["splits"]
        corpus_, queries, qrels = _beir(tmp_path / "out" / name, split)
        assert set(corpus_) == set(members.loc[members["pool_id"] == pool_id, "paper_id"])
        q = qrels_all[qrels_all["pool_id"] == pool_id]
        assert set(queries) == set(q["query_id"].astype(str))
        assert sum(len(v) for v in qrels.values()) == len(q) == entry["counts"]["qrels"][split]
        data = _mteb(tmp_path / "out" / name, split)
        assert len(data["corpus"]) == len(corpus_) and data["relevant_docs"] == qrels
        assert data["top_ranked"] is None
