"""Aggregation of per-query metric values: per pool, over repetitions, per field, per query.

The levels follow the paper: a pool's value is the mean over its queries; a setup's value
(a pool size, or a field) is the mean over the repetitions of its pools, with the sample
standard deviation (ddof=1; undefined for one repetition); the field-level AVG is the
macro average of the field values. Significance tests pair queries, so a query's value is
its mean over the repetitions of its pools.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

CHANCE_ROW = "expected chance"  # the row of a measure's expectation under a random ranking
POOL_KEYS = ("setup", "split", "field", "size", "rep")
SETUP_KEYS = ("retriever", "setup", "split", "field", "size", "metric")


def per_pool_means(per_query: pd.DataFrame, pool_meta: pd.DataFrame) -> pd.DataFrame:
    """One row per (retriever, pool, metric): the mean over the pool's queries.

    ``per_query``: retriever, pool_id, query_id, metric, value. ``pool_meta``: pool_id plus
    setup, split, field, size, rep. Returns retriever, pool_id, setup, split, field, size,
    rep, metric, value, n_queries.
    """
    grouped = (
        per_query.groupby(["retriever", "pool_id", "metric"], sort=True)["value"]
        .agg(value="mean", n_queries="size")
        .reset_index()
    )
    meta = pool_meta[["pool_id", *POOL_KEYS]].drop_duplicates("pool_id")
    out = grouped.merge(meta, on="pool_id", how="left", validate="many_to_one")
    cols = ["retriever", "pool_id", *POOL_KEYS, "metric", "value", "n_queries"]
    return out[cols]


def over_reps(per_pool: pd.DataFrame, keys: Sequence[str] = SETUP_KEYS) -> pd.DataFrame:
    """Mean and sample std (ddof=1) of pool values over repetitions; columns keys + mean,
    std, n_reps. std is NaN for a single repetition."""
    return (
        per_pool.groupby(list(keys), dropna=False, sort=True)["value"]
        .agg(
            mean="mean",
            std=lambda v: float(np.std(v, ddof=1)) if len(v) > 1 else np.nan,
            n_reps="size",
        )
        .reset_index()
    )


def macro_over(
    table: pd.DataFrame, over: str, keys: Sequence[str], value: str = "mean"
) -> pd.DataFrame:
    """The macro average of ``value`` over the levels of column ``over`` within ``keys``.

    Returns keys + value + n (levels averaged) + complete (True when the group has every
    level of ``over`` that appears anywhere in ``table``; an incomplete average is not
    comparable with a complete one).
    """
    levels = table[over].nunique(dropna=False)
    grouped = table.groupby(list(keys), dropna=False, sort=True)[value]
    out = pd.concat([grouped.mean().rename(value), grouped.size().rename("n")], axis=1)
    out = out.reset_index()
    out["complete"] = out["n"] == levels
    return out


def field_average(
    cells: pd.DataFrame, n_fields: int, chance: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The AVG row of one field-level table (a split, pool size and measure), as the report
    shows it: per retriever the macro average of its field means (``mean`` NaN, ``complete``
    False, for a retriever not scored on every field of the table), ``n`` the fields
    averaged; with ``chance`` (one field's expectation per row), the chance row's AVG last,
    NaN unless each of the ``n_fields`` fields has one.

    ``cells``: retriever, field, mean. Returns retriever, mean, n, complete.
    """
    avg = macro_over(cells, "field", ["retriever"])
    avg.loc[~avg["complete"], "mean"] = np.nan
    out = avg[["retriever", "mean", "n", "complete"]]
    if chance is None or chance.empty:
        return out
    whole = len(chance) == n_fields
    row = pd.DataFrame(
        {
            "retriever": [CHANCE_ROW],
            "mean": [chance["mean"].mean() if whole else np.nan],
            "n": [len(chance)],
            "complete": [whole],
        }
    )
    return pd.concat([out, row], ignore_index=True)


def query_means(
    per_query: pd.DataFrame,
    pool_meta: pd.DataFrame,
    keys: Sequence[str] = ("retriever", "setup", "split", "field", "size", "metric", "query_id"),
) -> pd.DataFrame:
    """A query's value averaged over the repetitions (pools) it was scored in.

    These are the paired units of the significance tests: for a setup (pool size or field)
    the same query ids are scored by every retriever.
    """
    meta = pool_meta[["pool_id", *POOL_KEYS]].drop_duplicates("pool_id")
    joined = per_query.merge(meta, on="pool_id", how="left", validate="many_to_one")
    return (
        joined.groupby(list(keys), dropna=False, sort=True)["value"]
        .agg(value="mean", n_reps="size")
        .reset_index()
    )
