"""The dry run's wall-time estimates: the work each stage plans, the machine model, and
the measured rates reproducing the rehearsal they were fitted on."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from mdcr.core.pipeline import load_pipeline, planned_work
from mdcr.core.stage import Work
from mdcr.core.store import Store
from mdcr.planning.timing import (
    GpuRates,
    Machine,
    Rate,
    duration_text,
    estimate,
    load_gpu_rates,
    load_rates,
)

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
    stated = Machine(16, 2, papers_per_s=3000.0)
    gpu = estimate(Work("encode-model", units=6000.0), stated, rates)
    assert gpu.seconds == 1.0 and "stated rate" in gpu.basis  # 3,000 papers/s per GPU
    missing = estimate(Work("nothing"), Machine(16, 1), rates)
    assert missing.seconds == 0.0 and "no measured rate" in missing.basis
    assert [duration_text(s) for s in (42, 600, 36_000)] == ["42 s", "10 min", "10.0 h"]


def test_gpu_work_is_priced_by_the_rates_measured_on_the_named_card() -> None:
    measured = load_gpu_rates()
    assert measured.card.startswith("NVIDIA ") and measured.papers_per_s > 0
    gpu = GpuRates("NVIDIA X", 2000.0, {"search": Rate(1.0, 0.5, 0.25)})
    encode = estimate(Work("encode-model", units=8000.0), Machine(16, 2), {}, gpu)
    assert encode.seconds == 2.0 and encode.basis == (
        "2,000 BERT-base papers/s per GPU (measured on an NVIDIA X)"
    )
    search = estimate(Work("search", units=4.0, pairs=8.0), Machine(16, 2), {}, gpu)
    assert search.seconds == 1.0 + (2.0 + 2.0) / 2  # shared by the GPUs
    assert "measured on an NVIDIA X" in search.basis
    # Without a GPU the same work takes the CPU rate.
    cpu = {"search": Rate(3.0, 1.0, 0.5)}
    assert estimate(Work("search", units=4.0, pairs=8.0), Machine(16, 0), cpu, gpu).seconds == (
        3.0 + 8.0 / 6.0
    )


def test_target_machine_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Machine.target() == Machine(cores=16, gpus=1)
    monkeypatch.setenv("MDCR_PLAN_CORES", "64")
    monkeypatch.setenv("MDCR_PLAN_GPUS", "0")
    monkeypatch.setenv("MDCR_PLAN_PAPERS_PER_S", "oops")  # not a number: the measured rate
    assert Machine.target() == Machine(cores=64, gpus=0)
    monkeypatch.setenv("MDCR_PLAN_PAPERS_PER_S", "2500")
    assert Machine.target().papers_per_s == 2500.0


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


def test_s2ag_prefilter_is_priced_by_the_release_size(tmp_path: Path) -> None:
    """An S2AG prefilter is priced per gzipped byte of its three datasets (its own rate,
    measured by bench_prefilter.py): the files' sizes when the release is there (a plain
    file at its size / 7.9), else a stated full release; S2ORC stays priced per record."""
    import gzip

    from mdcr.corpus.prefilter.stage import PrefilterConfig, plan_prefilter
    from mdcr.planning.sizes import S2AG_GZ_PER_PAPER, S2AG_PLAIN_PER_GZ

    release = tmp_path / "release"
    sizes = {}
    for name, body in (("papers", b"p" * 5000), ("abstracts", b"a" * 300), ("citations", b"c")):
        (release / name).mkdir(parents=True)
        (release / name / f"{name}-0.jsonl.gz").write_bytes(gzip.compress(body * 40))
        sizes[name] = (release / name / f"{name}-0.jsonl.gz").stat().st_size
    (release / "citations" / "citations-1.jsonl").write_bytes(b"x" * 7900)
    cfg = PrefilterConfig(input=str(release))
    plan = plan_prefilter(cfg, {"input": [release]}, {})
    assert plan.work is not None and plan.work.rate == "prefilter-s2ag"
    assert plan.work.units == sum(sizes.values()) + round(7900 / S2AG_PLAIN_PER_GZ)
    papers = (sizes["papers"] + sizes["abstracts"]) / S2AG_GZ_PER_PAPER
    assert plan.facts is not None and plan.facts.records == round(papers)
    assert "the release's file sizes" in plan.text
    missing = plan_prefilter(
        PrefilterConfig(input="nowhere", format="s2ag"), {"input": [tmp_path / "nowhere"]}, {}
    )
    assert missing.work is not None and missing.work.units == 74_446_000_000
    assert missing.facts is not None and missing.facts.records == 220_000_000
    s2orc = plan_prefilter(PrefilterConfig(input="s"), {"input": [tmp_path / "s"]}, {})
    assert s2orc.work is not None and (s2orc.work.rate, s2orc.work.units) == ("prefilter", 81.1e6)
    rate = load_rates()["prefilter-s2ag"]  # about 7 minutes for a full release on 16 cores
    assert 360 < estimate(missing.work, Machine(16, 1), {"prefilter-s2ag": rate}).seconds < 480


SAMPLE = REPO / "tests" / "data" / "s2orc_sample"


def test_an_s2orc_folder_that_is_there_is_priced_by_its_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`S2ORC_DIR` naming a 1,000-paper folder plans 1,000 records, not S2ORC's 81.1M: a
    small file is counted, large ones (gzipped or not) estimated from their sizes and a
    sample of their lines."""
    import gzip

    from mdcr.corpus.prefilter.stage import PrefilterConfig, plan_prefilter
    from mdcr.planning import sizes
    from mdcr.planning.sizes import PREFILTER_KEEPS, count_records

    monkeypatch.setenv("S2ORC_DIR", str(SAMPLE))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    works = planned_work(load_pipeline(REPO / "pipelines" / "paper.toml", []), Store(tmp_path))
    assert (works["prefilter"].rate, works["prefilter"].units) == ("prefilter", 1000)
    # no pool larger than the ~197 papers it keeps: minutes, not the full paper's hours
    assert works["search_scibert"].units <= 2 * 69 * 1000 * PREFILTER_KEEPS
    rates = load_rates()
    total = sum(estimate(w, Machine(16, 1), rates).seconds for w in works.values())
    assert total < 15 * 60
    plan = plan_prefilter(PrefilterConfig(input=str(SAMPLE)), {"input": [SAMPLE]}, {})
    assert "(1,000 records, counted in 1 file(s))" in plan.text
    assert plan.facts is not None and plan.facts.papers == round(1000 * PREFILTER_KEEPS)

    # Files past the size counted whole (made smaller here: 1 MiB, samples of 256 KiB).
    monkeypatch.setattr(sizes, "WHOLE_BYTES", 1 << 20)
    monkeypatch.setattr(sizes, "SAMPLE_BYTES", 1 << 18)
    lines = (SAMPLE / "metadata_sample.jsonl").read_bytes()
    big = tmp_path / "big"
    big.mkdir()
    (big / "metadata_0.jsonl").write_bytes(lines * 2)
    with gzip.open(big / "metadata_1.jsonl.gz", "wb") as fh:
        for _ in range(6):
            fh.write(lines)
    assert min(f.stat().st_size for f in big.iterdir()) > sizes.WHOLE_BYTES
    records, how = count_records(sorted(big.iterdir())) or (0, "")
    assert how == "estimated from 2 file(s)' sizes and a sample of 2"
    assert records == pytest.approx(1000 * 8, rel=0.1)
    assert count_records([tmp_path / "nothing.jsonl"]) is None
