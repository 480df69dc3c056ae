"""Reading JSONL shards (plain or gzipped) with DuckDB, checking files, and naming bad lines.

Both input formats (S2ORC metadata, and the S2AG ``papers``, ``abstracts`` and
``citations`` datasets) are folders of JSON-lines files. A :class:`RecordSchema` names the
keys a format reads and the SQL that judges a record; everything else is shared here.

Why ``read_json`` reads every key as raw ``JSON`` text: with typed columns it converts
wrong types silently (a numeric title becomes ``"123"``, a year ``"abc"`` becomes NULL, a
list ``[1, 2]`` becomes ``["1", "2"]``), so a bad record would pass as a good one. Raw JSON
text keeps the type visible (its first character), costs about as much to read, and the
values are unescaped only where needed. One streaming pass reads, parses and validates
each shard; nothing is decompressed twice.

``read_json`` turns a line it cannot parse into a row of NULLs, so the scan counts those
lines but cannot say why. Only files with malformed lines are re-read here, in Python
(:func:`find_malformed`), to name their first few by 1-based line number and the precise
reason; the type checks there are the same SQL as in the scan, so counts and reasons
cannot drift.

Whole-file problems (:func:`file_problem`) are found before a file is read: a folder named
like a shard, a 0-byte file, a ``.gz`` name over data that is not gzip, and gzip data
under a plain ``.jsonl`` name. Such a file is not read; it is counted and reported. A
file that starts with a UTF-8 byte-order mark (:func:`starts_with_bom`) is read without
the mark, as every reader of mdcr reads a leading one (``utf-8-sig``): not a finding.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

# DuckDB's JSON reader (maximum_object_size 16 MiB) reads lines of up to about 32 MiB and
# fails a whole file on a longer one; such a file is re-read from a copy in which lines
# over MAX_LINE_BYTES are blanked out (malformed). The longest S2ORC records (papers with
# ~10^5 inbound citations) are a few MB.
MAX_OBJECT_SIZE = 16 * 1024 * 1024
MAX_LINE_BYTES = 2 * MAX_OBJECT_SIZE - 1024
TOO_LONG = f"line longer than {MAX_LINE_BYTES} bytes"
TRUNCATED = "truncated gzip stream"
BOM = b"\xef\xbb\xbf"
GZIP_MAGIC = b"\x1f\x8b"

# Python's str.isspace() set, as an RE2 class: a title made only of these is empty.
WHITESPACE_CLASS = (
    r"[\t\n\x{0b}\x{0c}\r\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}"
    r"\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]"
)
# JSON literal of a list of strings, as DuckDB writes it (minified).
STRING_LIST_RE = r'\[(?:"(?:[^"\\]|\\.)*"(?:,"(?:[^"\\]|\\.)*")*)?\]'


@dataclass(frozen=True)
class RecordSchema:
    """The keys one JSONL format reads and how a record of it is judged.

    ``columns`` name the raw-JSON column of each key in the scan; ``checks`` are SQL
    ``WHEN ... THEN '<reason>'`` clauses over those columns, in order (the first that
    matches names the reason); a row whose columns are all NULL is unreadable.
    """

    name: str
    keys: tuple[str, ...]
    columns: tuple[str, ...]
    checks: tuple[str, ...]

    @property
    def unreadable(self) -> str:
        return f"invalid JSON or UTF-8, not a JSON object, or none of the {self.name} keys"

    def reason_sql(self) -> str:
        """SQL CASE: NULL for a good record, else why it is malformed."""
        all_null = " AND ".join(f"{c} IS NULL" for c in self.columns)
        first = f"WHEN {all_null} THEN '{self.unreadable}'"
        return "CASE\n    " + "\n    ".join([first, *self.checks]) + "\n  END"


def natural_key(name: str) -> tuple[Any, ...]:
    """Sort key that orders ``metadata_2`` before ``metadata_10``."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def find_files(folder: Path, patterns: tuple[str, ...]) -> list[Path]:
    """The entries of ``folder`` matching any of ``patterns`` (hidden ones left out), in
    natural order. Folders named like a shard are kept: :func:`file_problem` reports them.
    """
    found = {p for pat in patterns for p in Path(folder).glob(pat) if p.name[0] != "."}
    return sorted(found, key=lambda p: natural_key(p.name))


def file_problem(path: Path) -> str | None:
    """Why a shard cannot be read as a whole, or None: checked before it is read."""
    if not path.is_file():
        return "is a folder, not a shard file" if path.is_dir() else "is not a regular file"
    if path.stat().st_size == 0:
        return "is empty (0 bytes)"
    with path.open("rb") as f:
        head = f.read(2)
    gz = path.name.endswith(".gz")
    if gz and head != GZIP_MAGIC:
        return "is not gzip data, though its name ends in .gz"
    if not gz and head == GZIP_MAGIC:
        return f"holds gzip data, though its name does not end in .gz; rename it {path.name}.gz"
    return None


def starts_with_bom(path: Path) -> bool:
    """Whether a shard's (decompressed) text starts with a UTF-8 byte-order mark."""
    head = b""
    try:
        for block in iter_blocks(path, size=64, strip_bom=False):
            head += block
            if len(head) >= len(BOM):
                break
    except GzipStreamError:
        pass
    return head.startswith(BOM)


def sql_str(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def shard_sql(schema: RecordSchema, path: Path, *, skip_bad_lines: bool = True) -> str:
    """A relation (rn, <schema columns>) over one shard's records.

    ``rn`` numbers the records in file order (the streaming window keeps file order only
    while ``preserve_insertion_order`` is on); the other columns are the raw JSON text of
    the keys read (NULL when missing; all NULL when the line could not be read).

    ``skip_bad_lines=False`` makes a line that cannot be read fail the query instead; it
    reads about 5% faster, so a clean shard is read that way first (see the scan).
    """
    cols = "{" + ", ".join(f"'{k}': 'JSON'" for k in schema.keys) + "}"
    select = ", ".join(
        f'"{k}"::VARCHAR AS {c}' for k, c in zip(schema.keys, schema.columns, strict=True)
    )
    return (
        f"(SELECT row_number() OVER () AS rn, {select} FROM read_json({sql_str(str(path))}, "
        f"format = 'newline_delimited', ignore_errors = {str(skip_bad_lines).lower()}, "
        f"maximum_object_size = {MAX_OBJECT_SIZE}, columns = {cols}))"
    )


def is_null(col: str) -> str:
    """SQL: the raw-JSON column is missing or JSON null."""
    return f"({col} IS NULL OR {col} = 'null')"


def string_value(col: str) -> str:
    """SQL: the string held by a JSON string literal (checked), unescaped.

    ``->> '$'`` (yyjson) is about twice as fast on abstracts as slicing off the quotes,
    because DuckDB slices strings by code point.
    """
    return f"({col} ->> '$')"


def string_list(col: str) -> str:
    """SQL: the VARCHAR list held by a JSON list-of-strings literal (checked), or []."""
    return (
        f"CASE WHEN {is_null(col)} OR {col} = '[]' THEN []::VARCHAR[] "
        f"ELSE from_json({col}, '[\"VARCHAR\"]') END"
    )


def string_check(key: str, col: str) -> str:
    """A check clause: the key holds a string or null."""
    return (
        f"WHEN NOT {is_null(col)} AND NOT starts_with({col}, '\"') "
        f"THEN '{key} is not a string or null'"
    )


# A publication year outside these bounds (0, 99999, a negative year) is a malformed
# line. Fixed bounds, not the current year: the same input must give the same output
# whenever it is prefiltered (the store's promise); the oldest journals date from 1665.
YEAR_MIN, YEAR_MAX = 1000, 2100
YEAR_RANGE = f"{YEAR_MIN}-{YEAR_MAX}"


def year_checks(col: str) -> tuple[str, ...]:
    """Check clauses: the year is an integer from ``YEAR_MIN`` to ``YEAR_MAX``, or null.

    DuckDB writes JSON integers as plain digits and other numbers with "." or "e"; the
    cast (which would round 2001.5) only decides once those are ruled out.
    """
    not_int = " OR ".join(
        [f"TRY_CAST({col} AS BIGINT) IS NULL"] + [f"contains({col}, '{c}')" for c in ".eE"]
    )
    return (
        f"WHEN NOT {is_null(col)} AND ({not_int}) THEN CASE "
        f"WHEN regexp_full_match({col}, '-?[0-9]+') THEN 'year is out of the 64-bit integer range' "
        "ELSE 'year is not an integer or null' END",
        f"WHEN NOT {is_null(col)} AND {col}::BIGINT NOT BETWEEN {YEAR_MIN} AND {YEAR_MAX} "
        f"THEN CASE WHEN {col}::BIGINT < 0 THEN 'year is negative' "
        f"ELSE 'year is not a publication year ({YEAR_RANGE})' END",
    )


def blank_string_check(key: str, col: str) -> str:
    """A check clause: a (checked) JSON string that holds only whitespace (Python's
    ``str.isspace`` set). Most strings start with a printable ASCII character, which
    decides without unescaping."""
    return (
        f"WHEN NOT (ord({col}[2]) BETWEEN 33 AND 126 AND {col}[2] <> '\\') "
        f"AND regexp_full_match({string_value(col)}, '{WHITESPACE_CLASS}*') "
        f"THEN '{key} is only whitespace'"
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


def iter_blocks(path: Path, size: int = 1 << 16, *, strip_bom: bool = True) -> Iterator[bytes]:
    """Yield a shard's (decompressed) bytes block by block, without a leading UTF-8 BOM.

    Unlike ``gzip.open``, every byte decoded before a truncation or corruption is yielded
    before :class:`GzipStreamError` is raised. Multi-member gzip files are read whole.
    """
    blocks = _raw_blocks(path, size)
    if not strip_bom:
        yield from blocks
        return
    head = b""
    for block in blocks:
        head += block
        if len(head) >= len(BOM):
            break
    yield head.removeprefix(BOM)
    yield from blocks


def _raw_blocks(path: Path, size: int) -> Iterator[bytes]:
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


def classify_sql(schema: RecordSchema, table: str) -> str:
    """SQL giving (rn, reason) for a table (rn, line) of text lines, as the scan judges them.

    Lines the scan can only count (all-NULL rows) get a precise reason here.
    """
    select = ", ".join(
        f'_j."{k}"::VARCHAR AS {c}' for k, c in zip(schema.keys, schema.columns, strict=True)
    )
    struct = "{" + ", ".join(f'"{k}": "JSON"' for k in schema.keys) + "}"
    return f"""
WITH _root AS (SELECT rn, line, TRY(json_type(line)) AS _type FROM {table}),
_cols AS (
  SELECT rn, _type, {select} FROM (
    SELECT rn, _type, CASE WHEN _type = 'OBJECT' THEN json_transform(line, {sql_str(struct)})
      END AS _j FROM _root))
SELECT rn, CASE WHEN _type IS NULL THEN 'invalid JSON'
    WHEN _type <> 'OBJECT' THEN 'not a JSON object'
    ELSE {schema.reason_sql()} END AS reason
FROM _cols"""


def find_malformed(
    con: duckdb.DuckDBPyConnection,
    schema: RecordSchema,
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
                f"SELECT rn, reason FROM ({classify_sql(schema, '_mdcr_lines')}) "
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
