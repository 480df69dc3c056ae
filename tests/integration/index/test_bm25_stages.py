"""Stages ``bm25-tune`` and ``bm25``: the run contract, index reuse, resume, a known best k1/b."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mdcr.contracts.artifacts import RUNS
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.inputs import resolve_inputs
from mdcr.core.store import Store
from mdcr.index.bm25 import search as bm25_search
from mdcr.index.bm25 import shared as bm25_shared
from mdcr.index.bm25 import tune as bm25_tune
from mdcr.index.runs import rank_candidates
from tests.integration.encoders.fixtures import write_pools


def _execute(home: Path, spec, cfg):  # type: ignore[no-untyped-def]
    return Store(home).execute(spec, cfg, resolve_inputs(cfg), quiet=True)


def write_corpus(folder: Path, papers: Sequence[tuple[str, str, str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table(
            {
                "paper_id": [p[0] for p in papers],
                "title": [p[1] for p in papers],
                "abstract": [p[2] for p in papers],
                "year": [2019] * len(papers),
                "fields": [["Medicine"]] * len(papers),
                "n_out": [3] * len(papers),
                "n_in": [3] * len(papers),
            }
        ),
        folder / "papers.parquet",
    )
    return folder


@pytest.fixture()
def index_dir(tmp_path: Path) -> Path:
    """Where the stages of these tests (store ``tmp_path / "home"``) keep their indexes."""
    return tmp_path / "home" / "lucene-index"


@pytest.fixture()
def real(tmp_path: Path, s2orc_papers: list) -> dict[str, Any]:  # type: ignore[type-arg]
    """Real-text corpus and three pools; the val pool has the same papers as one test pool."""
    papers = [(p.paper_id, p.title, p.abstract) for p in s2orc_papers]
    ids = [p[0] for p in papers]
    corpus = write_corpus(tmp_path / "corpus", papers)
    pools = {
        "dataset/test/300/r0": ids[:300],
        "field/test/Medicine/r0": ids[150:],
        "dataset/val/300/r0": ids[:300],
    }
    qrels = {
        "dataset/test/300/r0": {ids[3]: ids[10:14], ids[400]: ids[20:22], ids[7]: [ids[299]]},
        "field/test/Medicine/r0": {ids[160]: ids[200:203], ids[5]: [ids[300]]},
        "dataset/val/300/r0": {ids[11]: ids[30:33]},
    }
    folder = write_pools(tmp_path / "pools", pools, qrels)
    return {
        "corpus": corpus,
        "pools": folder,
        "ids": ids,
        "papers": papers,
        "qrels": qrels,
        "p": pools,
    }


def test_bm25_stage_writes_runs_by_the_contract(
    lucene_jvm: object, tmp_path: Path, real: dict[str, Any], index_dir: Path
) -> None:
    from mdcr.index.lucene.indexes import Doc, build_index, open_index

    cfg = bm25_search.BM25Config(corpus=str(real["corpus"]), pools=str(real["pools"]), k=50)
    art = _execute(tmp_path / "home", bm25_search.SPEC, cfg)
    table = pq.read_table(art.path / "runs.parquet")
    assert table.schema.equals(RUNS.schema)
    manifest = json.loads((art.path / "manifest.json").read_text())
    info = manifest["info"]
    assert info["retriever"] == "bm25" and (info["k1"], info["b"]) == (0.9, 0.4)
    assert info["n_pools"] == 2 and info["splits"] == ["test"]
    assert info["query_terms"]["queries"] == 5
    assert manifest["outputs"]["runs.parquet"]["rows"] == table.num_rows == 5 * 50
    assert not (art.path / bm25_shared.PARTS).exists()
    df = table.to_pandas()
    assert sorted(df["pool_id"].unique()) == ["dataset/test/300/r0", "field/test/Medicine/r0"]
    texts = {p[0]: f"{p[1]}\n{p[2]}" for p in real["papers"]}
    for (pool_id, qid), g in df.groupby(["pool_id", "query_id"], sort=True):
        assert g["rank"].tolist() == list(range(1, 51))
        assert qid not in set(g["paper_id"])  # never its own candidate
        assert set(g["paper_id"]) <= set(real["p"][pool_id])
        # The contract's order, exactly as every retriever ranks.
        ids, scores = rank_candidates(g["paper_id"].to_numpy(), g["score"].to_numpy(), 50)
        assert ids.tolist() == g["paper_id"].tolist() and scores.tolist() == g["score"].tolist()
    # A query paper outside the pool (ids[400], ids[5]) is searched like any other.
    assert {"dataset/test/300/r0", "field/test/Medicine/r0"} == set(
        df.loc[df["query_id"].isin([real["ids"][400], real["ids"][5]]), "pool_id"]
    )
    # Same as searching an index of the pool's own papers directly (per-pool statistics).
    pool = real["p"]["field/test/Medicine/r0"]
    build_index(tmp_path / "direct", sorted(pool), [Doc(pool, [texts[i] for i in pool])], meta={})
    qid = real["ids"][160]
    with open_index(tmp_path / "direct") as index:
        built, _ = index.build_queries([qid], [texts[qid]])
        ((ids, scores),) = index.search(built, 50, k1=0.9, b=0.4, exclude=[qid])
    got = df[(df["pool_id"] == "field/test/Medicine/r0") & (df["query_id"] == qid)]
    assert got["paper_id"].tolist() == ids.tolist()
    assert got["score"].tolist() == scores.tolist()
    # One index per distinct set of papers, reused by a second run with other parameters.
    assert len([p for p in index_dir.iterdir() if not p.name.startswith(".")]) == 2
    assert set(info["indexes"].values()) == {p.name for p in index_dir.iterdir()}
    cfg2 = bm25_search.BM25Config(
        corpus=str(real["corpus"]), pools=str(real["pools"]), k=50, b=0.75, splits=("val", "test")
    )
    art2 = _execute(tmp_path / "home", bm25_search.SPEC, cfg2)
    info2 = json.loads((art2.path / "manifest.json").read_text())["info"]
    assert info2["indexes"]["dataset/val/300/r0"] == info2["indexes"]["dataset/test/300/r0"]
    assert len(list(index_dir.iterdir())) == 2  # nothing rebuilt


def test_bm25_stage_resumes_after_a_crash(
    lucene_jvm: object, tmp_path: Path, real: dict[str, Any], index_dir: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    from mdcr.index.lucene import indexes as lucene

    cfg = bm25_search.BM25Config(corpus=str(real["corpus"]), pools=str(real["pools"]), k=20)
    calls = {"n": 0, "fail_at": 1}
    search = lucene.LuceneIndex.search

    def failing(self, *a, **kw):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == calls["fail_at"]:
            raise RuntimeError("killed")
        return search(self, *a, **kw)

    monkeypatch.setattr(lucene.LuceneIndex, "search", failing)
    with pytest.raises(RuntimeError, match="killed"):  # in the first pool: nothing to resume
        _execute(tmp_path / "home", bm25_search.SPEC, cfg)
    assert list((tmp_path / "home" / "bm25").iterdir()) == []  # no work folder, no lock
    calls.update(n=0, fail_at=2)
    with pytest.raises(RuntimeError, match="killed"):
        _execute(tmp_path / "home", bm25_search.SPEC, cfg)
    work = next((tmp_path / "home" / "bm25").glob(".*.partial"))
    assert len(list((work / bm25_shared.PARTS).glob("*.parquet"))) == 1  # the first pool survived
    monkeypatch.setattr(lucene.LuceneIndex, "search", search)
    resumed = pq.read_table(
        _execute(tmp_path / "home", bm25_search.SPEC, cfg).path / "runs.parquet"
    )
    fresh = pq.read_table(_execute(tmp_path / "home2", bm25_search.SPEC, cfg).path / "runs.parquet")
    assert resumed.equals(fresh)


def _known_case(tmp_path: Path, s2orc_papers: list) -> tuple[Path, Path]:  # type: ignore[type-arg]
    """A pool where only b = 0 ranks the relevant paper first.

    The query's only term is "zebra". R (relevant) and D both contain it twice; R is long,
    D is short. With b > 0 length normalisation puts D above R (AP 0.5); with b = 0 they
    tie exactly and the tie goes to the smaller paper id, R (AP 1).
    """
    filler = [(p.paper_id, p.title, p.abstract) for p in s2orc_papers[:40]]
    long_tail = " ".join(f"fillword{i}" for i in range(60))
    special = [
        ("q-zebra", "Zebra", "zebra zebra"),
        ("r1-long", "Zebra", f"zebra {long_tail}"),
        ("r2-short", "Zebra", "zebra"),
    ]
    corpus = write_corpus(tmp_path / "corpus", filler + special)
    ids = [p[0] for p in filler] + ["q-zebra", "r1-long", "r2-short"]
    pools = write_pools(
        tmp_path / "pools",
        {"dataset/val/43/r0": ids, "dataset/test/43/r0": ids},
        {
            "dataset/val/43/r0": {"q-zebra": ["r1-long"]},
            "dataset/test/43/r0": {"q-zebra": ["r1-long"]},
        },
    )
    return corpus, pools


def test_tuning_picks_the_known_best_point(
    lucene_jvm: object, tmp_path: Path, s2orc_papers: list, index_dir: Path
) -> None:  # type: ignore[type-arg]
    corpus, pools = _known_case(tmp_path, s2orc_papers)
    cfg = bm25_tune.TuneConfig(
        corpus=str(corpus), pools=str(pools), k1=(0.9, 1.2), b=(1.0, 0.0, 0.5)
    )
    art = _execute(tmp_path / "home", bm25_tune.TUNE_SPEC, cfg)
    grid = pq.read_table(art.path / "grid.parquet").to_pandas()
    assert len(grid) == 1 * 6 * 3  # one val pool, 6 points, 3 metrics
    assert set(grid["pool_id"]) == {"dataset/val/43/r0"}
    ap = grid[grid["metric"] == "map@500"].set_index(["k1", "b"])["value"]
    assert ap[(0.9, 0.0)] == ap[(1.2, 0.0)] == 1.0
    assert ap[(0.9, 0.5)] == ap[(1.2, 1.0)] == 0.5
    chosen = json.loads((art.path / "chosen.json").read_text())
    # b = 0 wins; between the two tied k1 values the one nearer pyserini's 0.9 is taken.
    assert (chosen["k1"], chosen["b"], chosen["value"]) == (0.9, 0.0, 1.0)
    assert chosen["metric"] == "map@500" and chosen["n_pools"] == 1
    # The bm25 stage takes the chosen values from the tuning output.
    run_cfg = bm25_search.BM25Config(
        corpus=str(corpus), pools=str(pools), params=str(art.path), k=5
    )
    run_art = _execute(tmp_path / "home", bm25_search.SPEC, run_cfg)
    info = json.loads((run_art.path / "manifest.json").read_text())["info"]
    assert (info["k1"], info["b"]) == (0.9, 0.0)
    run = pq.read_table(run_art.path / "runs.parquet").to_pandas()
    assert run["paper_id"].tolist()[:2] == ["r1-long", "r2-short"]
    assert run["score"].iloc[0] == run["score"].iloc[1]  # the tie, broken by paper_id
    assert len(list(index_dir.iterdir())) == 1  # val and test pools share one index


def test_lucene_indexes_live_in_the_store_and_outputs_name_them(
    lucene_jvm: object, tmp_path: Path, s2orc_papers: list, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[type-arg]
    """Indexes go to the store's lucene-index/, never the working folder; bm25-tune (on
    Lucene) and bm25 record the index they searched, so the catalog knows who uses it."""
    from mdcr.catalog import entries as catalog

    corpus, pools = _known_case(tmp_path, s2orc_papers)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    home = tmp_path / "home"
    tune_cfg = bm25_tune.TuneConfig(
        corpus=str(corpus), pools=str(pools), k1=(0.9,), b=(0.4,), backend="lucene"
    )
    tune = _execute(home, bm25_tune.TUNE_SPEC, tune_cfg)
    run_cfg = bm25_search.BM25Config(
        corpus=str(corpus), pools=str(pools), params=str(tune.path), k=5
    )
    run = _execute(home, bm25_search.SPEC, run_cfg)
    assert list((tmp_path / "cwd").iterdir()) == []
    (index,) = catalog.scan(home, "lucene-index")
    assert index.state == "complete" and index.path.parent == home / "lucene-index"
    used = {u.key for u in catalog.users(catalog.scan(home))[index.fingerprint]}
    assert used == {f"bm25-tune/{tune.fingerprint}", f"bm25/{run.fingerprint}"}


def test_choose_averages_pools_and_breaks_ties_toward_the_default() -> None:
    rows = []
    for pool, values in {"a": [0.2, 0.6, 0.6], "b": [0.4, 0.2, 0.2]}.items():
        for (k1, b), v in zip([(1.2, 0.75), (0.9, 0.4), (1.6, 1.0)], values, strict=True):
            rows.append({"pool_id": pool, "k1": k1, "b": b, "metric": "map@500", "value": v})
    grid = pd.DataFrame(rows)
    chosen = bm25_tune.choose(grid, "map@500")
    # means: (1.2, 0.75) 0.3; (0.9, 0.4) 0.4; (1.6, 1.0) 0.4 -> tie, nearer the default wins
    assert (chosen["k1"], chosen["b"]) == (0.9, 0.4)
    assert chosen["value"] == pytest.approx(0.4)
    assert chosen["default"]["value"] == pytest.approx(0.4)
    assert [t["k1"] for t in chosen["top"]] == [0.9, 1.6, 1.2]
    with pytest.raises(InputDataError, match="no values of metric 'ndcg@500'"):
        bm25_tune.choose(grid, "ndcg@500")


def test_configs_are_validated() -> None:
    with pytest.raises(ConfigError, match="either params"):
        bm25_search.BM25Config(corpus="c", pools="p", params="t", k1=1.2).validate()
    with pytest.raises(ConfigError, match="between 0 and 1"):
        bm25_search.BM25Config(corpus="c", pools="p", b=1.5).validate()
    with pytest.raises(ConfigError, match=r"bm25-tune\.metric: 'mrr'"):
        bm25_tune.TuneConfig(corpus="c", pools="p", metric="mrr").validate()
    with pytest.raises(ConfigError, match="duplicates"):
        bm25_tune.TuneConfig(corpus="c", pools="p", b=(0.4, 0.4)).validate()
    assert bm25_tune.metric_name("map", 500) == "map@500"
    assert bm25_tune.metric_name("recall@30", 500) == "recall@30"
    assert bm25_tune.metric_name("NDCG", 100) == "ndcg@100"


def test_inputs_without_val_pools_or_text_are_clear_errors(
    lucene_jvm: object, tmp_path: Path, real: dict[str, Any], index_dir: Path
) -> None:
    only_test = write_pools(
        tmp_path / "pools2", {"dataset/test/3/r0": real["ids"][:3]}, {"dataset/test/3/r0": {}}
    )
    cfg = bm25_tune.TuneConfig(corpus=str(real["corpus"]), pools=str(only_test))
    with pytest.raises(InputDataError, match=r"no validation pools .* it has: test"):
        _execute(tmp_path / "home", bm25_tune.TUNE_SPEC, cfg)
    missing = write_pools(
        tmp_path / "pools3",
        {"dataset/test/2/r0": [real["ids"][0], "not-in-corpus"]},
        {"dataset/test/2/r0": {real["ids"][1]: [real["ids"][0]]}},
    )
    cfg2 = bm25_search.BM25Config(corpus=str(real["corpus"]), pools=str(missing))
    with pytest.raises(InputDataError, match="index got 1 documents for 2 paper ids"):
        _execute(tmp_path / "home", bm25_search.SPEC, cfg2)
    assert np.all([not p.name.startswith(".") for p in index_dir.glob("*")])


def test_prefetched_texts_equal_the_corpus_reads(real: dict[str, Any], tmp_path: Path) -> None:
    """One scan for the pools asked for gives the same texts and queries as reading the
    corpus per pool; a pool not asked for is still read from the corpus."""
    from mdcr.index.bm25.data import PoolData

    pool_ids = ["dataset/test/300/r0", "field/test/Medicine/r0", "dataset/val/300/r0"]
    plain = PoolData(real["corpus"], real["pools"], 1)
    cached = PoolData(real["corpus"], real["pools"], 1)
    try:
        for asked, papers in ((pool_ids[2:], 300), (pool_ids[:2], 488)):
            assert cached.prefetch(asked, tmp_path / "spill") == papers  # pools and queries
            for pool_id in pool_ids:
                ids_a, texts_a = plain.pool_texts_sorted(pool_id)
                ids_b, texts_b = cached.pool_texts_sorted(pool_id)
                assert ids_a.tolist() == ids_b.tolist() and texts_a == texts_b
                assert plain.queries(pool_id) == cached.queries(pool_id)
                assert cached._papers_of(pool_id) == (
                    "pool_papers" if pool_id in asked else "papers"
                )
    finally:
        plain.close()
        cached.close()


def test_a_worker_process_reads_each_pool_in_one_scan_of_its_own(
    real: dict[str, Any], tmp_path: Path
) -> None:
    """A worker opened in its own process (as on Ray) reads each pool's texts as the pool
    starts, into a spill folder of its own; the texts equal the corpus reads."""
    import os

    from mdcr.index.bm25.data import PoolData, PoolJob, open_pool_worker

    job = PoolJob(
        corpus=real["corpus"], pools=real["pools"], out=tmp_path / "out",
        spill=tmp_path / "out" / "parts" / "spill", index_dir=tmp_path / "ix", threads=1,
        backend="sweep", depth=10, device="cpu", grid=((0.9, 0.4),),
    )  # fmt: skip
    worker, plain = open_pool_worker(job), PoolData(real["corpus"], real["pools"], 1)
    try:
        assert worker.spill is not None and worker.spill.parent == job.spill
        assert worker.spill.name.endswith(f"-{os.getpid()}")
        for pool_id in ("dataset/test/300/r0", "field/test/Medicine/r0"):
            worker.open_pool(pool_id)
            assert worker.data._papers_of(pool_id) == "pool_papers"
            assert worker.data._papers_of("dataset/val/300/r0") == "papers"  # not this pool
            ids_a, texts_a = plain.pool_texts_sorted(pool_id)
            ids_b, texts_b = worker.data.pool_texts_sorted(pool_id)
            assert ids_a.tolist() == ids_b.tolist() and texts_a == texts_b
            assert plain.queries(pool_id) == worker.data.queries(pool_id)
    finally:
        worker.data.close()
        plain.close()


def test_a_gpu_asked_for_but_absent_stops_before_any_pool(
    tmp_path: Path, real: dict[str, Any], index_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mdcr.retrievers.device.cuda_device_count", lambda: 0)
    cfg = bm25_tune.TuneConfig(
        corpus=str(real["corpus"]), pools=str(real["pools"]), device="cuda:1"
    )
    with pytest.raises(ConfigError, match=r"asks for GPU 1 but 0 GPU\(s\) are visible"):
        _execute(tmp_path / "home", bm25_tune.TUNE_SPEC, cfg)
    assert not list((tmp_path / "home").rglob("*.parquet"))  # no pool was started
