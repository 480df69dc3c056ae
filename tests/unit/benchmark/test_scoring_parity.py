"""MDCR scoring equals the original scorer's semantics, checked against pytrec_eval.

The reference (tests/unit/benchmark/reference.py) is written from the original scorer's
description; ranx computes ours, pytrec_eval-terrier the reference.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mdcr.benchmark.formats import read_release_json, score_key, scores_for
from mdcr.benchmark.scoring import (
    ALL,
    field_means,
    macro_means,
    official_round,
    per_query_metrics,
)
from tests.unit.benchmark.reference import original_scorer

pytrec_eval = pytest.importorskip("pytrec_eval")

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "mdcr_format_fixture"


def reference(benchmark: dict, scores: dict[str, float]) -> tuple[dict, dict, dict]:
    return original_scorer(benchmark, scores)


def fixture_scores(bench: pd.DataFrame, seed: int, ties: bool) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    pairs = sorted(
        {score_key(q, p) for q, p in zip(bench["query_id"], bench["paper_id"], strict=True)}
    )
    if ties:  # few distinct values: many ties inside a query
        vals = rng.integers(0, 3, size=len(pairs)).astype(float)
    else:
        vals = rng.permutation(len(pairs)).astype(float) / len(pairs)
    return dict(zip(pairs, vals.tolist(), strict=True))


def ours(bench: pd.DataFrame, scores: dict[str, float], ties: str):
    scored = scores_for(bench, scores, "test")
    pq_ = per_query_metrics(bench, scored, ties=ties, by_type=False)  # type: ignore[arg-type]
    pf = field_means(pq_.assign(retriever="x"))
    return pf, macro_means(pf)


METRIC = {"map": "map", "ndcg": "ndcg", "recall@5": "recall_5"}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_with_pytrec_eval_distinct_scores(seed: int) -> None:
    raw_json = json.loads((FIXTURE / "mdcr_test.json").read_text())
    bench = read_release_json(FIXTURE / "mdcr_test.json")
    scores = fixture_scores(bench, seed, ties=False)
    ref_round, ref_avg, ref_raw = reference(raw_json, scores)
    pf, _mc = ours(bench, scores, "paper_id")
    for r in pf.itertuples():
        assert r.value == pytest.approx(ref_raw[r.field][METRIC[r.metric]], abs=1e-12)
    fields, avg = official_round(pf)
    for r in fields.itertuples():
        assert r.value == ref_round[r.field][METRIC[r.metric]]
    for r in avg.itertuples():
        assert r.value == ref_avg[METRIC[r.metric]]
    assert set(pf["field"]) == set(raw_json)
    assert (pf["n_queries"] == pf["field"].map(lambda f: len(raw_json[f]))).all()


def test_parity_with_ties_needs_trec_eval_rule() -> None:
    raw_json = json.loads((FIXTURE / "mdcr_test.json").read_text())
    bench = read_release_json(FIXTURE / "mdcr_test.json")
    scores = fixture_scores(bench, 5, ties=True)
    _, _, ref_raw = reference(raw_json, scores)
    pf, _ = ours(bench, scores, "trec_eval")
    for r in pf.itertuples():
        assert r.value == pytest.approx(ref_raw[r.field][METRIC[r.metric]], abs=1e-12)
    # The project's own rule (paper_id ascending) orders ties differently: some value moves.
    pf2, _ = ours(bench, scores, "paper_id")
    diffs = [abs(r.value - ref_raw[r.field][METRIC[r.metric]]) for r in pf2.itertuples()]
    assert max(diffs) > 1e-6


def test_duplicates_count_once_and_positive_wins() -> None:
    bench = read_release_json(FIXTURE / "mdcr_test.json")
    q5 = bench[bench["query_id"] == "1005"]
    assert (q5["paper_id"] == "3041").sum() == 1
    assert q5.loc[q5["paper_id"] == "3041", "candidate_type"].item() == "true"
    q4 = bench[bench["query_id"] == "1004"]
    assert q4.loc[q4["paper_id"] == "3018", "candidate_type"].item() == "bm25"
    sizes = bench.groupby("query_id").size()
    assert sizes["1005"] == 14 and sizes["1004"] == 12 and sizes["1001"] == 15


def test_perfect_and_worst_rankings() -> None:
    bench = read_release_json(FIXTURE / "mdcr_test.json")
    pos = bench["candidate_type"] == "true"
    scored = bench[["split", "field", "query_id", "paper_id"]].assign(score=pos.astype(float))
    pq_ = per_query_metrics(bench, scored, by_type=True)
    full = pq_[pq_["subset"] == ALL]
    assert (full["value"] == 1.0).all()
    worst = per_query_metrics(bench, scored.assign(score=-scored["score"]), by_type=False)
    r5 = worst[worst["metric"] == "recall@5"].set_index("query_id")["value"]
    assert (r5 == 0.0).all()
    # Per type: each subset holds the positives plus that type's negatives.
    assert set(pq_["subset"]) == {ALL, "bm25", "scincl", "specter", "graph", "most_cited", "random"}
    counts = defaultdict(int)
    for r in pq_.itertuples():
        counts[(r.subset, r.metric)] += 1
    assert all(v == 7 for v in counts.values())
