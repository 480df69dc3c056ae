"""The dry run's wall-time estimates: the work each stage plans, the machine model, and
the measured rates reproducing the rehearsal they were fitted on."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from mdcr.pipeline import load_pipeline, planned_work
from mdcr.planning.timing import Machine, Rate, duration_text, estimate, load_rates
from mdcr.stage import Work
from mdcr.store import Store

REPO = Path(__file__).resolve().parents[2]


def _paper_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Work]:
    monkeypatch.setenv("S2ORC_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return planned_work(load_pipeline(REPO / "pipelines" / "paper.toml", []), Store(tmp_path))


def test_paper_work_follows_the_papers_sizes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    works = _paper_work(tmp_path, monkeypatch)
    # Per split: 3 repetitions of 200k + 500k + 1M + 2M papers with 3,800 queries each,
    # and 19 fields x 3 repetitions of 100k papers with 200 queries each.
    papers = 3 * 3_700_000 + 57 * 100_000
    pairs = 3 * 3_700_000 * 3_800 + 57 * 100_000 * 200
    got = {step: (w.rate, w.units, w.pairs) for step, w in works.items()}
    assert got["prefilter"] == ("prefilter", 81_100_000, 0)
    assert got["search_scibert"] == ("search", 2 * papers, 2 * pairs)
    assert got["search_aspire_bm"] == ("search-multi-vector", 2 * papers * 9, 2 * pairs)
    assert got["bm25_tune"] == ("bm25-tune", papers, pairs)  # val only
    assert got["bm25"] == ("bm25", 2 * papers, 2 * pairs)
    assert got["score"] == ("score", 15_200 * 6, 0)  # queries x runs
    assert works["enc_scibert"].rate == "encode-model"
    assert works["bench_rank_bm25"].rate == "benchmark-rank-bm25"
    # The parts an engine can run at once: 69 pools per split, 20k-paper shards.
    assert (works["bm25_tune"].parts, works["bm25"].parts) == (69, 138)
    assert works["bm25_tune"].largest == pytest.approx(2_000_000 * 3_800 / pairs)
    assert works["enc_scibert"].parts == 692 and works["score"].parts == 0


def test_machine_model_is_as_stated() -> None:
    assert Machine(cores=16, gpus=1).speedup() == 6.0  # 16 / 2 cores x 0.75
    assert Machine(cores=2, gpus=0).speedup() == 1.0
    assert Machine(cores=1, gpus=0).speedup() == 0.5
    rates = {"search": Rate(fixed_s=3.0, unit_s=1.0, pair_s=0.5), "pools": Rate(1.0, 2.0)}
    work = Work("search", units=4.0, pairs=8.0)
    assert estimate(work, Machine(2, 0), rates).seconds == 3.0 + 4.0 + 4.0
    assert estimate(work, Machine(16, 0), rates).seconds == 3.0 + 8.0 / 6.0  # all cores
    assert estimate(Work("pools", units=3.0), Machine(16, 0), rates).seconds == 7.0  # one core
    gpu = estimate(Work("encode-model", units=6000.0), Machine(16, 2), rates)
    assert gpu.seconds == 1.0 and "stated rate" in gpu.basis  # 3,000 papers/s per GPU
    missing = estimate(Work("nothing"), Machine(16, 1), rates)
    assert missing.seconds == 0.0 and "no measured rate" in missing.basis
    assert [duration_text(s) for s in (42, 600, 36_000)] == ["42 s", "10 min", "10.0 h"]


def test_target_machine_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Machine.target() == Machine(cores=16, gpus=1)
    monkeypatch.setenv("MDCR_PLAN_CORES", "64")
    monkeypatch.setenv("MDCR_PLAN_GPUS", "0")
    monkeypatch.setenv("MDCR_PLAN_PAPERS_PER_S", "oops")  # not a number: the stated default
    assert Machine.target() == Machine(cores=64, gpus=0)


def test_rates_reproduce_the_measured_rehearsal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planned on the machine the rates were measured on (2 cores, no GPU), every step of
    the 1/10 rehearsal is estimated within 20% of its measured wall time."""
    data = json.loads(resources.files("mdcr").joinpath("data/stage_rates.json").read_text())
    measured = data["measured_wall_s"]["0.1"]
    works = planned_work(load_pipeline(REPO / "pipelines" / "rehearsal.toml", []), Store(tmp_path))
    machine = Machine(cores=2, gpus=0)
    rates = load_rates()
    assert set(works) == set(measured)
    for step, work in works.items():
        assert work.rate in rates, step
        assert estimate(work, machine, rates).seconds == pytest.approx(measured[step], rel=0.2), (
            step
        )
