"""A measured rehearsal of the paper's experiments: pipelines/rehearsal.toml, step by step.

Each step runs as its own ``mdcr run pipelines/rehearsal.toml --only STEP`` process, so
that its wall time and peak resident memory (RSS, from ``os.wait4``) are its own; the disk
use of its output folder is measured after it. ``--scale`` multiplies the pipeline's sizes
(the file is 1/10 of the paper: ``--scale 0.1``, the default; ``--scale 0.01`` is 1/100):
synthetic records, dataset-level queries and pool sizes, field-level queries and pool
size. Steps already built in ``--home`` are reported as up to date, not timed again.

    python scripts/bench_paper.py                        # 1/10 of the paper (about an hour)
    python scripts/bench_paper.py --scale 0.01 --json bench-out/paper-0.01.json

``--fit`` turns measured tables into the rates the dry run prices work with
(mdcr/planning/timing.py): each step's work is planned exactly as ``--dry-run`` plans it
at that scale, and every rate's ``fixed_s + unit_s * units + pair_s * pairs`` is fitted
to the steps it prices, non-negative, minimising the relative error:

    python scripts/bench_paper.py --fit bench-out/paper-0.001.json bench-out/paper-0.01.json \
        bench-out/paper-0.1.json --rates-out mdcr/data/stage_rates.json \
        --pair-rate "search=6.4e-9=bench_search.py 2M x 768, 1000 queries: 12.8 s" ...

The rehearsal's pools are small (20k-200k), so the seconds per pair of search and BM25,
which dominate at the paper's pools (200k-2M), are taken from their benchmarks at those
sizes (``--pair-rate KEY=SECONDS=SOURCE``); the fit then finds the rest.
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


def fit_rate(
    rows: list[tuple[float, float, float]], pair_s: float | None = None
) -> tuple[dict[str, float], float]:
    """Non-negative ``fixed, unit, pair`` seconds fitted to ``(units, pairs, wall_s)`` rows.

    Relative least squares over every subset of the three terms (at most 7 small solves),
    keeping the best fit whose terms are all >= 0. A given ``pair_s`` is kept and only
    the other two are fitted to what it leaves. Returns the rate and its worst relative
    error on the rows."""
    import itertools

    import numpy as np

    pinned = pair_s or 0.0
    a = np.array([[1.0, u, p] for u, p, _ in rows])
    t = np.array([w for _, _, w in rows])
    if pair_s is not None:
        rate, err = fit_rate([(u, 0.0, w - pinned * p) for u, p, w in rows])
        rate["pair_s"] = pinned
        fitted = a @ np.array([rate["fixed_s"], rate["unit_s"], pinned])
        return rate, float(np.abs(fitted / t - 1).max())
    weighted = a / t[:, None]
    best: tuple[float, np.ndarray] | None = None
    for size in (1, 2, 3):
        for cols in itertools.combinations(range(3), size):
            if not weighted[:, list(cols)].any():
                continue
            sol, *_ = np.linalg.lstsq(weighted[:, list(cols)], np.ones(len(t)), rcond=None)
            if (sol < 0).any():
                continue
            coef = np.zeros(3)
            coef[list(cols)] = sol
            err = float(np.abs(a @ coef / t - 1).max())
            if best is None or err < best[0] - 1e-12:
                best = (err, coef)
    assert best is not None
    err, coef = best
    names = ("fixed_s", "unit_s", "pair_s")
    return {n: float(f"{c:.6g}") for n, c in zip(names, coef, strict=True)}, err


# Rates the rehearsal has no step for, taken from another's fixed and per-unit terms; they
# need a pair rate from a benchmark (--pair-rate).
DERIVED = {"search-multi-vector": "search"}


def fit(tables: list[Path], out: Path | None, pair_rates: dict[str, str]) -> int:
    """Fit the dry run's rates to measured rehearsal tables (see the module docstring).

    ``pair_rates``: rate key -> "SECONDS_PER_PAIR=where it was measured", for pair terms
    that a dedicated benchmark at the paper's pool sizes measures better than the
    rehearsal's small pools can."""
    import tempfile

    from mdcr.core.pipeline import load_pipeline, planned_work
    from mdcr.core.store import Store

    observed: dict[str, list[tuple[float, float, float]]] = {}
    sources = {}
    walls: dict[str, dict[str, float]] = {}
    for table_file in tables:
        table = json.loads(table_file.read_text())
        scale = float(table["scale"])
        sources[f"{scale:g}"] = table_file.name
        walls[f"{scale:g}"] = {row["step"]: row["wall_s"] for row in table["steps"]}
        with tempfile.TemporaryDirectory() as home:
            works = planned_work(load_pipeline(PIPELINE, overrides(scale)), Store(Path(home)))
        for row in table["steps"]:
            work = works.get(row["step"])
            if work is not None:
                observed.setdefault(work.rate, []).append((work.units, work.pairs, row["wall_s"]))
    pinned = {k: float(v.split("=", 1)[0]) for k, v in pair_rates.items()}
    rates = {}
    for key, rows in sorted(observed.items()):
        rates[key], err = fit_rate(rows, pinned.get(key))
        print(f"{key:<22} {rates[key]}  worst relative error {err:.1%} over {len(rows)} runs")
    for key, base in DERIVED.items():
        if key in pinned and base in rates:
            rates[key] = {**rates[base], "pair_s": pinned[key]}
            print(f"{key:<22} {rates[key]}  (fixed and per-unit terms of {base})")
    if out is not None:
        previous = json.loads(out.read_text()) if out.is_file() else {}
        doc = {
            "about": "seconds = fixed_s + unit_s * units + pair_s * pairs on the 2-core, "
            "24 GiB development machine without GPU; fitted by scripts/bench_paper.py --fit "
            "to the rehearsals of pipelines/rehearsal.toml at these scales",
            "cores": 2,
            "sources": sources,
            "pair_rates_from": {k: v.split("=", 1)[1] for k, v in pair_rates.items()},
            "rates": dict(sorted(rates.items())),
            # Rates with no rehearsal step (an S2AG prefilter), measured by a benchmark.
            **{k: v for k, v in previous.items() if k.startswith("benchmark_rates")},
            "measured_wall_s": walls,
        }
        out.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=FILE_SCALE, help="fraction of the paper")
    ap.add_argument("--home", type=Path, default=None, help="store (default bench-out/paper-S)")
    ap.add_argument("--json", type=Path, default=None, help="also write the table here")
    ap.add_argument("--fit", type=Path, nargs="+", help="fit rates to these measured tables")
    ap.add_argument("--rates-out", type=Path, default=None, help="write fitted rates here")
    ap.add_argument(
        "--pair-rate",
        action="append",
        default=[],
        metavar="KEY=SECONDS=SOURCE",
        help="keep this rate's seconds per pair, measured by a benchmark (with --fit)",
    )
    args = ap.parse_args(argv)
    if args.fit:
        pair_rates = dict(p.split("=", 1) for p in args.pair_rate)
        return fit(args.fit, args.rates_out, pair_rates)

    from mdcr.core.pipeline import load_pipeline

    sets = overrides(args.scale)
    home = args.home or REPO / "bench-out" / f"paper-{args.scale:g}"
    home.mkdir(parents=True, exist_ok=True)
    index_dir = home / "lucene-index"  # the store's Lucene indexes
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
