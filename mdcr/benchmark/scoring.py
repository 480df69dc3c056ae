"""MDCR benchmark scoring with the original scorer's semantics: per-query MAP, nDCG and R@5.

The original scorer (``evaluate.py`` of github.com/zoranmedic/mdcr) does, per field:
binary qrels from the ``"true"`` lists (every other candidate is judged 0); a run with the
model's score for every candidate of the query; pytrec_eval's ``map``, ``ndcg`` (no
cut-off: the whole candidate list) and ``recall_5``; the mean over the field's queries,
x100, rounded to 4 decimals; then the plain mean of the field values over the fields,
rounded to 4 decimals. This module computes the same numbers with ranx:

- Ranks come from the scores with trec_eval's order (``ties="trec_eval"``, the default):
  score descending, then paper id *descending* as a byte string (``strcmp``), which is how
  trec_eval, hence pytrec_eval and the original scorer, order a query's results. So even
  tied scores give exactly the original's numbers. ``ties="paper_id"`` breaks ties by
  paper id ascending instead (the project's rule for runs). Either way ranx is fed
  ``-rank``, a value falling strictly with rank, so it applies no tie rule of its own.
- A query whose ``true`` list is empty (or missing) but has candidates scores 0 in every
  metric and counts in its field's mean, as in the original: pytrec_eval evaluates every
  query of the qrels, and one whose judgments are all 0 gets 0. Such queries are counted
  (:func:`mdcr.scoring.mdcr_tables.queries_without_positives`) and reported. A query
  without any candidate has no row in the internal form and is not scored (pytrec_eval
  skips it too).
- :func:`mdcr.scoring.mdcr_tables.official_round` reproduces the original's rounding (per
  field, then the mean of the rounded field values); unrounded values are kept in the
  outputs too.

Candidate-type analysis (Table 4, paper section 4.4): for each negative type, every query
is scored on its positives plus only that type's negatives (the same scores, so the same
relative order), then aggregated exactly like the full benchmark (field means, then the
plain mean over fields).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from mdcr.benchmark.formats import POSITIVE
from mdcr.contracts.paper import MDCR_RECALL_K
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.measures import registry as measures
from mdcr.scoring.mdcr_tables import ALL, MDCR_METRICS, type_order

Ties = Literal["paper_id", "trec_eval"]
TIES: tuple[str, ...] = ("paper_id", "trec_eval")
_SEP = "\x1f"


def rank_scores(scored: pd.DataFrame, ties: Ties = "trec_eval") -> pd.DataFrame:
    """Add a 1-based ``rank`` per (split, field, query) from ``score`` (higher is better).

    Ties: ``trec_eval`` orders tied scores by paper id descending (Python's string order,
    which is the byte order trec_eval's ``strcmp`` uses on UTF-8 ids); ``paper_id``
    ascending."""
    if ties not in TIES:
        raise ConfigError(f"ties: {ties!r} is not valid; valid options: {', '.join(TIES)}")
    bad = ~np.isfinite(scored["score"].to_numpy(dtype=np.float64))
    if bad.any():
        r = scored[bad].iloc[0]
        raise InputDataError(
            f"score of ({r['query_id']}, {r['paper_id']}) is {r['score']}; scores must be "
            "finite numbers"
        )
    keys = ["split", "field", "query_id"]
    out = scored.sort_values(
        [*keys, "score", "paper_id"],
        ascending=[True, True, True, False, ties == "paper_id"],
        kind="stable",
    ).reset_index(drop=True)
    out["rank"] = out.groupby(keys, sort=False).cumcount().astype(np.int64) + 1
    return out


def _labelled(bench: pd.DataFrame, ranked: pd.DataFrame) -> pd.DataFrame:
    """The ranked candidates with their type and label; every benchmark pair must be scored."""
    keys = ["split", "field", "query_id", "paper_id"]
    merged = bench[[*keys, "candidate_type"]].merge(
        ranked[[*keys, "score", "rank"]], on=keys, how="left", validate="one_to_one"
    )
    if merged["rank"].isna().any():
        r = merged[merged["rank"].isna()].iloc[0]
        raise InputDataError(
            f"no score for candidate '{r['paper_id']}' of query '{r['query_id']}' "
            f"({r['field']}, {r['split']}); score every pair of the benchmark"
        )
    merged["relevance"] = (merged["candidate_type"] == POSITIVE).astype(np.int64)
    merged["rank"] = merged["rank"].astype(np.int64)
    return merged


def _metrics_of(lists: pd.DataFrame, subset: str) -> pd.DataFrame:
    """Per-query metrics of ranked candidate lists (``rank`` already within the list)."""
    from mdcr.measures.compute import score_pool

    key = lists["split"] + _SEP + lists["field"] + _SEP + lists["query_id"]
    lists = lists.assign(qkey=key)
    depth = int(lists.groupby("qkey").size().max())  # the longest list: the whole of each
    names = measures.names(measures.PAPER_KINDS, depth, MDCR_RECALL_K)
    pos = lists[lists["relevance"] > 0]
    qrels = pd.DataFrame(
        {"query_id": pos["qkey"], "paper_id": pos["paper_id"], "relevance": pos["relevance"]}
    )
    run = pd.DataFrame(
        {"query_id": lists["qkey"], "paper_id": lists["paper_id"], "rank": lists["rank"]}
    )
    if len(qrels):
        vals = score_pool(qrels, run, names, depth, where=f"benchmark ({subset})")
    else:
        vals = pd.DataFrame({"query_id": [], "metric": [], "value": []})
    vals["metric"] = vals["metric"].map(dict(zip(names, MDCR_METRICS, strict=True)))
    # A query without positives is not in ranx's qrels: it scores 0, as pytrec_eval scores
    # a query whose judgments are all 0 (and counts it in the mean).
    all_q = sorted(set(lists["qkey"]))
    no_pos = sorted(set(all_q) - set(qrels["query_id"]))
    if no_pos:
        zeros = pd.DataFrame(
            {
                "query_id": np.repeat(no_pos, len(MDCR_METRICS)),
                "metric": np.tile(MDCR_METRICS, len(no_pos)),
                "value": 0.0,
            }
        )
        vals = pd.concat([vals, zeros], ignore_index=True)
    parts = vals["query_id"].str.split(_SEP, n=2, expand=True, regex=False)
    return pd.DataFrame(
        {
            "split": parts[0],
            "field": parts[1],
            "query_id": parts[2],
            "subset": subset,
            "metric": vals["metric"],
            "value": vals["value"].astype(np.float64),
        }
    )


def per_query_metrics(
    bench: pd.DataFrame,
    scored: pd.DataFrame,
    *,
    ties: Ties = "trec_eval",
    by_type: bool = True,
) -> pd.DataFrame:
    """MAP, nDCG and R@5 of every benchmark query: on its full list (subset ``all``) and,
    with ``by_type``, on its positives plus each negative type alone (subset = the type).

    ``bench``: the internal benchmark rows; ``scored``: split, field, query_id, paper_id,
    score for every benchmark pair. Returns split, field, query_id, subset, metric, value.
    """
    labelled = _labelled(bench, rank_scores(scored, ties))
    frames = [_metrics_of(labelled, ALL)]
    if by_type:
        negatives = [t for t in type_order(labelled["candidate_type"].unique()) if t != POSITIVE]
        for t in negatives:
            sub = labelled[labelled["candidate_type"].isin((POSITIVE, t))].copy()
            sub = sub.sort_values(["split", "field", "query_id", "rank"], kind="stable")
            sub["rank"] = sub.groupby(["split", "field", "query_id"], sort=False).cumcount() + 1
            frames.append(_metrics_of(sub, t))
    out = pd.concat(frames, ignore_index=True)
    return out.sort_values(["split", "subset", "field", "query_id", "metric"], kind="stable")
