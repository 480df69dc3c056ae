"""Per-query values of registered measures for one pool's run, computed with ranx.

Measure names carry their cut-off (``map@500``, ``ndcg@500``, ``recall@30``), so that
stored values say what they are; :mod:`mdcr.measures.registry` says how ranx names each.
Two rules of docs/architecture.md §7 (ties, every query scored) and one of exact ids
are enforced here:

- The order that counts is the run's ``rank`` (ties were already broken by score desc,
  paper_id asc). ranx sorts by score, so it is fed ``-rank`` as the score: a value that
  falls strictly with rank, which leaves ranx no ties to break its own way.
- Every query in the qrels is scored; a query the run does not retrieve anything for
  scores 0. Run queries that have no qrels are not scored.
- Document ids are given to ranx as exact integer codes (ranx itself would hash the
  strings into float64, where distinct hashes can collide).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mdcr.core.errors import InputDataError, require
from mdcr.measures.registry import parse

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


def _ranx_evaluate(qrels: list[np.ndarray], run: list[np.ndarray], metrics: list[str]) -> dict:
    """ranx.evaluate on numba typed lists of (doc code, score) arrays, per query."""
    import numpy as np

    require("ranx")
    import numba
    from numba.core.errors import NumbaTypeSafetyWarning
    from numba.typed import List as TypedList
    from ranx import evaluate

    with warnings.catch_warnings():
        # ranx's prange index is uint64; the cast it warns about is harmless.
        warnings.simplefilter("ignore", NumbaTypeSafetyWarning)
        scores = evaluate(
            TypedList(qrels),
            TypedList(run),
            # ranx 0.3.21 fails on a single metric (it looks the result up by the name
            # without its cut-off); a repeated name returns the dict of every metric.
            metrics if len(metrics) > 1 else metrics * 2,
            return_mean=False,
            threads=int(numba.config.NUMBA_NUM_THREADS),  # type: ignore[attr-defined]
            save_results_in_run=False,
        )
    return {m: np.asarray(v, dtype=np.float64) for m, v in scores.items()}


def score_pool(
    qrels: pd.DataFrame,
    run: pd.DataFrame,
    metrics: Sequence[str],
    depth: int,
    where: str = "run",
) -> pd.DataFrame:
    """Per-query values of one pool: columns query_id, metric, value.

    ``qrels`` has query_id, paper_id, relevance; ``run`` has query_id, paper_id, rank;
    ``metrics`` are stored names of registered measures (a name without a cut-off is
    computed at ``depth``). Every qrels query gets a row per metric (0 when the run has
    nothing for it); only the top ``depth`` ranks of the run count.
    """
    import numpy as np
    import pandas as pd

    metrics = list(metrics)
    ranx_names = {}
    for name in metrics:
        measure, k = parse(name)
        ranx_names[name] = measure.ranx_name(depth if k is None else k)
    qrels = qrels.assign(
        query_id=qrels["query_id"].astype(str), paper_id=qrels["paper_id"].astype(str)
    )
    run = run.assign(query_id=run["query_id"].astype(str), paper_id=run["paper_id"].astype(str))
    queries = np.array(sorted(qrels["query_id"].unique()), dtype=object)
    if len(queries) == 0:
        return pd.DataFrame({"query_id": [], "metric": [], "value": []})
    run = run.loc[run["rank"] <= depth, ["query_id", "paper_id", "rank"]]
    run = run[run["query_id"].isin(set(queries))]
    if run.duplicated(["query_id", "paper_id"]).any():
        raise InputDataError(
            f"{where}: a paper appears twice in one query's ranking; re-run search"
        )
    run = run.sort_values(["query_id", "rank"], kind="stable")
    if run.duplicated(["query_id", "rank"]).any():
        raise InputDataError(f"{where}: two papers share a rank in one query; re-run search")
    q = qrels[["query_id", "paper_id", "relevance"]].sort_values(
        ["query_id", "relevance"], ascending=[True, False], kind="stable"
    )
    codes, _ = pd.factorize(
        np.concatenate(
            [q["paper_id"].to_numpy(dtype=object), run["paper_id"].to_numpy(dtype=object)]
        )
    )
    q_codes = codes[: len(q)].astype(np.float64)
    r_codes = codes[len(q) :].astype(np.float64)

    q_pos = np.searchsorted(queries, q["query_id"].to_numpy(dtype=object))
    q_bounds = np.searchsorted(q_pos, np.arange(len(queries) + 1))
    q_rel = q["relevance"].to_numpy(dtype=np.float64)
    r_pos = np.searchsorted(queries, run["query_id"].to_numpy(dtype=object))
    r_bounds = np.searchsorted(r_pos, np.arange(len(queries) + 1))
    r_score = -run["rank"].to_numpy(dtype=np.float64)

    values = {m: np.zeros(len(queries), dtype=np.float64) for m in metrics}
    has_run = np.flatnonzero(np.diff(r_bounds) > 0)
    if len(has_run):
        qrel_arrays = [
            np.column_stack(
                (q_codes[q_bounds[i] : q_bounds[i + 1]], q_rel[q_bounds[i] : q_bounds[i + 1]])
            )
            for i in has_run
        ]
        run_arrays = [
            np.column_stack(
                (r_codes[r_bounds[i] : r_bounds[i + 1]], r_score[r_bounds[i] : r_bounds[i + 1]])
            )
            for i in has_run
        ]
        scored = _ranx_evaluate(qrel_arrays, run_arrays, list(dict.fromkeys(ranx_names.values())))
        for m in metrics:
            values[m][has_run] = scored[ranx_names[m]]
    return pd.DataFrame(
        {
            "query_id": np.tile(queries, len(metrics)).astype(str),
            "metric": np.repeat(metrics, len(queries)),
            "value": np.concatenate([values[m] for m in metrics]),
        }
    )
