"""The pools benchmark script runs at CI size and reports consistent figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_bench_pools_ci_size(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    cmd = [sys.executable, str(ROOT / "scripts" / "bench_pools.py"), "--papers", "20000"]
    cmd += ["--workdir", str(tmp_path), "--json", str(out), "--setups", "dataset,field"]
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True, timeout=300)
    fig = json.loads(out.read_text())
    cfg = fig["config"]
    n_dataset = 2 * cfg["repetitions"] * sum(cfg["dataset_sizes"])
    assert fig["rows"]["pools.parquet"] >= n_dataset
    assert fig["rows"]["pool_meta.parquet"] >= 2 * cfg["repetitions"] * len(cfg["dataset_sizes"])
    assert fig["peak_rss_mib"] > 0 and fig["wall_s"] > 0
    assert {"load", "queries", "field_cited", "pools", "write"} <= set(fig["phases_s"])
