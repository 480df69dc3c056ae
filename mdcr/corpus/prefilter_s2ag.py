"""The prefilter on an S2AG release: papers, abstracts and citation edges, joined by id.

The rules are those of the S2ORC path (:mod:`mdcr.corpus.prefilter`); only the sources
differ. Steps, all in DuckDB, which spills to disk, so that memory stays bounded by
``MDCR_MEMORY_LIMIT`` however large the release:

1. Scan each dataset file by file (:mod:`mdcr.corpus.prefilter_scan`) into narrow
   tables: papers (id, year and title rules; title, year and fields kept only for papers
   that pass both), abstracts (id, the abstract rule; the text kept only if it passes),
   edges (two ids).
2. Duplicates: the first record of a repeated paper id, and of a repeated abstract id,
   is kept (file order, then line order).
3. Edges: a row with a null id is an unresolved reference and counts for no paper. A
   paper's citation counts are its distinct cited ids (out) and citing ids (in) over the
   other rows, whether or not the id at the other end has a papers record: S2ORC's lists
   count every id they hold, so a release downloaded in part (or a sample) keeps the
   papers the same corpus keeps in the S2ORC layout. Repeated edges count once. Only
   edges between two papers can reach citations.parquet.
4. Flags: one row per paper with the four rule flags, for the funnel. Survivors: a table
   of the papers that pass all four, with their texts, sorted into file order once.
5. Outputs as for S2ORC (:func:`mdcr.corpus.prefilter_output.write_outputs`): edges
   between survivors, self-citations dropped.

Memory outside DuckDB: DuckDB sorts the edges between survivors and they are streamed
into citations.parquet (:func:`edge_keys`), so mdcr holds only per-survivor arrays (about
40 bytes per survivor) and one batch of edges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.core.errors import InputDataError
from mdcr.core.stage import Work
from mdcr.corpus import jsonl, s2ag
from mdcr.corpus.prefilter_output import KEEP, SEQ_SHIFT, EdgeTable
from mdcr.corpus.prefilter_rules import (
    PrefilterConfig,
    abstract_rule_sql,
    citation_test,
    title_rule_sql,
)
from mdcr.corpus.prefilter_scan import (
    Dataset,
    DatasetScan,
    drop_duplicates,
    one,
    scan_usable,
    stop_on_duplicates,
    summarize_malformed,
)

if TYPE_CHECKING:
    import duckdb

PAPERS_DDL = """CREATE TABLE s2_papers (
  seq BIGINT, reason VARCHAR, cid BIGINT, ok_year BOOLEAN, ok_title BOOLEAN,
  title VARCHAR, year BIGINT, fields VARCHAR[])"""
ABSTRACTS_DDL = """CREATE TABLE s2_abstracts (
  seq BIGINT, reason VARCHAR, cid BIGINT, ok_abstract BOOLEAN, abstract VARCHAR)"""
EDGES_DDL = "CREATE TABLE s2_edges (seq BIGINT, reason VARCHAR, citing BIGINT, cited BIGINT)"
EXAMPLES = 5
# Abstracts are scanned first: read after the papers, the same scan took 2.5 instead of 1.7
# s (4.1 against 3.1 CPU s) at 1M papers on 2 cores; the papers' scan takes the same time
# either way.
SCAN_ORDER = ("abstracts", "papers", "citations")


def papers_sql(cfg: PrefilterConfig, source: str, file_idx: int) -> str:
    """SQL of one papers file's rows (``source``: :func:`jsonl.shard_sql`)."""
    ok = "reason IS NULL AND ok_year AND ok_title"
    return f"""
WITH _r AS (SELECT *, {s2ag.PAPERS.reason_sql()} AS reason FROM {source}),
_f AS (
  SELECT rn, reason, _ti, _yr, _fos,
    CASE WHEN reason IS NULL THEN {s2ag.id_value("_cid")} END AS cid,
    NOT {jsonl.is_null("_yr")} AS ok_year,
    {title_rule_sql("_ti")} AS ok_title
  FROM _r
),
_c AS (
  SELECT *, CASE WHEN {ok} THEN {s2ag.categories_sql("_fos", cfg.field_sources)} END AS _cats
  FROM _f
)
SELECT ({file_idx}::BIGINT << {SEQ_SHIFT}) + rn AS seq, reason, cid, ok_year, ok_title,
  CASE WHEN {ok} THEN {jsonl.string_value("_ti")} END AS title,
  CASE WHEN {ok} THEN _yr::BIGINT END AS year,
  {s2ag.distinct_in_order("_cats")} AS fields
FROM _c"""


def abstracts_sql(cfg: PrefilterConfig, source: str, file_idx: int) -> str:
    """SQL of one abstracts file's rows: the text is kept only when it passes rule 3."""
    return f"""
WITH _r AS (SELECT *, {s2ag.ABSTRACTS.reason_sql()} AS reason FROM {source}),
_f AS (SELECT rn, reason, _ab, CASE WHEN reason IS NULL THEN {s2ag.id_value("_cid")} END AS cid,
  {abstract_rule_sql(cfg, "_ab")} AS ok_abstract FROM _r)
SELECT ({file_idx}::BIGINT << {SEQ_SHIFT}) + rn AS seq, reason, cid, ok_abstract,
  CASE WHEN reason IS NULL AND ok_abstract THEN {jsonl.string_value("_ab")} END AS abstract
FROM _f"""


def citations_sql(source: str, file_idx: int) -> str:
    """SQL of one citations file's rows (a null id stays NULL: an unresolved reference).

    Most rows hold two JSON integers: one whose integer prints back as the same text is
    well formed (DuckDB's lenient cast would also take 1.5 or 1e3), and only the other
    rows go through the full checks, which give the same verdict (tested).
    """
    full = s2ag.CITATIONS.reason_sql()
    return f"""
WITH _c AS (SELECT *, TRY_CAST(_citing AS BIGINT) AS _a, TRY_CAST(_cited AS BIGINT) AS _b
  FROM {source}),
_r AS (SELECT rn, _citing, _cited, _a, _b,
  CASE WHEN _a >= 0 AND _a::VARCHAR = _citing AND _b >= 0 AND _b::VARCHAR = _cited THEN NULL
    ELSE {full} END AS reason FROM _c)
SELECT ({file_idx}::BIGINT << {SEQ_SHIFT}) + rn AS seq, reason,
  CASE WHEN reason IS NULL THEN coalesce(_a, {s2ag.id_value("_citing")}) END AS citing,
  CASE WHEN reason IS NULL THEN coalesce(_b, {s2ag.id_value("_cited")}) END AS cited
FROM _r"""


def datasets(cfg: PrefilterConfig, release: s2ag.Release) -> list[Dataset]:
    """The three datasets of a release, in the order their findings are reported."""
    return [
        Dataset(
            "papers",
            s2ag.PAPERS,
            release.papers,
            "s2_papers",
            PAPERS_DDL,
            lambda src, i: papers_sql(cfg, src, i),
        ),
        Dataset(
            "abstracts",
            s2ag.ABSTRACTS,
            release.abstracts,
            "s2_abstracts",
            ABSTRACTS_DDL,
            lambda src, i: abstracts_sql(cfg, src, i),
        ),
        Dataset(
            "citations", s2ag.CITATIONS, release.citations, "s2_edges", EDGES_DDL, citations_sql
        ),
    ]


@dataclass
class S2agScan:
    """What :func:`scan_release` found: the scans, and the counts for the funnel."""

    scans: list[DatasetScan]
    reasons: dict[str, int]
    reported: list[jsonl.MalformedLine]
    papers_read: int
    papers_valid: int
    lines_read: int  # of the three datasets
    malformed_lines: int
    duplicates: tuple[int, list[str]]
    details: dict[str, Any]


def scan_release(
    con: duckdb.DuckDBPyConnection,
    cfg: PrefilterConfig,
    release: s2ag.Release,
    temp_dir: Path,
    threads: int,
    progress: Callable[[int], Any] | None,
) -> S2agScan:
    """Scan the three datasets and build ``_flags`` (every paper) and ``recs`` (survivors).

    ``recs`` has the columns :func:`write_outputs` reads, in file order.
    """
    found: dict[str, DatasetScan] = {}
    counts: dict[str, tuple[int, int]] = {}  # dataset -> (records read, malformed)
    for ds in sorted(datasets(cfg, release), key=lambda d: SCAN_ORDER.index(d.name)):
        where = str(release.folder / ds.name)
        result, read = scan_usable(
            con, ds, temp_dir, threads, strict=cfg.strict, progress=progress, where=where
        )
        counts[ds.name] = (read, result.malformed)
        found[ds.name] = result
    scans = [found[ds.name] for ds in datasets(cfg, release)]
    reasons, reported = summarize_malformed(con, scans, cfg.max_reported_errors)
    paper_dups = drop_duplicates(con, "s2_papers", "cid")
    stop_on_duplicates(paper_dups, "corpusid", str(release.folder / "papers"), cfg.strict)
    abstract_dups = drop_duplicates(con, "s2_abstracts", "cid")
    stop_on_duplicates(abstract_dups, "corpusid", str(release.folder / "abstracts"), cfg.strict)
    details: dict[str, Any] = {"field_sources": list(cfg.field_sources)}
    details["abstracts"] = _abstract_counts(con, counts["abstracts"], abstract_dups)
    details["papers_without_abstract"] = one(
        con,
        "SELECT count(*) FROM s2_papers p WHERE p.reason IS NULL AND NOT EXISTS "
        "(SELECT 1 FROM s2_abstracts a WHERE a.reason IS NULL AND a.cid = p.cid)",
    )
    details["citations"] = _resolve_edges(con, counts["citations"])
    _build_flags(con, cfg)
    return S2agScan(
        scans=scans,
        reasons=reasons,
        reported=reported,
        papers_read=counts["papers"][0],
        papers_valid=counts["papers"][0] - counts["papers"][1],
        lines_read=sum(read for read, _ in counts.values()),
        malformed_lines=sum(malformed for _, malformed in counts.values()),
        duplicates=paper_dups,
        details=details,
    )


def _abstract_counts(
    con: duckdb.DuckDBPyConnection, counts: tuple[int, int], dups: tuple[int, list[str]]
) -> dict[str, Any]:
    """Abstract records: read, malformed, duplicates, and those whose id has no paper."""
    orphans = (
        "FROM s2_abstracts a WHERE a.reason IS NULL AND NOT EXISTS "
        "(SELECT 1 FROM s2_papers p WHERE p.reason IS NULL AND p.cid = a.cid)"
    )
    examples = con.execute(f"SELECT a.cid {orphans} ORDER BY a.seq LIMIT {EXAMPLES}").fetchall()
    return {
        "records_read": counts[0],
        "malformed_skipped": counts[1],
        "duplicates_dropped": dups[0],
        "duplicate_examples": dups[1],
        "without_paper": one(con, f"SELECT count(*) {orphans}"),
        "without_paper_examples": [str(r[0]) for r in examples],
    }


def _resolve_edges(con: duckdb.DuckDBPyConnection, counts: tuple[int, int]) -> dict[str, Any]:
    """Build ``_edges`` (the distinct (citing, cited) id pairs of the well-formed rows) and
    ``_degrees`` (each id's distinct cited and citing ids); return the edge counts.

    A paper's counts take every non-null id, as S2ORC's lists do: an edge to an id without
    a papers record (a release downloaded in part) counts for the paper at its other end,
    though it cannot be written to citations.parquet. So the ids need no resolution to
    papers before the DISTINCT: the pairs are deduplicated as read, the degrees are grouped
    by id, and only papers are looked up in them (at 1M papers, with the flags: 3.8 CPU s
    against 9.4 s resolving every row to a paper number first). Every well-formed row is
    exactly one of: a null id, neither id a paper, a repeat of an earlier edge, a distinct
    edge between papers, or a distinct edge with one end outside the papers; the last
    three are told apart row by row only when some id is outside the papers (none in a
    complete release).
    """
    read, malformed = counts
    valid = "reason IS NULL AND citing IS NOT NULL AND cited IS NOT NULL"
    null_ids = one(
        con,
        "SELECT count(*) FROM s2_edges WHERE reason IS NULL AND (citing IS NULL OR cited IS NULL)",
    )
    con.execute(
        f"CREATE TEMP TABLE _edges AS SELECT DISTINCT citing, cited FROM s2_edges WHERE {valid}"
    )
    distinct = one(con, "SELECT count(*) FROM _edges")
    con.execute(
        """CREATE TEMP TABLE _degrees AS
        SELECT cid, sum(n_out)::BIGINT AS n_out, sum(n_in)::BIGINT AS n_in FROM (
          SELECT citing AS cid, count(*) AS n_out, 0 AS n_in FROM _edges GROUP BY 1
          UNION ALL SELECT cited, 0, count(*) FROM _edges GROUP BY 1
        ) GROUP BY cid"""
    )
    papers = "(SELECT cid FROM s2_papers WHERE reason IS NULL AND cid IS NOT NULL)"
    rows = read - malformed - null_ids
    known_rows, half_rows, resolved, outside = rows, 0, distinct, 0
    examples: list[str] = []
    if one(con, f"SELECT count(*) FROM _degrees ANTI JOIN {papers} p USING (cid)"):
        ends = f"citing IN {papers} AS a, cited IN {papers} AS b"
        tally = "count(*) FILTER (a AND b), count(*) FILTER (a <> b)"
        known_rows, half_rows = con.execute(
            f"SELECT {tally} FROM (SELECT {ends} FROM s2_edges WHERE {valid})"
        ).fetchone() or (0, 0)
        resolved, outside = con.execute(
            f"SELECT {tally} FROM (SELECT {ends} FROM _edges)"
        ).fetchone() or (0, 0)
        found = con.execute(
            f"SELECT citing, cited FROM (SELECT seq, citing, cited, {ends} FROM s2_edges "
            f"WHERE {valid}) WHERE a <> b ORDER BY seq LIMIT {EXAMPLES}"
        ).fetchall()
        examples = [f"{a} -> {b}" for a, b in found]
    return {
        "records_read": read,
        "malformed_skipped": malformed,
        "unresolved_null_id": null_ids,
        "neither_id_a_paper": rows - known_rows - half_rows,
        "duplicates_dropped": known_rows - resolved + half_rows - outside,
        "resolved": resolved,
        "one_id_outside": outside,
        "outside_examples": examples,
    }


def _build_flags(con: duckdb.DuckDBPyConnection, cfg: PrefilterConfig) -> None:
    """``_flags``: every paper record with its rule flags; ``recs``: the survivors, with
    their texts, in file order (the only sort of texts, over survivors alone)."""
    k_abs = cfg.min_abstract_chars
    ok_cit = citation_test(cfg, "coalesce(d.n_in, 0)", "coalesce(d.n_out, 0)")
    con.execute(
        f"""CREATE TEMP TABLE _flags AS
        SELECT p.seq, p.reason, p.cid, p.ok_year, p.ok_title,
          coalesce(a.ok_abstract, {k_abs <= 0}) AS ok_abstract, {ok_cit} AS ok_cit
        FROM s2_papers p
        LEFT JOIN (SELECT cid, ok_abstract FROM s2_abstracts WHERE reason IS NULL) a
          ON p.reason IS NULL AND a.cid = p.cid
        LEFT JOIN _degrees d ON p.reason IS NULL AND d.cid = p.cid"""
    )
    con.execute("DROP TABLE _degrees")
    con.execute(
        f"""CREATE TABLE recs AS
        SELECT f.seq, f.reason, f.cid::VARCHAR AS paper_id, f.cid,
          f.ok_year, f.ok_title, f.ok_abstract, f.ok_cit,
          p.title, a.abstract, p.year, p.fields
        FROM (SELECT * FROM _flags WHERE {KEEP}) f
        JOIN s2_papers p ON p.seq = f.seq
        LEFT JOIN (SELECT cid, abstract FROM s2_abstracts WHERE reason IS NULL) a
          ON a.cid = f.cid
        ORDER BY f.seq"""
    )


def edge_keys(con: duckdb.DuckDBPyConnection) -> EdgeTable:
    """The resolved edges between survivors as an :class:`EdgeTable` of keys
    ``citing_idx << 32 | cited_idx`` (indexes into ``_ids``, the survivors in file order),
    self-citations dropped. ``_edges`` is distinct and paper ids map to indexes one to one,
    so the keys are too."""
    con.execute(
        "CREATE TEMP TABLE _k_idx AS SELECT r.cid, i.idx FROM _ids i JOIN recs r USING (seq)"
    )
    con.execute(
        """CREATE TEMP TABLE _survivor_edges AS SELECT (c.idx::BIGINT << 32) | d.idx::BIGINT AS k
        FROM _edges e JOIN _k_idx c ON e.citing = c.cid JOIN _k_idx d ON e.cited = d.cid
        WHERE c.idx <> d.idx"""
    )
    con.execute("DROP TABLE _k_idx")
    return EdgeTable(con, "_survivor_edges")


def plan_release(folder: Path | None) -> tuple[str, int, Work]:
    """The dry run of an S2AG prefilter: the words on its size, its paper records, and its
    work, priced per gzipped byte of the three datasets (``prefilter-s2ag``): the files'
    sizes when the release is in ``folder``, else a full release
    (:func:`mdcr.planning.sizes.s2ag_release_size`)."""
    from mdcr.planning.sizes import s2ag_release_size, size_text

    files = None
    if folder is not None and s2ag.is_release(folder):
        try:
            release = s2ag.find_release(folder)
        except InputDataError:
            pass  # the run itself names the problem
        else:
            files = (release.papers + release.abstracts, release.citations)
    gz_bytes, records, how = s2ag_release_size(files)
    size = f", {size_text(gz_bytes)} gzipped ({how})"
    return size, records, Work("prefilter-s2ag", units=float(gz_bytes))
