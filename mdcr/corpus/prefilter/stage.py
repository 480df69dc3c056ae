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
  (:mod:`mdcr.corpus.formats.s2ag`): the non-null ids of the ``citations`` table's
  edges, the same ids whether or not they have a papers record.

Why "total" is the default: on the 1,000-record real sample (tests/data/s2orc_sample),
after the other three rules, 183 papers have in + out >= 3 (x 81.1M/1000 = 14.8M),
"either" 179 (14.5M), "in" 117 (9.5M), "out" 106 (8.6M), "both" 44 (3.6M). Only counting
both directions is consistent with the paper's "around 16M".

How it runs on S2ORC (one pass over the input; memory bounded on the full 81.1M records):

1. Scan (:mod:`mdcr.corpus.prefilter.scan`): each shard is one streaming ``read_json``
   query that validates every record, evaluates the four rules and appends one narrow row
   per record to a DuckDB table: its order key (file, record number), the malformed
   reason, paper_id and the rule flags; title, abstract, year, fields and outbound ids
   are kept only for records that pass all rules.
2. Duplicates: one GROUP BY over all paper_ids; the first record (file order, then line
   order) is kept, the rules then apply to it.
3. Outputs, in file order (file, then line; no sort of the texts), written as
   :mod:`mdcr.corpus.prefilter.output` describes; their bytes do not depend on the
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

Input formats: each layout is one entry of :mod:`mdcr.corpus.formats.registry` (its files, its
scan into the tables the shared steps read, its words and size in the dry run), registered
next to its definition (:mod:`mdcr.corpus.formats.s2orc`, :mod:`mdcr.corpus.formats.s2ag`);
``format`` names one of them or "auto".

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
from mdcr.core.stage import STAGES, PlanFacts, StageContext, StagePlan, StageSpec, Work
from mdcr.corpus.formats import registry as formats
from mdcr.corpus.formats.registry import InputFormat, Scanned
from mdcr.corpus.prefilter.output import write_outputs
from mdcr.corpus.prefilter.rules import (
    RULES,
    PrefilterConfig,
)
from mdcr.corpus.prefilter.scan import (
    first_line,
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


@dataclass
class PrefilterResult:
    """The funnel, the output row counts, and wall times of the scan and the output steps."""

    funnel: dict[str, Any]
    n_papers: int
    n_citations: int
    timings: dict[str, float]


def resolve_format(cfg: PrefilterConfig, folder: Path) -> str:
    """The input layout's name: ``cfg.format``, or for "auto" the registered format that
    recognises the folder (:func:`mdcr.corpus.formats.registry.resolve_format`)."""
    return formats.resolve_format(cfg.format, folder).name


def input_files(cfg: PrefilterConfig, folder: Path) -> list[Path]:
    """The files the prefilter reads from ``folder`` (one-line errors for a bad layout)."""
    return formats.resolve_format(cfg.format, folder).files(folder)


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


def plan_prefilter(
    cfg: PrefilterConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    from mdcr.planning import input_records
    from mdcr.planning.sizes import PREFILTER_KEEPS

    if cfg.format == formats.AUTO:
        layout = formats.auto_label()
    else:
        layout = formats.get_format(cfg.format).description(cfg)
    source = next(iter(inputs.get("input") or []), None)
    fmt = formats.sizing_format(cfg.format, source)
    if fmt.size is not None:  # the format's own size model
        size = fmt.size(cfg, source, inputs, upstream)
    else:  # the planned input's records, else S2ORC's count
        records, _ = input_records(inputs, upstream, [])
        size = formats.InputSize(records, Work(fmt.rate_key, units=float(records)))
    return StagePlan(
        f"read {layout}{size.layout_words} from {cfg.input}{size.source_words}; keep papers "
        f"with a year, a title, an abstract >= {cfg.min_abstract_chars} chars and >= "
        f"{cfg.min_citations} distinct citations ({cfg.citation_direction}); write "
        "papers.parquet, citations.parquet, funnel.json",
        facts=PlanFacts(papers=round(size.records * PREFILTER_KEEPS), records=size.records),
        work=size.work,
    )


SPEC = STAGES.register(
    StageSpec(
        name="prefilter",
        version="4",
        config=PrefilterConfig,
        run=run_prefilter,
        help="S2ORC shards or an S2AG release -> prefiltered papers + citation edges (DuckDB)",
        plan=plan_prefilter,
    )
)
