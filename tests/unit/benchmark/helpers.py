"""Small corpora, pools and runs for the benchmark tests, built through the real store.

``test-bench-run`` is a test-only stage that writes a run in the run contract for every
field-level pool: each query's candidates are ranked by a seeded hash of (name, query,
paper), so different names give different (but deterministic) top lists. With ``builtin``
it records the built-in entry it is named after, as a real run of
that built-in does (the real models are out of reach offline).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from mdcr.core.config import input_path, param
from mdcr.core.fingerprints import artifact_fingerprint
from mdcr.core.inputs import resolve_inputs
from mdcr.core.stage import STAGES, StageContext, StageSpec
from mdcr.core.store import Store
from mdcr.index.runs import RunWriter, rank_candidates, run_table
from mdcr.pools.build import SPEC as POOLS_SPEC
from mdcr.pools.build import PoolsConfig

FIELDS = ("Biology", "Computer Science", "Medicine")


@dataclass(frozen=True)
class FakeRunConfig:
    pools: str = input_path(help="pools output")
    name: str = param("bm25", help="retriever name")
    k: int = param(60, help="run depth")
    same_as: str = param("", help="rank exactly like the run of this name")
    builtin: bool = param(False, help="stand for the built-in entry of that name")


def _score(name: str, q: str, p: str) -> float:
    h = hashlib.sha256(f"{name}|{q}|{p}".encode()).digest()
    return int.from_bytes(h[:6], "little") / 2**48


def _run(cfg: FakeRunConfig, ctx: StageContext) -> None:
    pools_dir = ctx.input("pools")
    pools = pq.read_table(pools_dir / "pools.parquet").to_pandas()
    qrels = pq.read_table(pools_dir / "qrels.parquet").to_pandas()
    with RunWriter(ctx.output("runs.parquet")) as w:
        for pool_id, g in pools.groupby("pool_id", sort=True, observed=True):
            ids = g["paper_id"].to_numpy(dtype=str)
            qids = sorted(qrels.loc[qrels["pool_id"] == pool_id, "query_id"].unique())
            ranked = []
            for q in qids:
                sc = np.array([_score(cfg.same_as or cfg.name, q, p) for p in ids])
                ranked.append(rank_candidates(ids, sc, cfg.k, exclude=q))
            w.write(run_table(str(pool_id), qids, ranked))
    ctx.outputs["runs.parquet"] = w.rows
    ctx.record("retriever", cfg.name)
    ctx.record("pools_fingerprint", artifact_fingerprint(pools_dir))
    identity = {"builtin": cfg.name, "model": {}, "options": {}} if cfg.builtin else None
    ctx.record("builtin_entry", identity)


RUN_SPEC = STAGES.register(
    StageSpec("test-bench-run", "1", FakeRunConfig, _run, "fake runs for benchmark tests")
)


def make_corpus(folder: Path, n_papers: int = 6000, seed: int = 1) -> Path:
    from mdcr.corpus.synth.stage import write_tables

    if not (folder / "papers.parquet").is_file():
        write_tables(folder, n_papers=n_papers, seed=seed, with_text=True)
    return folder


def make_pools(home: Path, corpus: Path, **params: Any) -> Path:
    defaults: dict[str, Any] = {
        "setups": ("field",),
        "fields": FIELDS,
        "field_queries": 6,
        "field_pool_size": 700,
        "repetitions": 1,
        "min_cited": 5,
    }
    cfg = PoolsConfig(corpus=str(corpus), **{**defaults, **params})
    cfg.validate()
    return Store(home).execute(POOLS_SPEC, cfg, resolve_inputs(cfg), quiet=True).path


# Dataset- and field-level pools like the demo's, small: two repetitions of each.
DEMO_LIKE_POOLS: dict[str, Any] = {
    "setups": ("dataset", "field"),
    "n_queries_dataset": 6,
    "dataset_sizes": (800,),
    "field_queries": 4,
    "field_pool_size": 300,
    "repetitions": 2,
}


def make_run(
    home: Path, pools: Path, name: str, k: int = 60, same_as: str = "", builtin: bool = False
) -> Path:
    cfg = FakeRunConfig(pools=str(pools), name=name, k=k, same_as=same_as, builtin=builtin)
    return Store(home).execute(RUN_SPEC, cfg, resolve_inputs(cfg), quiet=True).path
