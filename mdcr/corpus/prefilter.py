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
3. Outputs, in file order (file, then line; no sort of the texts), written as
   :mod:`mdcr.corpus.prefilter_output` describes; their bytes do not depend on the
   thread count.

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
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mdcr.artifacts import CITATIONS, CORPUS_PAPERS
from mdcr.config import input_path, param
from mdcr.corpus import s2orc
from mdcr.corpus.prefilter_output import SEQ_SHIFT, write_outputs
from mdcr.errors import ConfigError, InputDataError
from mdcr.paper import MIN_ABSTRACT_CHARS, MIN_CITATIONS
from mdcr.stage import PlanFacts, StageContext, StagePlan, StageSpec, register

if TYPE_CHECKING:
    import duckdb

RULES = ("year", "title", "abstract", "citations")


@dataclass(frozen=True)
class PrefilterConfig:
    """Config of the `prefilter` stage."""

    input: str = input_path(help="folder of S2ORC metadata shards (metadata_*.jsonl.gz)")
    min_abstract_chars: int = param(
        MIN_ABSTRACT_CHARS, help="minimum abstract length in characters"
    )
    min_citations: int = param(MIN_CITATIONS, help="minimum number of distinct citations")
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
        n_papers, n_edges = write_outputs(con, out_dir, len(shards))
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
