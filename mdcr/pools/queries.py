"""Query sampling: which prefiltered papers may be queries, and which ones are.

A paper may be a query when (1) its year is the query year, (2) it is not in the
excluded-ids list (the SPECTER/SciNCL training queries in the paper), and (3) it cites at
least ``min_cited`` prefiltered papers that can be its positives: cited papers with
year <= the query year, other than itself (self-citations are dropped).

Validation and test are disjoint by construction: every paper has one split, fixed by
its id alone (``split_of``: the first hex digit of a seeded md5 key, 0-7 -> val,
8-f -> test). Both splits are then sampled the same way from their half. Because the
split does not depend on the setup or field, no validation query of any setup or field
is a test query of another, so tuning on validation never sees a test query. Within a
(setup, split, field) the queries are the ``n`` eligible papers with the smallest
sampling key (see :mod:`mdcr.pools.seeds`).

Dataset-level and field-level queries are sampled independently and may overlap (as may
the queries of two fields for a paper labelled with both); the paper's footnote 6 only
matches their total (3800 = 19 x 200). Each setup and field is evaluated on its own pools,
so an overlap does not leak anything between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mdcr.pools.seeds import derive_seed, key_sql, salt, sample_key

if TYPE_CHECKING:
    import duckdb


def split_seed(seed: int) -> int:
    """The derived seed that assigns every paper its split."""
    return derive_seed(seed, "pools", "split")


def split_of(seed: int, paper_id: str) -> str:
    """The split a paper belongs to as a query (a Python twin of the SQL assignment)."""
    return "val" if sample_key(split_seed(seed), paper_id)[0] < "8" else "test"


def query_seed(seed: int, setup: str, split: str, field: str | None) -> int:
    """The derived seed that orders the eligible queries of one (setup, split, field)."""
    return derive_seed(seed, "pools", "queries", setup, split, field or "")


@dataclass(frozen=True)
class QueryFunnel:
    """How many papers pass each query condition (recorded in the manifest)."""

    year_papers: int  # prefiltered papers of the query year
    excluded: int  # of those, in the excluded-ids list
    too_few_cited: int  # of the rest, citing fewer than min_cited eligible papers
    eligible: int  # may be queries
    eligible_val: int
    eligible_test: int
    mean_cited: float  # mean number of positives of an eligible query

    def as_dict(self) -> dict[str, int | float]:
        return {
            "year_papers": self.year_papers,
            "excluded": self.excluded,
            "too_few_cited": self.too_few_cited,
            "eligible": self.eligible,
            "eligible_val": self.eligible_val,
            "eligible_test": self.eligible_test,
            "mean_cited": round(self.mean_cited, 3),
        }


def prepare_query_candidates(
    con: duckdb.DuckDBPyConnection,
    citations: Path,
    *,
    query_year: int,
    min_cited: int,
    seed: int,
) -> QueryFunnel:
    """Create ``query_cited`` and ``query_candidates`` and return the funnel.

    Needs tables ``papers(paper_id, year)`` and ``excluded(paper_id)``. Creates
    ``query_cited(query_id, paper_id)``, the positives of every eligible query, and
    ``query_candidates(query_id, n_cited, split)``, the eligible queries.
    """
    con.execute(
        "CREATE OR REPLACE TEMP TABLE year_papers AS "
        "SELECT p.paper_id AS query_id, e.paper_id IS NOT NULL AS is_excluded "
        "FROM papers p LEFT JOIN excluded e ON e.paper_id = p.paper_id "
        f"WHERE p.year = {int(query_year)}"
    )
    con.execute(
        "CREATE OR REPLACE TABLE query_cited AS "
        "SELECT DISTINCT c.citing_id AS query_id, c.cited_id AS paper_id "
        "FROM read_parquet(?) c "
        "JOIN year_papers q ON q.query_id = c.citing_id AND NOT q.is_excluded "
        "JOIN papers p ON p.paper_id = c.cited_id "
        f"WHERE p.year <= {int(query_year)} AND c.cited_id <> c.citing_id",
        [str(citations)],
    )
    con.execute(
        "CREATE OR REPLACE TABLE query_candidates AS "
        "SELECT query_id, n_cited, "
        f"  CASE WHEN {key_sql('query_id')} < '8' THEN 'val' ELSE 'test' END AS split "
        "FROM (SELECT query_id, count(*) AS n_cited FROM query_cited GROUP BY query_id) "
        f"WHERE n_cited >= {int(min_cited)}",
        [salt(split_seed(seed))],
    )
    con.execute(
        "DELETE FROM query_cited WHERE query_id NOT IN (SELECT query_id FROM query_candidates)"
    )
    n_year, n_excl = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE is_excluded) FROM year_papers"
    ).fetchone() or (0, 0)
    n_elig, n_val, sum_cited = con.execute(
        "SELECT count(*), count(*) FILTER (WHERE split = 'val'), "
        "coalesce(sum(n_cited), 0)::BIGINT FROM query_candidates"
    ).fetchone() or (0, 0, 0)
    con.execute("DROP TABLE year_papers")
    return QueryFunnel(
        year_papers=int(n_year),
        excluded=int(n_excl),
        too_few_cited=int(n_year) - int(n_excl) - int(n_elig),
        eligible=int(n_elig),
        eligible_val=int(n_val),
        eligible_test=int(n_elig) - int(n_val),
        mean_cited=(int(sum_cited) / int(n_elig)) if n_elig else 0.0,
    )


def create_queries_table(con: duckdb.DuckDBPyConnection) -> None:
    """Create the empty ``queries`` table (the queries contract plus nothing else)."""
    con.execute(
        "CREATE OR REPLACE TABLE queries ("
        "query_id VARCHAR, split VARCHAR, setup VARCHAR, field VARCHAR, year INTEGER)"
    )


@dataclass(frozen=True)
class QuerySample:
    """The outcome of sampling one (setup, split, field)."""

    setup: str
    split: str
    field: str | None
    requested: int
    eligible: int
    taken: int

    @property
    def short(self) -> bool:
        return self.taken < self.requested


def sample_queries(
    con: duckdb.DuckDBPyConnection,
    *,
    setup: str,
    split: str,
    field: str | None,
    n: int,
    seed: int,
    query_year: int,
) -> QuerySample:
    """Add up to ``n`` queries of one (setup, split, field) to the ``queries`` table.

    Field-level queries are papers labelled with ``field`` (needs ``paper_fields``). Takes
    the ``n`` eligible papers with the smallest sampling key; fewer when fewer are
    eligible (the caller decides whether that is an error).
    """
    where = "split = ?"
    params: list[object] = [split]
    if field is not None:
        where += " AND query_id IN (SELECT paper_id FROM paper_fields WHERE field = ?)"
        params.append(field)
    (eligible,) = con.execute(
        f"SELECT count(*) FROM query_candidates WHERE {where}", params
    ).fetchone() or (0,)
    con.execute(
        "INSERT INTO queries "
        f"SELECT query_id, ?, ?, ?, {int(query_year)} FROM query_candidates WHERE {where} "
        f"ORDER BY {key_sql('query_id')}, query_id LIMIT {int(n)}",
        [split, setup, field, *params, salt(query_seed(seed, setup, split, field))],
    )
    return QuerySample(
        setup=setup,
        split=split,
        field=field,
        requested=n,
        eligible=int(eligible),
        taken=min(int(eligible), n),
    )
