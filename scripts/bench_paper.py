"""A measured rehearsal of the paper's experiments: pipelines/rehearsal.toml, step by step.

Each step runs as its own ``mdcr run pipelines/rehearsal.toml --only STEP`` process, so
that its wall time and peak resident memory (RSS, from ``os.wait4``) are its own; the disk
use of its output folder is measured after it. ``--scale`` multiplies the pipeline's sizes
(the file is 1/10 of the paper: ``--scale 0.1``, the default; ``--scale 0.01`` is 1/100):
synthetic records, dataset-level queries and pool sizes, field-level queries and pool
size. Steps already built in ``--home`` are reported as up to date, not timed again.

    python scripts/bench_paper.py                        # 1/10 of the paper (about an hour)
    python scripts/bench_paper.py --scale 0.01 --json bench-out/paper-0.01.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
PIPELINE = REPO / "pipelines" / "rehearsal.toml"
# The file's sizes, which are 1/10 of the paper's.
FILE_SCALE = 0.1
SIZES: dict[str, int | tuple[int, ...]] = {
    "corpus.n_papers": 8_400_000,
    "pools.n_queries_dataset": 380,
    "pools.dataset_sizes": (20_000, 50_000, 100_000, 200_000),
    "pools.field_queries": 20,
    "pools.field_pool_size": 10_000,
}


def overrides(scale: float) -> list[str]:
    """``--set`` values that take the file's sizes to ``scale`` of the paper's."""
    factor = scale / FILE_SCALE
    out = []
    for key, value in SIZES.items():
        if isinstance(value, tuple):
            out.append(f"{key}={','.join(str(max(100, round(v * factor))) for v in value)}")
        else:
            out.append(f"{key}={max(2, round(value * factor))}")
    return out


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run_step(step: str, sets: list[str], home: Path, log: Path) -> dict[str, Any]:
    """One step in its own process: wall time, peak RSS, exit status."""
    cmd = [sys.executable, "-m", "mdcr.cli", "run", str(PIPELINE), "--only", step]
    cmd += ["--home", str(home)] + [a for s in sets for a in ("--set", s)]
    t0 = time.perf_counter()
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    return {
        "step": step,
        "wall_s": round(wall, 1),
        "peak_rss_mib": round(usage.ru_maxrss / 1024),
        "exit": os.waitstatus_to_exitcode(status),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=FILE_SCALE, help="fraction of the paper")
    ap.add_argument("--home", type=Path, default=None, help="store (default bench-out/paper-S)")
    ap.add_argument("--json", type=Path, default=None, help="also write the table here")
    args = ap.parse_args(argv)

    from mdcr.pipeline import load_pipeline

    sets = overrides(args.scale)
    home = args.home or REPO / "bench-out" / f"paper-{args.scale:g}"
    home.mkdir(parents=True, exist_ok=True)
    index_dir = home / "indexes"
    os.environ["MDCR_INDEX_DIR"] = str(index_dir)
    pipeline = load_pipeline(PIPELINE, sets)
    log = home / "bench_paper.log"
    print(f"rehearsal at {args.scale:g} of the paper: {len(pipeline.steps)} steps; log {log}")
    rows = []
    for step in pipeline.steps:
        before = folder_bytes(home)
        row = run_step(step.id, sets, home, log)
        if row["exit"] != 0:
            print(f"step {step.id} failed (exit {row['exit']}); see {log}")
            return 1
        row["stage"] = step.spec.name
        # What the step added to the store (its outputs, and Lucene indexes it built).
        row["disk_mib"] = round((folder_bytes(home) - before) / 2**20, 1)
        rows.append(row)
        print(
            f"{step.id:<20} {row['stage']:<16} {row['wall_s']:>8.1f} s  "
            f"{row['peak_rss_mib']:>7,} MiB peak RSS  {row['disk_mib']:>9,.1f} MiB on disk"
        )
    total = sum(r["wall_s"] for r in rows)
    index_mib = round(folder_bytes(index_dir) / 2**20, 1) if index_dir.exists() else 0.0
    print(f"total {total:,.0f} s; Lucene indexes {index_mib:,.1f} MiB")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        table = {"scale": args.scale, "steps": rows, "total_s": total, "index_mib": index_mib}
        args.json.write_text(json.dumps(table, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
