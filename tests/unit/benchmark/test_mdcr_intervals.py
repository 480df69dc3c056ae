"""Intervals and tied groups on an MDCR benchmark: benchmark-score's own report and
``intervals.parquet``, ``mdcr evaluate``'s summary frame and printout, and the pools
report's MDCR section (companion tables, tied marks, MDE, the wins and losses), against
scipy.stats.bootstrap on the per-query values; the same seed gives the same intervals
under any thread count."""

from __future__ import annotations

import contextlib
import io
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
    "from mdcr.scoring.benchmark_intervals import benchmark_cells;"
    "from mdcr.scoring.report_context import SectionOptions;"
    "from mdcr.scoring.intervals import IntervalOptions;"
    "pq = pd.read_parquet(sys.argv[1]);"
    "out = benchmark_cells(pq, SectionOptions(permutations=500), IntervalOptions(3000, 7));"
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


def _rescored(folder: Path, home: Path, **params: Any) -> Path:
    """benchmark-score again on ``folder``'s benchmark and ranks, with other parameters."""
    from mdcr.benchmark.score import SPEC, BenchScoreConfig
    from mdcr.contracts.outputs import input_paths
    from mdcr.core.inputs import resolve_inputs
    from mdcr.core.store import Store

    (bench,) = input_paths(folder, "benchmark")
    ranks = tuple(str(r) for r in input_paths(folder, "ranks"))
    cfg = BenchScoreConfig(benchmark=str(bench), ranks=ranks, **params)
    return Store(home).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True).path


def test_benchmark_scores_own_report_has_companions_tied_marks_and_the_mde(scored: dict) -> None:
    from mdcr.contracts.paper import field_abbreviation
    from mdcr.scoring.document import read_report
    from mdcr.scoring.intervals import bootstrap_interval

    folder = scored["folder"]
    (test,) = [s for s in read_report(folder).sections if s.heading == "test"]
    names = [t.name for t in test.tables]
    at = names.index("mdcr_test_table3")
    assert names[at + 1 : at + 3] == ["mdcr_test_map_ci", "mdcr_test_recall_ci"]
    assert names[names.index("mdcr_test_ndcg") + 1] == "mdcr_test_ndcg_ci"
    assert names[-1] == "mdcr_test_table4"  # the candidate types keep their place, last
    table3 = test.tables[at]
    # No bm25 in this evaluation: the baseline is absent, so no differences, one MDE line.
    assert sum("Minimum detectable effect: no baseline `bm25`" in n for n in table3.notes) == 2
    assert {c.tied for c in table3.cells.values()} <= {True, False}
    companion = test.tables[at + 1]
    assert companion.rows == ["rnd1", "random"] and not companion.rule_before  # random last
    pq = scored["per_query"]
    fields = sorted(pq["field"].unique())
    values = _field_values(pq, "rnd1", fields[0], MAP)
    low, high = _scipy(values.to_numpy())
    cell = companion.cells[("rnd1", ("", field_abbreviation(fields[0])))]
    assert (cell.mean, cell.low, cell.high) == pytest.approx((values.mean(), low, high), rel=1e-12)
    strata = [_field_values(pq, "rnd1", f, MAP).to_numpy() for f in fields]
    want = bootstrap_interval(strata, resamples=2000, seed=42)
    got = companion.cells[("rnd1", ("", "AVG"))]
    assert (got.mean, got.low, got.high) == pytest.approx(tuple(want.__dict__.values()))
    report = (folder / "report.md").read_text()
    assert "**MDCR test: MAP per field: 95% intervals** (`tables/mdcr_test_map_ci.csv`" in report
    assert "Intervals: 95% BCa bootstrap over queries (2000 resamples, seed 42;" in report
    assert (folder / "tables" / "intervals.csv").is_file()


def test_intervals_parquet_is_what_the_summary_prints_and_equals_drawing_them_again(
    scored: dict, tmp_path: Path
) -> None:
    """The summary reads benchmark-score's intervals.parquet; an output without one (as
    written before benchmark-score drew intervals) gets the same numbers drawn anew."""
    import shutil

    from mdcr.contracts.artifacts import INTERVALS

    folder = scored["folder"]
    rows = INTERVALS.read_pandas(folder)
    assert set(rows["kind"]) == {"mean"}  # no baseline, no differences
    assert len(rows) == 2 * 3 * (3 + 1)  # retrievers x measures x (fields + AVG), one split
    assert rows["tied"].dtype == "boolean" and rows["tied"].notna().all()
    _, summary = benchmark_frames(folder)
    own = with_intervals(summary, folder)
    old = tmp_path / folder.name
    shutil.copytree(folder, old)
    (old / "intervals.parquet").unlink()
    drawn = with_intervals(summary, old)
    cols = ["retriever", "split", "field", "measure", "ci_low", "ci_high", "tied"]
    pd.testing.assert_frame_equal(own[cols], drawn[cols], check_dtype=False, rtol=1e-12)


def test_a_baseline_gives_differences_and_the_wins_and_losses(scored: dict, tmp_path: Path) -> None:
    """baseline=random: each rnd1 − random difference has its interval (scipy on the paired
    differences) and adjusted p; the wins-and-losses section counts the queries as the
    per-query values say, and plots them."""
    from mdcr.contracts.artifacts import INTERVALS
    from mdcr.contracts.paper import field_abbreviation
    from mdcr.scoring.document import read_report

    folder = _rescored(scored["folder"], tmp_path / "home", baseline="random")
    assert folder != scored["folder"]  # the baseline is a parameter: another output
    rows = INTERVALS.read_pandas(folder)
    diffs = rows[rows["kind"] == "minus random"]
    assert set(diffs["retriever"]) == {"rnd1"} and diffs["p_adjusted"].between(0, 1).all()
    pq = scored["per_query"]
    field = sorted(pq["field"].unique())[0]
    a, b = _field_values(pq, "rnd1", field, MAP), _field_values(pq, "random", field, MAP)
    row = diffs[(diffs["metric"] == MAP) & (diffs["field"] == field)].iloc[0]
    low, high = _scipy((a - b).to_numpy())
    assert (row["estimate"], row["ci_low"], row["ci_high"]) == pytest.approx(
        ((a - b).mean(), low, high), rel=1e-12, abs=1e-15
    )
    model = read_report(folder)
    (wins,) = [s for s in model.sections if s.heading == "Where the encoders win and lose"]
    (test,) = wins.subsections
    all_a = pq[(pq["retriever"] == "rnd1") & (pq["metric"] == MAP)].set_index(["field", "query_id"])
    all_b = pq[(pq["retriever"] == "random") & (pq["metric"] == MAP)].set_index(
        ["field", "query_id"]
    )
    d = all_a["value"] - all_b["value"]
    assert test.intro == [
        f"- `rnd1` against `random`: better on {(d > 0).sum()}, equal on {(d == 0).sum()}, "
        f"worse on {(d < 0).sum()} of {len(d)} queries."
    ]
    assert test.plots == ["plots/wins_losses_test.png", "plots/wins_losses_test.svg"]
    assert all((folder / p).stat().st_size > 1000 for p in test.plots)
    best = d.idxmax()
    assert f"| MDCR {field_abbreviation(best[0])} |" in "\n".join(test.body)
    table3 = next(t for t in model.sections[0].tables if t.name.endswith("_table3"))
    assert any(n.startswith("MAP: Minimum detectable effect vs `random`") for n in table3.notes)


def test_the_pools_report_takes_the_mdcr_sections_as_benchmark_score_drew_them(
    scored: dict, tmp_path: Path
) -> None:
    """Two benchmark-score outputs in one report: their tables get distinct file names,
    their plots are copied beside the report, their intervals join the report's."""
    from mdcr.scoring.report import benchmark_section, include_benchmark
    from mdcr.scoring.report_context import Context, SectionOptions

    other = _rescored(scored["folder"], tmp_path / "home", baseline="random")
    c = Context(SectionOptions(), ["bm25"], {}, [], tmp_path / "out")
    sections = []
    for number, folder in enumerate([scored["folder"], other], start=1):
        sections.append(benchmark_section(folder, ("test",)))
        include_benchmark(c, sections[-1], folder, number)
    first = [t.name for s in sections[0].subsections for t in s.tables]
    second = [t.name for s in sections[1].subsections for t in s.tables]
    assert "mdcr_test_map_ci" in first and "mdcr2_test_map_ci" in second
    assert [n.replace("mdcr2_", "mdcr_") for n in second] == first
    (wins,) = [s for s in sections[1].subsections if s.heading.startswith("Where")]
    assert wins.subsections[0].plots == [
        "plots/mdcr2_wins_losses_test.png",
        "plots/mdcr2_wins_losses_test.svg",
    ]
    assert (tmp_path / "out" / "plots" / "mdcr2_wins_losses_test.png").is_file()
    tables = set(pd.concat(c.intervals)["table"])
    assert {"mdcr_test_map", "mdcr2_test_map"} <= tables


def test_an_mdcr_section_without_intervals_gets_the_same_ones_in_the_report(
    scored: dict, tmp_path: Path
) -> None:
    """A benchmark-score output written before benchmark-score drew intervals: the report
    annotates its MDCR section with the same tests, and gets what the stage draws now."""
    from mdcr.scoring.benchmark_intervals import annotate_benchmark
    from mdcr.scoring.intervals import IntervalOptions
    from mdcr.scoring.report import benchmark_section
    from mdcr.scoring.report_context import Context, SectionOptions

    c = Context(SectionOptions(), ["bm25"], {}, [], tmp_path)
    c.interval_options = IntervalOptions(2000, 42, "bca")
    drawn = benchmark_section(scored["folder"], ("test",))
    old = benchmark_section(scored["folder"], ("test",))
    for sub in old.subsections:  # as an output of benchmark-score version 4 was
        sub.tables = [t for t in sub.tables if not t.name.endswith("_ci")]
        for t in sub.tables:
            t.notes = []
            for cell in t.cells.values():
                cell.tied = None
    annotate_benchmark(c, old, scored["folder"])
    (a,) = [s for s in old.subsections if s.heading == "test"]
    (b,) = [s for s in drawn.subsections if s.heading == "test"]
    assert [t.name for t in a.tables] == [t.name for t in b.tables]
    for ta, tb in zip(a.tables, b.tables, strict=True):
        assert ta.notes == tb.notes
        assert {k: (v.mean, v.low, v.high, v.tied, v.bold) for k, v in ta.cells.items()} == {
            k: (v.mean, v.low, v.high, v.tied, v.bold) for k, v in tb.cells.items()
        }
