"""The `prefilter` stage: S2ORC metadata shards -> the prefiltered corpus (papers + citations).

The paper (section 3) keeps the articles with (1) a publication year, (2) a non-empty
title, (3) an abstract of at least 30 characters and (4) at least three citations in
S2ORC, "around 16M" of S2ORC's 81.1M. Rules here, in this order:

- year: not null;
- title: not null and not only whitespace (Python's ``str.isspace`` set);
- abstract: at least ``min_abstract_chars`` characters (Unicode code points; null = 0);
- citations: the number of DISTINCT ids in ``inbound_citations`` / ``outbound_citations``
  as S2ORC gives them (before any filtering), compared with ``min_citations`` per
  ``citation_direction``: "total" in + out; "either" in or out alone; "in" / "out" one
  list; "both" each list.

Why "total" is the default: on the 1,000-record real sample (tests/data/s2orc_sample),
after the other three rules, 183 papers have in + out >= 3 (x 81.1M/1000 = 14.8M),
"either" 179 (14.5M), "in" 117 (9.5M), "out" 106 (8.6M), "both" 44 (3.6M). Only counting
both directions is consistent with the paper's "around 16M".

How it runs (one pass over the input; memory bounded on the full 81.1M records):

1. Scan: each shard is one streaming ``read_json`` query (see :mod:`mdcr.corpus.s2orc`)
   that validates every record, evaluates the four rules and appends one narrow row per
   record to a DuckDB table: its order key (file, record number), the malformed reason,
   paper_id and the rule flags; title, abstract, year, fields and outbound ids are kept
   only for records that pass all rules. Shards run ``MDCR_THREADS`` at a time, one
   gzip stream per thread and (with at least as many shards as threads) one DuckDB
   thread per query, which measured 8-10% faster than letting each query use all. A
   shard is first read with DuckDB's error skipping off (5% faster); only a shard with an
   unreadable line is read again with it on. A truncated gzip shard fails its own queries
   only; its readable lines are then read from a plain copy. Files with malformed lines
   (and only those) are re-read in Python to name the first ``max_reported_errors`` by
   line number.
2. Duplicates: one GROUP BY over all paper_ids; the first record (file order, then line
   order) is kept, the rules then apply to it.
3. Outputs, in file order (file, then line; no sort of the texts): survivors get an
   index in that order; DuckDB hash-joins their outbound ids to it, numpy sorts and
   deduplicates the edges as int64 keys (so edges are ordered by citing paper, then cited
   paper, in papers.parquet order), and n_out / n_in are bincounts. papers.parquet is
   then streamed file by file from the table (a helper thread fetches the rows and forms
   the next row group while the main thread compresses one) while a second thread writes
   citations.parquet. Both files are written in fixed 100,000-row groups of one chunk per
   column (zstd), so their bytes do not depend on the thread count.

Threads and DuckDB's memory limit do not change outputs, so they are not config fields:
``MDCR_THREADS`` (default: all cores) and ``MDCR_MEMORY_LIMIT`` (default: 50% of RAM).
DuckDB spills to a temporary folder inside the output folder, removed at the end; memory
stays bounded on the full 81.1M-record release.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mdcr.artifacts import CITATIONS, CORPUS_PAPERS
from mdcr.config import input_path, param
from mdcr.corpus import s2orc
from mdcr.errors import ConfigError, InputDataError
from mdcr.stage import PlanFacts, StageContext, StagePlan, StageSpec, register

if TYPE_CHECKING:
    import duckdb

RULES = ("year", "title", "abstract", "citations")
# seq = file index << SEQ_SHIFT | line order: one sortable key for "first record wins".
SEQ_SHIFT = 40


@dataclass(frozen=True)
class PrefilterConfig:
    """Config of the `prefilter` stage."""

    input: str = input_path(help="folder of S2ORC metadata shards (metadata_*.jsonl.gz)")
    min_abstract_chars: int = param(30, help="minimum abstract length in characters")
    min_citations: int = param(3, help="minimum number of distinct citations")
    citation_direction: Literal["total", "either", "in", "out", "both"] = param(
        "total",
        help="which citations count: total (in + out), either, in, out, or both lists",
    )
    strict: bool = param(False, help="stop at the first malformed line instead of skipping")
    max_reported_errors: int = param(5, help="how many malformed lines to name in the log")

    def validate(self) -> None:
        if self.min_abstract_chars < 0:
            raise ConfigError(
                f"prefilter.min_abstract_chars: {self.min_abstract_chars} is negative; "
                "use 0 or more"
            )
        if self.min_citations < 0:
            raise ConfigError(
                f"prefilter.min_citations: {self.min_citations} is negative; use 0 or more"
            )
        if self.max_reported_errors < 0:
            raise ConfigError(
                f"prefilter.max_reported_errors: {self.max_reported_errors} is negative; "
                "use 0 or more"
            )


# --------------------------------------------------------------------------- engine settings


def engine_threads() -> int:
    """Threads from ``MDCR_THREADS`` (default: all cores)."""
    raw = os.environ.get("MDCR_THREADS", "").strip()
    if not raw:
        return max(1, os.cpu_count() or 1)
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(f"MDCR_THREADS={raw!r} is not a positive integer; e.g. MDCR_THREADS=4")
    return value


def engine_memory_limit() -> str:
    """DuckDB memory limit from ``MDCR_MEMORY_LIMIT`` (default: 50% of physical memory).

    Half, not more: the edge step briefly holds up to ~24 bytes per citation edge in numpy
    arrays outside DuckDB (a few GB for the full S2ORC release).
    """
    raw = os.environ.get("MDCR_MEMORY_LIMIT", "").strip()
    if raw:
        return raw
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "4GiB"
    return f"{max(1, int(total * 0.5 / 2**20))}MiB"


def connect(temp_dir: Path, threads: int) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB that spills to ``temp_dir``."""
    import duckdb

    limit = engine_memory_limit()
    try:
        return duckdb.connect(
            config={
                "threads": threads,
                "memory_limit": limit,
                "temp_directory": str(temp_dir),
                "preserve_insertion_order": True,
            }
        )
    except duckdb.Error as exc:
        raise ConfigError(
            f"MDCR_MEMORY_LIMIT={limit!r} is not a valid DuckDB memory limit ({exc}); "
            "use e.g. 8GiB or 60%"
        ) from exc


# --------------------------------------------------------------------------- SQL


# Up to this threshold rule 4 first counts the distinct ids among the first k elements of
# each list with pairwise comparisons (cheap, no hash table); larger thresholds use
# list_unique on that prefix.
PAIRWISE_MAX = 6


def _prefix_distinct(lst: str, k: int) -> str:
    """SQL: the number of distinct elements among the first ``k`` of list ``lst``.

    It is at most min(distinct(lst), k), so reaching the threshold with it is exact.
    """
    if k > PAIRWISE_MAX:
        return f"coalesce(list_unique({lst}[1:{k}]), 0)"
    terms = []
    for i in range(1, k + 1):
        new = " AND ".join(
            [f"len({lst}) >= {i}"] + [f"{lst}[{i}] <> {lst}[{j}]" for j in range(1, i)]
        )
        terms.append(f"coalesce(({new})::INTEGER, 0)")
    return "(" + " + ".join(terms) + ")"


def citation_rule_sql(cfg: PrefilterConfig, cin: str, cout: str) -> str:
    """SQL for rule 4 on the inbound and outbound lists (exact distinct counts).

    Most records are decided cheaply: raw list lengths bound the distinct counts from
    above (too few elements: fail) and the distinct count of a short prefix bounds them
    from below (enough distinct ids already: pass). Only the rest (a list with repeated
    ids near its start) pays for ``list_unique`` over the whole list.
    """
    k = cfg.min_citations
    if k == 0:
        return "true"
    n_in, n_out = f"coalesce(len({cin}), 0)", f"coalesce(len({cout}), 0)"
    p_in, p_out = _prefix_distinct(cin, k), _prefix_distinct(cout, k)
    d_in, d_out = f"coalesce(list_unique({cin}), 0)", f"coalesce(list_unique({cout}), 0)"

    def test(a: str, b: str) -> str:
        return {
            "total": f"({a} + {b} >= {k})",
            "either": f"({a} >= {k} OR {b} >= {k})",
            "both": f"({a} >= {k} AND {b} >= {k})",
            "in": f"({a} >= {k})",
            "out": f"({b} >= {k})",
        }[cfg.citation_direction]

    return (
        f"CASE WHEN NOT {test(n_in, n_out)} THEN false WHEN {test(p_in, p_out)} THEN true "
        f"ELSE {test(d_in, d_out)} END"
    )


def scan_sql(cfg: PrefilterConfig, source: str, file_idx: int) -> str:
    """SQL of the per-record rows of one shard (``source``: :func:`s2orc.shard_sql`).

    Columns: seq (file index << SEQ_SHIFT | record number), reason (NULL unless
    malformed), paper_id, the four rule flags, and the output columns (title, abstract,
    year, fields, outbound), kept only for records that pass all four rules, so that
    memory holds ~16M texts rather than 81M.
    """
    ws = s2orc.WHITESPACE_CLASS
    k_abs = cfg.min_abstract_chars
    keep = "ok_year AND ok_title AND ok_abstract AND ok_cit"
    sv = s2orc.string_value
    return f"""
WITH _r AS (SELECT *, {s2orc.reason_sql()} AS reason FROM {source}),
_v AS (
  SELECT rn, reason, _ti, _ab, _yr, _mf,
    CASE WHEN reason IS NULL THEN {sv("_pid")} END AS paper_id,
    CASE WHEN reason IS NULL THEN {s2orc.string_list("_in")} END AS cin,
    CASE WHEN reason IS NULL THEN {s2orc.string_list("_out")} END AS cout
  FROM _r
),
_f AS (
  SELECT *,
    _yr IS NOT NULL AND _yr <> 'null' AS ok_year,
    CASE WHEN _ti IS NULL OR _ti = 'null' OR _ti = '""' THEN false
         WHEN ord(_ti[2]) BETWEEN 33 AND 126 AND _ti[2] <> '\\' THEN true
         ELSE NOT regexp_full_match({sv("_ti")}, '{ws}*') END AS ok_title,
    CASE WHEN _ab IS NULL OR _ab = 'null' THEN {k_abs <= 0}
         WHEN strlen(_ab) - 2 >= {12 * k_abs} THEN true
         ELSE length({sv("_ab")}) >= {k_abs} END AS ok_abstract,
    {citation_rule_sql(cfg, "cin", "cout")} AS ok_cit
  FROM _v
)
SELECT ({file_idx}::BIGINT << {SEQ_SHIFT}) + rn AS seq, reason, paper_id,
  ok_year, ok_title, ok_abstract, ok_cit,
  CASE WHEN reason IS NULL AND {keep} THEN {sv("_ti")} END AS title,
  CASE WHEN reason IS NULL AND {keep} THEN {sv("_ab")} END AS abstract,
  CASE WHEN reason IS NULL AND {keep} THEN _yr::BIGINT END AS year,
  CASE WHEN reason IS NULL AND {keep} THEN {s2orc.string_list("_mf")} END AS fields,
  CASE WHEN reason IS NULL AND {keep} THEN cout END AS outbound
FROM _f"""


# --------------------------------------------------------------------------- the run

RECS_DDL = """CREATE TABLE recs (
  seq BIGINT, reason VARCHAR, paper_id VARCHAR,
  ok_year BOOLEAN, ok_title BOOLEAN, ok_abstract BOOLEAN, ok_cit BOOLEAN,
  title VARCHAR, abstract VARCHAR, year BIGINT, fields VARCHAR[], outbound VARCHAR[])"""


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    row = con.execute(sql).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


@dataclass
class FileScan:
    """What the scan learned about one shard."""

    index: int
    path: Path
    malformed: int = 0
    # Set when DuckDB could not read the file and a s2orc.recover() copy was read instead.
    recovered: s2orc.Recovered | None = None

    @property
    def extra_malformed(self) -> int:
        """Malformed lines not in the scanned rows: a cut-off last line of a broken gzip."""
        return 1 if self.recovered is not None and self.recovered.stream_error else 0


@dataclass
class PrefilterResult:
    """The funnel, the output row counts, and wall times of the scan and the output steps."""

    funnel: dict[str, Any]
    n_papers: int
    n_citations: int
    timings: dict[str, float]


def _file_malformed(con: duckdb.DuckDBPyConnection, index: int) -> int:
    """Malformed records of one file (its rows are contiguous, so zone maps make it cheap)."""
    lo = index << SEQ_SHIFT
    return _one(
        con,
        f"SELECT count(*) FROM recs WHERE seq BETWEEN {lo} AND {lo + (1 << SEQ_SHIFT) - 1} "
        "AND reason IS NOT NULL",
    )


def _scan_file(
    con: duckdb.DuckDBPyConnection, cfg: PrefilterConfig, scan: FileScan, temp_dir: Path
) -> FileScan:
    """Insert one shard's records into ``recs`` (one streaming pass).

    DuckDB fails a whole file on a truncated or corrupt gzip stream or on a line far over
    ``MAX_LINE_BYTES``; such a file is then read from a :func:`s2orc.recover` copy in
    ``temp_dir`` (same line numbers), and only its bad lines are lost.
    """
    import duckdb

    if scan.path.stat().st_size == 0:  # an empty file holds no records (and no gzip header)
        return scan
    cur = con.cursor()
    errors = (duckdb.IOException, duckdb.InvalidInputException)
    try:
        try:
            # Fast path: a shard without unreadable lines (the usual case) is read with
            # DuckDB's error skipping off; a failed statement inserts nothing.
            source = s2orc.shard_sql(scan.path, skip_bad_lines=False)
            cur.execute(f"INSERT INTO recs {scan_sql(cfg, source, scan.index)}")
        except errors:
            try:
                source = s2orc.shard_sql(scan.path)
                cur.execute(f"INSERT INTO recs {scan_sql(cfg, source, scan.index)}")
            except errors as exc:
                copy = temp_dir / f"recovered_{scan.index}.jsonl"
                scan.recovered = s2orc.recover(scan.path, copy)
                if not (scan.recovered.stream_error or scan.recovered.too_long):
                    raise InputDataError(
                        f"{scan.path}: cannot be read ({_first_line(exc)})"
                    ) from exc
                source = s2orc.shard_sql(copy)
                cur.execute(f"INSERT INTO recs {scan_sql(cfg, source, scan.index)}")
                copy.unlink()
        if cfg.strict:
            scan.malformed = _file_malformed(cur, scan.index) + scan.extra_malformed
    finally:
        cur.close()
    return scan


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _scan_all(
    con: duckdb.DuckDBPyConnection,
    cfg: PrefilterConfig,
    shards: list[Path],
    temp_dir: Path,
    threads: int,
    progress: Callable[[int], Any] | None,
) -> list[FileScan]:
    """Scan all shards, ``threads`` at a time (one gzip stream is read by one thread).

    With ``strict`` the shards not yet started are skipped once one has a malformed line;
    the shards before it have all started, so the first malformed line is still found.
    """
    con.execute(RECS_DDL)
    stop = threading.Event()

    def work(scan: FileScan) -> FileScan | None:
        if stop.is_set():
            return None
        return _scan_file(con, cfg, scan, temp_dir)

    done: list[FileScan] = []
    workers = max(1, min(threads, len(shards)))
    # Each query reads one gzip stream; DuckDB threads beyond threads // workers per query
    # only contend (measured: 8-10% slower scan with 2 threads per query on 2 cores).
    con.execute(f"SET threads = {max(1, threads // workers)}")
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(work, FileScan(i, p)) for i, p in enumerate(shards)]
            for fut in as_completed(futures):
                result = fut.result()
                if result is None:
                    continue
                done.append(result)
                if progress is not None:
                    progress(1)
                if cfg.strict and result.malformed:
                    stop.set()
    finally:
        con.execute(f"SET threads = {threads}")
    per_file = dict(
        con.execute(
            f"SELECT seq >> {SEQ_SHIFT}, count(*) FROM recs WHERE reason IS NOT NULL GROUP BY 1"
        ).fetchall()
    )
    for scan in done:
        scan.malformed = int(per_file.get(scan.index, 0)) + scan.extra_malformed
    return sorted(done, key=lambda s: s.index)


def _report_malformed(
    con: duckdb.DuckDBPyConnection, scans: list[FileScan], limit: int
) -> list[s2orc.MalformedLine]:
    """The first ``limit`` malformed lines, re-reading only the files that have some."""
    found: list[s2orc.MalformedLine] = []
    for scan in scans:
        if len(found) >= limit:
            break
        if scan.malformed:
            long_lines = scan.recovered is not None and scan.recovered.too_long > 0
            found.extend(
                s2orc.find_malformed(con, scan.path, limit - len(found), long_lines=long_lines)
            )
    return found


def _dedup(con: duckdb.DuckDBPyConnection) -> tuple[int, list[str]]:
    """Drop all but the first record of each repeated paper_id; return (dropped, examples)."""
    con.execute(
        "CREATE TEMP TABLE _dup AS SELECT paper_id, count(*) - 1 AS extra, min(seq) AS keep "
        "FROM recs WHERE reason IS NULL GROUP BY paper_id HAVING count(*) > 1"
    )
    dropped = _one(con, "SELECT sum(extra) FROM _dup")
    examples: list[str] = []
    if dropped:
        examples = [
            r[0] for r in con.execute("SELECT paper_id FROM _dup ORDER BY keep LIMIT 5").fetchall()
        ]
        con.execute(
            "DELETE FROM recs USING _dup WHERE recs.reason IS NULL "
            "AND recs.paper_id = _dup.paper_id AND recs.seq <> _dup.keep"
        )
    con.execute("DROP TABLE _dup")
    return dropped, examples


def _rule_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    row = con.execute(
        """SELECT count(*),
          count(*) FILTER (NOT ok_year), count(*) FILTER (NOT ok_title),
          count(*) FILTER (NOT ok_abstract), count(*) FILTER (NOT ok_cit),
          count(*) FILTER (ok_year AND NOT ok_title),
          count(*) FILTER (ok_year AND ok_title AND NOT ok_abstract),
          count(*) FILTER (ok_year AND ok_title AND ok_abstract AND NOT ok_cit),
          count(*) FILTER (ok_year AND ok_title AND ok_abstract AND ok_cit)
        FROM recs WHERE reason IS NULL"""
    ).fetchone()
    assert row is not None  # an aggregate always returns one row
    keys = (
        "unique",
        "fail_year",
        "fail_title",
        "fail_abstract",
        "fail_citations",
        "removed_title",
        "removed_abstract",
        "removed_citations",
        "survivors",
    )
    return {k: int(v) for k, v in zip(keys, row, strict=True)}


KEEP = "reason IS NULL AND ok_year AND ok_title AND ok_abstract AND ok_cit"
# Rows per Parquet row group. Row groups are cut at fixed row counts (not at the engine's
# batch boundaries), so the bytes written do not depend on the thread count.
ROW_GROUP = 100_000
# Parquet compression of both outputs.
COMPRESSION = "zstd"
# Edge pairs fetched from DuckDB per batch.
EDGE_BATCH = 1 << 20


def _edge_keys(con: duckdb.DuckDBPyConnection) -> Any:
    """Distinct citation edges as sorted int64 keys ``citing_idx << 32 | cited_idx``.

    Indexes are positions of the survivors in file order (table ``_ids``), so the key
    order is the order of papers.parquet. DuckDB gives each survivor's outbound list its
    index (a join on seq, faster than a window over the lists), then maps cited ids to
    indexes (a hash join on the small ``_ids``; both spill if needed); numpy sorts and
    deduplicates 8 bytes per edge.
    """
    import numpy as np

    con.execute(
        "CREATE TEMP TABLE _outbound AS SELECT i.idx, r.outbound FROM recs r "
        f"JOIN _ids i ON r.seq = i.seq WHERE r.{KEEP}"
    )
    reader = con.sql(
        """SELECT (p.a::BIGINT << 32) | d.idx::BIGINT AS k
        FROM (SELECT idx AS a, unnest(outbound) AS cited FROM _outbound) p
        JOIN _ids d ON p.cited = d.paper_id
        WHERE p.a <> d.idx"""
    ).to_arrow_reader(EDGE_BATCH)
    parts = [batch.column(0).to_numpy() for batch in reader]
    con.execute("DROP TABLE _outbound")
    keys = np.concatenate(parts).astype(np.int64) if parts else np.empty(0, dtype=np.int64)
    keys.sort()
    if len(keys) > 1:
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    return keys


def _write_citations(path: Path, ids: Any, citing: Any, cited: Any) -> None:
    """citations.parquet from edge indexes into ``ids``, in fixed row groups."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("citing_id", pa.string()), ("cited_id", pa.string())])
    with pq.ParquetWriter(path, schema, compression=COMPRESSION, use_dictionary=False) as w:
        for lo in range(0, len(citing), ROW_GROUP):
            sl = slice(lo, lo + ROW_GROUP)
            table = pa.table({"citing_id": ids.take(citing[sl]), "cited_id": ids.take(cited[sl])})
            w.write_table(table, row_group_size=ROW_GROUP)


# Columns read for papers.parquet (seq only to check the order; it is not written).
PAPER_COLUMNS = "seq, paper_id, title, abstract, year, fields"


def _papers_in_file_order(cur: duckdb.DuckDBPyConnection, n_files: int) -> Iterator[Any]:
    """The survivors' output columns (with ``seq``) in file order, as record batches.

    No sort: one scan per file, in file order. A file's rows were appended by one INSERT
    in record order, and with ``preserve_insertion_order`` a filtered scan keeps table
    order (:func:`_write_papers` checks every seq); the seq range of a file lets DuckDB skip
    the row groups of the others.
    """
    for index in range(n_files):
        lo = index << SEQ_SHIFT
        hi = lo + (1 << SEQ_SHIFT) - 1
        yield from cur.sql(
            f"SELECT {PAPER_COLUMNS} FROM recs WHERE seq BETWEEN {lo} AND {hi} AND {KEEP}"
        ).to_arrow_reader(ROW_GROUP)


def _row_groups(batches: Iterator[Any], schema: Any) -> Iterator[Any]:
    """Tables of exactly ``ROW_GROUP`` rows (the last one shorter) from record batches.

    Each column is one chunk: Parquet pages are then cut the same way whatever the
    engine's batch sizes (which depend on the thread count).
    """
    import pyarrow as pa

    pending = pa.Table.from_batches([], schema=schema)
    for batch in batches:
        pending = pa.concat_tables([pending, pa.Table.from_batches([batch])])
        while pending.num_rows >= ROW_GROUP:
            yield pending.slice(0, ROW_GROUP).combine_chunks()
            pending = pending.slice(ROW_GROUP)
    if pending.num_rows:
        yield pending.combine_chunks()


def _write_papers(
    path: Path, schema: Any, groups: Iterator[Any], seqs: Any, n_out: Any, n_in: Any
) -> None:
    """papers.parquet from row groups of the survivors in file order (:func:`_row_groups`
    over :func:`_papers_in_file_order`, whose Arrow schema is ``schema``).

    The counts are aligned by position with ``seqs`` (the survivors' seqs in file order);
    a check on every row guards it.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    out_schema = schema.remove(schema.get_field_index("seq"))
    out_schema = out_schema.append(pa.field("n_out", pa.int64()))
    out_schema = out_schema.append(pa.field("n_in", pa.int64()))
    pos = 0
    with pq.ParquetWriter(
        path, out_schema, compression=COMPRESSION, use_dictionary=["fields.list.element"]
    ) as writer:
        for group in groups:
            rows = group.num_rows
            if not np.array_equal(group.column("seq").to_numpy(), seqs[pos : pos + rows]):
                raise RuntimeError("papers and citation counts are misaligned")  # a bug
            group = group.drop_columns(["seq"])
            group = group.append_column("n_out", pa.array(n_out[pos : pos + rows]))
            group = group.append_column("n_in", pa.array(n_in[pos : pos + rows]))
            writer.write_table(group, row_group_size=ROW_GROUP)
            pos += rows
    if pos != len(seqs):
        raise RuntimeError("papers and citation counts differ in length")  # a bug


def _prefetch(items: Iterator[Any], depth: int) -> Generator[Any, None, None]:
    """Yield from ``items``, computed ahead by a helper thread (at most ``depth`` waiting).

    Here it fetches the next papers from DuckDB and forms their row group while the
    previous one is compressed. An error in the helper is raised in the consumer.
    """
    import queue

    buf: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                buf.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put(("item", item)):
                    return
            put(("end", None))
        except BaseException as exc:  # handed to the consumer
            put(("error", exc))

    thread = threading.Thread(target=produce, name="mdcr-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = buf.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        stop.set()
        thread.join()


def _write_outputs(con: duckdb.DuckDBPyConnection, out_dir: Path, n_files: int) -> tuple[int, int]:
    """Write citations.parquet and papers.parquet, both in file order; return their rows.

    Papers keep the order of the shards (file, then line: the first record of each
    paper_id); edges are ordered by (citing paper, cited paper) in that order. Edges come
    from the survivors' outbound lists, kept when the cited paper survived too,
    self-citations and repeats dropped. The two files are written at the same time (the
    Parquet writers run outside Python's lock).
    """
    import numpy as np

    con.execute("SET preserve_insertion_order = false")
    con.execute(
        "CREATE TEMP TABLE _ids AS SELECT seq, paper_id, "
        f"(row_number() OVER (ORDER BY seq) - 1)::INTEGER AS idx FROM recs WHERE {KEEP}"
    )
    keys = _edge_keys(con)
    con.execute("SET preserve_insertion_order = true")
    table = con.sql("SELECT seq, paper_id FROM _ids ORDER BY idx").to_arrow_table()
    con.execute("DROP TABLE _ids")
    seqs = table.column("seq").to_numpy()
    ids = table.column("paper_id").combine_chunks()
    del table
    citing = (keys >> 32).astype(np.int32)
    cited = (keys & 0xFFFFFFFF).astype(np.int32)
    del keys
    n_out = np.bincount(citing, minlength=len(ids)).astype(np.int64)
    n_in = np.bincount(cited, minlength=len(ids)).astype(np.int64)
    schema = con.sql(f"SELECT {PAPER_COLUMNS} FROM recs LIMIT 0").to_arrow_table().schema
    cur = con.cursor()
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            # The edges are written while the papers are.
            job = pool.submit(_write_citations, CITATIONS.path(out_dir), ids, citing, cited)
            # A helper thread fetches the papers and forms the row groups while the
            # previous one is compressed.
            groups = _prefetch(_row_groups(_papers_in_file_order(cur, n_files), schema), 1)
            try:
                _write_papers(CORPUS_PAPERS.path(out_dir), schema, groups, seqs, n_out, n_in)
            finally:
                groups.close()  # stops the helper thread before the cursor closes
            job.result()
    finally:
        cur.close()
    return len(ids), len(citing)


def funnel_table(funnel: dict[str, Any]) -> str:
    """The funnel as a small text table for the log: each step, what it removed, what is left.

    The last column gives each rule's failures on its own (over all unique papers).
    """
    left = funnel["records_read"]
    rows = [("records read", "", f"{left:,}", "")]
    steps = [
        ("malformed lines", funnel["malformed_skipped"], ""),
        ("duplicate paper_ids", funnel["duplicates_dropped"], ""),
    ] + [
        (f"rule: {r}", funnel["removed_by_rule"][r], f"{funnel['fails_alone'][r]:,}") for r in RULES
    ]
    for name, removed, alone in steps:
        left -= removed
        rows.append((name, f"-{removed:,}", f"{left:,}", alone))
    rows.append(("citation edges", "", f"{funnel['citation_edges']:,}", ""))
    head = ("step", "removed", "left", "fails alone")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    lines = []
    for r in [head, *rows]:
        cells = [r[0].ljust(widths[0])] + [r[i].rjust(widths[i]) for i in range(1, 4)]
        lines.append("  " + "  ".join(cells).rstrip())
    return "\n".join(lines)


def prefilter_corpus(
    shard_dir: Path,
    out_dir: Path,
    cfg: PrefilterConfig,
    *,
    log: Callable[[str], None] | None = None,
    progress: Callable[[int], Any] | None = None,
) -> PrefilterResult:
    """Prefilter the shards in ``shard_dir`` into ``out_dir``; return the funnel and counts.

    Writes papers.parquet, citations.parquet and funnel.json. Raises InputDataError for a
    folder without shards, and (with ``cfg.strict``) for the first malformed line.
    """
    import duckdb

    say = log or (lambda _msg: None)
    shards = s2orc.find_shards(Path(shard_dir))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    temp_dir = out_dir / ".duckdb-tmp"
    shutil.rmtree(temp_dir, ignore_errors=True)
    temp_dir.mkdir()
    threads = engine_threads()
    con = connect(temp_dir, threads)
    timings: dict[str, float] = {}
    clock = time.perf_counter()
    try:
        scans = _scan_all(con, cfg, shards, temp_dir, threads, progress)
        timings["scan_s"] = round(time.perf_counter() - clock, 3)
        n_malformed = sum(s.malformed for s in scans)
        reported = _report_malformed(
            con, scans, max(cfg.max_reported_errors, 1 if cfg.strict else 0)
        )
        if cfg.strict and n_malformed:
            first = reported[0] if reported else None
            where = str(first) if first else f"{next(s.path for s in scans if s.malformed)}"
            raise InputDataError(f"{where}; fix the line or run without --strict")
        reasons: dict[str, int] = {}
        for reason, n in con.execute(
            "SELECT reason, count(*) FROM recs WHERE reason IS NOT NULL GROUP BY 1"
        ).fetchall():
            reasons[str(reason)] = int(n)
        for scan in scans:
            if scan.recovered is None:
                continue
            if scan.recovered.stream_error:
                key = scan.recovered.stream_error
                reasons[key] = reasons.get(key, 0) + 1
            if scan.recovered.too_long:  # counted as unreadable ({}) by the scan
                reasons[s2orc.UNREADABLE] -= scan.recovered.too_long
                reasons[s2orc.TOO_LONG] = reasons.get(s2orc.TOO_LONG, 0) + scan.recovered.too_long
        reasons = {k: v for k, v in reasons.items() if v}
        n_valid = _one(con, "SELECT count(*) FROM recs WHERE reason IS NULL")
        dropped, dup_examples = _dedup(con)
        counts = _rule_counts(con)
        clock = time.perf_counter()
        n_papers, n_edges = _write_outputs(con, out_dir, len(shards))
        timings["outputs_s"] = round(time.perf_counter() - clock, 3)
    except duckdb.OutOfMemoryException as exc:
        raise ConfigError(
            f"DuckDB ran out of memory with MDCR_MEMORY_LIMIT={engine_memory_limit()} "
            f"({_first_line(exc)}); raise MDCR_MEMORY_LIMIT or lower MDCR_THREADS"
        ) from exc
    finally:
        con.close()
        shutil.rmtree(temp_dir, ignore_errors=True)
    if n_papers != counts["survivors"]:  # an internal invariant, not a data problem
        raise RuntimeError(f"wrote {n_papers} papers but counted {counts['survivors']}")
    funnel: dict[str, Any] = {
        "shards": len(shards),
        "records_read": n_valid + n_malformed,
        "malformed_skipped": n_malformed,
        "malformed_by_reason": dict(sorted(reasons.items())),
        "malformed_examples": [str(m) for m in reported[: cfg.max_reported_errors]],
        "duplicates_dropped": dropped,
        "duplicate_examples": dup_examples,
        "unique_papers": counts["unique"],
        "removed_by_rule": {
            "year": counts["fail_year"],
            "title": counts["removed_title"],
            "abstract": counts["removed_abstract"],
            "citations": counts["removed_citations"],
        },
        "fails_alone": {r: counts[f"fail_{r}"] for r in RULES},
        "survivors": counts["survivors"],
        "citation_edges": n_edges,
        "rules": {
            "min_abstract_chars": cfg.min_abstract_chars,
            "min_citations": cfg.min_citations,
            "citation_direction": cfg.citation_direction,
        },
    }
    (out_dir / "funnel.json").write_text(json.dumps(funnel, indent=2, sort_keys=True) + "\n")
    if n_malformed:
        say(f"skipped {n_malformed:,} malformed line(s); first ones:")
        for m in reported[: cfg.max_reported_errors]:
            say(f"  {m}")
    if dropped:
        say(f"dropped {dropped:,} duplicate record(s), e.g. paper_id {', '.join(dup_examples)}")
    say("prefilter funnel:\n" + funnel_table(funnel))
    return PrefilterResult(funnel=funnel, n_papers=n_papers, n_citations=n_edges, timings=timings)


def run_prefilter(cfg: PrefilterConfig, ctx: StageContext) -> None:
    shard_dir = ctx.input("input")
    n_shards = len(s2orc.find_shards(shard_dir))
    messages: list[str] = []  # logged once the progress bar is closed
    with ctx.timed("prefilter"), ctx.progress(total=n_shards, desc="shards", unit="shard") as bar:
        result = prefilter_corpus(shard_dir, ctx.out, cfg, log=messages.append, progress=bar.update)
    for msg in messages:
        ctx.log(msg)
    CORPUS_PAPERS.output(ctx, rows=result.n_papers)
    CITATIONS.output(ctx, rows=result.n_citations)
    ctx.output("funnel.json")
    ctx.record("funnel", result.funnel)
    ctx.timings.update(result.timings)


def plan_prefilter(
    cfg: PrefilterConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    return StagePlan(
        f"read S2ORC shards from {cfg.input}; keep papers with a year, a title, an abstract "
        f">= {cfg.min_abstract_chars} chars and >= {cfg.min_citations} distinct citations "
        f"({cfg.citation_direction}); write papers.parquet, citations.parquet, funnel.json"
    )


SPEC = register(
    StageSpec(
        name="prefilter",
        version="2",
        config=PrefilterConfig,
        run=run_prefilter,
        help="S2ORC metadata shards -> prefiltered papers + citation edges (DuckDB)",
        plan=plan_prefilter,
    )
)
