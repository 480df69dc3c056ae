"""Benchmark the check that guards every read of a stored output, against the read.

Before a stage reads an output (its inputs), before encode copies vectors from an earlier
output and before ``Store.find`` hands one over, every recorded file's XXH3-128 is compared
with its manifest (:mod:`mdcr.core.integrity`, ``hashes="read"``), whatever the file's
size. This script writes an encode-like output of ``--gib`` GiB of float16 vectors through
the real store and measures, in one process, best of ``--rounds``:

- ``read``: what a search does with the vectors, ``np.load`` of every shard into memory;
- ``check (XXH3)``: the integrity check at ``hashes="read"`` (the cache of hashed files
  cleared before each round, so every byte is hashed again);
- ``check (sha256)``: the same check by sha256 (``mdcr verify``'s), for comparison.

The files are in the page cache after the first round, so these are the CPU's costs, the
worst case for the check against the read (a read from disk is slower; the hash is not).

    python scripts/bench_integrity.py --gib 1
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0, help="size of the vectors written")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()

    from mdcr.core import integrity
    from mdcr.core.manifests import read_manifest
    from mdcr.core.stage import StageContext, StageSpec
    from mdcr.core.store import Store

    dim = 768
    rows = int(args.gib * 2**30 / (2 * dim) / args.shards)

    def write(_cfg: object, ctx: StageContext) -> None:
        rng = np.random.default_rng(0)
        for i in range(args.shards):
            vectors = rng.standard_normal((rows, dim), dtype=np.float32).astype(np.float16)
            np.save(ctx.output(f"emb_{i:05d}.npy", rows=rows), vectors)

    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Config:
        pass

    spec = StageSpec("bench-integrity", "1", Config, write, "vectors for the benchmark")
    with tempfile.TemporaryDirectory() as tmp:
        out = Store(Path(tmp)).execute(spec, Config(), {}, quiet=True).path
        manifest = read_manifest(out)
        assert manifest is not None
        files = sorted(out.glob("emb_*.npy"))
        total = sum(f.stat().st_size for f in files)
        best = dict.fromkeys(("read", "xxh3", "sha256"), float("inf"))
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            for f in files:
                np.load(f)
            best["read"] = min(best["read"], time.perf_counter() - t0)
            for kind, hashes in (("xxh3", "read"), ("sha256", "all")):
                integrity._HASHED.clear()
                t0 = time.perf_counter()
                assert integrity.damage(out, manifest, hashes=hashes) is None  # type: ignore[arg-type]
                best[kind] = min(best[kind], time.perf_counter() - t0)
        gib = total / 2**30
        print(f"{gib:.2f} GiB in {len(files)} files, best of {args.rounds}")
        for kind, label in (
            ("read", "read (np.load)"),
            ("xxh3", "check (XXH3)"),
            ("sha256", "check (sha256)"),
        ):
            t = best[kind]
            ratio = "" if kind == "read" else f"  = {t / best['read']:.2f}x the read"
            print(f"{label:<16} {t:7.3f} s  {gib / t:6.2f} GiB/s{ratio}")


if __name__ == "__main__":
    main()
