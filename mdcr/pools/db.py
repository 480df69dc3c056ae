"""DuckDB connections and corpus loading for the pool stages.

Every pool table is computed in DuckDB: it keeps memory bounded (it spills to
``temp_directory``) and runs in parallel. Results never depend on the thread count,
because every query whose rows reach a file has a total ORDER BY.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.contracts.artifacts import CITATIONS, CORPUS_PAPERS
from mdcr.core.errors import ConfigError, InputDataError

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

PAPERS_FILE = CORPUS_PAPERS.file
CITATIONS_FILE = CITATIONS.file


def duckdb_threads() -> int:
    """Threads for DuckDB: ``$MDCR_THREADS`` if set, else the number of CPUs."""
    text = os.environ.get("MDCR_THREADS", "").strip()
    if not text:
        return max(1, os.cpu_count() or 1)
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"MDCR_THREADS={text!r} is not a positive integer; set it to e.g. 2")
    return n


def connect(temp_dir: Path | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection set up for large, deterministic batch work.

    ``$MDCR_DUCKDB_MEMORY`` (e.g. ``16GB``) caps DuckDB's memory; the default is DuckDB's
    own (80% of RAM). ``temp_dir`` is where DuckDB spills when it reaches the cap.
    """
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute(f"SET threads = {duckdb_threads()}")
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET enable_progress_bar = false")
    memory = os.environ.get("MDCR_DUCKDB_MEMORY", "").strip()
    if memory:
        try:
            con.execute("SET memory_limit = ?", [memory])
        except duckdb.Error as exc:
            raise ConfigError(
                f"MDCR_DUCKDB_MEMORY={memory!r} is not a DuckDB memory size ({exc}); use e.g. 16GB"
            ) from exc
    if temp_dir is not None:
        temp_dir.mkdir(parents=True, exist_ok=True)
        con.execute("SET temp_directory = ?", [str(temp_dir)])
    return con


@dataclass(frozen=True)
class CorpusFiles:
    """The two tables of a prefiltered corpus (a prefilter output or any such folder)."""

    papers: Path
    citations: Path

    @classmethod
    def in_folder(cls, folder: Path) -> CorpusFiles:
        if folder.is_file():
            raise InputDataError(
                f"corpus '{folder}' is a file; give the folder that holds "
                f"{PAPERS_FILE} and {CITATIONS_FILE} (a prefilter output)"
            )
        files = cls(folder / PAPERS_FILE, folder / CITATIONS_FILE)
        for path in (files.papers, files.citations):
            if not path.is_file():
                raise InputDataError(
                    f"corpus folder '{folder}' has no {path.name}; give a prefilter output "
                    f"(a folder with {PAPERS_FILE} and {CITATIONS_FILE})"
                )
        return files


def _columns(con: duckdb.DuckDBPyConnection, path: Path) -> dict[str, str]:
    rows = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def require_columns(
    con: duckdb.DuckDBPyConnection, path: Path, needed: dict[str, tuple[str, ...]]
) -> None:
    """Check that ``path`` has each needed column with one of the allowed type prefixes."""
    cols = _columns(con, path)
    for name, kinds in needed.items():
        if name not in cols:
            raise InputDataError(
                f"{path} has no column '{name}' (columns: {', '.join(cols)}); "
                "the corpus must follow the papers/citations contract"
            )
        if not any(cols[name].startswith(k) for k in kinds):
            raise InputDataError(
                f"{path}: column '{name}' has type {cols[name]}, expected {' or '.join(kinds)}"
            )


_INT_TYPES: tuple[str, ...] = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT")
_INT_TYPES += ("UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT")


def load_papers(con: duckdb.DuckDBPyConnection, files: CorpusFiles, *, with_fields: bool) -> int:
    """Create ``papers(paper_id, year)`` and, if asked, ``paper_fields(paper_id, field)``.

    Papers without a year are dropped (they can be neither queries nor candidates).
    Returns the number of papers. Duplicate paper ids are an input error.
    """
    needed: dict[str, tuple[str, ...]] = {"paper_id": ("VARCHAR",), "year": _INT_TYPES}
    if with_fields:
        needed["fields"] = ("VARCHAR[]",)
    require_columns(con, files.papers, needed)
    src = str(files.papers)
    con.execute(
        "CREATE OR REPLACE TABLE papers AS SELECT paper_id, CAST(year AS INTEGER) AS year "
        "FROM read_parquet(?) WHERE year IS NOT NULL AND paper_id IS NOT NULL",
        [src],
    )
    n, n_distinct = con.execute(
        "SELECT count(*), count(DISTINCT paper_id) FROM papers"
    ).fetchone() or (0, 0)
    if n != n_distinct:
        raise InputDataError(
            f"{files.papers} has {n - n_distinct} duplicate paper_id values; "
            "paper ids must be unique (re-run prefilter)"
        )
    if with_fields:
        con.execute(
            "CREATE OR REPLACE TABLE paper_fields AS "
            "SELECT DISTINCT paper_id, field FROM ("
            "  SELECT paper_id, unnest(fields) AS field FROM read_parquet(?) "
            "  WHERE year IS NOT NULL AND paper_id IS NOT NULL"
            ") WHERE field IS NOT NULL",
            [src],
        )
    return int(n)


def check_citations(con: duckdb.DuckDBPyConnection, files: CorpusFiles) -> None:
    """Check the citations table's columns (its rows are read where they are needed)."""
    require_columns(con, files.citations, {"citing_id": ("VARCHAR",), "cited_id": ("VARCHAR",)})


def load_excluded(con: duckdb.DuckDBPyConnection, path: Path | None) -> int:
    """Create ``excluded(paper_id)`` from a text file with one paper id per line.

    Blank lines and lines starting with ``#`` are ignored. Without a file the table is
    empty. Returns the number of distinct ids.
    """
    import pyarrow as pa

    ids: set[str] = set()
    if path is not None:
        if path.is_dir():
            raise InputDataError(
                f"exclude_ids '{path}' is a folder; give a text file with one paper id per line"
            )
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputDataError(
                f"cannot read exclude_ids file '{path}' ({exc}); give a UTF-8 text file"
            ) from exc
        for line in text.splitlines():
            s = line.strip()
            if s and not s.startswith("#"):
                ids.add(s)
    table = pa.table({"paper_id": pa.array(sorted(ids), pa.string())})
    con.register("excluded_arrow", table)
    con.execute("CREATE OR REPLACE TABLE excluded AS SELECT paper_id FROM excluded_arrow")
    con.unregister("excluded_arrow")
    return len(ids)


def arrow_table(
    con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None
) -> pa.Table:
    """A query's result as one contiguous Arrow table (chunking never reaches a file)."""
    rel = con.sql(sql, params=params or None)
    fetch = getattr(rel, "to_arrow_table", None) or rel.arrow  # duckdb >= 1.4 / older
    table: pa.Table = fetch()
    return table.combine_chunks()
