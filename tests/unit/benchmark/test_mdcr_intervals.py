"""Intervals and tied groups on an MDCR benchmark: ``mdcr evaluate``'s summary frame and
printout, and the pools report's MDCR section (companion tables, tied marks, MDE), against
scipy.stats.bootstrap on the per-query values; the same seed gives the same intervals
under any thread count."""

from __future__ import annotations

import contextlib
import io
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.stats as st

from mdcr.cli import main
from mdcr.contracts.artifacts import BENCHMARK_METRICS
from mdcr.evaluation.result import benchmark_frames
from mdcr.scoring.summary_intervals import with_intervals

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "mdcr_format_fixture"
MAP = "map"


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``mdcr evaluate`` of two seeded random retrievers on the MDCR-format fixture."""
    home = tmp_path_factory.mktemp("mdcr_intervals")
    argv = ["evaluate", "--benchmark", str(FIXTURE), "--home", str(home), "-q"]
    argv += ["--encoder", "random", "--encoder", "rnd1=random", "--encode-set", "rnd1.seed=1"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    out = buf.getvalue()
    folder = Path(out.strip().splitlines()[-1].removeprefix("report: ")).parent
    per_query = BENCHMARK_METRICS.read_pandas(folder)
    return {"folder": folder, "stdout": out, "per_query": per_query[per_query["subset"] == "all"]}


def _scipy(values: np.ndarray) -> tuple[float, float]:
    ci = st.bootstrap(
        (values,), np.mean, n_resamples=2000, method="BCa", rng=np.random.default_rng(42)
    ).confidence_interval
    return float(ci.low), float(ci.high)


def _field_values(per_query: pd.DataFrame, retriever: str, field: str, metric: str) -> pd.Series:
    part = per_query[
        (per_query["retriever"] == retriever)
        & (per_query["field"] == field)
        & (per_query["metric"] == metric)
    ]
    return part.sort_values("query_id").set_index("query_id")["value"]


def test_the_summary_frame_carries_scipy_intervals_and_tied_groups(scored: dict) -> None:
    _, summary = benchmark_frames(scored["folder"])
    frame = with_intervals(summary, scored["folder"])
    assert len(frame) == len(summary) == 2 * 3 * (3 + 1)  # retrievers x measures x (fields+AVG)
    pq = scored["per_query"]
    checked = 0
    for r in frame.to_dict("records"):
        assert r["ci_low"] <= r["mean"] + 1e-9 and r["mean"] <= r["ci_high"] + 1e-9
        assert isinstance(r["tied"], (bool, np.bool_))
        if r["field"] == "AVG":
            continue
        metric = {"MAP": "map", "nDCG": "ndcg", "R@5": "recall@5"}[r["measure"]]
        values = _field_values(pq, r["retriever"], r["field"], metric).to_numpy()
        if np.all(values == values[0]):  # no spread: a point interval
            assert r["ci_low"] == r["ci_high"] == pytest.approx(r["mean"])
            continue
        low, high = _scipy(values)
        assert r["ci_low"] == pytest.approx(100 * low, rel=1e-12)
        assert r["ci_high"] == pytest.approx(100 * high, rel=1e-12)
        checked += 1
    assert checked >= 12
    # the best of every cell is in its tied group
    for _, cell in frame.groupby(["split", "measure", "field"]):
        assert bool(cell.loc[cell["mean"].idxmax(), "tied"])


def test_the_printout_shows_intervals_and_tied_groups(scored: dict) -> None:
    _, summary = benchmark_frames(scored["folder"])
    frame = with_intervals(summary, scored["folder"])
    out = scored["stdout"]
    assert "95% bootstrap interval over queries; †: the tied group" in out
    row = frame[(frame["retriever"] == "random") & (frame["measure"] == "MAP")]
    avg = row[row["field"] == "AVG"].iloc[0]
    cell = f"{avg['mean']:.1f} [{avg['ci_low']:.1f}, {avg['ci_high']:.1f}]"
    line = next(x for x in out.splitlines() if x.startswith("AVG ") and cell in x)
    assert (cell + " †" in line) == bool(avg["tied"])


_SCRIPT = (
    "import sys, pandas as pd;"
    "from mdcr.scoring.benchmark_intervals import PairedTests, benchmark_cells;"
    "from mdcr.scoring.intervals import IntervalOptions;"
    "pq = pd.read_parquet(sys.argv[1]);"
    "out = benchmark_cells(pq, PairedTests(permutations=500), IntervalOptions(3000, 7));"
    "print(out.to_csv(float_format=repr))"
)


def test_same_seed_same_intervals_under_any_thread_count(scored: dict) -> None:
    path = scored["folder"] / "per_query.parquet"
    outs = set()
    for threads in ("1", "2"):
        env = {
            **os.environ,
            "OMP_NUM_THREADS": threads,
            "OPENBLAS_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
            "NUMBA_NUM_THREADS": threads,
        }
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT, str(path)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outs.add(done.stdout)
    assert len(outs) == 1
    assert len(next(iter(outs)).strip().splitlines()) == 1 + 2 * 3 * 4  # header, cells


def test_the_reports_mdcr_section_gets_companions_tied_marks_and_the_mde(
    scored: dict, tmp_path: Path
) -> None:
    from mdcr.scoring.benchmark_intervals import annotate_benchmark
    from mdcr.scoring.intervals import IntervalOptions, bootstrap_interval
    from mdcr.scoring.report import benchmark_section
    from mdcr.scoring.report_sections import Context, SectionOptions

    options = SectionOptions(permutations=500, baseline="random")
    c = Context(options, ["bm25"], {}, [], tmp_path)
    c.interval_options = IntervalOptions(2000, 42, "bca")
    section = benchmark_section(scored["folder"], ("test",))
    annotate_benchmark(c, section, scored["folder"])
    (test,) = [s for s in section.subsections if s.heading == "test"]
    names = [t.name for t in test.tables]
    at = names.index("mdcr_test_table3")
    assert names[at + 1 : at + 3] == ["mdcr_test_map_ci", "mdcr_test_recall_ci"]
    assert names[names.index("mdcr_test_ndcg") + 1] == "mdcr_test_ndcg_ci"
    table3 = test.tables[at]
    assert sum(n.startswith("MAP: Minimum detectable effect vs `random`") for n in table3.notes)
    companion = test.tables[at + 1]
    assert companion.rows == ["rnd1", "random", "rnd1 − random"]  # random last
    pq = scored["per_query"]
    field = sorted(pq["field"].unique())[0]
    from mdcr.contracts.paper import field_abbreviation

    col = ("", field_abbreviation(field))
    a = _field_values(pq, "rnd1", field, MAP)
    b = _field_values(pq, "random", field, MAP)
    low, high = _scipy(a.to_numpy())
    cell = companion.cells[("rnd1", col)]
    assert (cell.mean, cell.low, cell.high) == pytest.approx((a.mean(), low, high), rel=1e-12)
    diff = companion.cells[("rnd1 − random", col)]
    d_low, d_high = _scipy((a - b).to_numpy())
    assert (diff.mean, diff.low, diff.high) == pytest.approx(
        ((a - b).mean(), d_low, d_high), rel=1e-12, abs=1e-15
    )
    assert diff.note.startswith("(p ")
    # AVG: the fields as strata, each weighted 1/F
    strata = [_field_values(pq, "rnd1", f, MAP).to_numpy() for f in sorted(pq["field"].unique())]
    want = bootstrap_interval(strata, resamples=2000, seed=42)
    got = companion.cells[("rnd1", ("", "AVG"))]
    assert (got.mean, got.low, got.high) == pytest.approx(tuple(want.__dict__.values()))
    # table3's tied flags are the summary's (same tests, same correction)
    _, summary = benchmark_frames(scored["folder"])
    frame = with_intervals(summary, scored["folder"])
    flags = [cell.tied for (_, (_, m)), cell in table3.cells.items() if m == "MAP"]
    mine = frame[frame["measure"] == "MAP"]
    assert sorted(flags) == sorted(bool(t) for t in mine["tied"])
    ndcg = test.tables[names.index("mdcr_test_ndcg")]
    for row in ndcg.rows:  # each field's best bold, the others of its tied group with †
        best = max(x.mean for (r, _), x in ndcg.cells.items() if r == row)
        assert all(x.bold == (x.mean == best) for (r, _), x in ndcg.cells.items() if r == row)
        assert "†" not in ndcg.text(row, max(ndcg.columns, key=lambda k: ndcg.cells[(row, k)].mean))
    frames = pd.concat(c.intervals, ignore_index=True)
    assert set(frames["setup"]) == {"mdcr"} and not math.isnan(frames["ci_low"].iloc[0])
