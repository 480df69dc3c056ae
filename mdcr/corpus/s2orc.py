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
"""

from __future__ import annotations

from pathlib import Path

from mdcr.core.errors import InputDataError
from mdcr.corpus import jsonl

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
