"""Adding a measure is one registry entry: precision@k, registered here in one call, is
scored by the normal route (score_pool, the score stage and its chance rows), labelled
and ordered in tables, and agrees with pytrec_eval's ``P_k``. The registry is restored
after each test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
import pytrec_eval

from mdcr.core.config import from_mapping
from mdcr.core.errors import ConfigError
from mdcr.core.store import Store
from mdcr.measures import registry
from mdcr.measures.compute import score_pool
from mdcr.measures.registry import Measure
from mdcr.scoring.score import ScoreConfig
from tests.unit.scoring.conftest import make_runs, run_score
from tests.unit.scoring.fakes import POOLS, FakePoolsConfig

pytestmark = pytest.mark.usefixtures("ranx_ready")


def expected_precision(n: int, m: int, r: int, k: int) -> float:
    """E[P@k] of a random ranking: each of the top min(k, n) holds a relevant one with
    probability m/n, and P@k divides by k (R/N for k <= N)."""
    return m * min(k, n) / (n * k) if n > 0 else 0.0


@pytest.fixture
def precision() -> Iterator[Measure]:
    # The whole of adding a measure:
    measure = registry.MEASURES.register(
        Measure(
            kind="precision",
            label="P",
            cutoff="k",
            ranx="precision",
            pytrec_eval="P_{k}",
            order=3,
            chance=expected_precision,
        )
    )
    yield measure
    registry.MEASURES.unregister("precision")  # the registry as it was


def _pytrec(qrels: pd.DataFrame, run: pd.DataFrame, measure: str) -> dict[str, float]:
    q: dict[str, dict[str, int]] = {}
    for r in qrels.itertuples(index=False):
        q.setdefault(str(r.query_id), {})[str(r.paper_id)] = int(r.relevance)
    rr: dict[str, dict[str, float]] = {}
    for r in run.itertuples(index=False):
        rr.setdefault(str(r.query_id), {})[str(r.paper_id)] = -float(r.rank)
    res = pytrec_eval.RelevanceEvaluator(q, {measure}).evaluate(rr)
    return {qid: res[qid][measure] if qid in res else 0.0 for qid in q}


def test_a_registered_measure_is_scored_like_pytrec_eval(precision: Measure) -> None:
    qrels = pd.DataFrame(
        [("q1", "a", 1), ("q1", "c", 1), ("q1", "f", 1), ("q2", "b", 1), ("q3", "a", 1)],
        columns=["query_id", "paper_id", "relevance"],
    )
    run = pd.DataFrame(
        [("q1", p, i + 1) for i, p in enumerate("abcdef")]
        + [("q2", p, i + 1) for i, p in enumerate("ab")],  # fewer than k retrieved
        columns=["query_id", "paper_id", "rank"],
    )
    names = registry.names(["map", "precision"], 500, 4)
    assert names == ["map@500", "precision@4"]
    ours = score_pool(qrels, run, names, 500).set_index(["query_id", "metric"])["value"]
    theirs = _pytrec(qrels, run, precision.pytrec_eval_name(4))
    assert theirs == {"q1": 0.5, "q2": 0.25, "q3": 0.0}  # P_k divides by k
    for qid, value in theirs.items():
        assert ours[(qid, "precision@4")] == pytest.approx(value, abs=1e-12)
    assert registry.label("precision@4") == "P@4"
    assert registry.per_query_label("precision@4") == "P@4"
    assert sorted(["precision@4", "recall@4", "map@500"], key=registry.sort_key) == [
        "map@500",
        "recall@4",
        "precision@4",
    ]
    assert registry.expected("precision@4", 20, 5, 6) == pytest.approx(5 / 20)


def test_the_score_stage_scores_and_floors_a_registered_measure(
    precision: Measure, tmp_path: Path
) -> None:
    store = Store(tmp_path)
    pools = store.execute(POOLS, from_mapping(FakePoolsConfig, {}, "p"), {}, quiet=True).path
    runs = make_runs(store, pools, {"bm25": {"skill": 2.0}})
    plain = run_score(store, pools, list(runs.values()), metrics=["map"])
    out = run_score(store, pools, list(runs.values()), metrics=["map", "precision"])

    per_query = pd.read_parquet(out / "per_query.parquet")
    assert sorted(per_query["metric"].unique()) == ["map@500", "precision@30"]
    qrels = pd.read_parquet(pools / "qrels.parquet")
    run = pd.read_parquet(runs["bm25"] / "runs.parquet")
    pid = "dataset/test/300/r0"
    theirs = _pytrec(
        qrels[qrels["pool_id"] == pid], run[run["pool_id"] == pid], precision.pytrec_eval_name(30)
    )
    got = per_query[(per_query["pool_id"] == pid) & (per_query["metric"] == "precision@30")]
    assert len(got) == len(theirs) == 12
    for r in got.itertuples(index=False):
        assert r.value == pytest.approx(theirs[r.query_id], abs=1e-12)

    # the chance row: the mean over the pool's queries of m/n (k <= n here)
    chance = pd.read_parquet(out / "chance.parquet").set_index(["pool_id", "metric"])["value"]
    members = set(pd.read_parquet(pools / "pools.parquet").query("pool_id == @pid")["paper_id"])
    by_hand = [
        len(set(g["paper_id"]) & (members - {qid})) / len(members - {qid})
        for qid, g in qrels[qrels["pool_id"] == pid].groupby("query_id")
    ]
    assert chance[(pid, "precision@30")] == pytest.approx(sum(by_hand) / 12, abs=1e-15)

    # a measure registered at run time is part of the fingerprint; built-in ones are not
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["identity"]["measures"]) == {"precision"}
    assert json.loads((plain / "manifest.json").read_text())["identity"] == {}


def test_score_config_refuses_an_unknown_measure_in_one_line() -> None:
    with pytest.raises(ConfigError) as err:
        from_mapping(ScoreConfig, {"pools": "x", "runs": ["x"], "metrics": ["precision"]}, "s")
    assert str(err.value) == (
        "score.metrics: unknown measure 'precision'; valid: map, ndcg, recall"
    )


def test_the_registry_refuses_a_duplicate_and_is_restored_after_a_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert registry.kinds() == registry.PAPER_KINDS  # the fixture above left nothing behind
    assert registry.MEASURES.register(registry.MAP) is registry.MAP  # a module imported twice
    with pytest.raises(ConfigError, match="measure 'map' is registered already"):
        registry.MEASURES.register(Measure("map", "AP", "depth", "map", "map_cut_{k}", order=3))
    with pytest.raises(ConfigError, match="lower-case"):
        registry.MEASURES.register(Measure("P@k", "P", "k", "precision", "P_{k}", order=3))
