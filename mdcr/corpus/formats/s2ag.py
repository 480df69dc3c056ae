"""The Semantic Scholar Academic Graph (S2AG) bulk datasets: layout and record checks.

A release, as mdcr reads it, is a folder holding three dataset folders, each of
``*.jsonl.gz`` (or ``*.jsonl``, or ``*.gz`` as downloaded) files of one JSON object per
line, joined by ``corpusid``:

- ``papers/``: ``corpusid``, ``title``, ``year`` (integer or null) and
  ``s2fieldsofstudy`` (null or a list of ``{"category": str, "source": str}``, the source
  being "external" (MAG-derived) or "s2-fos-model");
- ``abstracts/``: ``corpusid`` and ``abstract`` (a paper without an abstract has no
  record);
- ``citations/``: one edge per line, ``citingcorpusid`` and ``citedcorpusid`` (either
  may be null: an unresolved reference).

Ids may be JSON numbers or strings of digits; they are read as 64-bit integers and
written as strings. A line is *malformed* when it is not a JSON object or a key has the
wrong type: a ``corpusid`` missing, empty, or not a non-negative integer (a number, or a
string of digits without leading zeros); a citation id that is neither null nor such an
id; ``title`` / ``abstract`` neither a string nor null; ``year`` neither null nor an
integer from 1000 to 2100; ``s2fieldsofstudy`` not null nor a list of objects with a string
``category`` (and a string or null ``source``).

This module is the whole format: the layout and record checks above, the prefilter's scan
of a release (below), its size model for the dry run (priced per gzipped byte) and its
registration, recognised by ``detect`` for ``format = "auto"``.

The scan: papers, abstracts and citation edges, joined by id.

The rules are those of the S2ORC path (:mod:`mdcr.corpus.formats.s2orc`); only the sources
differ. Steps, all in DuckDB, which spills to disk, so that memory stays bounded by
``MDCR_MEMORY_LIMIT`` however large the release:

1. Scan each dataset file by file (:mod:`mdcr.corpus.prefilter.scan`) into narrow
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
5. Outputs as for S2ORC (:func:`mdcr.corpus.prefilter.output.write_outputs`): edges
   between survivors, self-citations dropped.

Memory outside DuckDB: DuckDB sorts the edges between survivors and they are streamed
into citations.parquet (:func:`edge_keys`), so mdcr holds only per-survivor arrays (about
40 bytes per survivor) and one batch of edges.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.core.errors import InputDataError
from mdcr.core.stage import PlanFacts, Work
from mdcr.corpus import jsonl
from mdcr.corpus.formats.registry import FORMATS, InputFormat, InputSize, Scanned
from mdcr.corpus.prefilter.output import KEEP, SEQ_SHIFT, EdgeTable
from mdcr.corpus.prefilter.rules import (
    PrefilterConfig,
    abstract_rule_sql,
    citation_test,
    title_rule_sql,
)
from mdcr.corpus.prefilter.scan import (
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

DATASETS = ("papers", "abstracts", "citations")
PATTERNS = ("*.jsonl.gz", "*.jsonl", "*.gz")
_ID_RE = '(0|[1-9][0-9]*)|"(0|[1-9][0-9]*)"'


@dataclass(frozen=True)
class Release:
    """The files of an S2AG release folder, per dataset, in natural order."""

    folder: Path
    papers: tuple[Path, ...]
    abstracts: tuple[Path, ...]
    citations: tuple[Path, ...]

    @property
    def files(self) -> tuple[Path, ...]:
        return self.papers + self.abstracts + self.citations


def is_release(folder: Path) -> bool:
    """Whether ``folder`` looks like an S2AG release (holds one of the dataset folders)."""
    return any((Path(folder) / name).is_dir() for name in DATASETS)


def find_release(folder: Path) -> Release:
    """The dataset files of a release folder; a missing or empty dataset is a one-line error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputDataError(
            f"S2AG input '{folder}' is not a folder; pass the folder that holds papers/, "
            "abstracts/ and citations/"
        )
    found: dict[str, tuple[Path, ...]] = {}
    for name in DATASETS:
        sub = folder / name
        if not sub.is_dir():
            raise InputDataError(
                f"S2AG input '{folder}' has no {name}/ folder; a release needs papers/, "
                "abstracts/ and citations/, each a folder of *.jsonl.gz files (see the "
                "README on downloading S2AG)"
            )
        files = jsonl.find_files(sub, PATTERNS)
        if not files:
            raise InputDataError(f"no {name} files in '{sub}': expected *.jsonl.gz or *.jsonl")
        found[name] = tuple(files)
    return Release(folder, found["papers"], found["abstracts"], found["citations"])


def id_value(col: str) -> str:
    """SQL: the BIGINT id held by a checked raw-JSON id column (number or digit string)."""
    return f"TRY_CAST(trim({col}, '\"') AS BIGINT)"


def _id_checks(key: str, col: str, *, nullable: bool) -> list[str]:
    if nullable:
        guard = f"NOT {jsonl.is_null(col)} AND "
        head = []
    else:
        guard = ""
        head = [f"WHEN {jsonl.is_null(col)} THEN '{key} is missing'"]
    return [
        *head,
        f"WHEN {guard}{col} = '\"\"' THEN '{key} is empty'",
        f"WHEN {guard}NOT regexp_full_match({col}, '{_ID_RE}') "
        f"THEN '{key} is not an integer id (a number or a string of digits)'",
        f"WHEN {guard}{id_value(col)} IS NULL THEN '{key} is out of the 64-bit integer range'",
    ]


_FOS_OK = (
    "coalesce(list_bool_and(list_transform(from_json(_fos, '[\"JSON\"]'), lambda x: "
    "json_type(x) = 'OBJECT' AND coalesce(json_type(x, '$.category'), '') = 'VARCHAR' "
    "AND coalesce(json_type(x, '$.source'), 'NULL') IN ('VARCHAR', 'NULL'))), true)"
)

PAPERS = jsonl.RecordSchema(
    name="S2AG papers",
    keys=("corpusid", "title", "year", "s2fieldsofstudy"),
    columns=("_cid", "_ti", "_yr", "_fos"),
    checks=(
        *_id_checks("corpusid", "_cid", nullable=False),
        jsonl.string_check("title", "_ti"),
        *jsonl.year_checks("_yr"),
        f"WHEN NOT {jsonl.is_null('_fos')} AND NOT (starts_with(_fos, '[') AND {_FOS_OK}) "
        "THEN 's2fieldsofstudy is not a list of {category, source} objects or null'",
    ),
)

ABSTRACTS = jsonl.RecordSchema(
    name="S2AG abstracts",
    keys=("corpusid", "abstract"),
    columns=("_cid", "_ab"),
    checks=(
        *_id_checks("corpusid", "_cid", nullable=False),
        jsonl.string_check("abstract", "_ab"),
    ),
)

CITATIONS = jsonl.RecordSchema(
    name="S2AG citations",
    keys=("citingcorpusid", "citedcorpusid"),
    columns=("_citing", "_cited"),
    checks=(
        *_id_checks("citingcorpusid", "_citing", nullable=True),
        *_id_checks("citedcorpusid", "_cited", nullable=True),
    ),
)


def categories_sql(col: str, sources: tuple[str, ...]) -> str:
    """SQL: the categories of a checked ``s2fieldsofstudy`` column whose source is one of
    ``sources``, in file order (repeats kept: see :func:`distinct_in_order`).
    """
    wanted = ", ".join(jsonl.sql_str(s) for s in sources)
    return (
        f"CASE WHEN {jsonl.is_null(col)} THEN []::VARCHAR[] ELSE "
        f"list_transform(list_filter(from_json({col}, "
        '\'[{"category": "VARCHAR", "source": "VARCHAR"}]\'), '
        f"lambda x: x.source IN ({wanted})), lambda x: x.category) END"
    )


def distinct_in_order(col: str) -> str:
    """SQL: a list column with repeats dropped, first occurrences kept in order (a
    category often comes from both sources)."""
    return f"list_filter({col}, lambda x, i: list_position({col}, x) = i)"


# ------------------------------------------------------------------ the prefilter's scan

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
WITH _r AS (SELECT *, {PAPERS.reason_sql()} AS reason FROM {source}),
_f AS (
  SELECT rn, reason, _ti, _yr, _fos,
    CASE WHEN reason IS NULL THEN {id_value("_cid")} END AS cid,
    NOT {jsonl.is_null("_yr")} AS ok_year,
    {title_rule_sql("_ti")} AS ok_title
  FROM _r
),
_c AS (
  SELECT *, CASE WHEN {ok} THEN {categories_sql("_fos", cfg.field_sources)} END AS _cats
  FROM _f
)
SELECT ({file_idx}::BIGINT << {SEQ_SHIFT}) + rn AS seq, reason, cid, ok_year, ok_title,
  CASE WHEN {ok} THEN {jsonl.string_value("_ti")} END AS title,
  CASE WHEN {ok} THEN _yr::BIGINT END AS year,
  {distinct_in_order("_cats")} AS fields
FROM _c"""


def abstracts_sql(cfg: PrefilterConfig, source: str, file_idx: int) -> str:
    """SQL of one abstracts file's rows: the text is kept only when it passes rule 3."""
    return f"""
WITH _r AS (SELECT *, {ABSTRACTS.reason_sql()} AS reason FROM {source}),
_f AS (SELECT rn, reason, _ab, CASE WHEN reason IS NULL THEN {id_value("_cid")} END AS cid,
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
    full = CITATIONS.reason_sql()
    return f"""
WITH _c AS (SELECT *, TRY_CAST(_citing AS BIGINT) AS _a, TRY_CAST(_cited AS BIGINT) AS _b
  FROM {source}),
_r AS (SELECT rn, _citing, _cited, _a, _b,
  CASE WHEN _a >= 0 AND _a::VARCHAR = _citing AND _b >= 0 AND _b::VARCHAR = _cited THEN NULL
    ELSE {full} END AS reason FROM _c)
SELECT ({file_idx}::BIGINT << {SEQ_SHIFT}) + rn AS seq, reason,
  CASE WHEN reason IS NULL THEN coalesce(_a, {id_value("_citing")}) END AS citing,
  CASE WHEN reason IS NULL THEN coalesce(_b, {id_value("_cited")}) END AS cited
FROM _r"""


def datasets(cfg: PrefilterConfig, release: Release) -> list[Dataset]:
    """The three datasets of a release, in the order their findings are reported."""
    return [
        Dataset(
            "papers",
            PAPERS,
            release.papers,
            "s2_papers",
            PAPERS_DDL,
            lambda src, i: papers_sql(cfg, src, i),
        ),
        Dataset(
            "abstracts",
            ABSTRACTS,
            release.abstracts,
            "s2_abstracts",
            ABSTRACTS_DDL,
            lambda src, i: abstracts_sql(cfg, src, i),
        ),
        Dataset("citations", CITATIONS, release.citations, "s2_edges", EDGES_DDL, citations_sql),
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
    release: Release,
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


def scan_s2ag(
    con: duckdb.DuckDBPyConnection,
    cfg: PrefilterConfig,
    folder: Path,
    temp_dir: Path,
    threads: int,
    progress: Callable[[int], Any] | None,
) -> Scanned:
    release = find_release(folder)
    found = scan_release(con, cfg, release, temp_dir, threads, progress)
    return Scanned(
        scans=found.scans,
        reasons=found.reasons,
        reported=found.reported,
        records_read=found.papers_read,
        records_valid=found.papers_valid,
        lines_read=found.lines_read,
        malformed_lines=found.malformed_lines,
        duplicates=found.duplicates,
        flags="_flags",
        paper_files=len(release.papers),
        edge_keys=edge_keys,
        details={"s2ag": found.details},
    )


def s2ag_lines(funnel: dict[str, Any]) -> str:
    """The S2AG totals and abstract and citation counts, for the log."""
    details = funnel["s2ag"]
    a, c = details["abstracts"], details["citations"]
    return "\n".join(
        [
            f"  all datasets: {funnel['lines_read']:,} lines read, "
            f"{funnel['malformed_lines']:,} malformed (papers {funnel['malformed_skipped']:,}, "
            f"abstracts {a['malformed_skipped']:,}, citations {c['malformed_skipped']:,})",
            f"  field sources: {', '.join(details['field_sources'])}",
            f"  abstracts: {a['records_read']:,} read, {a['malformed_skipped']:,} malformed, "
            f"{a['duplicates_dropped']:,} duplicate, {a['without_paper']:,} without a paper; "
            f"{details['papers_without_abstract']:,} papers without an abstract",
            f"  citation rows: {c['records_read']:,} read, {c['malformed_skipped']:,} malformed, "
            f"{c['unresolved_null_id']:,} with a null id and {c['neither_id_a_paper']:,} "
            f"with neither id a paper (not counted), {c['duplicates_dropped']:,} duplicate; "
            f"{c['resolved']:,} distinct edges between papers, {c['one_id_outside']:,} to "
            "ids without a papers record (counted, not written)",
        ]
    )


def plan_release(folder: Path | None) -> tuple[str, int, Work]:
    """The dry run of an S2AG prefilter: the words on its size, its paper records, and its
    work, priced per gzipped byte of the three datasets (``prefilter-s2ag``): the files'
    sizes when the release is in ``folder``, else a full release
    (:func:`mdcr.planning.sizes.s2ag_release_size`)."""
    from mdcr.planning.sizes import s2ag_release_size, size_text

    files = None
    if folder is not None and is_release(folder):
        try:
            release = find_release(folder)
        except InputDataError:
            pass  # the run itself names the problem
        else:
            files = (release.papers + release.abstracts, release.citations)
    gz_bytes, records, how = s2ag_release_size(files)
    size = f", {size_text(gz_bytes)} gzipped ({how})"
    return size, records, Work("prefilter-s2ag", units=float(gz_bytes))


def size_s2ag(
    cfg: PrefilterConfig,
    source: Path | None,
    inputs: dict[str, list[Path]],
    upstream: Mapping[Path, PlanFacts],
) -> InputSize:
    """The dry run's size of an S2AG release: priced by its gzipped bytes."""
    size, records, work = plan_release(source)
    return InputSize(records, work, layout_words=size)


FORMATS.register(
    InputFormat(
        name="s2ag",
        label="an S2AG release",
        files=lambda folder: list(find_release(folder).files),
        scan=scan_s2ag,
        size=size_s2ag,
        detect=is_release,
        describe=lambda cfg: f"an S2AG release (fields from {', '.join(cfg.field_sources)})",
        funnel_lines=s2ag_lines,
    )
)
