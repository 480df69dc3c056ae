"""MDCR scoring equals the original scorer's semantics, checked against pytrec_eval.

The reference (tests/integration/benchmark/reference.py) is written from the original scorer's
description; ranx computes ours, pytrec_eval-terrier the reference.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mdcr.benchmark.formats import from_release_json, read_release_json, score_key, scores_for
from mdcr.benchmark.scoring import per_query_metrics
from mdcr.scoring.mdcr_tables import ALL, field_means, macro_means, official_round
from tests.integration.benchmark.reference import original_scorer

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


def _agrees(pf: pd.DataFrame, ref_raw: dict, ref_round: dict, ref_avg: dict) -> None:  # type: ignore[type-arg]
    """Per-field means equal the reference's unrounded values, and the printed (rounded)
    per-field and AVG values equal its printout exactly."""
    for r in pf.itertuples():
        assert r.value == pytest.approx(ref_raw[r.field][METRIC[r.metric]], abs=1e-12)
    fields, avg = official_round(pf)
    for r in fields.itertuples():
        assert r.value == ref_round[r.field][METRIC[r.metric]]
    for r in avg.itertuples():
        assert r.value == ref_avg[METRIC[r.metric]]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_with_pytrec_eval_distinct_scores(seed: int) -> None:
    raw_json = json.loads((FIXTURE / "mdcr_test.json").read_text())
    bench = read_release_json(FIXTURE / "mdcr_test.json")
    scores = fixture_scores(bench, seed, ties=False)
    ref_round, ref_avg, ref_raw = reference(raw_json, scores)
    pf, _mc = ours(bench, scores, "paper_id")
    _agrees(pf, ref_raw, ref_round, ref_avg)
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


def test_pytrec_eval_orders_ties_by_docno_descending_and_scores_all_zero_queries_0() -> None:
    """What the original scorer inherits, checked on pytrec_eval itself: tied scores in
    descending docno order compared as strings ('9' before '10'), and a query whose
    judgments are all 0 evaluated (0 in every measure), not skipped."""
    qrel = {"q1": {"9": 1, "10": 0, "100": 0, "8": 0}, "q2": {"a": 0, "b": 0}}
    run = {"q1": dict.fromkeys(("9", "10", "100", "8"), 1.0), "q2": {"a": 0.5, "b": 0.1}}
    res = pytrec_eval.RelevanceEvaluator(qrel, {"map", "ndcg", "recall"}).evaluate(run)
    assert res["q1"]["map"] == 1.0  # '9' ranks first: string order, descending
    assert set(res) == {"q1", "q2"} and res["q2"]["map"] == res["q2"]["ndcg"] == 0.0


def _check_default_equals_reference(raw_json: dict, scores: dict[str, float]) -> None:
    """mdcr's default scoring (no ties argument) equals the original scorer's numbers:
    unrounded per field, and the printed rounding per field and on average."""
    ref_round, ref_avg, ref_raw = reference(raw_json, scores)
    bench = from_release_json(raw_json, "test", "test")
    scored = scores_for(bench, scores, "test")
    pf = field_means(per_query_metrics(bench, scored, by_type=False).assign(retriever="x"))
    assert len(pf) == 3 * len(raw_json)
    _agrees(pf, ref_raw, ref_round, ref_avg)


def test_default_ties_equal_the_original_on_a_score_file_full_of_ties() -> None:
    """Every pair scored the same: the order is trec_eval's alone, and mdcr's default
    gives the original scorer's numbers (paper_id ascending would not)."""
    raw_json = json.loads((FIXTURE / "mdcr_test.json").read_text())
    bench = read_release_json(FIXTURE / "mdcr_test.json")
    keys = {score_key(q, p) for q, p in zip(bench["query_id"], bench["paper_id"], strict=True)}
    tied = dict.fromkeys(sorted(keys), 0.25)
    _check_default_equals_reference(raw_json, tied)
    # Ids of different lengths, where string and numeric order differ.
    small = {"Art": {"q1": {"true": ["9"], "bm25": ["10", "8", "100"]}}}
    flat = dict.fromkeys((f"q1_{c}" for c in ("9", "10", "8", "100")), 1.0)
    _check_default_equals_reference(small, flat)
    bench_small = from_release_json(small, "test", "t")
    ascending = per_query_metrics(
        bench_small, scores_for(bench_small, flat, "t"), ties="paper_id", by_type=False
    )
    assert reference(small, flat)[2]["Art"]["map"] == 1.0  # '9' first, not 100 or 10
    assert ascending.set_index("metric").loc["map", "value"] == 0.25  # '10' '100' '8' '9'


def test_a_query_with_an_empty_true_list_counts_as_the_original_counts_it() -> None:
    """Art: one of two queries has an empty ``true`` list. pytrec_eval (the original
    scorer) scores it 0 and averages over both queries; so does mdcr, and it counts it."""
    from mdcr.scoring.mdcr_tables import queries_without_positives, without_positives_line

    art = {
        "Art": {
            "q1": {"true": ["a", "b"], "bm25": ["c", "d", "e"]},
            "q2": {"true": [], "bm25": ["f", "g"], "random": ["h"]},
        },
        "Biology": {"q3": {"true": ["x"], "bm25": ["y"]}, "q4": {"bm25": ["z"]}},
    }
    scores = {"q1_a": 0.9, "q1_b": 0.2, "q1_c": 0.5, "q1_d": 0.1, "q1_e": 0.0}
    scores |= {"q2_f": 0.3, "q2_g": 0.2, "q2_h": 0.1, "q3_x": 0.4, "q3_y": 0.6, "q4_z": 0.0}
    _check_default_equals_reference(art, scores)
    ref_raw = reference(art, scores)[2]
    assert ref_raw["Art"]["map"] == pytest.approx((1 + 2 / 3) / 2 / 2)  # q2 counts, as 0
    bench = from_release_json(art, "test", "t")
    empty = queries_without_positives(bench)
    assert empty.to_dict("records") == [
        {"split": "test", "field": "Art", "n": 1},
        {"split": "test", "field": "Biology", "n": 1},  # a missing list is an empty one
    ]
    line = without_positives_line(empty, "test")
    assert line.startswith("2 queries have an empty `true` list (Art: 1, Biology: 1)")
    assert without_positives_line(empty, "val") == ""
