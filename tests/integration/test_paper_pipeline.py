"""The paper's pipeline (pipelines/paper.toml) on a synthetic S2ORC, so the file cannot rot.

The dry run uses the paper's own sizes (nothing is built, so it is quick); the real run
scales every size down with ``--set`` overrides and replaces the five neural encoders with
hashed bag-of-words stand-ins (tests/integration/fake_encoders.py), because the model hub is
out of reach in tests. Being user encoders they are named ``<model>-standin``: a user
encoder never stands for a built-in's paper rows or MDCR negative type, so the benchmark's
model types are set to the stand-ins' names. Everything else is the real pipeline.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pandas as pd
import pytest

import mdcr.encoders.stage
import mdcr.index.bm25
import mdcr.index.dense  # noqa: F401  (registers encode, search, bm25 if STAGE_MODULES lacks them)
from mdcr.cli import main
from mdcr.store import read_manifest

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipelines" / "paper.toml"
FAKE = "py:tests.integration.fake_encoders:"
ENCODERS = {
    "scibert": "SciBERT",
    "specter": "Specter",
    "scincl": "SciNCL",
    "aspire_bm": "AspireBM",
    "aspire_cs": "AspireCS",
}
SCALED = [
    "pools.n_queries_dataset=20",
    "pools.dataset_sizes=800,1200,1600,2000",
    "pools.repetitions=2",
    "pools.field_queries=4",
    "pools.field_pool_size=600",
    "pools.on_short_field=warn",
    "pools.fields=Biology,Chemistry,Computer Science,Medicine",
    "bm25_tune.k1=0.9,1.2",
    "bm25_tune.b=0.4,0.75",
    "benchmark.on_short=warn",
    "benchmark.models=bm25,specter-standin,scincl-standin",
    "report.permutations=200",
]
for _step, _cls in ENCODERS.items():
    SCALED += [f"enc_{_step}.encoder={FAKE}{_cls}", f"bench_enc_{_step}.encoder={FAKE}{_cls}"]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from mdcr.corpus.synth import SPEC, SynthConfig
    from mdcr.store import Store

    home = tmp_path_factory.mktemp("paper")
    shards = (
        Store(home)
        .execute(SPEC, SynthConfig(n_papers=12000, n_shards=2, seed=3), {}, quiet=True)
        .path
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("S2ORC_DIR", str(shards))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.delenv("MDCR_HOME", raising=False)
        yield {"home": home}


def _run(home: Path, *extra: str) -> tuple[int, str]:
    argv = ["run", str(PIPELINE), "--home", str(home), *extra]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(argv)
    return rc, buf.getvalue()


@pytest.mark.integration
def test_dry_run_prints_the_paper_scale_plan(env: dict) -> None:
    rc, out = _run(env["home"] / "dry", "--dry-run")
    assert rc == 0
    # 4 sizes x 3 repetitions x 2 splits; 19 fields x 3 repetitions x 2 splits.
    assert "pools: 24 dataset-level + 114 field-level" in out
    assert "15200 queries" in out
    assert out.count("papers to encode:") == 10  # 5 encoders on the pools + on the benchmark
    assert "disk ~" in out
    assert "7600 queries x 66 papers" in out  # MDCR: 19 fields x 200 queries x 2 splits
    plan, _, table = out.partition("\nEstimated wall time on one machine with 16 cores, 1 GPU")
    store, *lines = plan.splitlines()
    assert store == f"store: {env['home'] / 'dry'} (--home)"
    steps = [line.split()[0] for line in lines if line and not line.startswith(" ")]
    assert steps[0] == "prefilter" and steps[-1] == "bench_score" and len(steps) == 30
    # Every step's time, then the total; each step's plan says how it was priced.
    rows = [line.split()[0] for line in table.splitlines()[1:] if line.startswith("  ")]
    assert rows == [*steps, "total"]
    assert plan.count("    time: ~") == 30
    assert plan.count("3,000 BERT-base papers/s per GPU (stated rate)") == 10
    assert "no measured rate" not in out


@pytest.mark.integration
@pytest.mark.slow
def test_scaled_paper_pipeline_runs_end_to_end(env: dict) -> None:
    home = env["home"] / "run"
    args = [a for s in SCALED for a in ("--set", s)]
    rc, out = _run(home, "-q", *args)
    assert rc == 0, out
    *_, main_file, folder = out.strip().splitlines()
    assert main_file.endswith("report.md") and Path(folder).parent.parent == home
    bench_dir = next((home / "benchmark").iterdir())
    bench = pd.read_parquet(bench_dir / "benchmark.parquet")
    sizes = bench.groupby(["split", "field", "query_id"]).size()
    assert set(bench["split"]) == {"val", "test"} and (sizes == 65).all()
    types = set(bench["candidate_type"])
    standins = {"specter-standin", "scincl-standin"}
    assert types == {"true", "bm25", *standins, "graph", "most_cited", "random"}
    report = next((home / "benchmark-score").iterdir()) / "report.md"
    text = report.read_text()
    names = ["scibert", "specter", "scincl", "aspire-bm", "aspire-cs"]
    for label in ["BM25", *(f"{n}-standin" for n in names)]:
        assert f" {label} MAP | {label} R@5 |" in text
    # Only the built-in bm25 is set beside the paper; the stand-ins never are.
    assert "| BM25 | all | MAP |" in text and "| Specter |" not in text
    assert "(Table 4 layout)" in text
    large = (next((home / "report").iterdir()) / "report.md").read_text()
    assert "Computer Science" in large or "CS" in large
    jac = read_manifest(next((home / "benchmark-jaccard").iterdir()))
    assert jac is not None and len(jac["info"]["suggested_models"]) == 3
    # Dataset- and field-level pools were all searched by every dense retriever.
    for step in ("search",):
        for folder in (home / step).iterdir():
            runs = pd.read_parquet(folder / "runs.parquet", columns=["pool_id"])
            pools = set(runs["pool_id"].astype(str))
            assert any(p.startswith("dataset/test/") for p in pools)
            assert any(p.startswith("field/test/") for p in pools)
