"""Benchmark exact dense search against a raw Faiss search of the same pool, same run.

A random float16 pool (``--pool`` x ``--dim``) and ``--queries`` queries (half of them
pool papers, as in the real pools, so self-exclusion is exercised) are searched at top-k
(``--k``, default 500) by each backend through mdcr's exact top-k (tie rule, self-exclusion,
float64 re-scoring), and by a raw ``faiss.IndexFlatIP.search(k)`` over the same pool in
float32: the realistic alternative. Each is measured ``--repeat`` times, interleaved, and
the best of each is compared. The script checks that all backends return identical
rankings and prints the peak resident memory (RSS) of the process.

``--sentences S`` benchmarks multi-vector (Aspire) search instead: ``--pool`` papers of
``S`` sentence vectors each, queries of ``S`` sentences, best sentence pair per paper.
``--no-raw`` leaves the raw index out (for the memory of a 2M pool without a second copy).

With the torch backend (``--backends torch``, on ``--device cuda`` or the CPU) it also
measures the floor: the pool uploaded to the device once (timed apart), then only a raw
``torch.mm`` and ``torch.topk`` per query batch. It prints the backend's CPU time beside
its wall time (the share of the search spent on the CPU), and a line ending ``N.NNx the
floor`` for mdcr's build + search against floor + upload (and the same ratio in CPU
time, steadier on a shared machine). ``--rescore-on device|host`` picks
where the torch backend re-scores the candidates (default: on CUDA the device,
on the CPU the host); ``--norm`` sets the vectors' length (1: unit vectors; 15: about
SciBERT's CLS vectors, where every pair's exactness is checked).

    python scripts/bench_search.py --pool 200000 --dim 768 --queries 1000
    python scripts/bench_search.py --pool 2000000 --no-raw --backends faiss
    python scripts/bench_search.py --pool 200000 --sentences 9 --queries 200
    python scripts/bench_search.py --pool 2000000 --device cuda --backends torch,faiss
    python scripts/bench_search.py --pool 200000 --backends torch --no-raw --norm 15
"""

from __future__ import annotations

import argparse
import json
import resource
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
    ap.add_argument(
        "--norm",
        type=float,
        default=1.0,
        help="length of every vector (1: unit vectors; about 15 for SciBERT-like CLS vectors)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="measurements of each (best wins)")
    ap.add_argument("--no-raw", action="store_true", help="leave out the raw Faiss baseline")
    ap.add_argument(
        "--rescore-on",
        choices=["auto", "device", "host"],
        default="auto",
        help="where the torch backend re-scores the candidates (auto: on CUDA "
        "the device, on the CPU the host)",
    )
    ap.add_argument("--sentences", type=int, default=0, help="multi-vector: sentences per paper")
    ap.add_argument(
        "--store",
        type=Path,
        help="also write the vectors as an embedding store here and time the search stage's "
        "own path on it (search_pool: id lookup, loading, blocks); queries not in the pool "
        "are stored as extra papers",
    )
    ap.add_argument(
        "--block-vectors", type=int, default=None, help="search_pool's block size (with --store)"
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from mdcr.index.backends import TorchBackend, make_backend
    from mdcr.index.exact import SearchStats, built_max_norm, exact_topk, exact_topk_multi
    from mdcr.retrievers.device import resolve_device

    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    per = max(1, args.sentences)
    rows = args.pool * per
    db = np.empty((rows, args.dim), dtype=np.float16)
    for s in range(0, rows, 100_000):
        block = rng.standard_normal((min(100_000, rows - s), args.dim), dtype=np.float32)
        block *= args.norm / np.linalg.norm(block, axis=1, keepdims=True)
        db[s : s + len(block)] = block
    half = args.queries // 2
    q_docs = rng.choice(args.pool, size=half, replace=False)
    q_rows = (q_docs[:, None] * per + np.arange(per)).ravel()
    extra = rng.standard_normal(((args.queries - half) * per, args.dim), dtype=np.float32)
    extra *= args.norm / np.linalg.norm(extra, axis=1, keepdims=True)
    queries = np.concatenate([db[q_rows], extra.astype(np.float16)])
    exclude = np.concatenate([q_docs, -np.ones(args.queries - half, dtype=np.int64)])
    offsets = np.arange(args.queries + 1, dtype=np.int64) * per
    sentence_doc = np.repeat(np.arange(args.pool, dtype=np.int64), per)
    print(
        f"data {args.pool} papers x {per} vector(s) x {args.dim} float16, {args.queries} "
        f"queries: {time.perf_counter() - t0:.1f}s"
    )
    device = resolve_device(args.device)
    results: dict[str, Any] = {"pool": args.pool, "sentences": per, "queries": args.queries}
    runs: dict[str, Any] = {}
    q32 = np.ascontiguousarray(queries, dtype=np.float32)
    x32 = None if args.no_raw else np.ascontiguousarray(db, dtype=np.float32)  # a user's vectors
    names = list(filter(None, args.backends.split(",")))
    backends: dict[str, Any] = {}
    raw_build: list[float] = []
    raw_times: list[float] = []
    build: dict[str, list[float]] = {name: [] for name in names}
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu_times: dict[str, list[float]] = {name: [] for name in names}
    cpu_e2e: dict[str, list[float]] = {name: [] for name in names}
    for _rep in range(args.repeat):
        # Each repetition builds every index anew and searches it: end to end is what a
        # user with the vectors in memory compares (add + search against build + search).
        if x32 is not None:
            import faiss

            t0 = time.perf_counter()
            raw_index = faiss.IndexFlatIP(args.dim)
            raw_index.add(x32)
            t1 = time.perf_counter()
            raw_index.search(q32, args.k if per == 1 else args.k + 1 + args.margin)
            raw_build.append(t1 - t0)
            raw_times.append(time.perf_counter() - t1)
            del raw_index
        for name in names:
            backends.pop(name, None)  # free the previous repetition's index first
            t0, c0 = time.perf_counter(), time.process_time()
            if name == "torch" and args.rescore_on != "auto":
                backend = backends[name] = TorchBackend(
                    db, args.metric, device, rescore_on_device=args.rescore_on == "device"
                )
            else:
                backend = backends[name] = make_backend(name, db, args.metric, device)  # type: ignore[arg-type]
            t1 = time.perf_counter()
            c1 = time.process_time()
            build[name].append(t1 - t0)
            stats = SearchStats()
            norm = built_max_norm(backend, db)  # as the search stage
            if per == 1:
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
            else:
                runs[name] = exact_topk_multi(
                    backend,
                    db,
                    sentence_doc,
                    queries,
                    offsets,
                    exclude,
                    args.k,
                    args.metric,  # type: ignore[arg-type]
                    margin=args.margin,
                    batch=args.query_batch,
                    db_max_norm=norm,
                    stats=stats,
                )
            times[name].append(time.perf_counter() - t1)
            cpu_times[name].append(time.process_time() - c1)
            cpu_e2e[name].append(time.process_time() - c0)
            results[name] = {"widened": stats.widened, **stats.extra}
    raw = min(raw_times) if raw_times else None
    raw_e2e = min(b + s for b, s in zip(raw_build, raw_times, strict=True)) if raw_times else None
    if raw is not None and raw_e2e is not None:
        results["raw_faiss_s"] = round(raw, 3)
        results["raw_faiss_add_s"] = round(min(raw_build), 3)
        results["raw_faiss_end_to_end_s"] = round(raw_e2e, 3)
        label = f"{'raw faiss':>16}"
        print(
            f"{label}: add   {min(raw_build):6.2f}s  search {raw:7.2f}s  end to end "
            f"{raw_e2e:6.2f}s (IndexFlatIP add of float32 + search, best of {args.repeat})"
        )
    floor = torch_floor(db, queries, args, device, per) if "torch" in names else None
    if floor is not None:
        results["torch_floor"] = floor
        print(
            f"{'torch floor':>16}: upload {floor['upload_s']:6.2f}s  search "
            f"{floor['floor_s']:7.2f}s (raw torch matmul + top-k per {args.query_batch} "
            f"queries over the pool already on {device}, best of {args.repeat})"
        )
    for name, backend in backends.items():
        wall = min(times[name])
        e2e = min(b + s for b, s in zip(build[name], times[name], strict=True))
        ratio = f", {wall / raw:.2f}x raw faiss" if raw else ""
        e2e_ratio = f", {e2e / raw_e2e:.2f}x raw faiss" if raw_e2e else ""
        results[name].update(
            backend=backend.name,
            build_s=round(min(build[name]), 3),
            search_s=round(wall, 3),
            end_to_end_s=round(e2e, 3),
            ms_per_query=round(1000 * wall / args.queries, 2),
            ratio_to_raw=round(wall / raw, 3) if raw else None,
            end_to_end_ratio_to_raw=round(e2e / raw_e2e, 3) if raw_e2e else None,
        )
        where = "device" if results[name].get("device_rescoring") else "host"
        rescored = results[name].get("host_rescored")
        print(
            f"{backend.name:>16}: build {min(build[name]):6.2f}s  search {wall:7.2f}s  "
            f"({1000 * wall / args.queries:.2f} ms/query, widened {results[name]['widened']}, "
            f"re-scored on the {where}"
            + (f", {rescored} pairs re-scored on the host" if rescored else "")
            + f"{ratio})"
        )
        print(f"{backend.name:>16}: end to end {e2e:6.2f}s (build + search{e2e_ratio})")
        if name == "torch" and floor is not None:
            base = floor["upload_s"] + floor["floor_s"]
            cpu = min(cpu_times[name])
            results[name].update(floor_ratio=round(e2e / base, 3), cpu_s=round(cpu, 3))
            cpu_ratio = min(cpu_e2e[name]) / floor["cpu_s"]
            results[name].update(cpu_floor_ratio=round(cpu_ratio, 3))
            print(
                f"{backend.name:>16}: CPU time {cpu:.2f}s of its search {wall:.2f}s wall "
                f"({cpu / wall:.0%}); in CPU time, build + search against floor + upload: "
                f"{cpu_ratio:.2f}x"
            )
            print(
                f"{backend.name:>16}: build + search against floor + upload: "
                f"{e2e / base:.2f}x the floor"
            )
    if args.store is not None:
        results["store"] = time_store(args, db, queries, q_docs, per, device)
        if runs:
            ids, ranked = results["store"].pop("ranked")
            first = runs[next(iter(runs))]
            same = all(
                np.array_equal(ids[a[0]], b[0]) and np.array_equal(a[1], b[1])
                for a, b in zip(first, ranked, strict=True)
            )
            print(f"search_pool == {next(iter(runs))}: {same}")
            results["store_equal"] = same
        else:
            results["store"].pop("ranked")
        if raw:
            results["store"]["ratio_to_raw"] = round(results["store"]["search_s"] / raw, 3)
    names = list(runs)
    for other in names[1:]:
        same = all(
            np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
            for a, b in zip(runs[names[0]], runs[other], strict=True)
        )
        print(f"{names[0]} == {other}: {same}")
        results[f"{names[0]}=={other}"] = same
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    results["peak_rss_mib"] = round(peak)
    print(f"peak RSS {peak:,.0f} MiB (float16 pool {db.nbytes / 2**20:,.0f} MiB)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


def torch_floor(
    db: np.ndarray, queries: np.ndarray, args: Any, device: Any, per: int
) -> dict[str, float]:
    """The floor of an exact top-k with torch: the pool uploaded once (timed apart), then
    only the matmul and ``torch.topk`` per ``--query-batch`` queries, in the torch backend's
    dtype (float16 with float32 output on CUDA, float32 on the CPU). Best of ``--repeat``.
    Multi-vector: every query sentence's ``k + 1 + margin`` nearest sentences, the search
    mdcr's first round makes."""
    import torch

    dev = torch.device(device.torch_device)
    half = dev.type == "cuda"
    k = min(args.k if per == 1 else args.k + 1 + args.margin, len(db))

    def sync() -> None:
        if half:
            torch.cuda.synchronize(dev)

    uploads, floors, cpus = [], [], []
    for _ in range(args.repeat):
        sync()
        t0, c0 = time.perf_counter(), time.process_time()
        pool = torch.from_numpy(db).to(dev)
        pool = pool if half else pool.float()
        q = torch.from_numpy(queries).to(dev)
        q = q if half else q.float()
        sync()
        t1 = time.perf_counter()
        for s in range(0, len(q), args.query_batch):
            part = q[s : s + args.query_batch]
            scores = torch.mm(part, pool.T, out_dtype=torch.float32) if half else part @ pool.T
            torch.topk(scores, k, dim=1)
        sync()
        floors.append(time.perf_counter() - t1)
        uploads.append(t1 - t0)
        cpus.append(time.process_time() - c0)
        del pool, q
    return {
        "upload_s": round(min(uploads), 3),
        "floor_s": round(min(floors), 3),
        "cpu_s": round(min(cpus), 3),
    }


def time_store(
    args: argparse.Namespace,
    db: np.ndarray,
    queries: np.ndarray,
    q_docs: np.ndarray,
    per: int,
    device: Any,
) -> dict[str, Any]:
    """Write the pool (and the queries outside it) as an embedding store; time search_pool."""
    import pyarrow as pa

    from mdcr.encoders.store import ENCODER_JSON, EmbeddingStore, write_shard
    from mdcr.index.dense import BLOCK_VECTORS, search_pool

    folder: Path = args.store
    folder.mkdir(parents=True, exist_ok=True)
    n_extra = args.queries - len(q_docs)
    ids = np.array([f"p{i:08d}" for i in range(args.pool)] + [f"q{i:08d}" for i in range(n_extra)])
    extra = queries[len(q_docs) * per :]
    shard = 100_000
    t0 = time.perf_counter()
    for s, start in enumerate(range(0, len(ids), shard)):
        stop = min(len(ids), start + shard)
        parts = []
        if start < args.pool:
            parts.append(db[start * per : min(stop, args.pool) * per])
        if stop > args.pool:
            parts.append(
                extra[(max(start, args.pool) - args.pool) * per : (stop - args.pool) * per]
            )
        vecs = np.concatenate(parts) if len(parts) > 1 else parts[0]
        offsets = np.arange(stop - start + 1, dtype=np.int64) * per if per > 1 else None
        write_shard(folder, s, ids[start:stop].tolist(), vecs, offsets)
    meta = {"identity": {"name": "bench"}, "name": "bench", "dim": args.dim, "metric": "ip"}
    (folder / ENCODER_JSON).write_text(json.dumps({**meta, "multi_vector": per > 1}))
    print(f"store written: {time.perf_counter() - t0:.1f}s")
    pool_ids = pa.array(ids[: args.pool].tolist(), pa.string())
    query_ids = ids[q_docs].tolist() + ids[args.pool :].tolist()
    block = args.block_vectors or BLOCK_VECTORS
    best = None
    for _rep in range(args.repeat):
        store = EmbeddingStore(folder)  # a fresh store: its id lookup is built each time
        t0 = time.perf_counter()
        result = search_pool(
            store, pool_ids, query_ids, k=args.k, metric="ip", backend="faiss", device=device,
            query_batch=args.query_batch, margin=args.margin, block_vectors=block,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        best = wall if best is None else min(best, wall)
    assert best is not None
    print(
        f"{'search_pool':>16}: {best:7.2f}s (best of {args.repeat}; {result.stats['blocks']} "
        f"block(s) of at most {block:,} vectors; id lookup and loading included)"
    )
    return {
        "search_s": round(best, 3),
        "blocks": result.stats["blocks"],
        "block_vectors": block,
        "ranked": (ids, result.ranked),
    }


if __name__ == "__main__":
    main()
