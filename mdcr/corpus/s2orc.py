"""Reading S2ORC metadata shards (release v2020-07-05) with DuckDB, and finding bad lines.

A release ships ``metadata/metadata_{0..99}.jsonl.gz``: one JSON object per line with
``paper_id`` (string), ``title`` and ``abstract`` (string or null), ``year`` (integer or
null), ``mag_field_of_study`` (list of strings or null), ``outbound_citations`` and
``inbound_citations`` (lists of paper-id strings), plus keys this project does not read.

Why ``read_json`` reads every key as raw ``JSON`` text: with typed columns it converts
wrong types silently (a numeric title becomes ``"123"``, a year ``"abc"`` becomes NULL, a
list ``[1, 2]`` becomes ``["1", "2"]``), so a bad record would pass as a good one. Raw JSON
text keeps the type visible (its first character), costs about as much to read, and the
values are unescaped only where needed. One streaming pass reads, parses and validates
each shard; nothing is decompressed twice.

A line is *malformed* when it is not valid UTF-8, not valid JSON, not a JSON object, or a
key has the wrong JSON type: ``paper_id`` missing or not a string; ``title``/``abstract``
neither a string nor null; ``year`` not an integer (within 64 bits) nor null; a list key
neither a list of strings nor null. A missing key counts as null. Lines holding only JSON
whitespace are skipped and are not records.

``read_json`` turns a line it cannot parse into a row of NULLs, so the scan counts those
lines but cannot say why. Only files with malformed lines are re-read here, in Python
(:func:`find_malformed`), to name their first few by 1-based line number and the precise
reason; the type checks there are the same SQL as in the scan, so counts and reasons
cannot drift.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.errors import InputDataError

if TYPE_CHECKING:
    import duckdb

SHARD_PATTERNS = ("metadata_*.jsonl.gz", "metadata_*.jsonl")
FALLBACK_PATTERNS = ("*.jsonl.gz", "*.jsonl")
# DuckDB's JSON reader (maximum_object_size 16 MiB) reads lines of up to about 32 MiB and
# fails a whole file on a longer one; such a file is re-read from a copy in which lines
# over MAX_LINE_BYTES are blanked out (malformed). The longest S2ORC records (papers with
# ~10^5 inbound citations) are a few MB.
MAX_OBJECT_SIZE = 16 * 1024 * 1024
MAX_LINE_BYTES = 2 * MAX_OBJECT_SIZE - 1024
TOO_LONG = f"line longer than {MAX_LINE_BYTES} bytes"

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

# Python's str.isspace() set, as an RE2 class: a title made only of these is empty.
WHITESPACE_CLASS = (
    r"[\t\n\x{0b}\x{0c}\r\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}"
    r"\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]"
)

SHORT = ("_pid", "_ti", "_ab", "_yr", "_mf", "_out", "_in")
UNREADABLE = "invalid JSON or UTF-8, not a JSON object, or none of the S2ORC keys"
TRUNCATED = "truncated gzip stream"
# JSON literal of a list of strings, as DuckDB writes it (minified).
_STRING_LIST_RE = r'\[(?:"(?:[^"\\]|\\.)*"(?:,"(?:[^"\\]|\\.)*")*)?\]'
_JSON_STRUCT = "{" + ", ".join(f'"{k}": "JSON"' for k in KEYS) + "}"


def natural_key(name: str) -> tuple[Any, ...]:
    """Sort key that orders ``metadata_2`` before ``metadata_10``."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def find_shards(folder: Path) -> list[Path]:
    """The shard files of a folder, in file order (natural sort of their names).

    ``metadata_*.jsonl.gz`` / ``metadata_*.jsonl`` as in a release; if there are none,
    any ``*.jsonl.gz`` / ``*.jsonl``. A folder without shards is a one-line error.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise InputDataError(
            f"S2ORC input '{folder}' is not a folder; pass the folder that holds "
            "metadata_*.jsonl.gz shards"
        )
    for patterns in (SHARD_PATTERNS, FALLBACK_PATTERNS):
        found = {
            p for pat in patterns for p in folder.glob(pat) if p.is_file() and p.name[0] != "."
        }
        if found:
            return sorted(found, key=lambda p: natural_key(p.name))
    raise InputDataError(
        f"no S2ORC shards in '{folder}': expected files named metadata_*.jsonl.gz or "
        "metadata_*.jsonl (or any *.jsonl.gz / *.jsonl)"
    )


def sql_str(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def shard_sql(path: Path, *, skip_bad_lines: bool = True) -> str:
    """A relation (rn, _pid, _ti, _ab, _yr, _mf, _out, _in) over one shard's records.

    ``rn`` numbers the records in file order (the streaming window keeps file order only
    while ``preserve_insertion_order`` is on); the other columns are the raw JSON text of
    the keys read (NULL when missing; all NULL when the line could not be read).

    ``skip_bad_lines=False`` makes a line that cannot be read fail the query instead; it
    reads about 5% faster, so a clean shard is read that way first (see the scan).
    """
    cols = "{" + ", ".join(f"'{k}': 'JSON'" for k in KEYS) + "}"
    select = ", ".join(f"{k}::VARCHAR AS {s}" for k, s in zip(KEYS, SHORT, strict=True))
    return (
        f"(SELECT row_number() OVER () AS rn, {select} FROM read_json({sql_str(str(path))}, "
        f"format = 'newline_delimited', ignore_errors = {str(skip_bad_lines).lower()}, "
        f"maximum_object_size = {MAX_OBJECT_SIZE}, columns = {cols}))"
    )


def _is_null(col: str) -> str:
    return f"({col} IS NULL OR {col} = 'null')"


def reason_sql() -> str:
    """SQL CASE: NULL for a good record, else why it is malformed (over shard_sql columns)."""
    all_null = " AND ".join(f"{s} IS NULL" for s in SHORT)
    checks = [
        f"WHEN _pid IS NULL THEN CASE WHEN {all_null} THEN '{UNREADABLE}' "
        "ELSE 'paper_id is missing' END",
        "WHEN NOT starts_with(_pid, '\"') THEN 'paper_id is not a string'",
    ]
    for key, col in (("title", "_ti"), ("abstract", "_ab")):
        checks.append(
            f"WHEN NOT {_is_null(col)} AND NOT starts_with({col}, '\"') "
            f"THEN '{key} is not a string or null'"
        )
    # DuckDB writes JSON integers as plain digits and other numbers with "." or "e"; the
    # cast (which would round 2001.5) only decides once those are ruled out.
    not_int = " OR ".join(
        ["TRY_CAST(_yr AS BIGINT) IS NULL"] + [f"contains(_yr, '{c}')" for c in ".eE"]
    )
    checks.append(
        f"WHEN NOT {_is_null('_yr')} AND ({not_int}) THEN CASE "
        "WHEN regexp_full_match(_yr, '-?[0-9]+') THEN 'year is out of the 64-bit integer range' "
        "ELSE 'year is not an integer or null' END"
    )
    for key, col in zip(LIST_KEYS, SHORT[4:], strict=True):
        checks.append(
            f"WHEN NOT ({_is_null(col)} OR {col} = '[]') "
            f"AND NOT regexp_full_match({col}, '{_STRING_LIST_RE}') "
            f"THEN '{key} is not a list of strings or null'"
        )
    return "CASE\n    " + "\n    ".join(checks) + "\n  END"


def string_value(col: str) -> str:
    """SQL: the string held by a JSON string literal (checked), unescaped.

    ``->> '$'`` (yyjson) is about twice as fast on abstracts as slicing off the quotes,
    because DuckDB slices strings by code point.
    """
    return f"({col} ->> '$')"


def string_list(col: str) -> str:
    """SQL: the VARCHAR list held by a JSON list-of-strings literal (checked), or []."""
    return (
        f"CASE WHEN {_is_null(col)} OR {col} = '[]' THEN []::VARCHAR[] "
        f"ELSE from_json({col}, '[\"VARCHAR\"]') END"
    )


# --------------------------------------------------------------------------- Python re-reads


@dataclass(frozen=True)
class MalformedLine:
    """One malformed line: its file, 1-based line number and why it was skipped."""

    file: Path
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


class GzipStreamError(Exception):
    """A gzip stream ended early or holds corrupt data (the data before it was yielded)."""


def iter_blocks(path: Path, size: int = 1 << 16) -> Iterator[bytes]:
    """Yield a shard's (decompressed) bytes block by block.

    Unlike ``gzip.open``, every byte decoded before a truncation or corruption is yielded
    before :class:`GzipStreamError` is raised. Multi-member gzip files are read whole.
    """
    with path.open("rb") as f:
        if not path.name.endswith(".gz"):
            while block := f.read(size):
                yield block
            return
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        started = False
        while chunk := f.read(size):
            while chunk:
                try:
                    out = d.decompress(chunk)
                except zlib.error as exc:
                    raise GzipStreamError(f"corrupt gzip stream ({exc})") from exc
                started = True
                if out:
                    yield out
                if d.eof:
                    chunk = d.unused_data
                    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    started = False
                else:
                    chunk = b""
        if started and not d.eof:
            tail = d.flush()
            if tail:
                yield tail
            raise GzipStreamError(TRUNCATED)


def _split_lines(blocks: Iterator[bytes]) -> Iterator[bytes]:
    """The lines (without newline) of a byte stream, the last one even without a newline.

    An error raised by ``blocks`` propagates after the complete lines before it; the
    partial line it cut off is dropped. Long lines are joined once, not copied per block.
    """
    parts: list[bytes] = []
    for block in blocks:
        start = 0
        while (end := block.find(b"\n", start)) >= 0:
            if parts:
                parts.append(block[start:end])
                yield b"".join(parts)
                parts.clear()
            else:
                yield block[start:end]
            start = end + 1
        if start < len(block):
            parts.append(block[start:])
    if parts:
        yield b"".join(parts)


def iter_lines(path: Path) -> Iterator[tuple[int, bytes | str]]:
    """Yield (1-based line number, line) for the lines of a shard that hold a record.

    Lines holding only JSON whitespace are skipped, as ``read_json`` skips them. A
    corrupt or truncated gzip stream yields a final ``(n, reason)`` with a ``str``
    reason, ``n`` being the line after the last complete one.
    """
    n = 0
    try:
        for line in _split_lines(iter_blocks(path)):
            n += 1
            if line.strip(b" \t\r"):
                yield n, line
    except GzipStreamError as exc:
        yield n + 1, str(exc)


@dataclass
class Recovered:
    """What :func:`recover` copied: lines, lines blanked for length, the stream error."""

    lines: int = 0
    too_long: int = 0
    stream_error: str | None = None


def recover(path: Path, dest: Path) -> Recovered:
    """Copy a shard that DuckDB could not read to ``dest`` (plain text, same line numbers).

    Used only for files whose scan failed: a truncated or corrupt gzip stream (the
    readable complete lines are copied; the partial last line is dropped, it is the
    malformed line the error is reported on), or a line longer than ``MAX_LINE_BYTES``
    (replaced by ``{}``, which the scan counts as malformed).
    """
    rec = Recovered()
    with dest.open("wb") as out:
        try:
            for line in _split_lines(iter_blocks(path)):
                if len(line) > MAX_LINE_BYTES:
                    line = b"{}"
                    rec.too_long += 1
                out.write(line + b"\n")
                rec.lines += 1
        except GzipStreamError as exc:
            rec.stream_error = str(exc)
    return rec


def classify_sql(table: str) -> str:
    """SQL giving (rn, reason) for a table (rn, line) of text lines, as the scan judges them.

    Lines the scan can only count (all-NULL rows) get a precise reason here.
    """
    select = ", ".join(f"_j.{k}::VARCHAR AS {s}" for k, s in zip(KEYS, SHORT, strict=True))
    return f"""
WITH _root AS (SELECT rn, line, TRY(json_type(line)) AS _type FROM {table}),
_cols AS (
  SELECT rn, _type, {select} FROM (
    SELECT rn, _type, CASE WHEN _type = 'OBJECT' THEN json_transform(line, {sql_str(_JSON_STRUCT)})
      END AS _j FROM _root))
SELECT rn, CASE WHEN _type IS NULL THEN 'invalid JSON'
    WHEN _type <> 'OBJECT' THEN 'not a JSON object'
    ELSE {reason_sql()} END AS reason
FROM _cols"""


def find_malformed(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    limit: int,
    *,
    long_lines: bool = False,
    batch: int = 20_000,
) -> list[MalformedLine]:
    """Re-read one shard and return its first ``limit`` malformed lines (file order).

    Used only for files the scan found malformed lines in; stops once ``limit`` are
    found. ``long_lines``: the file was read from a :func:`recover` copy, in which lines
    longer than ``MAX_LINE_BYTES`` were blanked; report those as too long.
    """
    import pyarrow as pa

    found: list[MalformedLine] = []
    numbers: list[int] = []
    texts: list[str] = []

    def flush() -> None:
        if not numbers:
            return
        con.register("_mdcr_lines", pa.table({"rn": numbers, "line": texts}))
        try:
            rows = con.execute(
                f"SELECT rn, reason FROM ({classify_sql('_mdcr_lines')}) "
                "WHERE reason IS NOT NULL ORDER BY rn"
            ).fetchall()
        finally:
            con.unregister("_mdcr_lines")
        found.extend(MalformedLine(path, int(rn), str(reason)) for rn, reason in rows)
        numbers.clear()
        texts.clear()

    for n, line in iter_lines(path):
        if isinstance(line, str):
            flush()
            found.append(MalformedLine(path, n, line))
            break
        if long_lines and len(line) > MAX_LINE_BYTES:
            flush()
            found.append(MalformedLine(path, n, TOO_LONG))
        else:
            try:
                texts.append(line.decode("utf-8"))
            except UnicodeDecodeError:
                flush()
                found.append(MalformedLine(path, n, "invalid UTF-8"))
            else:
                numbers.append(n)
                if len(numbers) >= batch:
                    flush()
        if len(found) >= limit:
            break
    flush()
    return found[:limit]
