"""Bootstrap intervals against scipy.stats.bootstrap, their determinism, tied groups, MDE."""

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
    IntervalOptions,
    bootstrap_interval,
    cell_intervals,
    corrected_alpha,
    minimum_detectable_effect,
    paired_differences,
    tied_with_best,
)
from mdcr.scoring.significance import correct, pairwise_tests


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
            "query_id": [f"q{i:03d}" for i in range(300)] * 2,
            "value": np.concatenate([a, b]),
        }
    )
    d = paired_differences(frame, "bm25", ["query_id"])
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


def test_nested_levels_weight_fields_equally() -> None:
    """AVG over fields: each field's value is its repetitions' mean, fields equal."""
    rows = []
    for f, n_reps, base in (("bio", 1, 0.1), ("cs", 2, 0.5)):
        for r in range(n_reps):
            for q in range(30):
                rows.append(("x", f, r, f"q{q}", base + 0.01 * ((q * 7 + r) % 5)))
    frame = pd.DataFrame(rows, columns=["retriever", "field", "rep", "query_id", "value"])
    out = cell_intervals(frame, ["retriever"], ["field", "rep"], IntervalOptions(500, 1))
    by_field_rep = frame.groupby(["field", "rep"])["value"].mean()
    expected = by_field_rep.groupby("field").mean().mean()
    assert out["estimate"].iloc[0] == pytest.approx(expected, rel=1e-14)
    assert int(out["n_queries"].iloc[0]) == 90


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


def test_minimum_detectable_effect_formula() -> None:
    d = np.array([0.1, -0.05, 0.2, 0.0, 0.15, -0.1, 0.05, 0.3])
    alpha = corrected_alpha(0.05, 5)
    assert alpha == pytest.approx(0.01)
    z = 2.5758293035489004 + 0.8416212335729143  # z_{0.995} + z_{0.8}
    expected = z * np.std(d, ddof=1) / math.sqrt(len(d))
    assert minimum_detectable_effect(d, alpha) == pytest.approx(expected, rel=1e-12)
    # four times the queries halve it
    assert minimum_detectable_effect(np.tile(d, 4), alpha) == pytest.approx(
        z * np.std(np.tile(d, 4), ddof=1) / math.sqrt(32), rel=1e-12
    )
    assert math.isnan(minimum_detectable_effect(d[:1], alpha))


def test_tied_group_on_a_constructed_example() -> None:
    """best: clearly highest; close: a hair below (not significant); far: well below."""
    rng = np.random.default_rng(0)
    base = rng.random(200)
    values = {
        "best": base + 0.20,
        "close": base + 0.20 - 0.002 * rng.standard_normal(200),
        "far": base,
    }
    units = pd.DataFrame(
        [
            {"metric": "map", "retriever": r, "query_id": f"q{i}", "value": v[i]}
            for r, v in values.items()
            for i in range(200)
        ]
    )
    retrievers = ["best", "close", "far"]
    comps = pairwise_tests(units, ["metric"], retrievers, ["fisher"], 2000, 42)
    corrected = correct(comps.assign(table="t"), ["table"], "holm", 0.05)
    means = units.groupby(["metric", "retriever"])["value"].mean().rename("mean").reset_index()
    best = means.loc[means["mean"].idxmax(), "retriever"]
    tied = tied_with_best(corrected, means, ["metric"], "fisher")
    assert best in ("best", "close")
    assert tied == {("map", "best"), ("map", "close")}
