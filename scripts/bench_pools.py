"""Benchmark the pools stage on a synthetic prefiltered corpus (ids, years, fields, citations).

The paper's corpus has about 16M prefiltered papers; ``--papers 16000000`` builds all
dataset-level pools at full scale (4 sizes x 3 repetitions, per split). With fewer
papers the pool sizes and query counts shrink in proportion (for CI), so the pools keep
the paper's ratios. Prints wall time, per-phase timings, peak RSS and rows written.

    python scripts/bench_pools.py --papers 200000            # CI-sized, seconds
    python scripts/bench_pools.py --papers 16000000          # full scale, minutes

The corpus comes from ``mdcr.corpus.synth.stage.write_tables`` (``--generator synth``, the
default), or from a built-in DuckDB generator (``--generator duckdb``: faster to make,
same schema, with about 10 citations per paper and 30 per query-year paper). It is
generated in a child process, so the peak RSS reported is the pools stage's alone. It is
kept under ``--workdir`` and reused by later runs with the same generator, size and seed;
delete it after changing the generator.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FULL_PAPERS = 16_000_000
SIZES = (200_000, 500_000, 1_000_000, 2_000_000)


def generate_duckdb(out: Path, n: int, seed: int) -> None:
    """Write papers.parquet + citations.parquet for ``n`` papers with DuckDB SQL.

    Paper i has a year that grows with i (density ~ year^2 over 1950-2020, about 4% in
    2019) and cites papers with a smaller index, so never a later year.
    """
    import duckdb

    from mdcr.contracts.paper import MAG_FIELDS

    out.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = false")
    fields = "[" + ", ".join(f"'{f}'" for f in MAG_FIELDS) + "]"
    con.execute(
        f"""CREATE TABLE p AS SELECT i,
          ((i * 2654435761 + {seed}) % 4294967296)::VARCHAR AS paper_id,
          (1950 + floor(71 * pow((i + 0.5) / {n}, 1.0 / 3)))::INTEGER AS year,
          CASE WHEN i % 3 = 0
               THEN [{fields}[1 + (i * 7) % 19], {fields}[1 + (i * 11 + 5) % 19]]
               ELSE [{fields}[1 + (i * 7) % 19]] END AS fields
        FROM range({n}) t(i)"""
    )
    con.execute(
        f"""COPY (SELECT paper_id, '' AS title, '' AS abstract, year, fields,
                  0 AS n_out, 0 AS n_in FROM p)
           TO '{out / "papers.parquet"}' (FORMAT parquet, COMPRESSION zstd)"""
    )
    con.execute(
        f"""COPY (
          WITH e AS (
            SELECT i, m FROM (
              SELECT i, year, unnest(range(CASE WHEN year >= 2019 THEN 10 + (i * 13) % 41
                                               ELSE (i * 13) % 21 END)) AS m
              FROM p WHERE i > 0)
          )
          SELECT a.paper_id AS citing_id, b.paper_id AS cited_id
          FROM (SELECT i, (i - 1 - floor(i * pow((hash(i, m, {seed}) % 1000003) / 1000003.0, 2))
                 )::BIGINT AS j FROM e) x
          JOIN p a ON a.i = x.i JOIN p b ON b.i = x.j
        ) TO '{out / "citations.parquet"}' (FORMAT parquet, COMPRESSION zstd)"""
    )


def generate_synth(out: Path, n: int, seed: int) -> None:
    from mdcr.corpus.synth.stage import write_tables

    write_tables(out, n_papers=n, seed=seed, with_text=False)


def peak_rss_mib() -> float:
    """Peak resident memory of this process (VmHWM), in MiB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--papers", type=int, default=200_000, help="prefiltered papers")
    ap.add_argument("--generator", choices=("synth", "duckdb"), default="synth")
    ap.add_argument("--workdir", type=Path, default=Path("data/bench-pools"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--setups", default="dataset", help="comma list: dataset,field")
    ap.add_argument("--splits", default="val,test", help="comma list: val,test")
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--keep", action="store_true", help="keep the pools output")
    ap.add_argument("--_generate", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._generate is not None:  # the child process
        gen = generate_synth if args.generator == "synth" else generate_duckdb
        gen(args._generate, args.papers, args.seed)
        return 0

    corpus = args.workdir / f"{args.generator}-{args.papers}-s{args.seed}"
    t0 = time.perf_counter()
    if not (corpus / "citations.parquet").is_file():
        cmd = [sys.executable, __file__, "--_generate", str(corpus)]
        cmd += ["--papers", str(args.papers), "--generator", args.generator]
        subprocess.run([*cmd, "--seed", str(args.seed)], check=True)
    t_gen = time.perf_counter() - t0

    import pyarrow.parquet as pq

    from mdcr.core.inputs import resolve_inputs
    from mdcr.core.store import Store
    from mdcr.pools.build import SPEC, PoolsConfig

    scale = min(1.0, args.papers / FULL_PAPERS)
    cfg = PoolsConfig(
        corpus=str(corpus),
        n_queries_dataset=max(5, round(3800 * scale)),
        dataset_sizes=tuple(max(100, round(s * scale)) for s in SIZES),
        field_queries=max(2, round(200 * scale)),
        field_pool_size=max(100, round(100_000 * scale)),
        repetitions=args.repetitions,
        splits=tuple(s for s in args.splits.split(",") if s),  # type: ignore[arg-type]
        setups=tuple(s for s in args.setups.split(",") if s),  # type: ignore[arg-type]
        on_short_field="warn",
    )
    cfg.validate()
    home = Path(tempfile.mkdtemp(prefix="home-", dir=args.workdir))
    rss0 = peak_rss_mib()
    t1 = time.perf_counter()
    art = Store(home).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True, label="pools")
    wall = time.perf_counter() - t1
    manifest = json.loads((art.path / "manifest.json").read_text())
    rows = {k: v["rows"] for k, v in manifest["outputs"].items()}
    sizes = {k: v["bytes"] for k, v in manifest["outputs"].items()}
    n_cit = pq.ParquetFile(corpus / "citations.parquet").metadata.num_rows
    figures = {
        "papers": args.papers,
        "citations": n_cit,
        "generator": args.generator,
        "threads": os.environ.get("MDCR_THREADS", str(os.cpu_count())),
        "config": {
            "n_queries_dataset": cfg.n_queries_dataset,
            "dataset_sizes": list(cfg.dataset_sizes),
            "repetitions": cfg.repetitions,
            "splits": list(cfg.splits),
            "setups": list(cfg.setups),
        },
        "generate_s": round(t_gen, 1),
        "wall_s": round(wall, 1),
        "phases_s": {k: v for k, v in manifest["timings"].items() if k not in ("started",)},
        "peak_rss_mib_before": round(rss0),
        "peak_rss_mib": round(peak_rss_mib()),
        "rows": rows,
        "bytes": sizes,
        "query_funnel": manifest["info"]["query_funnel"],
        "output": str(art.path),
    }
    if not args.keep:
        shutil.rmtree(home)
        figures["output"] = "(deleted; use --keep)"
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
