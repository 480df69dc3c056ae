"""An independent reference for MDCR scoring, written from the original scorer's description
(``evaluate.py`` of github.com/zoranmedic/mdcr): per field, pytrec_eval ``map``, ``ndcg``
and ``recall_5`` over binary qrels built from every candidate list ("true" read last, so a
positive stays positive); the mean over queries x100 rounded to 4 decimals; then the plain
mean of the rounded field values, rounded to 4 decimals."""

from __future__ import annotations

import numpy as np

TYPES_AS_ORIGINAL = ("bm25", "graph", "most_cited", "random", "scincl", "specter", "true")
MEASURES = ("map", "ndcg", "recall_5")


def original_scorer(benchmark: dict, scores: dict[str, float]) -> tuple[dict, dict, dict]:
    """(per-field rounded, average rounded, per-field unrounded)."""
    import pytrec_eval

    rounded: dict[str, dict[str, float]] = {}
    raw: dict[str, dict[str, float]] = {}
    for field, queries in benchmark.items():
        qrel: dict[str, dict[str, int]] = {}
        for qid, lists in queries.items():
            qrel[qid] = {}
            for t in TYPES_AS_ORIGINAL:
                for cid in lists.get(t, []):
                    qrel[qid][cid] = 1 if t == "true" else 0
        run = {q: {c: scores[f"{q}_{c}"] for c in cands} for q, cands in qrel.items()}
        res = pytrec_eval.RelevanceEvaluator(qrel, {"map", "ndcg", "recall"}).evaluate(run)
        raw[field], rounded[field] = {}, {}
        for m in MEASURES:
            v = pytrec_eval.compute_aggregated_measure(m, [r[m] for r in res.values()])
            raw[field][m] = v
            rounded[field][m] = float(np.round(100 * v, 4))
    avg = {m: float(np.round(np.mean([rounded[f][m] for f in rounded]), 4)) for m in MEASURES}
    return rounded, avg, raw
