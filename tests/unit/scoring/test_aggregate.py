"""Aggregation over queries, repetitions and fields, checked by hand on a tiny case."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from mdcr.scoring.aggregate import macro_over, over_reps, per_pool_means, query_means

META = pd.DataFrame(
    [
        ("d/200/r0", "dataset", "test", None, 200, 0),
        ("d/200/r1", "dataset", "test", None, 200, 1),
        ("f/CS/r0", "field", "test", "Computer Science", 100, 0),
        ("f/CS/r1", "field", "test", "Computer Science", 100, 1),
        ("f/Art/r0", "field", "test", "Art", 100, 0),
    ],
    columns=["pool_id", "setup", "split", "field", "size", "rep"],
)


def _per_query() -> pd.DataFrame:
    rows = []
    vals = {
        # pool: (q1, q2) values for retriever A
        "d/200/r0": (0.2, 0.4),  # mean 0.3
        "d/200/r1": (0.5, 0.7),  # mean 0.6
        "f/CS/r0": (0.1, 0.3),  # mean 0.2
        "f/CS/r1": (0.3, 0.5),  # mean 0.4
        "f/Art/r0": (0.9, 0.7),  # mean 0.8
    }
    for pool, (a, b) in vals.items():
        prefix = "f" if pool.startswith("f/") else "d"
        rows += [("A", pool, f"{prefix}q1", "map@500", a), ("A", pool, f"{prefix}q2", "map@500", b)]
    return pd.DataFrame(rows, columns=["retriever", "pool_id", "query_id", "metric", "value"])


def test_per_pool_and_over_reps_by_hand() -> None:
    pp = per_pool_means(_per_query(), META)
    got = pp.set_index("pool_id")["value"]
    assert got["d/200/r0"] == pytest.approx(0.3)
    assert got["d/200/r1"] == pytest.approx(0.6)
    assert (pp["n_queries"] == 2).all()
    agg = over_reps(pp)
    ds = agg[agg["setup"] == "dataset"].iloc[0]
    assert ds["mean"] == pytest.approx(0.45)
    # sample std of (0.3, 0.6): |0.3 - 0.6| / sqrt(2)
    assert ds["std"] == pytest.approx(0.3 / math.sqrt(2))
    assert ds["n_reps"] == 2
    cs = agg[agg["field"] == "Computer Science"].iloc[0]
    assert cs["mean"] == pytest.approx(0.3)
    art = agg[agg["field"] == "Art"].iloc[0]
    assert art["mean"] == pytest.approx(0.8)
    assert math.isnan(art["std"])  # one repetition: undefined
    # macro AVG over fields = (0.3 + 0.8) / 2, not the pooled mean of the three pools
    fields = agg[agg["setup"] == "field"]
    avg = macro_over(fields, "field", ["retriever"])
    assert avg["mean"].iloc[0] == pytest.approx(0.55)
    assert bool(avg["complete"].iloc[0])


def test_macro_average_flags_missing_fields() -> None:
    t = pd.DataFrame(
        {"retriever": ["A", "A", "B"], "field": ["x", "y", "x"], "mean": [0.2, 0.4, 0.6]}
    )
    avg = macro_over(t, "field", ["retriever"]).set_index("retriever")
    assert avg.loc["A", "mean"] == pytest.approx(0.3)
    assert bool(avg.loc["A", "complete"]) and not bool(avg.loc["B", "complete"])


def test_query_means_average_over_repetitions() -> None:
    qm = query_means(_per_query(), META)
    d = qm[qm["setup"] == "dataset"].set_index("query_id")["value"]
    assert d["dq1"] == pytest.approx((0.2 + 0.5) / 2)
    assert d["dq2"] == pytest.approx((0.4 + 0.7) / 2)
    cs = qm[qm["field"] == "Computer Science"].set_index("query_id")
    assert cs.loc["fq1", "value"] == pytest.approx(0.2)
    assert cs.loc["fq1", "n_reps"] == 2
