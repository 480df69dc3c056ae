"""The graph-neighbours candidate type of MDCR (paper section 4.1).

How each detail the paper leaves open is resolved is in :mod:`mdcr.benchmark.build`'s
docstring and docs/benchmark.md: ``C_q`` is the query's outgoing citations, ``N_c`` the
undirected neighbourhood of a cited paper ``c``; cited papers are visited by the overlap
similarity of ``C_q`` and ``N_c`` (ties by a seeded hash), and each visit adds the eligible
neighbours of ``c`` in seeded-hash order until the query has its ten.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from mdcr.benchmark.lists import QueryList, take, type_seed
from mdcr.pools.db import arrow_table

if TYPE_CHECKING:
    import duckdb


def create_graph_tables(con: duckdb.DuckDBPyConnection, citations: str, similarity: str) -> None:
    """Create ``cq(q, c)``, ``nb(u, v)`` (undirected neighbours of every cited paper) and
    ``gsim(q, c, sim)``. Needs table ``qids(q)``."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE cq AS SELECT DISTINCT citing_id AS q, cited_id AS c "
        "FROM read_parquet(?) WHERE citing_id IN (SELECT q FROM qids) AND citing_id <> cited_id",
        [citations],
    )
    con.execute("CREATE OR REPLACE TEMP TABLE cset AS SELECT DISTINCT c FROM cq")
    con.execute(
        "CREATE OR REPLACE TEMP TABLE nb AS SELECT DISTINCT u, v FROM ("
        "  SELECT citing_id AS u, cited_id AS v FROM read_parquet(?) "
        "  WHERE citing_id IN (SELECT c FROM cset) "
        "  UNION ALL "
        "  SELECT cited_id AS u, citing_id AS v FROM read_parquet(?) "
        "  WHERE cited_id IN (SELECT c FROM cset)"
        ") WHERE u <> v",
        [citations, citations],
    )
    ratio = "i.inter::DOUBLE / least(nq, nc)" if similarity == "overlap" else "i.inter::DOUBLE"
    con.execute(
        "CREATE OR REPLACE TEMP TABLE gsim AS "
        "WITH inter AS ("
        "  SELECT a.q, a.c, count(*) AS inter FROM cq a "
        "  JOIN nb ON nb.u = a.c JOIN cq b ON b.q = a.q AND b.c = nb.v "
        "  GROUP BY a.q, a.c"
        "), nq AS (SELECT q, count(*) AS nq FROM cq GROUP BY q), "
        "nc AS (SELECT u AS c, count(*) AS nc FROM nb GROUP BY u) "
        f"SELECT cq.q, cq.c, coalesce({ratio}, 0.0) AS sim "
        "FROM cq JOIN nq USING (q) JOIN nc USING (c) "
        "LEFT JOIN inter i ON i.q = cq.q AND i.c = cq.c"
    )


def graph_round(
    con: duckdb.DuckDBPyConnection, todo: list[tuple[int, str, str, int, str, int]]
) -> dict[int, list[str]]:
    """Eligible neighbours of one cited paper per entry, in seeded-hash order.

    ``todo`` rows are (key, query, cited paper, query year, salt, cap): neighbours of the
    cited paper that the query does not cite, other than the query, with year <= the
    query year, the first ``cap`` by ``md5(salt || id)``.
    """
    import pyarrow as pa

    if not todo:
        return {}
    cols = list(zip(*todo, strict=True))
    table = pa.table(
        {
            "k": pa.array(cols[0], pa.int64()),
            "q": pa.array(cols[1], pa.string()),
            "c": pa.array(cols[2], pa.string()),
            "y": pa.array(cols[3], pa.int64()),
            "salt": pa.array(cols[4], pa.string()),
            "cap": pa.array(cols[5], pa.int64()),
        }
    )
    con.register("round_arrow", table)
    try:
        res = arrow_table(
            con,
            "SELECT r.k, nb.v FROM round_arrow r JOIN nb ON nb.u = r.c "
            "JOIN pyear p ON p.paper_id = nb.v "
            "WHERE nb.v <> r.q AND p.year <= r.y "
            "AND NOT EXISTS (SELECT 1 FROM cq WHERE cq.q = r.q AND cq.c = nb.v) "
            "QUALIFY row_number() OVER (PARTITION BY r.k ORDER BY md5(r.salt || nb.v), nb.v) "
            "<= r.cap "
            "ORDER BY r.k, md5(r.salt || nb.v), nb.v",
        )
    finally:
        con.unregister("round_arrow")
    out: dict[int, list[str]] = {}
    for k, v in zip(res["k"].to_pylist(), res["v"].to_pylist(), strict=True):
        out.setdefault(int(k), []).append(str(v))
    return out


def graph_negatives(
    con: duckdb.DuckDBPyConnection,
    lists: list[QueryList],
    seed: int,
    n: int,
    skipped: Counter[str],
) -> tuple[int, list[int]]:
    """Add up to ``n`` graph negatives to each list; (rounds run, cited papers per query).

    Needs the tables of :func:`create_graph_tables` and ``pyear``. All queries advance
    together, one cited paper per round, so each round is one DuckDB query.
    """
    from mdcr.pools.seeds import salt, sample_key

    res = arrow_table(con, "SELECT q, c, sim FROM gsim")
    sims: dict[str, list[tuple[str, float]]] = {}
    for qid, c, s in zip(
        res["q"].to_pylist(), res["c"].to_pylist(), res["sim"].to_pylist(), strict=True
    ):
        sims.setdefault(str(qid), []).append((str(c), float(s)))
    orders: list[list[str]] = []
    for q in lists:
        q.chosen.setdefault("graph", [])
        visit_seed = type_seed(seed, q, "graph-visit")
        orders.append(
            [
                c
                for c, _ in sorted(
                    sims.get(q.query_id, []),
                    key=lambda cs, vs=visit_seed: (  # type: ignore[misc]
                        -cs[1],
                        sample_key(vs, cs[0]),
                        cs[0],
                    ),
                )
            ]
        )
    pos = [0] * len(lists)
    active = [i for i in range(len(lists)) if orders[i]]
    rounds = 0
    while active:
        rounds += 1
        todo = []
        for i in active:
            q = lists[i]
            c = orders[i][pos[i]]
            cap = n + len(q.taken)
            s = salt(type_seed(seed, q, "graph"))
            todo.append((i, q.query_id, c, q.year, s, cap))
        found = graph_round(con, todo)
        nxt = []
        for i in active:
            q = lists[i]
            take(q, "graph", found.get(i, []), n, set(), skipped)
            pos[i] += 1
            if len(q.chosen["graph"]) < n and pos[i] < len(orders[i]):
                nxt.append(i)
        active = nxt
    return rounds, [len(o) for o in orders]
