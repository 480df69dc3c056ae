"""Seeded sampling of pool papers in DuckDB, and the field-cited sets.

A pool is the papers cited by its queries plus a seeded sample of the rest of its
universe (dataset-level: all prefiltered papers with year <= the query year;
field-level: the field-cited set). The sample is the ``n`` papers with the smallest key
``md5(salt || paper_id)`` (see :mod:`mdcr.pools.seeds`); it is computed without sorting
the whole universe: a cheap filter on the key's first 8 hex digits keeps a little more
than ``n`` rows, and only those are sorted. The filter keeps a prefix of the key order,
so the result is exactly the full sort's top ``n``; if the filter ever keeps fewer than
``n`` rows the full sort runs instead.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mdcr.pools.seeds import key_sql, salt

if TYPE_CHECKING:
    import duckdb

_KEY_SPACE = 16**8  # the first 8 hex digits of the md5 key


def _threshold(n: int, universe: int) -> str | None:
    """A key prefix that keeps about n + 8 sd rows of ``universe``, or None (no filter)."""
    if universe <= 0 or n >= universe:
        return None
    p = (n + 8.0 * math.sqrt(n) + 64.0) / universe
    if p >= 0.6:
        return None
    return f"{math.ceil(p * _KEY_SPACE):08x}"


def count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    (n,) = con.execute(f"SELECT count(*) FROM {table}").fetchone() or (0,)
    return int(n)


def rank_sample(
    con: duckdb.DuckDBPyConnection,
    universe: str,
    n: int,
    derived_seed: int,
    out: str,
    *,
    universe_size: int | None = None,
) -> None:
    """Create table ``out(paper_id)``: the ``n`` papers of ``universe`` with smallest key.

    ``universe`` is a table with a unique ``paper_id`` column. Ties in the key (never seen
    with md5) are broken by paper_id, so the order is total.
    """
    size = count(con, universe) if universe_size is None else universe_size
    s = salt(derived_seed)
    t = _threshold(n, size)
    if t is not None:
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {out} AS "
            f"SELECT paper_id FROM (SELECT paper_id, {key_sql()} AS k FROM {universe}) "
            f"WHERE k < ? ORDER BY k, paper_id LIMIT {int(n)}",
            [s, t],
        )
        if count(con, out) == min(n, size):
            return
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {out} AS "
        f"SELECT paper_id FROM {universe} ORDER BY {key_sql()}, paper_id LIMIT {int(n)}",
        [s],
    )


def create_field_cited(
    con: duckdb.DuckDBPyConnection, citations: str, fields: tuple[str, ...], query_year: int
) -> dict[str, int]:
    """Create ``field_cited(field, paper_id)`` and return each field's set size.

    The field-cited set of a field is every prefiltered paper cited by any paper labelled
    with the field (citing papers of any year), restricted to year <= the query year,
    since only those may be candidates. Needs ``papers`` and ``paper_fields``.
    """
    import pyarrow as pa

    con.register("wanted_fields_arrow", pa.table({"field": pa.array(fields, pa.string())}))
    con.execute(
        "CREATE OR REPLACE TEMP TABLE wanted_paper_fields AS "
        "SELECT paper_id, field FROM paper_fields "
        "WHERE field IN (SELECT field FROM wanted_fields_arrow)"
    )
    con.unregister("wanted_fields_arrow")
    con.execute(
        "CREATE OR REPLACE TABLE field_cited AS "
        "SELECT DISTINCT f.field, c.cited_id AS paper_id "
        "FROM read_parquet(?) c "
        "JOIN wanted_paper_fields f ON f.paper_id = c.citing_id "
        "JOIN papers p ON p.paper_id = c.cited_id "
        f"WHERE p.year <= {int(query_year)}",
        [citations],
    )
    con.execute("DROP TABLE wanted_paper_fields")
    rows = con.execute("SELECT field, count(*) FROM field_cited GROUP BY field").fetchall()
    sizes = {str(f): int(n) for f, n in rows}
    return {f: sizes.get(f, 0) for f in fields}


def create_group_tables(
    con: duckdb.DuckDBPyConnection,
    *,
    setup: str,
    split: str,
    field: str | None,
    query_year: int,
) -> tuple[int, int, int]:
    """Create the tables shared by the pools of one (setup, split, field).

    ``g_queries(query_id)``: its queries; ``g_cited(paper_id)``: every paper they cite
    (their positives, all of which go into each pool); ``g_universe(paper_id)``: what the
    rest of a pool is sampled from, without ``g_cited``. Returns (queries, cited, universe).
    """
    con.execute(
        "CREATE OR REPLACE TEMP TABLE g_queries AS SELECT query_id FROM queries "
        "WHERE setup = ? AND split = ? AND field IS NOT DISTINCT FROM ?",
        [setup, split, field],
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE g_cited AS SELECT DISTINCT qc.paper_id "
        "FROM query_cited qc JOIN g_queries q ON q.query_id = qc.query_id"
    )
    if field is None:
        source = f"SELECT paper_id FROM papers WHERE year <= {int(query_year)}"
        params: list[object] = []
    else:
        source = "SELECT paper_id FROM field_cited WHERE field = ?"
        params = [field]
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE g_universe AS SELECT u.paper_id FROM ({source}) u "
        "ANTI JOIN g_cited c ON c.paper_id = u.paper_id",
        params,
    )
    return count(con, "g_queries"), count(con, "g_cited"), count(con, "g_universe")


def create_pool_table(
    con: duckdb.DuckDBPyConnection,
    *,
    fill: int,
    universe_size: int,
    derived_seed: int,
) -> None:
    """Create ``p_pool(paper_id)``: ``g_cited`` plus ``fill`` papers sampled from ``g_universe``.

    With ``fill >= universe_size`` the whole universe is taken (an all-field-cited pool).
    """
    if fill >= universe_size:
        fill_sql = "SELECT paper_id FROM g_universe"
    else:
        rank_sample(con, "g_universe", fill, derived_seed, "p_fill", universe_size=universe_size)
        fill_sql = "SELECT paper_id FROM p_fill"
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE p_pool AS SELECT paper_id FROM g_cited UNION ALL {fill_sql}"
    )
    con.execute("DROP TABLE IF EXISTS p_fill")


def pool_qrels_sql() -> str:
    """SQL for the qrels of ``p_pool``: each query's cited papers that are in the pool."""
    return (
        "SELECT qc.query_id, qc.paper_id FROM query_cited qc "
        "JOIN g_queries q ON q.query_id = qc.query_id "
        "SEMI JOIN p_pool p ON p.paper_id = qc.paper_id "
        "ORDER BY qc.query_id, qc.paper_id"
    )
