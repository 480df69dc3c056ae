"""The store's Parquet files read on demand with DuckDB: one query's ranking by each
retriever, the top k of every query of a setup, its positives, and papers' texts.

Every path comes from the opened result (:mod:`mdcr.explore.result`), found through the
manifests; a request only chooses values (a pool, a query, a retriever), which DuckDB
receives as bound parameters. Runs hold one row group per pool, so a filter on the pool
reads that pool's rows only; nothing of a pool is held in memory between requests.

MDCR rankings are ranked from the pair scores as benchmark-score ranks them
(:func:`mdcr.benchmark.scoring.rank_scores`, with the ties the benchmark-score output
used), so a rank shown is the rank that was scored.

Papers are looked up by id. A corpus's ``papers.parquet`` is not sorted by id, so a
lookup there decompresses every title and abstract (about 2 s for 2.2M papers); a papers
file of more than :data:`INDEXED_ROWS` rows is therefore copied once per session into a
DuckDB database in a temporary folder (never the store), with an index on the id, which
answers a page's lookups in milliseconds; the folder is removed when the server stops.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

INDEXED_ROWS = 200_000  # a larger papers file is indexed by id for the session

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

    def __init__(
        self, result: Result, threads: int = 2, memory_limit: str = "1GB", *, quiet: bool = True
    ) -> None:
        import duckdb

        self.result = result
        self._config: dict[str, str | bool | int | float | list[str]] = {
            "threads": threads,
            "memory_limit": memory_limit,
        }
        self._con = duckdb.connect(config=self._config)
        self._con.execute("SET parquet_metadata_cache = true")  # footers read once
        self._con.execute("SET enable_progress_bar = false")
        self._lock = threading.Lock()
        self._temp: tempfile.TemporaryDirectory[str] | None = None
        self._papers: dict[Path, str] = {}  # papers file -> the relation read for lookups
        for path in {result.pool_papers, result.benchmark_papers} - {None}:
            assert path is not None
            self._papers[path] = self._papers_relation(path, quiet)

    def _papers_relation(self, path: Path, quiet: bool) -> str:
        """The relation papers are looked up in: the file itself, or for a large one its
        copy indexed by id (built now, in this session's temporary folder)."""
        import duckdb
        import pyarrow.parquet as pq

        columns = set(pq.read_schema(path).names)
        year = "year" if "year" in columns else "NULL::BIGINT AS year"
        quoted = str(path).replace("'", "''")  # a path from a manifest, never a request
        select = f"SELECT paper_id, title, abstract, {year} FROM read_parquet('{quoted}')"
        rows = pq.ParquetFile(path).metadata.num_rows
        name = f"papers_{len(self._papers)}"
        if rows <= INDEXED_ROWS:
            self._con.execute(f"CREATE VIEW {name} AS {select}")
            return name
        if not quiet:
            print(f"indexing {rows:,} papers by id for this session ...", file=sys.stderr)
        if self._temp is None:
            self._temp = tempfile.TemporaryDirectory(prefix="mdcr-explore-")
        db = Path(self._temp.name) / f"{name}.duckdb"
        with duckdb.connect(str(db), config=self._config) as build:
            build.execute(f"CREATE TABLE papers AS {select}")
            build.execute("CREATE INDEX paper_id_index ON papers (paper_id)")
        attached = str(db).replace("'", "''")
        self._con.execute(f"ATTACH '{attached}' AS {name} (READ_ONLY)")
        return f"{name}.papers"

    def close(self) -> None:
        """Close the connection and remove the session's indexed copies."""
        import contextlib

        import duckdb

        with contextlib.suppress(duckdb.Error):  # a read still running: the process ends
            self._con.close()
        if self._temp is not None:
            self._temp.cleanup()

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

    def rankings(self, setup: Setup, unit: int) -> dict[str, Ranked | None]:
        """Each retriever's whole ranking of the query of ``unit`` (None: no ranking of it
        is stored with this result); the runs are read in one statement, in parallel."""
        row = self.result.units.iloc[unit]
        sources = {r: self.result.ranking(setup, r) for r in setup.retrievers}
        found: dict[str, Ranked | None] = {r: None for r, s in sources.items() if s is None}
        runs = [(r, s) for r, s in sources.items() if s is not None and not s.mdcr]
        if runs:
            one = "SELECT ? AS retriever, paper_id, score, rank FROM read_parquet(?) "
            one += "WHERE pool_id = ? AND query_id = ?"
            params: list[Any] = []
            for name, source in runs:
                params += [name, str(source.file), str(row["pool_id"]), str(row["query_id"])]
            sql = " UNION ALL ".join([one] * len(runs)) + " ORDER BY retriever, rank"
            lists: dict[str, tuple[list[str], list[float]]] = {r: ([], []) for r, _ in runs}
            for name, paper, score, _ in self._rows(sql, params):
                lists[name][0].append(str(paper))
                lists[name][1].append(float(score))
            found.update({r: Ranked(r, ids, scores) for r, (ids, scores) in lists.items()})
        for name, mdcr in sources.items():
            if mdcr is not None and mdcr.mdcr:
                ranked = self._mdcr_ranked(mdcr, str(row["split"]), str(row["field"]), row)
                ids = [str(p) for p in ranked["paper_id"]]
                found[name] = Ranked(name, ids, [float(x) for x in ranked["score"]])
        return {r: found[r] for r in setup.retrievers}

    def _rows(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        cur = self._cursor()
        try:
            return cur.execute(sql, params).fetchall()
        finally:
            cur.close()

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
        import pandas as pd

        path = self.result.benchmark_papers if setup.is_mdcr else self.result.pool_papers
        if path is None or not ids:
            return {}
        wanted = sorted(set(ids))
        found = self._rows(
            f"SELECT paper_id, title, abstract, year FROM {self._papers[path]} "
            f"WHERE paper_id IN ({', '.join('?' * len(wanted))})",
            list(wanted),
        )
        out: dict[str, dict[str, Any]] = {}
        for paper, title, abstract, when in found:
            out[str(paper)] = {
                "title": "" if title is None else str(title),
                "abstract": "" if abstract is None else str(abstract),
                "year": None if when is None or pd.isna(when) else int(when),
            }
        return out

    # -- every query of a setup ---------------------------------------------------------

    def top_k(self, setup: Setup, retriever: str, k: int) -> pd.DataFrame | None:
        """The first ``k`` papers ``retriever`` ranked for every query of the setup:
        pool_id, query_id, paper_id, rank (None: no ranking stored)."""
        source = self.result.ranking(setup, retriever)
        if source is None:
            return None
        if source.mdcr:
            return self._mdcr_top_k(source, setup, k)
        pools = ", ".join("?" * len(setup.pool_ids))
        return self._frame(
            "SELECT pool_id, query_id, paper_id, rank FROM read_parquet(?) "
            f"WHERE pool_id IN ({pools}) AND rank <= ?",
            [str(source.file), *setup.pool_ids, k],
        )

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
        return top.assign(pool_id=pool)[["pool_id", "query_id", "paper_id", "rank"]]
