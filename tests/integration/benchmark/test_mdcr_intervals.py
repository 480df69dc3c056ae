"""Intervals and tied groups on an MDCR benchmark: benchmark-score's own report and
``intervals.parquet``, ``mdcr evaluate``'s summary frame and printout, and the pools
report's MDCR section (one per benchmark, every benchmark-score output of it together;
companion tables, tied marks, MDE, the wins and losses), against scipy.stats.bootstrap on
the per-query values; the same seed gives the same intervals under any thread count."""

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
from mdcr.scoring.table_intervals import with_intervals

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
        assert r["tie_group"] in ("best", "tied", "separated", "unresolved")
        assert pd.isna(r["tied"]) == (r["tie_group"] == "unresolved")
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
    # the best of every cell is in its tied group; with 2 or 3 queries a field (7 in AVG)
    # Fisher's test cannot reach α/m = 0.05/4 (its smallest p: 2/2^n), so the other
    # retriever is unresolved, never tied
    for _, cell in frame.groupby(["split", "measure", "field"]):
        best = cell["mean"].max()
        for r in cell.to_dict("records"):
            want = "best" if r["mean"] >= best - 1e-9 else "unresolved"
            assert r["tie_group"] == want


def test_the_printout_shows_intervals_and_tied_groups(scored: dict) -> None:
    _, summary = benchmark_frames(scored["folder"])
    frame = with_intervals(summary, scored["folder"])
    out = scored["stdout"]
    assert "95% bootstrap interval over queries; †: the tied group" in out
    assert "°: too few queries to tell from the best at the corrected level" in out
    row = frame[(frame["retriever"] == "random") & (frame["measure"] == "MAP")]
    avg = row[row["field"] == "AVG"].iloc[0]
    cell = f"{avg['mean']:.1f} [{avg['ci_low']:.1f}, {avg['ci_high']:.1f}]"
    line = next(x for x in out.splitlines() if x.startswith("AVG ") and cell in x)
    mark = {"best": " †", "tied": " †", "unresolved": " °"}.get(avg["tie_group"], "")
    assert cell + mark in line


_SCRIPT = (
    "import sys, pandas as pd;"
    "from mdcr.scoring.intervals import IntervalOptions, cell_intervals;"
    "pq = pd.read_parquet(sys.argv[1]);"
    "pq = pq[pq['subset'] == 'all'].assign(pool_id=lambda f: f['split'] + f['field']);"
    "keys = ['retriever', 'split', 'metric'];"
    "fields = cell_intervals(pq, [*keys, 'field'], [], IntervalOptions(3000, 7));"
    "avg = cell_intervals(pq, keys, ['field'], IntervalOptions(3000, 7));"
    "print(pd.concat([fields, avg]).to_csv(float_format=repr))"
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
    assert {c.tied for c in table3.cells.values()} <= {True, False, None}
    rings = [c for c in table3.cells.values() if c.unresolved]
    assert rings and all(c.tied is None and not c.bold for c in rings)  # 2-3 queries a field
    assert any(n.startswith("°: not significantly worse") for n in table3.notes)
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


def test_intervals_parquet_is_what_the_summary_prints(scored: dict) -> None:
    from mdcr.contracts.artifacts import INTERVALS

    folder = scored["folder"]
    rows = INTERVALS.read_pandas(folder)
    assert set(rows["kind"]) == {"mean"}  # no baseline, no differences
    assert len(rows) == 2 * 3 * (3 + 1)  # retrievers x measures x (fields + AVG), one split
    assert rows["tied"].dtype == "boolean"
    assert (rows["tied"].isna() == (rows["tie_group"] == "unresolved")).all()
    _, summary = benchmark_frames(folder)
    own = with_intervals(summary, folder)
    keys = ["retriever", "field", "metric"]
    printed = own.assign(
        metric=own["measure"].map({"MAP": "map", "nDCG": "ndcg", "R@5": "recall@5"})
    )
    both = printed.merge(rows, on=keys, suffixes=("", "_file"), validate="one_to_one")
    assert len(both) == len(rows)
    assert (both["ci_low"] - 100 * both["ci_low_file"]).abs().max() < 1e-9
    assert (both["tie_group"] == both["tie_group_file"]).all()


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


def _evaluated(home: Path, *encoders: str) -> Path:
    """The benchmark-score output of ``mdcr evaluate`` on the fixture with these encoders."""
    buf = io.StringIO()
    argv = ["evaluate", "--benchmark", str(FIXTURE), "--home", str(home), "-q", *encoders]
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return Path(buf.getvalue().strip().splitlines()[-1].removeprefix("report: ")).parent


def _cells(table: Any) -> dict:
    return {
        k: (v.mean, v.low, v.high, v.tied, v.unresolved, v.bold) for k, v in table.cells.items()
    }


def test_the_pools_report_draws_one_section_per_benchmark(scored: dict, tmp_path: Path) -> None:
    """One benchmark-score output alone gives the section its own report has; two of one
    benchmark (the second with a retriever of its own) make one section with every
    retriever, tested and compared together; two naming one retriever after different
    ranks are refused unless the last is taken."""
    from mdcr.core.errors import InputDataError
    from mdcr.scoring.document import read_report
    from mdcr.scoring.intervals import IntervalOptions
    from mdcr.scoring.report import benchmark_sections
    from mdcr.scoring.report_context import Context, SectionOptions

    def context(out: Path) -> Context:
        c = Context(SectionOptions(), ["bm25"], {}, [], out)
        c.interval_options = IntervalOptions(2000, 42, "bca")
        return c

    folder = scored["folder"]
    (alone,) = benchmark_sections(context(tmp_path / "one"), [folder], ("test",))
    (test,) = [s for s in alone.subsections if s.heading == "test"]
    (own,) = [s for s in read_report(folder).sections if s.heading == "test"]
    assert [t.name for t in test.tables] == [t.name for t in own.tables]
    for a, b in zip(test.tables, own.tables, strict=True):
        assert (a.notes, a.rows, a.columns, _cells(a)) == (b.notes, b.rows, b.columns, _cells(b))
    assert test.body == own.body

    home = folder.parents[1]
    other = _evaluated(home, "--encoder", "rnd2=random", "--encode-set", "rnd2.seed=2")
    c = context(tmp_path / "two")
    (both,) = benchmark_sections(c, [folder, other], ("test",))
    (test,) = [s for s in both.subsections if s.heading == "test"]
    ci = next(t for t in test.tables if t.name == "mdcr_test_map_ci")
    assert set(ci.rows) == {"random", "rnd1", "rnd2"}
    table3 = next(t for t in test.tables if t.name == "mdcr_test_table3")
    assert {g for g, _ in table3.columns} == {"Random", "rnd1", "rnd2"}
    assert sum(line.startswith("From `") for line in both.intro) == 2
    assert "mdcr_test_map" in set(pd.concat(c.intervals)["table"])
    assert any("| rnd1 | rnd2 |" in line for line in test.body)  # compared together
    clash = _evaluated(home, "--encoder", "rnd1=random", "--encode-set", "rnd1.seed=5")
    with pytest.raises(InputDataError, match="scored by two benchmark-rank outputs"):
        benchmark_sections(context(tmp_path / "three"), [folder, clash], ("test",))
    (last,) = benchmark_sections(context(tmp_path / "four"), [folder, clash], ("test",), "last")
    assert "`rnd1`: embeddings" in "\n".join(last.intro)
