"""The S2ORC metadata format (release v2020-07-05): its shards and how a record is judged.

A release ships ``metadata/metadata_{0..99}.jsonl.gz``: one JSON object per line with
``paper_id`` (string), ``title`` and ``abstract`` (string or null), ``year`` (integer or
null), ``mag_field_of_study`` (list of strings or null), ``outbound_citations`` and
``inbound_citations`` (lists of paper-id strings), plus keys this project does not read.
Reading and re-reading shards is shared with the S2AG format (:mod:`mdcr.corpus.jsonl`).

A line is *malformed* when it is not valid UTF-8, not valid JSON, not a JSON object, or a
key has the wrong JSON type or value: ``paper_id`` missing, not a string, empty or
only whitespace; ``title``/``abstract`` neither a string nor null; ``year`` neither null nor
an integer from 1000 to 2100 (``jsonl.YEAR_MIN``, ``YEAR_MAX``: 0 and 99999 are not
publication years); a list key neither a list of strings nor null. A missing key
counts as null. Lines holding only JSON whitespace are skipped and are not records.

This module is the whole format: its shards, its scan (one streaming ``read_json`` query
per shard that validates every record, evaluates the four rules and keeps the texts of
the survivors only: :func:`scan_sql`), its size model for the dry run (the records in its
shards when they are there, else S2ORC's count) and its registration, the default format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.core.errors import InputDataError
from mdcr.core.stage import PlanFacts, Work
from mdcr.corpus import jsonl
from mdcr.corpus.formats.registry import FORMATS, InputFormat, InputSize, Scanned
from mdcr.corpus.prefilter.output import SEQ_SHIFT
from mdcr.corpus.prefilter.rules import (
    PrefilterConfig,
    abstract_rule_sql,
    citation_rule_sql,
    title_rule_sql,
)
from mdcr.corpus.prefilter.scan import (
    Dataset,
    drop_duplicates,
    scan_usable,
    stop_on_duplicates,
    summarize_malformed,
)

if TYPE_CHECKING:
    import duckdb

SHARD_PATTERNS = ("metadata_*.jsonl.gz", "metadata_*.jsonl")
FALLBACK_PATTERNS = ("*.jsonl.gz", "*.jsonl")

# The keys read; SHORT names their raw-JSON columns in the scan.
KEYS = (
    "paper_id",
    "title",
    "abstract",
    "year",
    "mag_field_of_study",
    "outbound_citations",
    "inbound_citations",
)
LIST_KEYS = ("mag_field_of_study", "outbound_citations", "inbound_citations")
SHORT = ("_pid", "_ti", "_ab", "_yr", "_mf", "_out", "_in")


def _checks() -> tuple[str, ...]:
    checks = [
        "WHEN _pid IS NULL THEN 'paper_id is missing'",
        "WHEN NOT starts_with(_pid, '\"') THEN 'paper_id is not a string'",
        "WHEN _pid = '\"\"' THEN 'paper_id is empty'",
        jsonl.blank_string_check("paper_id", "_pid"),
        jsonl.string_check("title", "_ti"),
        jsonl.string_check("abstract", "_ab"),
        *jsonl.year_checks("_yr"),
    ]
    for key, col in zip(LIST_KEYS, SHORT[4:], strict=True):
        checks.append(
            f"WHEN NOT ({jsonl.is_null(col)} OR {col} = '[]') "
            f"AND NOT regexp_full_match({col}, '{jsonl.STRING_LIST_RE}') "
            f"THEN '{key} is not a list of strings or null'"
        )
    return tuple(checks)


SCHEMA = jsonl.RecordSchema(name="S2ORC", keys=KEYS, columns=SHORT, checks=_checks())
UNREADABLE = SCHEMA.unreadable


def find_shards(folder: Path) -> list[Path]:
    """The shard files of a folder, in file order (natural sort of their names).

    ``metadata_*.jsonl.gz`` / ``metadata_*.jsonl`` as in a release; if there are none,
    any ``*.jsonl.gz`` / ``*.jsonl``. A folder without shards is a one-line error.
    Entries named like shards that are not readable files are returned too; the scan
    reports them as whole-file problems.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputDataError(
            f"S2ORC input '{folder}' is not a folder; pass the folder that holds "
            "metadata_*.jsonl.gz shards"
        )
    for patterns in (SHARD_PATTERNS, FALLBACK_PATTERNS):
        found = jsonl.find_files(folder, patterns)
        if found:
            return found
    raise InputDataError(
        f"no S2ORC shards in '{folder}': expected files named metadata_*.jsonl.gz or "
        "metadata_*.jsonl (or any *.jsonl.gz / *.jsonl)"
    )


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
WITH _r AS (SELECT *, {SCHEMA.reason_sql()} AS reason FROM {source}),
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


def scan_s2orc(
    con: duckdb.DuckDBPyConnection,
    cfg: PrefilterConfig,
    folder: Path,
    temp_dir: Path,
    threads: int,
    progress: Callable[[int], Any] | None,
) -> Scanned:
    shards = tuple(find_shards(folder))
    ds = Dataset("metadata", SCHEMA, shards, "recs", RECS_DDL, lambda src, i: scan_sql(cfg, src, i))
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


def _input_files(source: Path | None, upstream: Mapping[Path, PlanFacts]) -> list[Path]:
    """The JSONL files of an input folder that is there (none: planned, or missing)."""
    if source is None or source in upstream or not source.is_dir():
        return []
    try:
        return find_shards(source)
    except InputDataError:
        return []  # the run itself names the problem


def size_s2orc(
    cfg: PrefilterConfig,
    source: Path | None,
    inputs: dict[str, list[Path]],
    upstream: Mapping[Path, PlanFacts],
) -> InputSize:
    """The dry run's size of S2ORC shards: the records in them when they are there
    (counted, or estimated from their sizes), else the planned input's or S2ORC's count."""
    from mdcr.planning import input_records

    files = _input_files(source, upstream)
    records, how = input_records(inputs, upstream, files)
    counted = f" ({records:,} records, {how})" if files else ""
    return InputSize(records, Work("prefilter", units=float(records)), source_words=counted)


FORMATS.register(
    InputFormat(
        name="s2orc",
        label="S2ORC shards",
        files=find_shards,
        scan=scan_s2orc,
        size=size_s2orc,
    )
)
