"""The config of the ``benchmark`` stage (``mdcr benchmark build``); the stage and its
rules are in :mod:`mdcr.benchmark.build`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mdcr.contracts.paper import (
    MDCR_FIXED_TYPES,
    MDCR_MOST_CITED_N,
    MDCR_PER_TYPE,
    MDCR_POSITIVE,
    MDCR_POSITIVES,
    MDCR_TOP_N,
)
from mdcr.core.config import input_path, param
from mdcr.core.errors import ConfigError
from mdcr.retrievers.builtin import MDCR_MODELS

FIXED_TYPES, POSITIVE = MDCR_FIXED_TYPES, MDCR_POSITIVE


@dataclass(frozen=True)
class BenchmarkConfig:
    corpus: str = input_path(
        help="prefiltered corpus (prefilter output: papers.parquet with n_in, citations.parquet)"
    )
    pools: str = input_path(help="pools output; the MDCR queries are its field-level queries")
    runs: tuple[str, ...] = input_path(
        (),
        multiple=True,
        help="search/bm25 outputs on the field-level pools, one per model in `models` "
        "(matched by their manifest's info.retriever)",
    )
    models: tuple[str, ...] = param(
        MDCR_MODELS, help="models whose top candidates give the model-based negative types"
    )
    n_true: int = param(MDCR_POSITIVES, help="positives per query (sampled from its cited papers)")
    n_per_type: int = param(MDCR_PER_TYPE, help="negatives per candidate type")
    top_n: int = param(MDCR_TOP_N, help="model-based types sample from each model's top N ranks")
    most_cited_n: int = param(
        MDCR_MOST_CITED_N, help="most_cited samples from the field's N most-cited papers"
    )
    pool_rep: int = param(0, help="repetition of the field-level pools whose runs are used")
    seed: int = param(0, help="master seed of every sample")
    splits: tuple[Literal["val", "test"], ...] = param(("val", "test"), help="splits to build")
    fields: tuple[str, ...] = param((), help="fields to build; empty = every field with queries")
    graph_similarity: Literal["overlap", "intersection"] = param(
        "overlap",
        help="graph type: overlap = |C_q ∩ N_c| / min(|C_q|, |N_c|); intersection = |C_q ∩ N_c|",
    )
    on_short: Literal["error", "warn"] = param(
        "error",
        help="a query lacking positives or a full type: stop, or keep it as it is and warn "
        "(listed in short_queries.parquet either way)",
    )
    hf_export: bool = param(True, help="also save the benchmark as HF datasets (needs datasets)")

    def validate(self) -> None:
        for key in ("n_true", "n_per_type", "top_n", "most_cited_n"):
            if getattr(self, key) < 1:
                raise ConfigError(f"benchmark.{key}: must be >= 1, got {getattr(self, key)}")
        if self.pool_rep < 0 or self.seed < 0:
            raise ConfigError("benchmark.pool_rep and benchmark.seed must be >= 0")
        if len(set(self.models)) != len(self.models):
            raise ConfigError(f"benchmark.models: lists a model twice: {list(self.models)}")
        reserved = [m for m in self.models if m in (*FIXED_TYPES, POSITIVE) or not m]
        if reserved:
            raise ConfigError(
                f"benchmark.models: '{reserved[0]}' is a reserved type name; name models "
                "by their retriever names (bm25, specter, scincl, ...)"
            )
        if self.top_n < self.n_per_type or self.most_cited_n < self.n_per_type:
            raise ConfigError(
                f"benchmark.top_n and most_cited_n must be >= n_per_type ({self.n_per_type})"
            )
        if not self.splits or len(set(self.splits)) != len(self.splits):
            raise ConfigError(f"benchmark.splits: must be val and/or test, got {self.splits}")
