"""Stage score: every qrels query scored, only the pools a run covers, exact aggregation,
the analytic chance per pool, and refusals of mismatched inputs."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mdcr.core.config import from_mapping
from mdcr.core.errors import ConfigError, ManifestMismatchError
from mdcr.measures.compute import score_pool
from mdcr.measures.registry import expected as expected_metric
from tests.unit.scoring.conftest import Built, make_runs, run_score
from tests.unit.scoring.fakes import POOLS, FakePoolsConfig

METRICS = ["map@500", "ndcg@500", "recall@30"]


def test_every_query_scored_and_only_covered_pools(built: Built) -> None:
    pq_ = pd.read_parquet(built.score / "per_query.parquet")
    meta = pd.read_parquet(built.pools / "pool_meta.parquet")
    qrels = pd.read_parquet(built.pools / "qrels.parquet")
    n_queries = qrels.groupby("pool_id")["query_id"].nunique()
    field_pools = set(meta.loc[meta["setup"] == "field", "pool_id"])
    for name in ("bm25", "specter", "random"):
        sub = pq_[pq_["retriever"] == name]
        assert len(sub) == int(n_queries.sum()) * len(METRICS)
    partial = pq_[pq_["retriever"] == "partial"]
    assert set(partial["pool_id"]) == field_pools  # its run covers the field pools only
    assert len(partial) == int(n_queries[sorted(field_pools)].sum()) * len(METRICS)
    # the two queries left out of the partial run score 0 in every pool and metric
    for pid in field_pools:
        dropped = sorted(qrels.loc[qrels["pool_id"] == pid, "query_id"].unique())[:2]
        vals = partial[(partial["pool_id"] == pid) & partial["query_id"].isin(dropped)]
        assert len(vals) == 2 * len(METRICS) and (vals["value"] == 0).all()
    info = json.loads((built.score / "manifest.json").read_text())["info"]
    by_name = {r["retriever"]: r for r in info["runs"]}
    assert by_name["partial"]["queries_without_results"] == 2 * len(field_pools)
    assert by_name["bm25"]["queries_without_results"] == 0
    assert by_name["bm25"]["fingerprint"] == built.runs["bm25"].name
    assert info["pools_fingerprint"] == built.pools.name


def test_values_and_pool_means(built: Built) -> None:
    pq_ = pd.read_parquet(built.score / "per_query.parquet")
    pp = pd.read_parquet(built.score / "per_pool.parquet")
    qrels = pd.read_parquet(built.pools / "qrels.parquet")
    run = pd.read_parquet(built.runs["specter"] / "runs.parquet")
    pid = "dataset/test/600/r1"
    direct = score_pool(qrels[qrels["pool_id"] == pid], run[run["pool_id"] == pid], METRICS, 500)
    got = pq_[(pq_["retriever"] == "specter") & (pq_["pool_id"] == pid)]
    merged = got.merge(direct, on=["query_id", "metric"], suffixes=("", "_direct"))
    assert len(merged) == len(direct) and (merged["value"] == merged["value_direct"]).all()
    means = pq_.groupby(["retriever", "pool_id", "metric"])["value"].mean()
    for r in pp.itertuples(index=False):
        assert r.value == pytest.approx(means[(r.retriever, r.pool_id, r.metric)], abs=1e-15)
    row = pp[(pp["pool_id"] == pid) & (pp["retriever"] == "specter")].iloc[0]
    assert (row["setup"], row["size"], row["rep"]) == ("dataset", 600, 1)
    assert pd.isna(row["field"])


def test_chance_per_pool_by_hand(built: Built) -> None:
    chance = pd.read_parquet(built.score / "chance.parquet")
    pools = pd.read_parquet(built.pools / "pools.parquet")
    qrels = pd.read_parquet(built.pools / "qrels.parquet")
    pid = "field/test/Medicine/r0"
    papers = set(pools.loc[pools["pool_id"] == pid, "paper_id"])
    vals = []
    for qid, g in qrels[qrels["pool_id"] == pid].groupby("query_id"):
        n = len(papers) - (1 if qid in papers else 0)  # the query is not its own candidate
        m = int(g["paper_id"].isin(papers - {qid}).sum())
        vals.append(expected_metric("map@500", n, m, len(g)))
    got = chance[(chance["pool_id"] == pid) & (chance["metric"] == "map@500")]["value"]
    assert got.tolist() == [pytest.approx(sum(vals) / len(vals), abs=1e-15)]
    assert len(chance) == 8 * len(METRICS)


def test_names_and_pools_are_checked(built: Built) -> None:
    runs = [built.runs["bm25"], built.runs["random"]]
    with pytest.raises(ConfigError, match="one name per run"):
        run_score(built.store, built.pools, runs, names=["a"])
    with pytest.raises(ConfigError, match="names two runs"):
        run_score(built.store, built.pools, runs, names=["same", "same"])
    other = built.store.execute(
        POOLS, from_mapping(FakePoolsConfig, {"seed": 1}, "p"), {}, quiet=True
    ).path
    foreign = make_runs(built.store, other, {"bm25": {"skill": 1.0}})["bm25"]
    with pytest.raises(ManifestMismatchError, match="was built from pools"):
        run_score(built.store, built.pools, [foreign])
    with pytest.raises(ConfigError, match="recall_k"):
        run_score(built.store, built.pools, runs, recall_k=600)
