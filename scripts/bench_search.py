"""Benchmark exact dense search: Faiss and the torch backend through the same exact top-k.

A random float16 pool (``--pool`` x ``--dim``) and ``--queries`` queries (half of them
pool papers, as in the real pools, so self-exclusion is exercised) are searched at top-k
(``--k``, default 500) by each backend; the script prints wall time, time per query,
how many queries needed a widened candidate window, and checks that all backends return
identical rankings.

    python scripts/bench_search.py --pool 200000 --dim 768 --queries 1000
    python scripts/bench_search.py --pool 2000000 --device cuda --backends torch,faiss
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pool", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--k", type=int, default=500)
    ap.add_argument("--metric", default="ip", choices=["ip", "l2"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--backends", default="faiss,torch")
    ap.add_argument("--query-batch", type=int, default=1024)
    ap.add_argument("--margin", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from mdcr.device import resolve_device
    from mdcr.index.backends import make_backend
    from mdcr.index.exact import SearchStats, exact_topk, max_norm

    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    db = np.empty((args.pool, args.dim), dtype=np.float16)
    for s in range(0, args.pool, 100_000):
        block = rng.standard_normal((min(100_000, args.pool - s), args.dim), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        db[s : s + len(block)] = block
    half = args.queries // 2
    q_rows = rng.choice(args.pool, size=half, replace=False)
    extra = rng.standard_normal((args.queries - half, args.dim), dtype=np.float32)
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    queries = np.concatenate([db[q_rows], extra.astype(np.float16)])
    exclude = np.concatenate([q_rows, -np.ones(args.queries - half, dtype=np.int64)])
    print(
        f"data {args.pool} x {args.dim} float16, {args.queries} queries: "
        f"{time.perf_counter() - t0:.1f}s"
    )
    device = resolve_device(args.device)
    norm = max_norm(db)
    results: dict[str, Any] = {}
    runs = {}
    for name in args.backends.split(","):
        t0 = time.perf_counter()
        backend = make_backend(name, db, args.metric, device)  # type: ignore[arg-type]
        build = time.perf_counter() - t0
        stats = SearchStats()
        t0 = time.perf_counter()
        runs[name] = exact_topk(
            backend,
            db,
            queries,
            exclude,
            args.k,
            args.metric,  # type: ignore[arg-type]
            margin=args.margin,
            batch=args.query_batch,
            db_max_norm=norm,
            stats=stats,
        )
        wall = time.perf_counter() - t0
        results[name] = {
            "backend": backend.name,
            "build_s": round(build, 2),
            "search_s": round(wall, 2),
            "ms_per_query": round(1000 * wall / args.queries, 2),
            "widened": stats.widened,
        }
        print(
            f"{backend.name:>16}: build {build:6.2f}s  search {wall:7.2f}s  "
            f"({1000 * wall / args.queries:.2f} ms/query, widened {stats.widened})"
        )
    names = list(runs)
    for other in names[1:]:
        same = all(
            np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
            for a, b in zip(runs[names[0]], runs[other], strict=True)
        )
        print(f"{names[0]} == {other}: {same}")
        results[f"{names[0]}=={other}"] = same
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
