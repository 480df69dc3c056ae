"""Per-query values of the registered measures agree with pytrec_eval (trec_eval), an
independent implementation.

Both implementations are given the run's rank order as scores that fall strictly with rank
(``-rank``), so neither applies its own tie rule; the ranks themselves come from
``rank_candidates`` on scores with ties (broken by paper_id ascending).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import pytrec_eval

from mdcr.core.errors import InputDataError
from mdcr.index.runs import rank_candidates
from mdcr.measures.compute import score_pool
from mdcr.measures.registry import label as metric_label
from mdcr.measures.registry import names as metric_names
from mdcr.measures.registry import parse

pytestmark = pytest.mark.usefixtures("ranx_ready")


def _trec_measure(metric: str) -> str:
    """pytrec_eval's name of a stored name, as the registry declares it."""
    measure, k = parse(metric)
    return measure.pytrec_eval_name(k)


def _pytrec(qrels: pd.DataFrame, run: pd.DataFrame, metrics: list[str], depth: int) -> dict:
    q: dict[str, dict[str, int]] = {}
    for r in qrels.itertuples(index=False):
        q.setdefault(r.query_id, {})[r.paper_id] = int(r.relevance)
    rr: dict[str, dict[str, float]] = {}
    for r in run[run["rank"] <= depth].itertuples(index=False):
        rr.setdefault(r.query_id, {})[r.paper_id] = -float(r.rank)
    measures = {_trec_measure(m) for m in metrics}
    return pytrec_eval.RelevanceEvaluator(q, measures).evaluate(rr)


def _ranked_run(query_scores: dict[str, dict[str, float]], k: int) -> pd.DataFrame:
    rows = []
    for qid, docs in query_scores.items():
        ids, _ = rank_candidates(np.array(list(docs)), np.array(list(docs.values())), k)
        rows += [(qid, pid, i + 1) for i, pid in enumerate(ids)]
    return pd.DataFrame(rows, columns=["query_id", "paper_id", "rank"])


def _check_against_pytrec(
    qrels: pd.DataFrame, run: pd.DataFrame, metrics: list[str], depth: int
) -> pd.DataFrame:
    ours = score_pool(qrels, run, metrics, depth)
    theirs = _pytrec(qrels, run, metrics, depth)
    all_queries = set(qrels["query_id"])
    assert set(ours["query_id"]) == all_queries
    assert len(ours) == len(all_queries) * len(metrics)
    for r in ours.itertuples(index=False):
        # trec_eval drops queries without results; the rule here is 0
        found = r.query_id in theirs
        expected = theirs[r.query_id][_trec_measure(r.metric)] if found else 0.0
        assert r.value == pytest.approx(expected, abs=1e-6), (r.query_id, r.metric)
    return ours


def test_handmade_run_with_ties_and_missing_queries() -> None:
    qrels = pd.DataFrame(
        [
            ("q1", "a", 1),
            ("q1", "c", 1),
            ("q1", "f", 1),
            ("q2", "b", 1),
            ("q2", "z", 1),  # z is never retrieved
            ("q3", "a", 1),  # q3 is missing from the run
            ("q4", "d", 1),
            ("q4", "e", 1),
        ],
        columns=["query_id", "paper_id", "relevance"],
    )
    scores = {
        # a, b, c tie: rank order a, b, c by paper_id; then d; e and f tie -> e, f
        "q1": {"c": 0.9, "a": 0.9, "b": 0.9, "d": 0.5, "f": 0.1, "e": 0.1},
        "q2": {"a": 1.0, "b": 1.0, "c": 0.2},
        "q4": {"x": 3.0, "y": 2.0, "w": 2.0, "d": 1.0},  # only one of two positives found
        "q9": {"a": 1.0},  # a run query without qrels is not scored
    }
    run = _ranked_run(scores, 500)
    metrics = metric_names(["map", "ndcg", "recall"], 500, 2)
    ours = _check_against_pytrec(qrels, run, metrics, 500)
    v = ours.set_index(["query_id", "metric"])["value"]
    # by hand: q1 ranking a b c d e f, positives a c f at ranks 1, 3, 6
    assert v[("q1", "map@500")] == pytest.approx((1 / 1 + 2 / 3 + 3 / 6) / 3, abs=1e-12)
    assert v[("q1", "recall@2")] == pytest.approx(1 / 3, abs=1e-12)
    # q2 ranking a b c: positive b at rank 2, z missing -> AP = (1/2)/2
    assert v[("q2", "map@500")] == pytest.approx(0.25, abs=1e-12)
    assert (v.loc["q3"] == 0).all()
    assert "q9" not in set(ours["query_id"])


def test_rank_order_wins_over_scores() -> None:
    """The run's rank is what counts, even when the stored scores would order otherwise."""
    qrels = pd.DataFrame({"query_id": ["q"], "paper_id": ["b"], "relevance": [1]})
    run = pd.DataFrame(
        {"query_id": ["q", "q"], "paper_id": ["a", "b"], "rank": [2, 1], "score": [5.0, 1.0]}
    )
    ours = score_pool(qrels, run, ["map@500"], 500)
    assert ours["value"].tolist() == [1.0]


def test_random_runs_agree_with_pytrec_eval_at_depth() -> None:
    rng = np.random.default_rng(7)
    qrels_rows, scores = [], {}
    for i in range(40):
        qid = f"q{i:02d}"
        docs = [f"d{j:03d}" for j in rng.choice(300, 120, replace=False)]
        # coarse scores: many ties, broken by paper_id
        scores[qid] = {
            d: float(s) for d, s in zip(docs, rng.integers(0, 15, len(docs)), strict=True)
        }
        pool = [f"d{j:03d}" for j in range(300)]
        for d in rng.choice(pool, int(rng.integers(1, 12)), replace=False):
            qrels_rows.append((qid, str(d), 1))
    qrels_rows.append(("q_missing", "d001", 1))
    qrels = pd.DataFrame(qrels_rows, columns=["query_id", "paper_id", "relevance"])
    run = _ranked_run(scores, 100)
    for depth, k in ((100, 30), (40, 10)):
        metrics = metric_names(["map", "ndcg", "recall"], depth, k)
        ours = _check_against_pytrec(qrels, run, metrics, depth)
        assert (ours.loc[ours["query_id"] == "q_missing", "value"] == 0).all()
        # means over every qrels query, missing ones as 0
        theirs = _pytrec(qrels, run, metrics, depth)
        for m in metrics:
            total = sum(v[_trec_measure(m)] for v in theirs.values())
            mean = ours.loc[ours["metric"] == m, "value"].mean()
            assert mean == pytest.approx(total / qrels["query_id"].nunique(), abs=1e-9)


def test_graded_relevance_ndcg_agrees() -> None:
    qrels = pd.DataFrame(
        [("q", "a", 1), ("q", "b", 3), ("q", "c", 2), ("q", "d", 0)],
        columns=["query_id", "paper_id", "relevance"],
    )
    run = pd.DataFrame(
        {"query_id": ["q"] * 4, "paper_id": ["d", "a", "c", "b"], "rank": [1, 2, 3, 4]}
    )
    _check_against_pytrec(qrels, run, ["ndcg@500", "map@500", "recall@30"], 500)


def test_bad_runs_are_refused() -> None:
    qrels = pd.DataFrame({"query_id": ["q"], "paper_id": ["a"], "relevance": [1]})
    dup = pd.DataFrame({"query_id": ["q", "q"], "paper_id": ["a", "a"], "rank": [1, 2]})
    with pytest.raises(InputDataError, match="twice"):
        score_pool(qrels, dup, ["map@500"], 500)
    same_rank = pd.DataFrame({"query_id": ["q", "q"], "paper_id": ["a", "b"], "rank": [1, 1]})
    with pytest.raises(InputDataError, match="share a rank"):
        score_pool(qrels, same_rank, ["map@500"], 500)


def test_metric_names_and_labels() -> None:
    assert metric_names(["map", "ndcg", "recall"], 500, 30) == ["map@500", "ndcg@500", "recall@30"]
    assert [metric_label(m) for m in ("map@500", "ndcg@500", "recall@30")] == [
        "MAP",
        "nDCG",
        "R@30",
    ]
