"""Run the pools stage through the real store, and an independent view of a corpus."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from mdcr.core.inputs import resolve_inputs
from mdcr.core.store import Store
from mdcr.pools.build import SPEC, PoolsConfig


def run_pools(home: Path, corpus: Path, **params: Any) -> Path:
    """Build pools with ``params`` (defaults sized for small corpora); return the folder."""
    defaults: dict[str, Any] = {
        "n_queries_dataset": 30,
        "dataset_sizes": (500, 1000),
        "field_queries": 10,
        "field_pool_size": 300,
        "repetitions": 2,
        "fields": ("Art", "Biology", "Computer Science", "Medicine", "Physics"),
    }
    cfg = PoolsConfig(corpus=str(corpus), **{**defaults, **params})
    cfg.validate()
    return Store(home).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True).path


def rows(folder: Path, name: str) -> list[dict[str, Any]]:
    table = pq.read_table(folder / f"{name}.parquet")
    return [{k: (str(v) if k == "pool_id" else v) for k, v in r.items()} for r in table.to_pylist()]


@dataclass
class Corpus:
    """The corpus as Python dicts, to check the stage against an independent computation."""

    year: dict[str, int]
    fields: dict[str, list[str]]
    cites: dict[str, set[str]]

    @classmethod
    def read(cls, folder: Path) -> Corpus:
        papers = pq.read_table(folder / "papers.parquet").to_pylist()
        cites: dict[str, set[str]] = defaultdict(set)
        for e in pq.read_table(folder / "citations.parquet").to_pylist():
            cites[e["citing_id"]].add(e["cited_id"])
        return cls(
            year={p["paper_id"]: p["year"] for p in papers},
            fields={p["paper_id"]: p["fields"] for p in papers},
            cites=cites,
        )

    def positives(self, q: str, query_year: int = 2019) -> set[str]:
        """Cited papers that may be positives: year <= the query year, not the query."""
        return {c for c in self.cites.get(q, ()) if c != q and self.year[c] <= query_year}

    def field_cited(self, field: str, query_year: int = 2019) -> set[str]:
        out: set[str] = set()
        for p, fs in self.fields.items():
            if field in fs:
                out |= {c for c in self.cites.get(p, ()) if self.year[c] <= query_year}
        return out
