"""The store's Parquet files read on demand with DuckDB: one query's ranking by each
retriever, the top k of every query of a setup, its positives, and papers' texts.

Every path comes from the opened result (:mod:`mdcr.explore.result`), found through the
manifests; a request only chooses values (a pool, a query, a retriever), which DuckDB
receives as bound parameters. Runs hold one row group per pool, so a filter on the pool
reads that pool's rows only; nothing of a pool is held in memory between requests.

MDCR rankings are ranked from the pair scores as benchmark-score ranks them
(:func:`mdcr.benchmark.scoring.rank_scores`, with the ties the benchmark-score output
used), so a rank shown is the rank that was scored.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from mdcr.explore.result import Ranking, Result, Setup


@dataclass(frozen=True)
class Ranked:
    """One retriever's ranking of one query: every paper it ranked (rank 1 first, at most
    its run's depth), with scores."""

    retriever: str
    paper_ids: list[str]
    scores: list[float]

    @property
    def depth(self) -> int:
        return len(self.paper_ids)

    def rank_of(self) -> dict[str, int]:
        return {p: i + 1 for i, p in enumerate(self.paper_ids)}


class Reader:
    """A DuckDB connection over the result's files; each call takes its own cursor, so the
    server's threads read in parallel."""

    def __init__(self, result: Result, threads: int = 2, memory_limit: str = "1GB") -> None:
        import duckdb

        self.result = result
        self._con = duckdb.connect(config={"threads": threads, "memory_limit": memory_limit})
        self._lock = threading.Lock()

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            return self._con.cursor()

    def _frame(self, sql: str, params: list[Any]) -> pd.DataFrame:
        cur = self._cursor()
        try:
            return cur.execute(sql, params).df()
        finally:
            cur.close()

    # -- one query ----------------------------------------------------------------------

    def ranking(self, setup: Setup, unit: int, retriever: str) -> Ranked | None:
        """``retriever``'s whole ranking of the query of ``unit`` (None: no ranking of it
        is stored with this result)."""
        source = self.result.ranking(setup, retriever)
        if source is None:
            return None
        row = self.result.units.iloc[unit]
        if source.mdcr:
            ranked = self._mdcr_ranked(source, str(row["split"]), str(row["field"]), row)
        else:
            ranked = self._frame(
                "SELECT paper_id, score FROM read_parquet(?) "
                "WHERE pool_id = ? AND query_id = ? ORDER BY rank",
                [str(source.file), str(row["pool_id"]), str(row["query_id"])],
            )
        return Ranked(
            retriever,
            [str(p) for p in ranked["paper_id"]],
            [float(s) for s in ranked["score"]],
        )

    def _mdcr_ranked(self, source: Ranking, split: str, field: str, row: Any) -> pd.DataFrame:
        from mdcr.benchmark.scoring import rank_scores

        scored = self._frame(
            "SELECT split, field, query_id, paper_id, score FROM read_parquet(?) "
            "WHERE split = ? AND field = ? AND query_id = ?",
            [str(source.file), split, field, str(row["query_id"])],
        )
        return rank_scores(scored, source.ties)  # type: ignore[arg-type]

    def positives(self, setup: Setup, unit: int) -> list[str]:
        """The query's cited papers in that pool: its qrels with relevance >= 1 (MDCR: its
        ``true`` candidates), by paper id."""
        from mdcr.contracts.paper import MDCR_POSITIVE

        row = self.result.units.iloc[unit]
        if setup.is_mdcr:
            if self.result.benchmark is None:
                return []
            found = self._frame(
                "SELECT DISTINCT paper_id FROM read_parquet(?) WHERE split = ? AND field = ? "
                "AND query_id = ? AND candidate_type = ? ORDER BY paper_id",
                [
                    str(self.result.benchmark),
                    str(row["split"]),
                    str(row["field"]),
                    str(row["query_id"]),
                    MDCR_POSITIVE,
                ],
            )
        else:
            if self.result.qrels is None:
                return []
            found = self._frame(
                "SELECT DISTINCT paper_id FROM read_parquet(?) WHERE pool_id = ? "
                "AND query_id = ? AND relevance >= 1 ORDER BY paper_id",
                [str(self.result.qrels), str(row["pool_id"]), str(row["query_id"])],
            )
        return [str(p) for p in found["paper_id"]]

    def papers(self, setup: Setup, ids: list[str]) -> dict[str, dict[str, Any]]:
        """paper_id -> title, abstract and year (where the papers file has one) of the
        papers ``ids`` that the setup's papers file holds."""
        import pyarrow.parquet as pq

        path = self.result.benchmark_papers if setup.is_mdcr else self.result.pool_papers
        if path is None or not ids:
            return {}
        has_year = "year" in pq.read_schema(path).names
        year = "year" if has_year else "NULL AS year"
        found = self._frame(
            f"SELECT paper_id, title, abstract, {year} FROM read_parquet(?) "
            "WHERE paper_id IN (SELECT unnest(?))",
            [str(path), sorted(set(ids))],
        )
        import pandas as pd

        out: dict[str, dict[str, Any]] = {}
        for paper, title, abstract, when in zip(
            found["paper_id"], found["title"], found["abstract"], found["year"], strict=True
        ):
            out[str(paper)] = {
                "title": "" if title is None else str(title),
                "abstract": "" if abstract is None else str(abstract),
                "year": None if pd.isna(when) else int(when),
            }
        return out

    # -- every query of a setup ---------------------------------------------------------

    def top_k_lists(self, setup: Setup, retriever: str, k: int) -> dict[tuple[str, str], list[str]]:
        """(pool_id, query_id) -> the first ``k`` paper ids ``retriever`` ranked, for every
        query of the setup (an empty dict: no ranking stored)."""
        source = self.result.ranking(setup, retriever)
        if source is None:
            return {}
        if source.mdcr:
            frame = self._mdcr_top_k(source, setup, k)
        else:
            frame = self._frame(
                "SELECT pool_id, query_id, paper_id FROM read_parquet(?) "
                "WHERE pool_id IN (SELECT unnest(?)) AND rank <= ? "
                "ORDER BY pool_id, query_id, rank",
                [str(source.file), list(setup.pool_ids), k],
            )
        lists: dict[tuple[str, str], list[str]] = {}
        for pool, query, paper in zip(
            frame["pool_id"], frame["query_id"], frame["paper_id"], strict=True
        ):
            lists.setdefault((str(pool), str(query)), []).append(str(paper))
        return lists

    def _mdcr_top_k(self, source: Ranking, setup: Setup, k: int) -> pd.DataFrame:
        from mdcr.benchmark.scoring import rank_scores
        from mdcr.scoring.per_query import MDCR_SETUP

        scored = self._frame(
            "SELECT split, field, query_id, paper_id, score FROM read_parquet(?) WHERE split = ?",
            [str(source.file), setup.split],
        )
        ranked = rank_scores(scored, source.ties)  # type: ignore[arg-type]
        top = ranked[ranked["rank"] <= k]
        pool = MDCR_SETUP + "/" + top["split"] + "/" + top["field"]
        return top.assign(pool_id=pool)[["pool_id", "query_id", "paper_id"]]


def file_of(path: Path | None) -> str:
    """A file's name for the pages (never its folder: the pages name outputs by
    fingerprint)."""
    return path.name if path is not None else ""
