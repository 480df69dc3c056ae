"""Bootstrap intervals against scipy.stats.bootstrap and an independent cluster bootstrap
(the query the unit, with its values in every repetition), their determinism, tied groups
that are findings (the test's reach), and the MDE of the test used."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import scipy.stats as st

from mdcr.scoring.intervals import (
    BEST,
    SEPARATED,
    TIED,
    UNRESOLVED,
    IntervalOptions,
    bootstrap_interval,
    bootstrap_intervals,
    cell_intervals,
    corrected_alpha,
    minimum_detectable_effect,
    paired_differences,
    query_strata,
    smallest_p_value,
    tie_groups,
)
from mdcr.scoring.significance import correct, fisher_randomization_test, pairwise_tests


def _ap_like(seed: int, n: int) -> np.ndarray:
    """Skewed values in [0, 1] with many zeros, as per-query AP is."""
    x = np.random.default_rng(seed).beta(0.5, 2.0, size=n)
    x[: n // 5] = 0.0
    return x


@pytest.mark.parametrize("method", ["percentile", "bca"])
@pytest.mark.parametrize("n", [7, 120, 5000])
def test_one_stratum_is_scipy_bootstrap_of_the_mean(method: str, n: int) -> None:
    x = _ap_like(n, n)
    ref = st.bootstrap(
        (x,), np.mean, n_resamples=2000, method=method, rng=np.random.default_rng(11)
    ).confidence_interval
    iv = bootstrap_interval([x], resamples=2000, seed=11, method=method)
    assert iv.estimate == pytest.approx(x.mean(), rel=1e-15)
    assert iv.low == pytest.approx(ref.low, rel=1e-12, abs=1e-15)
    assert iv.high == pytest.approx(ref.high, rel=1e-12, abs=1e-15)


def test_many_data_sets_at_once_are_each_alone() -> None:
    """A row of bootstrap_intervals is bootstrap_interval of that data set: the same draws
    (to the last bits: vectorised powers may round differently)."""
    sets = np.stack([_ap_like(s, 30) for s in range(6)])
    other = np.stack([_ap_like(s + 50, 12) for s in range(6)])
    sets[2] = 0.25  # no spread in the first stratum of one data set
    together = bootstrap_intervals([sets, other], [0.5, 0.5], resamples=999, seed=3)
    for d in range(6):
        alone = bootstrap_interval([sets[d], other[d]], [0.5, 0.5], resamples=999, seed=3)
        want = (alone.estimate, alone.low, alone.high)
        assert tuple(together[d]) == pytest.approx(want, rel=1e-13, abs=1e-15)


def _long(values: dict[str, np.ndarray], queries: list[str]) -> pd.DataFrame:
    """Per-query values of one retriever, one pool per key (a repetition)."""
    rows = [
        {"retriever": "x", "pool_id": pool, "query_id": q, "value": float(v)}
        for pool, vals in values.items()
        for q, v in zip(queries, vals, strict=True)
    ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_repetitions_on_the_same_queries_are_the_bootstrap_of_per_query_means(
    method: str,
) -> None:
    """Two repetitions of the same 20 queries, correlated: the query is resampled with both
    its values, i.e. scipy's bootstrap of the per-query means (n = 20, not 40)."""
    base = _ap_like(1, 20)
    r1 = np.clip(base + 0.05 * np.random.default_rng(2).standard_normal(20), 0, 1)
    queries = [f"q{i:02d}" for i in range(20)]
    frame = _long({"r0": base, "r1": r1}, queries)
    out = cell_intervals(frame, ["retriever"], [], IntervalOptions(2000, 42, method)).iloc[0]
    ref = st.bootstrap(
        ((base + r1) / 2,), np.mean, n_resamples=2000, method=method, rng=np.random.default_rng(42)
    ).confidence_interval
    assert out["estimate"] == pytest.approx(np.mean([base.mean(), r1.mean()]), rel=1e-14)
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((ref.low, ref.high), rel=1e-12)
    assert out["n_queries"] == 20
    # resampling each repetition apart (the old rule) narrows it
    apart = bootstrap_interval([base, r1], resamples=2000, seed=42, method=method)
    assert apart.high - apart.low < out["ci_high"] - out["ci_low"]


def _cluster_bootstrap(frame: pd.DataFrame, resamples: int, seed: int, method: str) -> tuple:
    """An independent cluster bootstrap of a field AVG: per field (stratum, in name order)
    and in it per set of pools holding the same queries (in pool order), draw the queries
    with ``rng.integers`` and recompute every pool's mean over the drawn queries' values in
    that pool; a field's value is its pools' mean, AVG the fields' mean. BCa's jackknife
    leaves one query (all its values) out."""

    designs: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    layout = []  # per field: each pool's values by query, with the design it is in
    for fld, part in sorted(frame.groupby("field"), key=lambda kv: str(kv[0])):
        pools = {
            str(p): rows.set_index("query_id")["value"].to_dict()
            for p, rows in part.groupby("pool_id", sort=True)
        }
        groups: dict[tuple, list[str]] = {}
        for pool, vals in pools.items():
            groups.setdefault(tuple(sorted(vals)), []).append(pool)
        for qs, members in sorted(groups.items(), key=lambda kv: kv[1]):
            designs[(str(fld), tuple(members))] = list(qs)
        owner = {p: k for k in designs if k[0] == str(fld) for p in k[1]}
        layout.append([(vals, owner[p]) for p, vals in pools.items()])

    def statistic(take: dict[tuple[str, tuple[str, ...]], list[str]]) -> float:
        fields = [np.mean([np.mean([v[q] for q in take[k]]) for v, k in f]) for f in layout]
        return float(np.mean(fields))

    estimate = statistic(designs)
    rng = np.random.default_rng(seed)
    thetas = np.empty(resamples)
    draws = {k: rng.integers(0, len(q), (resamples, len(q))) for k, q in designs.items()}
    for b in range(resamples):
        thetas[b] = statistic({k: [q[i] for i in draws[k][b]] for k, q in designs.items()})
    alpha = 0.025
    if method == "percentile":
        probs = [alpha, 1 - alpha]
    else:
        jack = []
        for k, qs in designs.items():
            for q in qs:
                jack.append(statistic({**designs, k: [x for x in qs if x != q]}))
        j = np.asarray(jack)
        u = (len(j) - 1) * (j.mean() - j)
        a = np.sum(u**3) / len(j) ** 3 / 6 / (np.sum(u**2) / len(j) ** 2) ** 1.5
        z0 = st.norm.ppf((np.sum(thetas < estimate) + np.sum(thetas <= estimate)) / 2 / resamples)
        probs = [
            st.norm.cdf(z0 + (z0 + z) / (1 - a * (z0 + z))) for z in st.norm.ppf([0.025, 0.975])
        ]
    return (estimate, *np.quantile(thetas, probs))


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_a_field_avg_is_an_independent_cluster_bootstrap(method: str) -> None:
    """Unbalanced: two fields of 9 and 5 queries, one with two repetitions on its queries,
    the other with two repetitions on different queries (strata of their own)."""
    rng = np.random.default_rng(7)
    rows = []
    for r in ("r0", "r1"):
        for i in range(9):
            rows.append(("bio", f"bio/{r}", f"b{i}", 0.3 + 0.1 * i / 9 + 0.05 * rng.random()))
    for r, qs in (("r0", range(5)), ("r1", range(3, 9))):
        for i in qs:
            rows.append(("cs", f"cs/{r}", f"c{i}", rng.beta(0.5, 2.0)))
    frame = pd.DataFrame(rows, columns=["field", "pool_id", "query_id", "value"])
    want = _cluster_bootstrap(frame, 400, 5, method)
    got = cell_intervals(
        frame.assign(retriever="x"), ["retriever"], ["field"], IntervalOptions(400, 5, method)
    ).iloc[0]
    assert (got["estimate"], got["ci_low"], got["ci_high"]) == pytest.approx(want, rel=1e-12)
    arrays, weights = query_strata(frame, ["field"])
    assert [len(a) for a in arrays] == [9, 5, 6] and weights == [0.5, 0.25, 0.25]
    assert got["n_queries"] == 9 + 5 + 6


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_paired_difference_is_scipy_paired_bootstrap(method: str) -> None:
    a, b = _ap_like(1, 300), _ap_like(2, 300)
    ref = st.bootstrap(
        (a, b),
        lambda u, v, axis: np.mean(u - v, axis=axis),
        paired=True,
        n_resamples=3000,
        method=method,
        rng=np.random.default_rng(5),
    ).confidence_interval
    frame = pd.DataFrame(
        {
            "retriever": ["x"] * 300 + ["bm25"] * 300,
            "pool_id": "p",
            "query_id": [f"q{i:03d}" for i in range(300)] * 2,
            "value": np.concatenate([a, b]),
        }
    )
    d = paired_differences(frame, "bm25")
    assert list(d["retriever"].unique()) == ["x"] and len(d) == 300
    out = cell_intervals(d, ["retriever"], [], IntervalOptions(3000, 5, method))
    row = out.iloc[0]
    assert row["estimate"] == pytest.approx(float(np.mean(a - b)), rel=1e-12)
    assert row["ci_low"] == pytest.approx(ref.low, rel=1e-12)
    assert row["ci_high"] == pytest.approx(ref.high, rel=1e-12)


def test_blocks_do_not_change_the_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    """Resamples drawn in blocks are the ones drawn at once (scipy's single draw)."""
    import mdcr.scoring.intervals as iv

    x = _ap_like(3, 500)
    whole = bootstrap_interval([x], resamples=1000, seed=2)
    monkeypatch.setattr(iv, "_BLOCK_ELEMENTS", 500 * 7)  # blocks of 7 resamples
    assert bootstrap_interval([x], resamples=1000, seed=2) == whole


def test_strata_estimate_is_the_mean_of_means_and_widths_shrink() -> None:
    reps = [_ap_like(s, 40 + 10 * s) for s in range(3)]
    iv = bootstrap_interval(reps, resamples=1000, seed=1)
    assert iv.estimate == pytest.approx(np.mean([r.mean() for r in reps]), rel=1e-15)
    assert iv.low < iv.estimate < iv.high
    wide = bootstrap_interval(reps[:1], resamples=1000, seed=1)
    assert (iv.high - iv.low) < (wide.high - wide.low)  # three strata: more queries


def test_constant_values_give_a_point_interval() -> None:
    iv = bootstrap_interval([np.full(10, 0.25)], resamples=500, seed=0)
    assert (iv.estimate, iv.low, iv.high) == (0.25, 0.25, 0.25)


_SCRIPT = (
    "import numpy as np; from mdcr.scoring.intervals import bootstrap_interval as b;"
    "x=np.random.default_rng(4).random(2000); y=np.random.default_rng(5).random(900);"
    "print(repr(b([x, y], resamples=3000, seed=9)))"
)


def test_same_seed_same_interval_on_any_thread_count() -> None:
    outs = set()
    for threads in ("1", "2", "4"):
        env = {
            **os.environ,
            "OMP_NUM_THREADS": threads,
            "OPENBLAS_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
        }
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, check=True
        )
        outs.add(done.stdout)
    assert len(outs) == 1
    other_seed = bootstrap_interval(
        [np.random.default_rng(4).random(2000), np.random.default_rng(5).random(900)],
        resamples=3000,
        seed=10,
    )
    assert repr(other_seed) + "\n" not in outs


def test_the_mde_gives_its_power_to_the_t_test() -> None:
    """At the MDE, the paired t-test at α' rejects in 80% of normal data sets (Monte Carlo,
    an independent check of the noncentral t); for many queries it tends to the normal
    approximation (z₁₋α'/2 + z₀.₈) · sd / √n; four times the queries about halve it."""
    d = np.array([0.1, -0.05, 0.2, 0.0, 0.15, -0.1, 0.05, 0.3])
    alpha = corrected_alpha(0.05, 5)
    assert alpha == pytest.approx(0.01)
    mde = minimum_detectable_effect(d, alpha)
    sd = np.std(d, ddof=1)
    sims = np.random.default_rng(0).normal(mde, sd, size=(40000, len(d)))
    p = st.ttest_1samp(sims, 0.0, axis=1).pvalue
    assert np.mean(p < alpha) == pytest.approx(0.8, abs=0.01)
    z = st.norm.ppf(1 - alpha / 2) + st.norm.ppf(0.8)
    assert mde > z * sd / math.sqrt(len(d))  # small n: the t's heavier tails ask for more
    many = np.tile(d, 625)  # n = 5000
    assert minimum_detectable_effect(many, alpha) == pytest.approx(
        z * np.std(many, ddof=1) / math.sqrt(5000), rel=1e-3
    )
    assert math.isnan(minimum_detectable_effect(d[:1], alpha))


def test_the_smallest_p_is_the_one_the_test_gives() -> None:
    """Fisher's exact test on n distinct positive differences gives 2/2^n; sampled, 1/(B+1)."""
    for n in (3, 8, 13):
        d = np.arange(1, n + 1) / 10
        assert fisher_randomization_test(d, np.zeros(n), 10000) == smallest_p_value(
            "fisher", n, 10000
        )
    assert smallest_p_value("fisher", 8, 10000) == 2 / 256
    d = np.arange(1, 26) / 10
    assert fisher_randomization_test(d, np.zeros(25), 999) == smallest_p_value("fisher", 25, 999)
    assert smallest_p_value("student", 3, 10000) == 0.0
    assert math.isnan(smallest_p_value("student", 1, 10000))


def _units(values: dict[str, np.ndarray]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"metric": "map", "retriever": r, "query_id": f"q{i:03d}", "value": v[i]}
            for r, v in values.items()
            for i in range(len(v))
        ]
    )


def _groups(units: pd.DataFrame, retrievers: list[str], perms: int = 2000) -> dict[tuple, str]:
    comps = pairwise_tests(units, ["metric"], retrievers, ["fisher"], perms, 42)
    corrected = correct(comps.assign(table="t"), ["table"], "holm", 0.05)
    means = units.groupby(["metric", "retriever"])["value"].mean().rename("mean").reset_index()
    return tie_groups(corrected, means, ["metric"], "fisher", alpha=0.05, permutations=perms)


def test_tied_group_on_a_constructed_example() -> None:
    """best: clearly highest; close: a hair below (not significant); far: well below."""
    rng = np.random.default_rng(0)
    base = rng.random(200)
    close = base + 0.20 - 0.002 * rng.standard_normal(200)
    units = _units({"best": base + 0.20, "close": close, "far": base})
    groups = _groups(units, ["best", "close", "far"])
    top = BEST if (base + 0.2).mean() > close.mean() else TIED
    assert groups[("map", "best")] == top and groups[("map", "far")] == SEPARATED
    assert {groups[("map", "best")], groups[("map", "close")]} == {BEST, TIED}


def test_too_few_queries_is_unresolved_not_tied() -> None:
    """8 queries: Fisher's smallest p is 2/2^8 = 0.0078. Three retrievers (3 comparisons):
    α/3 = 0.0167 is reachable, so a far retriever is separated; five (10 comparisons):
    α/10 = 0.005 is not, so nothing can be separated and no tie is claimed."""
    rng = np.random.default_rng(1)
    base = rng.random(8) * 0.3
    three = {"a": base + 0.6, "b": base + 0.3, "c": base}
    groups = _groups(_units(three), list(three))
    assert groups == {("map", "a"): BEST, ("map", "b"): SEPARATED, ("map", "c"): SEPARATED}
    five = {**three, "d": base + 0.59, "e": base + 0.1}
    groups = _groups(_units(five), list(five))
    assert groups[("map", "a")] == BEST
    assert {groups[("map", r)] for r in "bcde"} == {UNRESOLVED}
