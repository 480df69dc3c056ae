"""Runs and qrels leave mdcr as TREC files and ranx objects that give the same metrics."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mdcr.cli import main
from mdcr.eval.trec import load_qrels, load_run, topic_id
from tests.unit.eval.conftest import Built


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
    assert len(every) > len(run) and all(":" in q for q in every.get_query_ids())
