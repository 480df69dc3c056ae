"""Stage ``search``: runs by the contract, equal to brute force, the same on every backend."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from mdcr.contracts.artifacts import RUNS
from mdcr.core.errors import InputDataError
from mdcr.core.inputs import resolve_inputs
from mdcr.core.store import Store
from mdcr.encoders.stage import SPEC as ENCODE
from mdcr.encoders.stage import EncodeConfig
from mdcr.encoders.store import EmbeddingStore
from mdcr.index.dense import SPEC as SEARCH
from mdcr.index.dense import SearchConfig
from mdcr.index.runs import rank_candidates
from tests.integration.encoders.fixtures import write_corpus, write_pools, write_store


def _execute(home: Path, spec, cfg):  # type: ignore[no-untyped-def]
    cfg.validate()
    return Store(home).execute(spec, cfg, resolve_inputs(cfg), quiet=True).path


@pytest.fixture()
def pools(tmp_path: Path) -> dict[str, object]:
    ids = [f"p{i:04d}" for i in range(120)]
    pools = {"dataset/test/80/r0": ids[:80], "field/test/CS/r0": ids[40:120]}
    qrels = {
        "dataset/test/80/r0": {"p0005": ids[10:13], "p0100": ids[:2], "p0110": ids[3:4]},
        "field/test/CS/r0": {"p0041": ids[50:53], "p0002": ids[60:61]},
    }
    folder = write_pools(tmp_path / "pools", pools, qrels)
    return {"folder": folder, "pools": pools, "qrels": qrels, "ids": ids}


def _brute(store: EmbeddingStore, pools: dict, qrels: dict, k: int, metric: str):  # type: ignore[type-arg]
    rows = []
    for pool_id in sorted(pools):
        cand = np.array(sorted(pools[pool_id]))
        c = store.vectors(store.rows(list(cand))).astype(np.float64)
        for qid in sorted(qrels[pool_id]):
            q = store.vectors(store.rows([qid]))[0].astype(np.float64)
            s = (c * q).sum(1) if metric != "l2" else -((c - q) ** 2).sum(1)
            r_ids, r_sc = rank_candidates(cand, s, k, exclude=qid)
            rows += [
                (pool_id, qid, p, sc, r + 1)
                for r, (p, sc) in enumerate(zip(r_ids, r_sc, strict=True))
            ]
    return rows


def _rows(path: Path) -> list[tuple]:  # type: ignore[type-arg]
    t = pq.read_table(path / "runs.parquet")
    assert t.schema.equals(RUNS.schema)
    return list(zip(*[t[c].to_pylist() for c in RUNS.schema.names], strict=True))


@pytest.mark.parametrize("block_vectors", [2_000_000, 7], ids=["one-index", "blocks-of-7"])
def test_search_stage_equals_brute_force_on_both_backends(
    tmp_path: Path,
    pools,  # type: ignore[no-untyped-def]
    block_vectors: int,
) -> None:
    corpus = tmp_path / "corpus"
    write_corpus(corpus, 120)
    home = tmp_path / "home"
    emb = _execute(
        home,
        ENCODE,
        EncodeConfig(
            corpus=str(corpus),
            encoder="random",
            dim=16,
            targets=(str(pools["folder"]),),
            shard_size=32,
        ),
    )
    runs = {}
    for backend in ("faiss", "torch"):
        cfg = SearchConfig(
            pools=str(pools["folder"]),
            embeddings=str(emb),
            k=30,
            backend=backend,
            device="cpu",
            query_batch=2,
            margin=1,
            block_vectors=block_vectors,
        )
        runs[backend] = _execute(home, SEARCH, cfg)
    got = _rows(runs["faiss"])
    assert got == _rows(runs["torch"])
    want = _brute(EmbeddingStore(emb), pools["pools"], pools["qrels"], 30, "cos")
    assert [r[:3] + r[4:] for r in got] == [r[:3] + r[4:] for r in want]
    np.testing.assert_allclose([r[3] for r in got], [r[3] for r in want], rtol=0, atol=1e-12)
    # Contract: 5 queries x 30, query never retrieved, ranks 1..30 per query.
    assert len(got) == 150
    assert all(r[1] != r[2] for r in got)
    # The query p0005 is in pool 1 and must not be its own top hit.
    info = json.loads((runs["faiss"] / "manifest.json").read_text())["info"]
    assert info["retriever"] == "random" and info["k"] == 30 and info["metric"] == "cos"
    assert info["pools"]["dataset/test/80/r0"]["queries"] == 3
    assert info["pools"]["dataset/test/80/r0"]["blocks"] == (1 if block_vectors > 80 else 12)
    assert "pools_fingerprint" in info


@pytest.mark.parametrize("block_vectors", [2_000_000, 5, 1], ids=["one-index", "5", "1"])
def test_search_l2_multi_vector_store(tmp_path: Path, pools, block_vectors: int) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(5)
    ids = pools["ids"]
    counts = rng.integers(1, 4, size=len(ids))
    offsets = np.concatenate([[0], np.cumsum(counts)])
    vecs = (rng.integers(-1, 2, size=(offsets[-1], 6)) / 2).astype(np.float16)
    emb = write_store(tmp_path / "emb", ids, vecs, metric="l2", offsets=offsets, shard_size=37)
    cfg = SearchConfig(
        pools=str(pools["folder"]),
        embeddings=str(emb),
        k=25,
        device="cpu",
        margin=0,
        block_vectors=block_vectors,  # 1: one paper per block, whatever its vectors
    )
    got = _rows(_execute(tmp_path / "home", SEARCH, cfg))
    doc = {p: vecs[offsets[i] : offsets[i + 1]].astype(np.float64) for i, p in enumerate(ids)}
    want = []
    for pool_id in sorted(pools["pools"]):
        cand = np.array(sorted(pools["pools"][pool_id]))
        for qid in sorted(pools["qrels"][pool_id]):
            q = doc[qid]
            s = np.array([(-((q[:, None] - doc[c][None]) ** 2).sum(-1)).max() for c in cand])
            r_ids, r_sc = rank_candidates(cand, s, 25, exclude=qid)
            want += [
                (pool_id, qid, p, float(v), r + 1)
                for r, (p, v) in enumerate(zip(r_ids, r_sc, strict=True))
            ]
    assert got == want  # ties are everywhere with 3-level vectors


def test_missing_embeddings_are_a_one_line_error(tmp_path: Path, pools) -> None:  # type: ignore[no-untyped-def]
    ids = pools["ids"][:100]
    emb = write_store(tmp_path / "emb", ids, np.ones((100, 4), np.float16), metric="ip")
    cfg = SearchConfig(pools=str(pools["folder"]), embeddings=str(emb), device="cpu")
    with pytest.raises(InputDataError, match=r"2 queries have no embedding .*p0100") as info:
        _execute(tmp_path / "home", SEARCH, cfg)
    assert "\n" not in str(info.value)
