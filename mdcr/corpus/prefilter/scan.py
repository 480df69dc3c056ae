"""Scanning one dataset of JSONL shards into a DuckDB table, file by file, for the prefilter.

A :class:`Dataset` names its shards, the :class:`~mdcr.corpus.jsonl.RecordSchema` that
judges a record, the table the rows go to, and the SQL of one file's rows. Each file is
one streaming ``read_json`` query; files run ``threads`` at a time, one gzip stream per
thread and (with at least as many files as threads) one DuckDB thread per query, which
measured 8-10% faster than letting each query use all. A file is first read with DuckDB's
error skipping off (5% faster); only a file with an unreadable line is read again with it
on. A truncated gzip file fails its own queries only; its readable lines are then read
from a plain copy. A file with a whole-file problem (:func:`jsonl.file_problem`) is not
read; a file that starts with a UTF-8 byte-order mark is read from a copy without it (a
leading mark is accepted, as every reader of mdcr accepts it, not a finding).

Every table row carries ``seq`` (file index << SEQ_SHIFT | record number) and ``reason``
(NULL unless the record is malformed). Files with malformed lines (and only those) are
re-read in Python to name the first few by line number.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.core.errors import InputDataError
from mdcr.corpus import jsonl
from mdcr.corpus.prefilter.output import SEQ_SHIFT

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True)
class Dataset:
    """One dataset to scan: its name, schema, shard files, table (DDL) and rows SQL.

    ``rows_sql(source, file_index)`` is the SELECT of one file's table rows over
    ``source``, a :func:`jsonl.shard_sql` relation.
    """

    name: str
    schema: jsonl.RecordSchema
    files: tuple[Path, ...]
    table: str
    ddl: str
    rows_sql: Callable[[str, int], str]


@dataclass
class FileScan:
    """What the scan learned about one shard."""

    index: int
    path: Path
    problem: str | None = None  # a whole-file problem: the file was not read
    bom: bool = False  # it starts with a UTF-8 byte-order mark (read without it)
    malformed: int = 0
    # Set when DuckDB could not read the file and a jsonl.recover() copy was read instead.
    recovered: jsonl.Recovered | None = None

    @property
    def extra_malformed(self) -> int:
        """Malformed lines not in the scanned rows: a cut-off last line of a broken gzip."""
        return 1 if self.recovered is not None and self.recovered.stream_error else 0

    @property
    def finding(self) -> str | None:
        """The whole-file finding to report, if any."""
        return f"{self.path}: {self.problem}" if self.problem else None


@dataclass
class DatasetScan:
    """The scanned files of a dataset and what was found in them."""

    dataset: Dataset
    files: list[FileScan] = field(default_factory=list)

    @property
    def malformed(self) -> int:
        return sum(s.malformed for s in self.files)

    @property
    def findings(self) -> list[str]:
        return [f for s in self.files if (f := s.finding)]


def one(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    """The single integer a query returns (0 for NULL or no row)."""
    rows = con.execute(sql).fetchall()
    return int(rows[0][0]) if rows and rows[0][0] is not None else 0


def first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _file_malformed(con: duckdb.DuckDBPyConnection, table: str, index: int) -> int:
    """Malformed records of one file (its rows are contiguous, so zone maps make it cheap)."""
    lo = index << SEQ_SHIFT
    return one(
        con,
        f"SELECT count(*) FROM {table} WHERE seq BETWEEN {lo} AND {lo + (1 << SEQ_SHIFT) - 1} "
        "AND reason IS NOT NULL",
    )


def _scan_file(
    con: duckdb.DuckDBPyConnection, ds: Dataset, scan: FileScan, temp_dir: Path, strict: bool
) -> FileScan:
    """Insert one shard's records into the dataset's table (one streaming pass).

    DuckDB fails a whole file on a truncated or corrupt gzip stream or on a line far over
    ``MAX_LINE_BYTES``; such a file is then read from a :func:`jsonl.recover` copy in
    ``temp_dir`` (same line numbers), and only its bad lines are lost. A file that starts
    with a byte-order mark is read from such a copy straight away.
    """
    import duckdb

    scan.problem = jsonl.file_problem(scan.path)
    if scan.problem:
        return scan
    scan.bom = jsonl.starts_with_bom(scan.path)
    cur = con.cursor()
    errors = (duckdb.IOException, duckdb.InvalidInputException)

    def insert(path: Path, skip_bad_lines: bool) -> None:
        source = jsonl.shard_sql(ds.schema, path, skip_bad_lines=skip_bad_lines)
        cur.execute(f"INSERT INTO {ds.table} {ds.rows_sql(source, scan.index)}")

    def from_copy(exc: BaseException | None) -> None:
        copy = temp_dir / f"recovered_{ds.name}_{scan.index}.jsonl"
        scan.recovered = jsonl.recover(scan.path, copy)
        if exc is not None and not (scan.recovered.stream_error or scan.recovered.too_long):
            raise InputDataError(f"{scan.path}: cannot be read ({first_line(exc)})") from exc
        insert(copy, True)
        copy.unlink()

    try:
        if scan.bom:
            from_copy(None)
        else:
            try:
                # Fast path: a shard without unreadable lines (the usual case) is read with
                # DuckDB's error skipping off; a failed statement inserts nothing.
                insert(scan.path, False)
            except errors:
                try:
                    insert(scan.path, True)
                except errors as exc:
                    from_copy(exc)
        if strict:
            scan.malformed = _file_malformed(cur, ds.table, scan.index) + scan.extra_malformed
    finally:
        cur.close()
    return scan


def scan_dataset(
    con: duckdb.DuckDBPyConnection,
    ds: Dataset,
    temp_dir: Path,
    threads: int,
    *,
    strict: bool,
    progress: Callable[[int], Any] | None,
) -> DatasetScan:
    """Scan all shards of a dataset, ``threads`` at a time (one gzip stream per thread).

    With ``strict`` the shards not yet started are skipped once one has a malformed line
    or a whole-file finding; the shards before it have all started, so the first is still
    found.
    """
    con.execute(ds.ddl)
    stop = threading.Event()

    def work(scan: FileScan) -> FileScan | None:
        if stop.is_set():
            return None
        return _scan_file(con, ds, scan, temp_dir, strict)

    done: list[FileScan] = []
    workers = max(1, min(threads, len(ds.files)))
    # Each query reads one gzip stream; DuckDB threads beyond threads // workers per query
    # only contend (measured: 8-10% slower scan with 2 threads per query on 2 cores).
    con.execute(f"SET threads = {max(1, threads // workers)}")
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(work, FileScan(i, p)) for i, p in enumerate(ds.files)]
            for fut in as_completed(futures):
                result = fut.result()
                if result is None:
                    continue
                done.append(result)
                if progress is not None:
                    progress(1)
                if strict and (result.malformed or result.finding):
                    stop.set()
    finally:
        con.execute(f"SET threads = {threads}")
    per_file = dict(
        con.execute(
            f"SELECT seq >> {SEQ_SHIFT}, count(*) FROM {ds.table} WHERE reason IS NOT NULL "
            "GROUP BY 1"
        ).fetchall()
    )
    for scan in done:
        scan.malformed = int(per_file.get(scan.index, 0)) + scan.extra_malformed
    return DatasetScan(ds, sorted(done, key=lambda s: s.index))


def report_malformed(
    con: duckdb.DuckDBPyConnection, result: DatasetScan, limit: int
) -> list[jsonl.MalformedLine]:
    """The first ``limit`` malformed lines, re-reading only the files that have some."""
    found: list[jsonl.MalformedLine] = []
    for scan in result.files:
        if len(found) >= limit:
            break
        if scan.malformed:
            long_lines = scan.recovered is not None and scan.recovered.too_long > 0
            found.extend(
                jsonl.find_malformed(
                    con,
                    result.dataset.schema,
                    scan.path,
                    limit - len(found),
                    long_lines=long_lines,
                )
            )
    return found


def stop_if_strict(con: duckdb.DuckDBPyConnection, result: DatasetScan, strict: bool) -> None:
    """With ``strict``, raise on the first whole-file finding or malformed line."""
    if not strict:
        return
    for scan in result.files:
        if scan.finding:
            raise InputDataError(f"{scan.finding}; fix the file or run without --strict")
        if scan.malformed:
            first = report_malformed(con, DatasetScan(result.dataset, [scan]), 1)
            where = str(first[0]) if first else str(scan.path)
            raise InputDataError(f"{where}; fix the line or run without --strict")


def malformed_reasons(con: duckdb.DuckDBPyConnection, result: DatasetScan) -> dict[str, int]:
    """Malformed records by reason, with the recovered files' cut-off and long lines."""
    reasons: dict[str, int] = {}
    for reason, n in con.execute(
        f"SELECT reason, count(*) FROM {result.dataset.table} WHERE reason IS NOT NULL GROUP BY 1"
    ).fetchall():
        reasons[str(reason)] = int(n)
    unreadable = result.dataset.schema.unreadable
    for scan in result.files:
        if scan.recovered is None:
            continue
        if scan.recovered.stream_error:
            key = scan.recovered.stream_error
            reasons[key] = reasons.get(key, 0) + 1
        if scan.recovered.too_long:  # counted as unreadable ({}) by the scan
            reasons[unreadable] -= scan.recovered.too_long
            reasons[jsonl.TOO_LONG] = reasons.get(jsonl.TOO_LONG, 0) + scan.recovered.too_long
    return dict(sorted((k, v) for k, v in reasons.items() if v))


def drop_duplicates(con: duckdb.DuckDBPyConnection, table: str, key: str) -> tuple[int, list[str]]:
    """Drop all but the first record (lowest seq) of each repeated ``key`` among the
    well-formed rows of ``table``; return (dropped, up to 5 example keys in file order).
    """
    con.execute(
        f"CREATE TEMP TABLE _dup AS SELECT {key} AS k, count(*) - 1 AS extra, min(seq) AS keep "
        f"FROM {table} WHERE reason IS NULL GROUP BY {key} HAVING count(*) > 1"
    )
    dropped = one(con, "SELECT sum(extra) FROM _dup")
    examples: list[str] = []
    if dropped:
        examples = [
            str(r[0]) for r in con.execute("SELECT k FROM _dup ORDER BY keep LIMIT 5").fetchall()
        ]
        con.execute(
            f"DELETE FROM {table} USING _dup WHERE {table}.reason IS NULL "
            f"AND {table}.{key} = _dup.k AND {table}.seq <> _dup.keep"
        )
    con.execute("DROP TABLE _dup")
    return dropped, examples


def stop_on_duplicates(
    duplicates: tuple[int, list[str]], key: str, where: str, strict: bool
) -> None:
    """With ``strict``, raise when :func:`drop_duplicates` dropped a record."""
    dropped, examples = duplicates
    if strict and dropped:
        raise InputDataError(
            f"{dropped:,} duplicate {key} record(s) in '{where}' (e.g. {key} "
            f"{', '.join(examples)}); deduplicate the input or run without --strict"
        )


def no_usable_record(result: DatasetScan, records: int, where: str) -> InputDataError:
    """The error for a dataset in which not one record could be used."""
    parts = [
        f"{len(result.files)} file(s)",
        f"{records:,} record(s) of which {result.malformed:,} malformed",
    ]
    if result.findings:
        parts.append(f"{len(result.findings)} unreadable file(s), first: {result.findings[0]}")
    return InputDataError(f"no usable record in '{where}' ({'; '.join(parts)})")


def summarize_malformed(
    con: duckdb.DuckDBPyConnection, scans: list[DatasetScan], limit: int
) -> tuple[dict[str, int], list[jsonl.MalformedLine]]:
    """Malformed records by reason over ``scans`` (prefixed with the dataset name when
    there are several), and the first ``limit`` malformed lines."""
    reported: list[jsonl.MalformedLine] = []
    reasons: dict[str, int] = {}
    for result in scans:
        if limit - len(reported) > 0:
            reported += report_malformed(con, result, limit - len(reported))
        for reason, n in malformed_reasons(con, result).items():
            reasons[reason if len(scans) == 1 else f"{result.dataset.name}: {reason}"] = n
    return dict(sorted(reasons.items())), reported


def scan_usable(
    con: duckdb.DuckDBPyConnection,
    ds: Dataset,
    temp_dir: Path,
    threads: int,
    *,
    strict: bool,
    progress: Callable[[int], Any] | None,
    where: str,
) -> tuple[DatasetScan, int]:
    """:func:`scan_dataset`, then the ``strict`` stop, then the error for a dataset
    without one usable record (named by ``where``). Returns the scan and the number of
    records read, malformed ones included."""
    result = scan_dataset(con, ds, temp_dir, threads, strict=strict, progress=progress)
    stop_if_strict(con, result, strict)
    read = one(con, f"SELECT count(*) FROM {ds.table}") + sum(
        s.extra_malformed for s in result.files
    )
    if read == result.malformed:
        raise no_usable_record(result, read, where)
    return result, read
