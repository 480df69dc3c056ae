"""Each stage's work for the wall-time estimate, from the facts its inputs' plans returned.

The units match the rates of :mod:`mdcr.planning.timing` (fitted on the same functions by
``scripts/bench_paper.py --fit``), so keep both in step: search and BM25 price the papers
of their pools (``units``) and pool size x queries (``pairs``); the others price papers,
records or queries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from mdcr.core.stage import PlanFacts, Work
from mdcr.planning.sizes import ASPIRE_SENTENCES

# Vectors of this size make one unit of search pairs; others count in proportion.
UNIT_DIM = 768


def facts_of(
    inputs: dict[str, list[Path]], name: str, upstream: Mapping[Path, PlanFacts]
) -> list[PlanFacts]:
    """The planned facts of every folder an input names (those planned so far)."""
    return [upstream[p] for p in inputs.get(name) or [] if p in upstream]


def pool_work(
    rate: str, pools: PlanFacts, splits: Iterable[str], *, pair_factor: float = 1.0
) -> Work:
    """Papers and pairs of the pools of ``splits``."""
    splits = list(splits)
    units = sum(pools.pool_papers.get(s, 0) for s in splits)
    base = sum(pools.pool_pairs.get(s, 0) for s in splits)
    return Work(
        rate,
        units=float(units),
        pairs=float(base * pair_factor),
        parts=sum(pools.pool_count.get(s, 0) for s in splits),
        largest=pools.pool_max_pairs / base if base else 0.0,
    )


def search_work(inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]) -> Work | None:
    """Dense search: every pool's vectors, and its queries against them.

    Multi-vector encoders have a rate of their own, measured at 9 vectors per paper
    (Aspire's average): their pairs count papers, scaled by the square of the vectors per
    paper relative to that."""
    pools = facts_of(inputs, "pools", upstream)
    if not pools:
        return None
    embeddings = facts_of(inputs, "embeddings", upstream)
    per_paper = embeddings[0].vectors_per_paper if embeddings else 1.0
    dim = (embeddings[0].dim if embeddings else 0) or UNIT_DIM
    work = pool_work("search", pools[0], pools[0].pool_papers, pair_factor=dim / UNIT_DIM)
    if per_paper <= 1:
        return work
    return replace(
        work,
        rate="search-multi-vector",
        units=work.units * per_paper,
        pairs=work.pairs * (per_paper / ASPIRE_SENTENCES) ** 2,
    )


def queries_work(rate: str, queries: int, runs: int) -> Work:
    """Work that reads every query's ranked list of each run."""
    return Work(rate, units=float(queries * max(runs, 1)))
