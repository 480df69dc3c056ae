"""Tiny pools and runs written by two test-only stages, so score and report tests go
through the real store (manifests, fingerprints, retriever names).

``test-eval-pools`` writes a pools-stage output (queries are papers of the pool, like the
real pools stage allows); ``test-eval-search`` writes a run whose quality is set by
``skill``: positives get a score boost of ``skill`` plus Gaussian noise, so a larger skill
ranks them higher (``skill=0`` is a random ranking). With ``builtin`` the run records the
built-in entry it is named after, as a real search of that
built-in encoder does (the real models are out of reach offline); without it, it is any
retriever of that name, as a ``py:`` encoder would be.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mdcr.core.config import input_path, param
from mdcr.core.fingerprints import artifact_fingerprint
from mdcr.core.stage import STAGES, StageContext, StageSpec
from mdcr.index.runs import RunWriter, rank_candidates, run_table


@dataclass(frozen=True)
class FakePoolsConfig:
    dataset_sizes: tuple[int, ...] = param((300, 600), help="dataset-level pool sizes")
    fields: tuple[str, ...] = param(("Computer Science", "Medicine"), help="fields")
    field_size: int = param(200, help="field pool size")
    reps: int = param(2, help="repetitions")
    n_queries: int = param(12, help="queries per pool")
    splits: tuple[str, ...] = param(("test",), help="splits")
    seed: int = param(0, help="seed")
    declared_sizes: tuple[int, ...] = param((), help="pool_meta sizes of the dataset pools")


def _rng(*parts: object) -> np.random.Generator:
    h = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return np.random.default_rng(int.from_bytes(h[:8], "little"))


def run_fake_pools(cfg: FakePoolsConfig, ctx: StageContext) -> None:
    meta, pools, qrels = [], [], []
    specs = []
    declared = dict(zip(cfg.dataset_sizes, cfg.declared_sizes or cfg.dataset_sizes, strict=True))
    for split in cfg.splits:
        specs += [("dataset", split, None, size) for size in cfg.dataset_sizes]
        specs += [("field", split, f, cfg.field_size) for f in cfg.fields]
    for setup, split, fld, size in specs:
        for rep in range(cfg.reps):
            label = fld if fld else declared[size]
            pid = f"{setup}/{split}/{label}/r{rep}"
            rng = _rng(cfg.seed, pid)
            papers = [f"p{i:05d}" for i in rng.choice(5000, size, replace=False)]
            queries = [f"q{(fld or 'd')[:2]}{i:03d}" for i in range(cfg.n_queries)]
            # one query is also a candidate of the pool (allowed by the contract)
            papers[0] = queries[0]
            papers = sorted(papers)
            cands = [p for p in papers if not p.startswith("q")]
            for q in queries:
                for p in rng.choice(cands, int(rng.integers(2, 7)), replace=False):
                    qrels.append((pid, q, str(p), 1))
            pools += [(pid, p) for p in papers]
            meta.append(
                (
                    pid,
                    setup,
                    split,
                    fld,
                    size if fld else declared[size],
                    rep,
                    cfg.seed,
                    len(papers),
                    len(queries),
                    2019,
                    False,
                )
            )
    pd.DataFrame(
        meta,
        columns=[
            "pool_id",
            "setup",
            "split",
            "field",
            "size",
            "rep",
            "seed",
            "n_papers",
            "n_queries",
            "query_year",
            "all_field_cited",
        ],
    ).to_parquet(ctx.output("pool_meta.parquet"), index=False)
    pd.DataFrame(pools, columns=["pool_id", "paper_id"]).to_parquet(
        ctx.output("pools.parquet"), index=False
    )
    pd.DataFrame(qrels, columns=["pool_id", "query_id", "paper_id", "relevance"]).to_parquet(
        ctx.output("qrels.parquet"), index=False
    )


@dataclass(frozen=True)
class FakeSearchConfig:
    pools: str = input_path(help="fake pools")
    retriever: str = param("bm25", help="name recorded in the manifest")
    skill: float = param(2.0, help="score boost of positives")
    k: int = param(50, help="ranks per query")
    setups: tuple[str, ...] = param(("dataset", "field"), help="setups to search")
    drop_queries: int = param(0, help="queries of each pool left out of the run")
    builtin: bool = param(False, help="stand for the built-in entry of that name")


def run_fake_search(cfg: FakeSearchConfig, ctx: StageContext) -> None:
    pools_dir = ctx.input("pools")
    meta = pd.read_parquet(pools_dir / "pool_meta.parquet")
    pools = pd.read_parquet(pools_dir / "pools.parquet")
    qrels = pd.read_parquet(pools_dir / "qrels.parquet")
    with RunWriter(ctx.output("runs.parquet")) as w:
        for pid in sorted(meta.loc[meta["setup"].isin(cfg.setups), "pool_id"]):
            cands = pools.loc[pools["pool_id"] == pid, "paper_id"].to_numpy()
            q = qrels[qrels["pool_id"] == pid]
            qids = sorted(q["query_id"].unique())[cfg.drop_queries :]
            ranked = []
            for qid in qids:
                rng = _rng(cfg.retriever, cfg.skill, pid, qid)
                pos = set(q.loc[q["query_id"] == qid, "paper_id"])
                scores = rng.normal(size=len(cands)) + cfg.skill * np.array(
                    [c in pos for c in cands], dtype=float
                )
                scores = np.round(scores, 1)  # ties, broken by the rule in rank_candidates
                ranked.append(rank_candidates(cands, scores, cfg.k, exclude=qid))
            w.write(run_table(pid, qids, ranked))
    ctx.record("retriever", cfg.retriever)
    ctx.record("pools_fingerprint", artifact_fingerprint(pools_dir))
    identity = {"builtin": cfg.retriever, "model": {}, "options": {}} if cfg.builtin else None
    ctx.record("builtin_entry", identity)


POOLS = STAGES.register(
    StageSpec("test-eval-pools", "1", FakePoolsConfig, run_fake_pools, "fake pools")
)
SEARCH = STAGES.register(
    StageSpec("test-eval-search", "1", FakeSearchConfig, run_fake_search, "fake search")
)
