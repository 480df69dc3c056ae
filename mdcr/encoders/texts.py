"""The texts an encode reads: the distinct papers its targets name, from the corpus, sorted
by paper_id and written one Parquet row group per shard (the unit of resume)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from mdcr.core.errors import InputDataError


def sql_path(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def write_texts(
    corpus: Path, targets: list[Path], out: Path, shard_size: int, which: str = "all"
) -> int:
    """Write the distinct target papers' texts sorted by paper_id, one row group per shard.

    ``which``: ``"all"`` the papers the targets name, ``"queries"`` only their query papers
    (``query_id`` columns), ``"documents"`` only the others. Returns the number of papers.
    Every target id must be in the corpus.
    """
    import duckdb

    corpus_sql = f"read_parquet({sql_path(corpus)})"
    con = duckdb.connect()
    try:
        n_targets = collect_targets(con, corpus, corpus_sql, targets, which)
        reader = con.sql(
            "SELECT t.paper_id, coalesce(c.title, '') AS title, "
            "coalesce(c.abstract, '') AS abstract "
            f"FROM targets t JOIN {corpus_sql} c ON c.paper_id = t.paper_id ORDER BY t.paper_id"
        ).to_arrow_reader(max(shard_size, 1))
        rows = _write_row_groups(reader, out, shard_size)
    finally:
        con.close()
    if rows != n_targets:
        raise InputDataError(
            f"corpus '{corpus}' has duplicate paper_ids ({rows} rows for {n_targets} papers); "
            "deduplicate it (prefilter does)"
        )
    return rows


def collect_targets(
    con: Any, corpus: Path, corpus_sql: str, targets: list[Path], which: str
) -> int:
    """Fill the temporary table ``targets`` with the distinct paper ids to encode (every
    corpus paper without targets) and return their number; one line if some are not in
    the corpus."""
    from mdcr.contracts.artifacts import target_sources

    if targets:
        selects = [
            f"SELECT CAST({col} AS VARCHAR) AS paper_id FROM read_parquet({sql_path(f)})"
            for t in targets
            for f, col in target_sources(t)
            if which == "all" or (col == "query_id") == (which == "queries")
        ] or ["SELECT NULL::VARCHAR AS paper_id WHERE false"]
        con.execute(
            "CREATE TEMP TABLE targets AS SELECT DISTINCT paper_id FROM ("
            + " UNION ALL ".join(selects)
            + ") WHERE paper_id IS NOT NULL"
        )
    else:
        con.execute(
            f"CREATE TEMP TABLE targets AS SELECT DISTINCT CAST(paper_id AS VARCHAR) AS paper_id "
            f"FROM {corpus_sql}"
        )
    n_targets = int(con.execute("SELECT count(*) FROM targets").fetchone()[0])
    missing = con.execute(
        f"SELECT paper_id FROM targets ANTI JOIN {corpus_sql} c USING (paper_id) ORDER BY paper_id"
    ).fetchall()
    if missing:
        raise InputDataError(
            f"{len(missing)} target papers are not in the corpus '{corpus}' (e.g. "
            f"'{missing[0][0]}'); encode with the corpus the pools were built from"
        )
    return n_targets


def _write_row_groups(reader: Any, out: Path, shard_size: int) -> int:
    """Write (paper_id, title, abstract) batches to ``out`` in row groups of exactly
    ``shard_size`` rows (the last one shorter); returns the rows written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [("paper_id", pa.string()), ("title", pa.string()), ("abstract", pa.string())]
    )
    rows = 0
    pending: list[pa.RecordBatch] = []
    n_pending = 0
    with pq.ParquetWriter(out, schema, compression="zstd") as writer:

        def flush(limit: int) -> None:
            nonlocal pending, n_pending, rows
            table = pa.Table.from_batches(pending, schema).combine_chunks()
            head, tail = table.slice(0, limit), table.slice(limit)
            writer.write_table(head, row_group_size=max(limit, 1))
            rows += head.num_rows
            pending = tail.to_batches()
            n_pending = tail.num_rows

        for batch in cast("pa.RecordBatchReader", reader):
            pending.append(batch.cast(schema))
            n_pending += batch.num_rows
            while n_pending >= shard_size:
                flush(shard_size)
        if n_pending:
            flush(n_pending)
    return rows
