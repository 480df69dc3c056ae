"""Runs and qrels leave mdcr as TREC files and ranx objects that give the same metrics."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mdcr.cli import main
from mdcr.scoring.trec import load_qrels, load_run, topic_id
from tests.integration.scoring.conftest import Built


def _read_trec_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        q, q0, doc, _rank, score, _tag = line.split()
        assert q0 == "Q0"
        run.setdefault(q, {})[doc] = float(score)
    return run


def _read_trec_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        q, zero, doc, rel = line.split()
        assert zero == "0"
        qrels.setdefault(q, {})[doc] = int(rel)
    return qrels


def test_trec_export_reads_back_in_pytrec_eval_with_the_same_metrics(
    built: Built, tmp_path: Path, capsys
) -> None:
    import pytrec_eval

    run_folder = built.runs["specter"]
    argv = ["export", "--format", "trec", "--run", str(run_folder), "--qrels", str(built.pools)]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    assert "run.trec" in capsys.readouterr().out
    run = _read_trec_run(tmp_path / "run.trec")
    qrels = _read_trec_qrels(tmp_path / "qrels.trec")
    ours = pd.read_parquet(built.score / "per_query.parquet")
    ours = ours[ours["retriever"] == "specter"]
    scored_pools = set(ours["pool_id"])
    qrels = {
        q: v
        for q, v in qrels.items()
        if q.rsplit(":", 1)[0].replace("_", " ") in {p.replace("_", " ") for p in scored_pools}
    }
    measures = pytrec_eval.RelevanceEvaluator(qrels, {"map", "ndcg", "recall.30"}).evaluate(run)
    names = {"map@500": "map", "ndcg@500": "ndcg", "recall@30": "recall_30"}
    checked = 0
    for r in ours.itertuples(index=False):
        q = topic_id(str(r.pool_id), str(r.query_id))
        got = measures.get(q, {}).get(names[str(r.metric)], 0.0)
        assert got == pytest.approx(float(r.value), abs=1e-9), (q, r.metric)
        checked += 1
    assert checked == len(ours) > 100


def test_ranx_objects_of_one_pool(built: Built) -> None:
    pool = str(pd.read_parquet(built.pools / "pool_meta.parquet")["pool_id"].iloc[0])
    run = load_run(built.runs["bm25"], pool)
    qrels = load_qrels(built.pools, pool)
    per_pool = pd.read_parquet(built.score / "per_pool.parquet")
    want = per_pool[
        (per_pool["retriever"] == "bm25")
        & (per_pool["pool_id"] == pool)
        & (per_pool["metric"] == "map@500")
    ]["value"].iloc[0]
    from ranx import evaluate

    assert evaluate(qrels, run, "map@500") == pytest.approx(float(want), abs=1e-9)
    every = load_run(built.runs["bm25"])
    ranked = pd.read_parquet(built.runs["bm25"] / "runs.parquet").astype({"pool_id": str})
    topics = {topic_id(p, q) for p, q in zip(ranked["pool_id"], ranked["query_id"], strict=True)}
    assert set(every.get_query_ids()) == topics and len(topics) > len(run)


def test_export_refuses_run_and_qrels_of_different_pools(
    built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    from mdcr.core.config import from_mapping
    from mdcr.core.fingerprints import artifact_fingerprint
    from mdcr.core.store import Store
    from tests.integration.scoring.fakes import POOLS, FakePoolsConfig

    cfg = from_mapping(FakePoolsConfig, {"fields": ["Biology", "Medicine"]}, "p")
    other = Store(tmp_path / "home").execute(POOLS, cfg, {}, quiet=True).path
    run, out = built.runs["specter"], tmp_path / "out"
    assert main(["export", "--run", str(run), "--qrels", str(other), "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"mdcr: error: run '{run}' (specter) was built from pools "
        f"{artifact_fingerprint(built.pools)}, not the given pools "
        f"{artifact_fingerprint(other)}; pass the pools the run was searched on\n"
    )
    assert not out.exists()
    # A run no stage made records no pools: its queries must be the qrels' queries.
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(run / "runs.parquet", plain)
    ranked = pd.read_parquet(plain / "runs.parquet")[["pool_id", "query_id"]].drop_duplicates()
    lost = ranked[ranked["pool_id"].astype(str).str.contains("Computer Science")]
    first = lost.astype(str).sort_values(["pool_id", "query_id"]).iloc[0]
    assert main(["export", "--run", str(plain), "--qrels", str(other), "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"mdcr: error: run '{plain}' and qrels '{other}' are of different pools: {len(lost)} of "
        f"the run's {len(ranked)} queries have no qrels (e.g. "
        f"'{topic_id(first['pool_id'], first['query_id'])}'); pass the pools output the run "
        "was searched on\n"
    )
    assert not out.exists()
    same = ["export", "--run", str(plain), "--qrels", str(built.pools), "--out", str(out)]
    assert main(same) == 0
    assert (out / "run.trec").is_file() and (out / "qrels.trec").is_file()


def test_export_out_on_an_existing_file_is_one_line(
    built: Built, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.trec"
    out.write_text("keep me\n")
    assert main(["export", "--run", str(built.runs["bm25"]), "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"mdcr: error: export --out '{out}' is a file; give a folder (the TREC files are "
        "written into it)\n"
    )
    assert out.read_text() == "keep me\n"
