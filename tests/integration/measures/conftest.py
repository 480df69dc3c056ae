"""One ranx warm-up per session: numba compiles ranx's measures on first use (seconds)."""

from __future__ import annotations

import pandas as pd
import pytest


def warm_up_ranx() -> None:
    """Compile (or load from the numba cache) ranx's MAP, nDCG and recall."""
    from mdcr.measures.compute import score_pool

    qrels = pd.DataFrame({"query_id": ["q"] * 2, "paper_id": ["a", "b"], "relevance": [1, 1]})
    run = pd.DataFrame({"query_id": ["q"] * 3, "paper_id": ["a", "x", "b"], "rank": [1, 2, 3]})
    score_pool(qrels, run, ["map@500", "ndcg@500", "recall@30"], 500)


@pytest.fixture(scope="session")
def ranx_ready() -> None:
    warm_up_ranx()
