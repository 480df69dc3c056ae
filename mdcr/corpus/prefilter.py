"""The `prefilter` stage: S2ORC shards or an S2AG release -> the prefiltered corpus.

The paper (section 3) keeps the articles with (1) a publication year, (2) a non-empty
title, (3) an abstract of at least 30 characters and (4) at least three citations in
S2ORC, "around 16M" of S2ORC's 81.1M. Rules here, in this order:

- year: not null;
- title: not null and not only whitespace (Python's ``str.isspace`` set);
- abstract: at least ``min_abstract_chars`` characters (Unicode code points; null = 0);
- citations: the number of DISTINCT cited and citing ids, compared with
  ``min_citations`` per ``citation_direction``: "total" in + out; "either" in or out
  alone; "in" / "out" one direction; "both" each. S2ORC: the ids in
  ``inbound_citations`` / ``outbound_citations`` as given (before any filtering). S2AG
  (:mod:`mdcr.corpus.prefilter_s2ag`): the non-null ids of the ``citations`` table's
  edges, the same ids whether or not they have a papers record.

Why "total" is the default: on the 1,000-record real sample (tests/data/s2orc_sample),
after the other three rules, 183 papers have in + out >= 3 (x 81.1M/1000 = 14.8M),
"either" 179 (14.5M), "in" 117 (9.5M), "out" 106 (8.6M), "both" 44 (3.6M). Only counting
both directions is consistent with the paper's "around 16M".

How it runs on S2ORC (one pass over the input; memory bounded on the full 81.1M records):

1. Scan (:mod:`mdcr.corpus.prefilter_scan`): each shard is one streaming ``read_json``
   query that validates every record, evaluates the four rules and appends one narrow row
   per record to a DuckDB table: its order key (file, record number), the malformed
   reason, paper_id and the rule flags; title, abstract, year, fields and outbound ids
   are kept only for records that pass all rules.
2. Duplicates: one GROUP BY over all paper_ids; the first record (file order, then line
   order) is kept, the rules then apply to it.
3. Outputs, in file order (file, then line; no sort of the texts), written as
   :mod:`mdcr.corpus.prefilter_output` describes; their bytes do not depend on the
   thread count.

Findings: malformed lines (a year outside 1000-2100 and a whitespace-only id included)
are counted by reason and the first ``max_reported_errors`` named; whole-file problems
(a 0-byte file, a folder named like a shard, a ``.gz`` that is not gzip) are counted and
listed (a leading UTF-8 byte-order mark is read past, as by every reader of mdcr);
duplicate ids are counted with examples. ``strict`` stops at the first finding of any of
these kinds. An input without a single usable record is an error naming it, and so is one
of which no record passes the rules (the error shows the funnel). The funnel's
``records_read`` and ``malformed_skipped`` are the paper records'; ``lines_read`` and
``malformed_lines`` total every dataset read (for S2AG the papers, abstracts and
citations).

Input formats: each layout is one entry of :mod:`mdcr.corpus.formats` (its files, its
scan into the tables the shared steps read, its words in the dry run); S2ORC and S2AG are
registered at the end of this module, and ``format`` names one of them or "auto".

Threads and DuckDB's memory limit do not change outputs, so they are not config fields:
``MDCR_THREADS`` (default: all cores) and ``MDCR_MEMORY_LIMIT`` (default: 50% of RAM).
DuckDB spills to a temporary folder inside the output folder, removed at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.contracts.artifacts import CITATIONS, CORPUS_PAPERS
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.stage import PlanFacts, StageContext, StagePlan, StageSpec, Work, register
from mdcr.corpus import formats, jsonl, prefilter_s2ag, s2ag, s2orc
from mdcr.corpus.formats import InputFormat, Scanned, register_format
from mdcr.corpus.prefilter_output import SEQ_SHIFT, write_outputs
from mdcr.corpus.prefilter_rules import (
    RULES,
    PrefilterConfig,
    abstract_rule_sql,
    citation_rule_sql,
    title_rule_sql,
)
from mdcr.corpus.prefilter_scan import (
    Dataset,
    drop_duplicates,
    first_line,
    scan_usable,
    stop_on_duplicates,
    summarize_malformed,
)

if TYPE_CHECKING:
    import duckdb

__all__ = ["SPEC", "PrefilterConfig", "PrefilterResult", "prefilter_corpus"]


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


def scan_sql(cfg: PrefilterConfig, source: str, file_idx: int) -> str:
    """SQL of the per-record rows of one shard (``source``: :func:`jsonl.shard_sql`).

    Columns: seq (file index << SEQ_SHIFT | record number), reason (NULL unless
    malformed), paper_id, the four rule flags, and the output columns (title, abstract,
    year, fields, outbound), kept only for records that pass all four rules, so that
    memory holds ~16M texts rather than 81M.
    """
    keep = "ok_year AND ok_title AND ok_abstract AND ok_cit"
    sv = jsonl.string_value
    return f"""
WITH _r AS (SELECT *, {s2orc.SCHEMA.reason_sql()} AS reason FROM {source}),
_v AS (
  SELECT rn, reason, _ti, _ab, _yr, _mf,
    CASE WHEN reason IS NULL THEN {sv("_pid")} END AS paper_id,
    CASE WHEN reason IS NULL THEN {jsonl.string_list("_in")} END AS cin,
    CASE WHEN reason IS NULL THEN {jsonl.string_list("_out")} END AS cout
  FROM _r
),
_f AS (
  SELECT *,
    _yr IS NOT NULL AND _yr <> 'null' AS ok_year,
    {title_rule_sql("_ti")} AS ok_title,
    {abstract_rule_sql(cfg, "_ab")} AS ok_abstract,
    {citation_rule_sql(cfg, "cin", "cout")} AS ok_cit
  FROM _v
)
SELECT ({file_idx}::BIGINT << {SEQ_SHIFT}) + rn AS seq, reason, paper_id,
  ok_year, ok_title, ok_abstract, ok_cit,
  CASE WHEN reason IS NULL AND {keep} THEN {sv("_ti")} END AS title,
  CASE WHEN reason IS NULL AND {keep} THEN {sv("_ab")} END AS abstract,
  CASE WHEN reason IS NULL AND {keep} THEN _yr::BIGINT END AS year,
  CASE WHEN reason IS NULL AND {keep} THEN {jsonl.string_list("_mf")} END AS fields,
  CASE WHEN reason IS NULL AND {keep} THEN cout END AS outbound
FROM _f"""


RECS_DDL = """CREATE TABLE recs (
  seq BIGINT, reason VARCHAR, paper_id VARCHAR,
  ok_year BOOLEAN, ok_title BOOLEAN, ok_abstract BOOLEAN, ok_cit BOOLEAN,
  title VARCHAR, abstract VARCHAR, year BIGINT, fields VARCHAR[], outbound VARCHAR[])"""


@dataclass
class PrefilterResult:
    """The funnel, the output row counts, and wall times of the scan and the output steps."""

    funnel: dict[str, Any]
    n_papers: int
    n_citations: int
    timings: dict[str, float]


def resolve_format(cfg: PrefilterConfig, folder: Path) -> str:
    """The input layout's name: ``cfg.format``, or for "auto" the registered format that
    recognises the folder (:func:`mdcr.corpus.formats.resolve_format`)."""
    return formats.resolve_format(cfg.format, folder).name


def input_files(cfg: PrefilterConfig, folder: Path) -> list[Path]:
    """The files the prefilter reads from ``folder`` (one-line errors for a bad layout)."""
    return formats.resolve_format(cfg.format, folder).files(folder)


def _scan_s2orc(
    con: duckdb.DuckDBPyConnection,
    cfg: PrefilterConfig,
    folder: Path,
    temp_dir: Path,
    threads: int,
    progress: Callable[[int], Any] | None,
) -> Scanned:
    shards = tuple(s2orc.find_shards(folder))
    ds = Dataset(
        "metadata", s2orc.SCHEMA, shards, "recs", RECS_DDL, lambda src, i: scan_sql(cfg, src, i)
    )
    result, read = scan_usable(
        con, ds, temp_dir, threads, strict=cfg.strict, progress=progress, where=str(folder)
    )
    reasons, reported = summarize_malformed(con, [result], cfg.max_reported_errors)
    duplicates = drop_duplicates(con, "recs", "paper_id")
    stop_on_duplicates(duplicates, "paper_id", str(folder), cfg.strict)
    return Scanned(
        scans=[result],
        reasons=reasons,
        reported=reported,
        records_read=read,
        records_valid=read - result.malformed,
        lines_read=read,
        malformed_lines=result.malformed,
        duplicates=duplicates,
        flags="recs",
        paper_files=len(shards),
    )


def _scan_s2ag(
    con: duckdb.DuckDBPyConnection,
    cfg: PrefilterConfig,
    folder: Path,
    temp_dir: Path,
    threads: int,
    progress: Callable[[int], Any] | None,
) -> Scanned:
    release = s2ag.find_release(folder)
    found = prefilter_s2ag.scan_release(con, cfg, release, temp_dir, threads, progress)
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
        edge_keys=prefilter_s2ag.edge_keys,
        details={"s2ag": found.details},
    )


def _rule_counts(con: duckdb.DuckDBPyConnection, table: str) -> dict[str, int]:
    row = con.execute(
        f"""SELECT count(*),
          count(*) FILTER (NOT ok_year), count(*) FILTER (NOT ok_title),
          count(*) FILTER (NOT ok_abstract), count(*) FILTER (NOT ok_cit),
          count(*) FILTER (ok_year AND NOT ok_title),
          count(*) FILTER (ok_year AND ok_title AND NOT ok_abstract),
          count(*) FILTER (ok_year AND ok_title AND ok_abstract AND NOT ok_cit),
          count(*) FILTER (ok_year AND ok_title AND ok_abstract AND ok_cit)
        FROM {table} WHERE reason IS NULL"""
    ).fetchall()[0]  # an aggregate returns one row
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


def no_survivor(input_dir: Path, found: Scanned, counts: dict[str, int]) -> InputDataError:
    """The one-line error for an input of which no record passes the rules: the funnel."""
    removed = ", ".join(
        f"{r} {counts[f'removed_{r}'] if r != 'year' else counts['fail_year']:,}" for r in RULES
    )
    dropped = found.duplicates[0]
    return InputDataError(
        f"no paper in '{input_dir}' passes the prefilter rules ({found.records_read:,} "
        f"records read, {found.records_read - found.records_valid:,} malformed, "
        f"{dropped:,} duplicate, removed by rule: {removed}); check that the input is the "
        "release you meant, and --min-abstract-chars, --min-citations, --citation-direction"
    )


def prefilter_corpus(
    input_dir: Path,
    out_dir: Path,
    cfg: PrefilterConfig,
    *,
    log: Callable[[str], None] | None = None,
    progress: Callable[[int], Any] | None = None,
) -> PrefilterResult:
    """Prefilter the S2ORC shards or S2AG release in ``input_dir`` into ``out_dir``.

    Writes papers.parquet, citations.parquet and funnel.json; returns the funnel and
    counts. Raises InputDataError for a bad layout, an input without a usable record, and
    (with ``cfg.strict``) for the first malformed line or whole-file finding.
    """
    import duckdb

    say = log or (lambda _msg: None)
    input_dir = Path(input_dir)
    fmt = formats.resolve_format(cfg.format, input_dir)
    fmt.files(input_dir)  # layout errors before anything is created
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
        found = fmt.scan(con, cfg, input_dir, temp_dir, threads, progress)
        timings["scan_s"] = round(time.perf_counter() - clock, 3)
        counts = _rule_counts(con, found.flags)
        if counts["survivors"] == 0:
            raise no_survivor(input_dir, found, counts)
        clock = time.perf_counter()
        n_papers, n_edges = write_outputs(con, out_dir, found.paper_files, found.edge_keys)
        timings["outputs_s"] = round(time.perf_counter() - clock, 3)
    except duckdb.OutOfMemoryException as exc:
        raise ConfigError(
            f"DuckDB ran out of memory with MDCR_MEMORY_LIMIT={engine_memory_limit()} "
            f"({first_line(exc)}); raise MDCR_MEMORY_LIMIT or lower MDCR_THREADS"
        ) from exc
    finally:
        con.close()
        shutil.rmtree(temp_dir, ignore_errors=True)
    if n_papers != counts["survivors"]:  # an internal invariant, not a data problem
        raise RuntimeError(f"wrote {n_papers} papers but counted {counts['survivors']}")
    funnel = _funnel(cfg, fmt, found, counts, n_edges)
    (out_dir / "funnel.json").write_text(json.dumps(funnel, indent=2, sort_keys=True) + "\n")
    _log_funnel(say, fmt, found, funnel)
    return PrefilterResult(funnel=funnel, n_papers=n_papers, n_citations=n_edges, timings=timings)


def _funnel(
    cfg: PrefilterConfig, fmt: InputFormat, found: Scanned, counts: dict[str, int], n_edges: int
) -> dict[str, Any]:
    """funnel.json: what was read, skipped, dropped and removed by each rule, and kept."""
    dropped, dup_examples = found.duplicates
    return {
        "format": fmt.name,
        "shards": sum(len(r.dataset.files) for r in found.scans),
        "file_problems": [f for result in found.scans for f in result.findings],
        "records_read": found.records_read,
        "malformed_skipped": found.records_read - found.records_valid,
        "lines_read": found.lines_read,
        "malformed_lines": found.malformed_lines,
        "malformed_by_reason": dict(sorted(found.reasons.items())),
        "malformed_examples": [str(m) for m in found.reported],
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
        **found.details,
    }


def _log_funnel(
    say: Callable[[str], None], fmt: InputFormat, found: Scanned, funnel: dict[str, Any]
) -> None:
    """Whole-file problems, the first malformed lines, duplicates, and the funnel table."""
    findings = funnel["file_problems"]
    if findings:
        say(f"{len(findings):,} file(s) with a whole-file problem:")
        for finding in findings:
            say(f"  {finding}")
    n_malformed = found.malformed_lines
    if n_malformed:
        say(f"skipped {n_malformed:,} malformed line(s); first ones:")
        for m in found.reported:
            say(f"  {m}")
    dropped, dup_examples = found.duplicates
    if dropped:
        say(f"dropped {dropped:,} duplicate record(s), e.g. paper_id {', '.join(dup_examples)}")
    table = funnel_table(funnel)
    if fmt.funnel_lines is not None:
        table += "\n" + fmt.funnel_lines(funnel)
    say("prefilter funnel:\n" + table)


def run_prefilter(cfg: PrefilterConfig, ctx: StageContext) -> None:
    input_dir = ctx.input("input")
    n_files = len(input_files(cfg, input_dir))
    messages: list[str] = []  # logged once the progress bar is closed
    with ctx.timed("prefilter"), ctx.progress(total=n_files, desc="files", unit="file") as bar:
        result = prefilter_corpus(input_dir, ctx.out, cfg, log=messages.append, progress=bar.update)
    for msg in messages:
        ctx.log(msg)
    CORPUS_PAPERS.output(ctx, rows=result.n_papers)
    CITATIONS.output(ctx, rows=result.n_citations)
    ctx.output("funnel.json")
    ctx.record("funnel", result.funnel)
    ctx.timings.update(result.timings)


def _input_files(source: Path | None, upstream: Mapping[Path, PlanFacts]) -> list[Path]:
    """The JSONL files of an input folder that is there (none: planned, or missing)."""
    if source is None or source in upstream or not source.is_dir():
        return []
    try:
        return s2orc.find_shards(source)
    except InputDataError:
        return []  # the run itself names the problem


def plan_prefilter(
    cfg: PrefilterConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    if cfg.format == formats.AUTO:
        layout, rate_key = formats.auto_label(), "prefilter"
    else:
        fmt = formats.get_format(cfg.format)
        layout, rate_key = fmt.description(cfg), fmt.rate_key
    from mdcr.planning import input_records
    from mdcr.planning.sizes import PREFILTER_KEEPS

    source = next(iter(inputs.get("input") or []), None)
    counted = ""
    if cfg.format == "s2ag" or (cfg.format == "auto" and source and s2ag.is_release(source)):
        size, records, work = prefilter_s2ag.plan_release(source)  # priced by its bytes
        layout += size
    else:  # S2ORC: the records in its shards when they are there, else S2ORC's count
        files = _input_files(source, upstream)
        records, how = input_records(inputs, upstream, files)
        counted = f" ({records:,} records, {how})" if files else ""
        work = Work(rate_key, units=float(records))
    return StagePlan(
        f"read {layout} from {cfg.input}{counted}; keep papers with a year, a title, an abstract "
        f">= {cfg.min_abstract_chars} chars and >= {cfg.min_citations} distinct citations "
        f"({cfg.citation_direction}); write papers.parquet, citations.parquet, funnel.json",
        facts=PlanFacts(papers=round(records * PREFILTER_KEEPS), records=records),
        work=work,
    )


# --------------------------------------------------------------------------- the built-in formats

S2ORC = register_format(
    InputFormat(
        name="s2orc",
        label="S2ORC shards",
        files=s2orc.find_shards,
        scan=_scan_s2orc,
    )
)
S2AG = register_format(
    InputFormat(
        name="s2ag",
        label="an S2AG release",
        files=lambda folder: list(s2ag.find_release(folder).files),
        scan=_scan_s2ag,
        detect=s2ag.is_release,
        describe=lambda cfg: f"an S2AG release (fields from {', '.join(cfg.field_sources)})",
        funnel_lines=s2ag_lines,
    )
)


SPEC = register(
    StageSpec(
        name="prefilter",
        version="4",
        config=PrefilterConfig,
        run=run_prefilter,
        help="S2ORC shards or an S2AG release -> prefiltered papers + citation edges (DuckDB)",
        plan=plan_prefilter,
    )
)
