"""The session's copies of the large files a page reads by key: papers by id, and a run's
(or the qrels') rows of one query.

Parquet gives no access below a row group: reading one row decompresses its row group's
column chunks whole. A corpus's ``papers.parquet`` is not sorted by id, so the 60 papers of
a query page lie in nearly every row group, and their abstracts are most of the bytes
(0.3 s per row group of 122,880 papers on the 2-core machine: seconds per page at 2M
papers). A run holds a row group of a million rows per pool, so one query's ranking
decompresses a million paper ids per retriever: a page reads about 30 MB of runs.

So each is copied once per session, in one pass that decodes it as a reader would, into an
Arrow IPC file in a temporary folder (never the store) cut into small record batches,
compressed with LZ4: :class:`PaperCopy` in batches of :data:`PAPER_BATCH` papers, in the
file's order; :class:`UnitCopy` (runs, qrels) in batches of :data:`RUN_BATCH` rows, in the
file's order, so that a query's rows are one or two batches. A request reads and
decompresses only the batches it needs, on its own thread, through ordinary file reads:
nothing of a copy stays in memory between requests. Papers are found by id through the
ids' DuckDB hashes, sorted once with their rows by DuckDB and kept on disk beside the
copy; memory holds the first hash of each block of :data:`FENCE`, and a lookup reads one
block. The folder is removed when the session ends.

The copies hold the files' values unchanged (``tests/unit/explore/test_copies.py`` checks
them against a scan of the papers file and against the run's rows).
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

PAPER_BATCH = 256  # papers per record batch of a papers copy
FENCE = 512  # sorted hashes per block; memory holds the first of each
PAPER_COLUMNS = ("paper_id", "title", "abstract", "year", "fields", "n_in")
RUN_BATCH = 4096  # run rows per record batch of a run copy
RUN_COLUMNS = ("paper_id", "score", "rank")
QRELS_COLUMNS = ("paper_id", "relevance")
NOT_RANKED = -1  # UnitCopy.first: the file holds no row of that query
SCATTERED = -2  # UnitCopy.first: its rows are not together in the file (read the file)
ID_HASH = "hash({}::VARCHAR)"  # DuckDB's hash of a paper id, the key papers are found by


class SessionFiles:
    """The session's temporary folder and the copies made in it, each made once (on first
    use) and shared by the server's threads; :meth:`close` removes them."""

    def __init__(self, *, quiet: bool = True) -> None:
        self.quiet = quiet
        self._temp: tempfile.TemporaryDirectory[str] | None = None
        self._papers: dict[Path, PaperCopy] = {}
        self._units: list[UnitCopy] = []
        self._closed = False
        self._lock = threading.Lock()

    def _folder(self) -> Path:
        """A new folder in the session's temporary folder (made on first use)."""
        if self._closed:  # a copy asked for as the session ends: nothing is left behind
            raise RuntimeError("the session has ended; its copies are removed")
        if self._temp is None:
            self._temp = tempfile.TemporaryDirectory(prefix="mdcr-explore-")
        folder = Path(self._temp.name) / str(len(list(Path(self._temp.name).iterdir())))
        folder.mkdir()
        return folder

    def papers(self, path: Path) -> PaperCopy:
        """The copy of the papers file ``path`` (made now if it is not yet)."""
        with self._lock:
            found = self._papers.get(path)
            if found is None:
                if not self.quiet:
                    rows = _rows(path)
                    _say(f"copying {rows:,} papers for this session (looked up by id) ...")
                found = self._papers[path] = PaperCopy(path, self._folder())
            return found

    def run(self, path: Path, unit_of: Callable[[str, str], int | None], units: int
            ) -> UnitCopy:  # fmt: skip
        """A copy of the run ``path`` by unit (``unit_of(pool_id, query_id)``)."""
        return self._unit_copy(path, unit_of, units, RUN_COLUMNS)

    def qrels(self, path: Path, unit_of: Callable[[str, str], int | None], units: int
              ) -> UnitCopy:  # fmt: skip
        """A copy of the qrels ``path`` by unit."""
        return self._unit_copy(path, unit_of, units, QRELS_COLUMNS)

    def _unit_copy(self, path: Path, unit_of: Callable[[str, str], int | None], units: int,
                   kept: tuple[str, ...]) -> UnitCopy:  # fmt: skip
        with self._lock:
            folder = self._folder()
        copy = UnitCopy(path, folder, unit_of, units, kept)
        with self._lock:
            if self._closed:  # made while the session ended: its folder is gone
                copy.close()
                raise RuntimeError("the session has ended; its copies are removed")
            self._units.append(copy)
        return copy

    def spill_folder(self) -> Path:
        """A folder for DuckDB to spill to beyond its memory limit (never the working
        directory, DuckDB's default), removed with the copies."""
        with self._lock:
            return self._folder()

    def read_papers(self, path: Path, ids: set[str], columns: list[str]) -> pa.Table:
        """The rows of the papers file ``path`` whose id is in ``ids``, in file order
        (``columns`` of them): the per-query facts' reader, answered from the copy."""
        return self.papers(path).rows(ids).select(columns)

    def close(self) -> None:
        """Close every copy and remove the session's temporary folder."""
        with self._lock:
            self._closed = True
            for paper_copy in self._papers.values():
                paper_copy.close()
            for unit_copy in self._units:
                unit_copy.close()
            self._papers.clear()
            self._units.clear()
            if self._temp is not None:
                self._temp.cleanup()
                self._temp = None


def _one_thread() -> Any:
    """Read options that decompress a batch on the calling thread: a page reads a few
    small batches, and handing each to a pool of threads costs more than it saves when
    the machine is busy (every handoff waits for a core)."""
    import pyarrow.ipc as ipc

    return ipc.IpcReadOptions(use_threads=False)


def _say(line: str) -> None:
    import sys

    print(line, file=sys.stderr, flush=True)


def _rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_rows)


def _hashes(con: Any, ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """DuckDB's hash of each id (as VARCHAR), as uint64."""
    import pyarrow as pa

    con.register("hashed_ids", pa.table({"id": ids}))
    try:
        hashed = ID_HASH.format("id")
        found = con.execute(f"SELECT {hashed} AS h FROM hashed_ids").fetchnumpy()["h"]
    finally:
        con.unregister("hashed_ids")
    return np.asarray(found, dtype=np.uint64)


class PaperCopy:
    """A papers file's rows by id: :data:`PAPER_COLUMNS` (those it has), in batches of
    :data:`PAPER_BATCH` rows in file order; and the ids' hashes in order with their rows
    (``hashes.u64``, ``rows.u32``), the first of each block of :data:`FENCE` in memory."""

    def __init__(self, source: Path, folder: Path) -> None:
        import duckdb
        import pyarrow as pa
        import pyarrow.ipc as ipc
        import pyarrow.parquet as pq

        self.source = source
        self._lock = threading.Lock()
        self._con = duckdb.connect(
            config={"threads": 2, "memory_limit": "256MB", "temp_directory": str(folder)}
        )
        parquet = pq.ParquetFile(source, pre_buffer=False)  # one row group's pages at a time
        names = set(parquet.schema_arrow.names)
        columns = [c for c in PAPER_COLUMNS if c in names]
        schema = pa.schema([parquet.schema_arrow.field(c) for c in columns])
        sizes: list[np.ndarray] = []
        path = folder / "papers.arrow"
        options = ipc.IpcWriteOptions(compression="lz4")
        with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, schema, options=options) as w:
            for batch in parquet.iter_batches(batch_size=PAPER_BATCH * 256, columns=columns):
                w.write_table(pa.Table.from_batches([batch], schema=schema), PAPER_BATCH)
                full, rest = divmod(batch.num_rows, PAPER_BATCH)
                sizes.append(np.array([PAPER_BATCH] * full + ([rest] if rest else [])))
        every_size = np.concatenate(sizes) if sizes else np.zeros(0, dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(every_size)[:-1]]).astype(np.int64)
        self.n_rows = int(every_size.sum())
        self._fences = self._sort_keys(folder)
        self._con.execute("SET threads = 1")  # a page's lookups: no thread handoffs
        self._hashes = np.memmap(folder / "hashes.u64", np.uint64, "r", shape=(self.n_rows,))
        self._rows = np.memmap(folder / "rows.u32", np.uint32, "r", shape=(self.n_rows,))
        pa.default_memory_pool().release_unused()  # the pass's buffers, back to the system
        self._file = pa.OSFile(str(path))  # read per batch, never mapped into memory
        self._reader = ipc.open_file(self._file, options=_one_thread())

    def _sort_keys(self, folder: Path) -> np.ndarray:
        """Write the ids' hashes in order with their rows (DuckDB sorts them, spilling to
        ``folder`` beyond its memory limit); return the first hash of each block."""
        ordered = self._con.sql(
            f"SELECT {ID_HASH.format('paper_id')} AS h, file_row_number::UINTEGER AS r "
            "FROM read_parquet($path, file_row_number = true) ORDER BY h, r",
            params={"path": str(self.source)},
        )
        fences, written = [], 0
        with open(folder / "hashes.u64", "wb") as hashes, open(folder / "rows.u32", "wb") as rows:
            for batch in ordered.to_arrow_reader(1 << 20):
                h = batch.column("h").to_numpy().astype(np.uint64)
                fences.append(h[(-written) % FENCE :: FENCE])
                h.tofile(hashes)
                batch.column("r").to_numpy().astype(np.uint32).tofile(rows)
                written += len(h)
        if written != self.n_rows:  # a bug, never the data
            raise RuntimeError(f"{written} ids sorted for {self.n_rows} papers")
        return np.concatenate(fences) if fences else np.zeros(0, dtype=np.uint64)

    def close(self) -> None:
        self._file.close()
        self._con.close()

    def _found_rows(self, ids: list[str]) -> np.ndarray:
        """The rows whose id hashes as one of ``ids`` (a superset: hashes may collide)."""
        import pyarrow as pa

        with self._lock:
            wanted = _hashes(self._con, pa.array(ids, pa.string()))
        found = []
        for h in wanted:
            lo = max(0, int(np.searchsorted(self._fences, h, "left")) - 1) * FENCE
            hi = min(self.n_rows, int(np.searchsorted(self._fences, h, "right")) * FENCE)
            block = np.asarray(self._hashes[lo:hi])
            first, last = np.searchsorted(block, h, "left"), np.searchsorted(block, h, "right")
            found.append(np.asarray(self._rows[lo + first : lo + last], dtype=np.int64))
        return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)

    def rows(self, ids: Iterable[str]) -> pa.Table:
        """Every row whose paper_id is one of ``ids``, in file order."""
        import pyarrow as pa
        import pyarrow.compute as pc

        wanted = sorted(set(ids))
        found = self._found_rows(wanted)
        batch_of = np.searchsorted(self._starts, found, "right") - 1
        blocks = np.unique(batch_of)
        with self._lock:
            batches = [self._reader.get_batch(int(b)) for b in blocks]
        table = pa.Table.from_batches(batches, schema=self._reader.schema)
        offsets = np.cumsum([0, *(b.num_rows for b in batches)])[:-1]
        at = offsets[np.searchsorted(blocks, batch_of)] + found - self._starts[batch_of]
        table = table.take(pa.array(at, pa.int64()))
        keep = pc.is_in(table.column("paper_id").cast(pa.string()), pa.array(wanted, pa.string()))
        return table.filter(keep)


class UnitCopy:
    """A file's rows by unit (a query in a pool: a row of the result's units), for a run
    or qrels: its rows (the ``kept`` columns, as it holds them) in its order, in batches of
    :data:`RUN_BATCH` rows, with each unit's first row and number of rows."""

    def __init__(self, source: Path, folder: Path, unit_of: Callable[[str, str], int | None],
                 units: int, kept: tuple[str, ...]) -> None:  # fmt: skip
        import pyarrow as pa
        import pyarrow.ipc as ipc
        import pyarrow.parquet as pq

        self.source = source
        self.first = np.full(units, NOT_RANKED, dtype=np.int64)  # or SCATTERED
        self.count = np.zeros(units, dtype=np.int64)
        self._lock = threading.Lock()
        parquet = pq.ParquetFile(source)
        schema = pa.schema([parquet.schema_arrow.field(c) for c in kept])
        path = folder / "rows.arrow"
        sizes: list[np.ndarray] = []
        written = 0
        last = (-1, -1)  # the unit of the rows written last, and the row after them
        options = ipc.IpcWriteOptions(compression="lz4")
        with pa.OSFile(str(path), "wb") as sink, ipc.new_file(sink, schema, options=options) as w:
            for g in range(parquet.num_row_groups):
                group = parquet.read_row_group(g, columns=["pool_id", "query_id", *kept])
                w.write_table(group.select(list(kept)), RUN_BATCH)
                full, rest = divmod(group.num_rows, RUN_BATCH)
                sizes.append(np.array([RUN_BATCH] * full + ([rest] if rest else [])))
                last = self._place(group, unit_of, written, last)
                written += group.num_rows
        every_size = np.concatenate(sizes) if sizes else np.zeros(0, dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(every_size)[:-1]]).astype(np.int64)
        self._file = pa.OSFile(str(path))
        self._reader = ipc.open_file(self._file, options=_one_thread())
        pa.default_memory_pool().release_unused()  # the pass's buffers, back to the system

    def _place(self, group: pa.Table, unit_of: Callable[[str, str], int | None], offset: int,
               last: tuple[int, int]) -> tuple[int, int]:  # fmt: skip
        """Record where each unit of ``group`` (written from row ``offset``) is; ``last``:
        the unit written last and the row after it."""
        import pyarrow as pa

        if group.num_rows == 0:
            return last
        starts = _starts(group)
        ends = np.append(starts[1:], group.num_rows)
        pools = group.column("pool_id").take(pa.array(starts)).to_pylist()
        queries = group.column("query_id").take(pa.array(starts)).to_pylist()
        units = np.array([_unit(unit_of, p, q) for p, q in zip(pools, queries, strict=True)])
        for unit, start, end in zip(units, starts + offset, ends + offset, strict=True):
            if unit < 0:
                continue  # a query the result does not hold
            if (unit, start) == last:  # the same query goes on from the last row group
                self.count[unit] += end - start
            elif self.first[unit] != NOT_RANKED:
                self.first[unit] = SCATTERED
            else:
                self.first[unit], self.count[unit] = start, end - start
            last = (int(unit), int(end))
        return last

    def rows(self, unit: int) -> pa.Table | None:
        """The unit's rows (none: the file holds none), or None: they are not together in
        the file (read them from the file)."""
        import pyarrow as pa

        first, count = int(self.first[unit]), int(self.count[unit])
        if first == SCATTERED:
            return None
        if first == NOT_RANKED:
            return self._reader.schema.empty_table()
        lo = int(np.searchsorted(self._starts, first, "right")) - 1
        hi = int(np.searchsorted(self._starts, first + count - 1, "right")) - 1
        with self._lock:
            batches = [self._reader.get_batch(b) for b in range(lo, hi + 1)]
        return pa.Table.from_batches(batches).slice(first - int(self._starts[lo]), count)

    def ranking(self, unit: int) -> tuple[list[str], list[float]] | None:
        """A run's ranking of the unit (paper ids and scores in rank order; empty: the run
        holds none), or None: its rows are not together in the run (read them from it)."""
        import pyarrow.compute as pc

        rows = self.rows(unit)
        if rows is None:
            return None
        rows = rows.take(pc.sort_indices(rows.column("rank")))
        return (
            [str(p) for p in rows.column("paper_id").to_pylist()],
            [float(s) for s in rows.column("score").to_pylist()],
        )

    def close(self) -> None:
        self._file.close()


def _unit(unit_of: Callable[[str, str], int | None], pool_id: Any, query_id: Any) -> int:
    found = unit_of(str(pool_id), str(query_id))
    return -1 if found is None else found


def _starts(group: pa.Table) -> np.ndarray:
    """The first row of each run of equal (pool_id, query_id) in ``group``."""
    import pyarrow.compute as pc

    n = group.num_rows
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    changed = np.zeros(n, dtype=bool)
    changed[0] = True
    for name in ("pool_id", "query_id"):
        col = group.column(name)
        differs = pc.not_equal(col.slice(1), col.slice(0, n - 1)).fill_null(True)
        changed[1:] |= differs.to_numpy(zero_copy_only=False)
    return np.nonzero(changed)[0]
