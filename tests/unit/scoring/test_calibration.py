"""Calibration by simulation (docs/scoring.md, "Calibration"): on the designs mdcr has, do
the 95% intervals cover the truth, do the tied groups separate no more often than α when
nothing differs, and does a difference at the printed MDE get found as often as stated?

The data sets are drawn from real per-query values (the demo's: tests/data/demo_per_query),
as Urbano, Lima & Hanjalic (SIGIR 2019) simulate from real evaluation data with the truth
known: a population of real queries (each with its values in every repetition, and every
retriever's), whose mean is the truth, sampled with replacement. Seeded and vectorised:
1,000 data sets per figure, each interval with 1,000 resamples (the report draws 2,000;
coverage barely moves). With 1,000 data sets a coverage is known to about ±1.4% (two
standard errors); each test asserts the figure docs/scoring.md states, within that.
``python -m tests.unit.scoring.test_calibration`` prints every figure.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd

from mdcr.scoring.intervals import bootstrap_intervals, paired_test_power
from mdcr.scoring.significance import fisher_p_values, holm

DATA = Path(__file__).resolve().parents[2] / "data" / "demo_per_query" / "per_query.csv"
DATA_SETS = 1000
RESAMPLES = 1000
CLOSE = ["bm25", "minilm", "bm25+minilm"]  # the demo's retrievers of similar quality
ALPHA = 0.05


def _data() -> pd.DataFrame:
    return pd.read_csv(DATA, keep_default_na=False, dtype={"query_id": str})


def _queries(setup: str, metric: str, retrievers: list[str], size: int | None = None):
    """Per (field, query): each retriever's mean over the repetitions (columns)."""
    d = _data()
    d = d[(d["setup"] == setup) & (d["metric"] == metric) & d["retriever"].isin(retrievers)]
    if size is not None:
        d = d[d["size"] == size]
    wide = d.pivot_table(
        index=["field", "query_id", "rep"], columns="retriever", values="value", aggfunc="first"
    )
    return wide[retrievers].groupby(level=["field", "query_id"]).mean()


def _coverage(populations: list[np.ndarray], sizes: list[int], seed: int) -> float:
    """The share of data sets whose 95% BCa interval of the stratified mean (strata weighted
    equally) holds the populations' stratified mean."""
    rng = np.random.default_rng(seed)
    draws = [
        p[rng.integers(0, len(p), (DATA_SETS, n))] for p, n in zip(populations, sizes, strict=True)
    ]
    truth = float(np.mean([p.mean() for p in populations]))
    out = bootstrap_intervals(draws, resamples=RESAMPLES, seed=42)
    return float(np.mean((out[:, 1] <= truth) & (truth <= out[:, 2])))


# ------------------------------------------------------------------------ the figures


def shared_repetitions(seed: int = 0) -> dict[str, float]:
    """Dataset-level pools of 1600, 20 queries in two repetitions (per-query values
    correlated 0.9): the query resampled with both its values, and each repetition
    resampled apart (the rule before: 40 'queries')."""
    out = {}
    for label, metric, names in (
        ("AP", "map@500", CLOSE),
        ("R@30 of random (68% zeros)", "recall@30", ["random"]),
    ):
        d = _data()
        d = d[(d["setup"] == "dataset") & (d["size"] == 1600) & (d["metric"] == metric)]
        d = d[d["retriever"].isin(names)]
        reps = d.pivot_table(index=["retriever", "query_id"], columns="rep", values="value")
        units = reps.to_numpy()  # a population unit: one query of one retriever, both reps
        rng = np.random.default_rng(seed)
        take = units[rng.integers(0, len(units), (DATA_SETS, 20))]  # (D, 20, 2)
        truth = units.mean()
        now = bootstrap_intervals([take.mean(axis=2)], resamples=RESAMPLES, seed=42)
        apart = bootstrap_intervals([take[:, :, 0], take[:, :, 1]], resamples=RESAMPLES, seed=42)
        for rule, ci in (("query", now), ("repetitions apart", apart)):
            out[f"{label}, {rule}"] = float(np.mean((ci[:, 1] <= truth) & (truth <= ci[:, 2])))
    return out


def few_queries(seed: int = 1) -> dict[str, float]:
    """Field-level cells of 8 and 3 queries, and the field AVG (fields as strata) with the
    demo's 8/8/3/8 queries and with 30 a field; AP of the close retrievers."""
    wide = _queries("field", "map@500", CLOSE)
    units = wide.to_numpy().ravel()  # a unit: one query of one retriever
    fields = [g.to_numpy().ravel() for _, g in wide.groupby(level="field")]
    return {
        "one field, 8 queries": _coverage([units], [8], seed),
        "one field, 3 queries": _coverage([units], [3], seed),
        "AVG, 8/8/3/8 queries": _coverage(fields, [8, 8, 3, 8], seed),
        "AVG, 30 queries a field": _coverage(fields, [30] * 4, seed),
    }


def mdcr_fields(seed: int = 2) -> dict[str, float]:
    """MDCR's fields as strata (the macro average), the demo benchmark's val and test
    queries a field's population: AP, and R@5 of random (64% zeros)."""
    out = {}
    for label, metric, names in (("AP", "map", CLOSE), ("R@5 of random", "recall@5", ["random"])):
        wide = _queries("mdcr", metric, names)
        pops = [g.to_numpy().ravel() for _, g in wide.groupby(level="field")]
        for n in (8, 30):
            out[f"{label}, AVG, {n} queries a field"] = _coverage(pops, [n] * 4, seed)
    return out


def paired_differences(seed: int = 3) -> dict[str, float]:
    """The interval of a paired difference against bm25: dataset-level (20 queries) and
    MDCR's AVG (fields as strata); the close retrievers' differences, skewed and
    heavy-tailed, and with random's, wide and near-symmetric."""
    wide = _queries("dataset", "map@500", [*CLOSE, "random"], size=1600)
    close = np.concatenate([(wide[x] - wide["bm25"]).to_numpy() for x in CLOSE[1:]])
    every = np.concatenate([close, (wide["random"] - wide["bm25"]).to_numpy()])
    mdcr = _queries("mdcr", "map", CLOSE)
    strata = [
        np.concatenate([(g[x] - g["bm25"]).to_numpy() for x in CLOSE[1:]])
        for _, g in mdcr.groupby(level="field")
    ]
    return {
        "dataset, close retrievers − bm25, 20 queries": _coverage([close], [20], seed),
        "dataset, all retrievers − bm25, 20 queries": _coverage([every], [20], seed),
        "MDCR AVG, close retrievers − bm25, 8 a field": _coverage(strata, [8] * 4, seed),
        "MDCR AVG, close retrievers − bm25, 30 a field": _coverage(strata, [30] * 4, seed),
    }


def _exchangeable(population: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """(D, n, k) data sets under no difference: real queries (each with k retrievers'
    values), the retrievers' labels shuffled within each query, so all k share one
    distribution and every pair's true difference is 0."""
    take = population[rng.integers(0, len(population), (DATA_SETS, n))]
    order = np.argsort(rng.random(take.shape), axis=-1)
    return np.take_along_axis(take, order, axis=-1)


def separations(columns: list[np.ndarray], permutations: int) -> dict[str, np.ndarray]:
    """The report's procedure on each data set: Fisher's test for every pair in every
    column, Holm over the table, a retriever separated from its column's best where their
    comparison is significant. Returns per data set: any significant comparison (FWER),
    any retriever separated from the best, and, per column, whether the test can reach
    α/m on its queries."""
    pairs = list(itertools.combinations(range(columns[0].shape[2]), 2))
    p = np.stack(
        [
            fisher_p_values(x[:, :, a] - x[:, :, b], permutations, 42)
            for x in columns
            for a, b in pairs
        ],
        axis=1,
    )
    significant = np.stack([holm(row) for row in p]) <= ALPHA
    separated = np.zeros(len(p), dtype=bool)
    for j, (col, (a, b)) in enumerate(itertools.product(range(len(columns)), pairs)):
        best = columns[col].mean(axis=1).argmax(axis=1)
        separated |= significant[:, j] & ((best == a) | (best == b))
    return {"any": significant.any(axis=1), "separated": separated, "p": p}


def null_separations(seed: int = 4) -> dict[str, float]:
    """The share of data sets in which a retriever is separated from its column's best
    when no retriever differs: the demo's field table (8/8/3/8 queries, AVG over the 27
    pooled; 15 comparisons), a dataset table (two columns of 20 queries; 6), MDCR's
    (four fields of 30 and AVG; 15)."""
    rng = np.random.default_rng(seed)
    field = _queries("field", "map@500", CLOSE)
    cols = [
        _exchangeable(field.xs(f, level="field").to_numpy(), n, rng)
        for f, n in (("Biology", 8), ("Chemistry", 8), ("Computer Science", 3), ("Medicine", 8))
    ]
    demo = separations([*cols, np.concatenate(cols, axis=1)], 10000)
    dataset_pop = _queries("dataset", "map@500", CLOSE, size=1600).to_numpy()
    two = separations([_exchangeable(dataset_pop, 20, rng) for _ in range(2)], 2000)
    mdcr = _queries("mdcr", "map", CLOSE)
    cols = [_exchangeable(g.to_numpy(), 30, rng) for _, g in mdcr.groupby(level="field")]
    big = separations([*cols, np.concatenate(cols, axis=1)], 2000)
    return {
        "demo field table (fields unresolved)": float(demo["separated"].mean()),
        "dataset table, 20 queries": float(two["separated"].mean()),
        "MDCR table, 30 queries a field": float(big["separated"].mean()),
        "dataset table, FWER": float(two["any"].mean()),
    }


def _effect(n: int, level: float) -> float:
    """The standardised effect the paired t-test at ``level`` finds with 80% power."""
    from scipy.optimize import brentq

    return float(brentq(lambda e: paired_test_power(e, n, level) - 0.8, 0.0, 50.0))


def power_at_the_mde(seed: int = 5) -> dict[str, float]:
    """The share of data sets in which Fisher's test at α/m finds a true difference of the
    MDE the report prints (the population's spread): real per-query differences against
    bm25, centred and shifted by the MDE. Dataset-level (20 queries, m = 36: AP's
    differences are skewed, kurtosis 4) and MDCR's AVG (27 pooled queries, m = 30: near
    symmetric)."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    out = {}
    dataset = _queries("dataset", "map@500", CLOSE, size=1600)
    mdcr = _queries("mdcr", "map", CLOSE)
    for label, wide, n, m in (
        ("dataset, 20 queries, α/36", dataset, 20, 36),
        ("MDCR AVG, 27 queries, α/30", mdcr, 27, 30),
    ):
        diffs = np.concatenate([(wide[x] - wide["bm25"]).to_numpy() for x in CLOSE[1:]])
        centred = diffs - diffs.mean()
        level = ALPHA / m
        mde = _effect(n, level) * centred.std(ddof=1)
        take = centred[rng.integers(0, len(centred), (DATA_SETS, n))] + mde
        out[f"{label}, Fisher"] = float(np.mean(fisher_p_values(take, 10000, 42) <= level))
        out[f"{label}, t-test"] = float(np.mean(stats.ttest_1samp(take, 0, axis=1).pvalue <= level))
    return out


# -------------------------------------------------------------------------- the tests


def test_the_query_as_unit_covers_where_repetitions_apart_did_not() -> None:
    found = shared_repetitions()
    assert 0.91 <= found["AP, query"] <= 0.96
    assert 0.91 <= found["R@30 of random (68% zeros), query"] <= 0.96
    assert found["AP, repetitions apart"] <= 0.86  # too narrow: 40 'queries' for 20
    assert found["R@30 of random (68% zeros), repetitions apart"] <= 0.86


def test_few_queries_cover_less_and_thirty_a_field_cover() -> None:
    found = few_queries()
    assert 0.87 <= found["one field, 8 queries"] <= 0.93
    assert 0.70 <= found["one field, 3 queries"] <= 0.80
    assert 0.86 <= found["AVG, 8/8/3/8 queries"] <= 0.92
    assert 0.93 <= found["AVG, 30 queries a field"] <= 0.97


def test_mdcr_fields_as_strata_cover() -> None:
    found = mdcr_fields()
    for label in ("AP", "R@5 of random"):
        assert 0.88 <= found[f"{label}, AVG, 8 queries a field"] <= 0.95
        assert 0.92 <= found[f"{label}, AVG, 30 queries a field"] <= 0.97


def test_paired_differences_cover_but_skewed_ones_at_twenty_queries() -> None:
    found = paired_differences()
    assert 0.82 <= found["dataset, close retrievers − bm25, 20 queries"] <= 0.89
    assert 0.93 <= found["dataset, all retrievers − bm25, 20 queries"] <= 0.97
    assert 0.89 <= found["MDCR AVG, close retrievers − bm25, 8 a field"] <= 0.95
    assert 0.92 <= found["MDCR AVG, close retrievers − bm25, 30 a field"] <= 0.97


def test_no_difference_separates_at_most_alpha() -> None:
    found = null_separations()
    assert found["demo field table (fields unresolved)"] <= ALPHA
    assert found["dataset table, 20 queries"] <= ALPHA
    assert found["MDCR table, 30 queries a field"] <= ALPHA
    assert found["dataset table, FWER"] <= ALPHA


def test_power_at_the_printed_mde() -> None:
    """Near 80% where the differences are near symmetric; lower (about 70%) where they are
    skewed: the t-based MDE is optimistic there (docs/scoring.md states the gap)."""
    found = power_at_the_mde()
    assert 0.76 <= found["MDCR AVG, 27 queries, α/30, Fisher"] <= 0.85
    assert 0.63 <= found["dataset, 20 queries, α/36, Fisher"] <= 0.76


def test_the_simulated_procedure_is_the_reports() -> None:
    """On simulated data sets, the report's own functions (pairwise_tests, correct,
    tie_groups) separate exactly where the vectorised procedure above does, and mark the
    8- and 3-query fields unresolved."""
    from mdcr.scoring.intervals import BEST, SEPARATED, UNRESOLVED, tie_groups
    from mdcr.scoring.significance import correct, pairwise_tests

    rng = np.random.default_rng(6)
    field = _queries("field", "map@500", CLOSE)
    sizes = (("Biology", 8), ("Chemistry", 8), ("Computer Science", 3), ("Medicine", 8))
    cols = [_exchangeable(field.xs(f, level="field").to_numpy(), n, rng) for f, n in sizes]
    cols.append(np.concatenate(cols, axis=1))
    cols = [c + np.array([0.03, 0.0, 0.015]) for c in cols]  # a difference, found at times
    found = separations(cols, 2000)
    assert 0 < found["separated"][:12].sum() < 12  # both outcomes are checked
    names = [f for f, _ in sizes] + ["AVG"]
    for d in range(12):
        rows = [
            {"field": f, "retriever": r, "query_id": f"q{i}", "value": cols[c][d, i, k]}
            for c, f in enumerate(names)
            for i in range(cols[c].shape[1])
            for k, r in enumerate(CLOSE)
        ]
        units = pd.DataFrame(rows)
        comps = pairwise_tests(units, ["field"], CLOSE, ["fisher"], 2000, 42)
        corrected = correct(comps.assign(table="t"), ["table"], "holm", ALPHA)
        means = units.groupby(["field", "retriever"])["value"].mean().rename("mean").reset_index()
        groups = tie_groups(corrected, means, ["field"], "fisher", alpha=ALPHA, permutations=2000)
        assert (SEPARATED in groups.values()) == bool(found["separated"][d])
        for f in names[:-1]:
            assert {g for (fld, _), g in groups.items() if fld == f} <= {BEST, UNRESOLVED}


if __name__ == "__main__":  # the figures of docs/scoring.md
    for name, figures in (
        ("Coverage, repetitions sharing queries", shared_repetitions()),
        ("Coverage, few queries", few_queries()),
        ("Coverage, MDCR fields as strata", mdcr_fields()),
        ("Coverage, paired differences", paired_differences()),
        ("False separations under no difference", null_separations()),
        ("Power at the printed MDE", power_at_the_mde()),
    ):
        print(f"{name}:")
        for label, value in figures.items():
            print(f"  {label}: {value:.3f}")
