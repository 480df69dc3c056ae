"""The prefilter's outputs: ``papers.parquet`` and ``citations.parquet`` in file order.

Survivors get an index in file order (file, then line; no sort of the texts); DuckDB
hash-joins their outbound ids to it, numpy sorts and deduplicates the edges as int64 keys
(so edges are ordered by citing paper, then cited paper, in papers.parquet order), and
n_out / n_in are bincounts. papers.parquet is then streamed file by file (a helper thread
fetches the rows and forms the next row group while the main thread compresses one) while
a second thread writes citations.parquet. Both files are written in fixed 100,000-row
groups of one chunk per column (zstd), so their bytes do not depend on the thread count.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.contracts.artifacts import CITATIONS, CORPUS_PAPERS

if TYPE_CHECKING:
    import duckdb


# seq = file index << SEQ_SHIFT | line order: one sortable key for "first record wins".
SEQ_SHIFT = 40
KEEP = "reason IS NULL AND ok_year AND ok_title AND ok_abstract AND ok_cit"
# Rows per Parquet row group. Row groups are cut at fixed row counts (not at the engine's
# batch boundaries), so the bytes written do not depend on the thread count.
ROW_GROUP = 100_000
# Parquet compression of both outputs.
COMPRESSION = "zstd"
# Edge pairs fetched from DuckDB per batch.
EDGE_BATCH = 1 << 20


def outbound_edge_keys(con: duckdb.DuckDBPyConnection) -> Any:
    """Distinct citation edges as sorted int64 keys ``citing_idx << 32 | cited_idx``, from
    the survivors' ``outbound`` lists (the S2ORC path).

    Indexes are positions of the survivors in file order (table ``_ids``), so the key
    order is the order of papers.parquet. DuckDB gives each survivor's outbound list its
    index (a join on seq, faster than a window over the lists), then maps cited ids to
    indexes (a hash join on the small ``_ids``; both spill if needed); numpy sorts and
    deduplicates 8 bytes per edge.
    """
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
    keys = sorted_unique_keys(reader)
    con.execute("DROP TABLE _outbound")
    return keys


def sorted_unique_keys(reader: Any) -> Any:
    """The int64 keys of an Arrow reader's first column, sorted, each once (numpy)."""
    import numpy as np

    parts = [batch.column(0).to_numpy() for batch in reader]
    keys = np.concatenate(parts).astype(np.int64) if parts else np.empty(0, dtype=np.int64)
    keys.sort()
    if len(keys) > 1:
        keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    return keys


def _pairs_table(ids: Any, citing: Any, cited: Any) -> Any:
    """One citations.parquet row group: the paper ids at edge indexes ``citing``, ``cited``."""
    import pyarrow as pa

    return pa.table({"citing_id": ids.take(citing), "cited_id": ids.take(cited)})


def _write_citations(path: Path, ids: Any, citing: Any, cited: Any) -> None:
    """citations.parquet from edge indexes into ``ids``, in fixed row groups."""
    import pyarrow.parquet as pq

    with pq.ParquetWriter(
        path, CITATIONS.schema, compression=COMPRESSION, use_dictionary=False
    ) as w:
        for lo in range(0, len(citing), ROW_GROUP):
            sl = slice(lo, lo + ROW_GROUP)
            w.write_table(_pairs_table(ids, citing[sl], cited[sl]), row_group_size=ROW_GROUP)


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
    for name in ("n_out", "n_in"):
        out_schema = out_schema.append(CORPUS_PAPERS.schema.field(name))
    if not out_schema.equals(CORPUS_PAPERS.schema):  # DuckDB's types are the contract's
        raise RuntimeError(f"papers schema {out_schema} differs from its contract")  # a bug
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


class Prefetch:
    """The items of ``items``, computed ahead by a helper thread from the moment it is made
    (at most ``depth`` waiting); iterate to take them, and :meth:`close` when done.

    Here it fetches the survivors' papers from DuckDB and forms their row groups while the
    edges are computed, and then while the previous row group is compressed. An error in
    the helper is raised in the consumer.
    """

    def __init__(self, items: Iterator[Any], depth: int) -> None:
        import queue

        self._buf: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._items = items
        self._thread = threading.Thread(target=self._produce, name="mdcr-prefetch", daemon=True)
        self._thread.start()

    def _put(self, entry: tuple[str, Any]) -> bool:
        import queue

        while not self._stop.is_set():
            try:
                self._buf.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        try:
            for item in self._items:
                if not self._put(("item", item)):
                    return
            self._put(("end", None))
        except BaseException as exc:  # handed to the consumer
            self._put(("error", exc))

    def __iter__(self) -> Iterator[Any]:
        while True:
            kind, value = self._buf.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            yield value

    def close(self) -> None:
        """Stop the helper thread and wait for it (before its DuckDB cursor is closed)."""
        self._stop.set()
        self._thread.join()


@dataclass(frozen=True)
class EdgeTable:
    """The edges between survivors held by DuckDB: table ``table`` of distinct keys ``k``
    (``citing_idx << 32 | cited_idx`` over ``_ids``), self-citations dropped. They are
    counted per paper in DuckDB and streamed into citations.parquet in key order, so the
    edges of a full release never sit in memory outside DuckDB."""

    con: duckdb.DuckDBPyConnection
    table: str

    def counts(self, n_papers: int) -> tuple[Any, Any]:
        """(n_out, n_in) per survivor index."""
        import numpy as np

        n_out = np.zeros(n_papers, dtype=np.int64)
        n_in = np.zeros(n_papers, dtype=np.int64)
        for end, counts in (("k >> 32", n_out), (f"k & {0xFFFFFFFF}", n_in)):
            got = self.con.sql(
                f"SELECT {end} AS i, count(*) AS n FROM {self.table} GROUP BY 1"
            ).fetchnumpy()
            counts[got["i"]] = got["n"]
        return n_out, n_in

    def sorted_keys(self) -> Any:
        """An Arrow reader of the keys in ascending order (DuckDB sorts, and spills)."""
        return self.con.sql(f"SELECT k FROM {self.table} ORDER BY k").to_arrow_reader(EDGE_BATCH)


def _write_citations_streamed(path: Path, ids: Any, edges: EdgeTable) -> int:
    """citations.parquet from the sorted keys of ``edges``, in fixed row groups; returns
    the edges written. Memory holds one batch of edges, never the whole edge list.
    """
    import numpy as np
    import pyarrow.parquet as pq

    empty = np.empty(0, dtype=np.int64)
    citing_left, cited_left = empty, empty
    total = 0
    with pq.ParquetWriter(
        path, CITATIONS.schema, compression=COMPRESSION, use_dictionary=False
    ) as w:
        for batch in edges.sorted_keys():
            keys = batch.column(0).to_numpy()
            citing = np.concatenate([citing_left, keys >> 32])
            cited = np.concatenate([cited_left, keys & 0xFFFFFFFF])
            total += len(keys)
            full = len(citing) // ROW_GROUP * ROW_GROUP
            for lo in range(0, full, ROW_GROUP):
                sl = slice(lo, lo + ROW_GROUP)
                w.write_table(_pairs_table(ids, citing[sl], cited[sl]), row_group_size=ROW_GROUP)
            citing_left, cited_left = citing[full:], cited[full:]
        if len(citing_left):
            w.write_table(_pairs_table(ids, citing_left, cited_left), row_group_size=ROW_GROUP)
    return total


def write_outputs(
    con: duckdb.DuckDBPyConnection,
    out_dir: Path,
    n_files: int,
    edge_keys: Callable[[duckdb.DuckDBPyConnection], Any] = outbound_edge_keys,
) -> tuple[int, int]:
    """Write citations.parquet and papers.parquet, both in file order; return their rows.

    Papers keep the order of the shards (file, then line: the first record of each
    paper_id); edges are ordered by (citing paper, cited paper) in that order.
    ``edge_keys`` gives the edges as keys over ``_ids`` (the survivors' indexes), either
    as a numpy array (sorted here; by default from the survivors' outbound lists, kept
    when the cited paper survived too, self-citations and repeats dropped), or as an
    :class:`EdgeTable` in DuckDB, counted there and streamed into citations.parquet in
    key order (memory per survivor, not per edge).

    The work overlaps (DuckDB and the Parquet writers run outside Python's lock): the
    papers' first row groups are fetched while the edges are computed, and the two files
    are written at the same time, on two connections to the same database.
    """
    import numpy as np

    con.execute(
        "CREATE TEMP TABLE _ids AS SELECT seq, paper_id, "
        f"(row_number() OVER (ORDER BY seq) - 1)::INTEGER AS idx FROM recs WHERE {KEEP}"
    )
    table = con.sql("SELECT seq, paper_id FROM _ids ORDER BY idx").to_arrow_table()
    seqs = table.column("seq").to_numpy()
    ids = table.column("paper_id").combine_chunks()
    del table
    schema = con.sql(f"SELECT {PAPER_COLUMNS} FROM recs LIMIT 0").to_arrow_table().schema
    cur = con.cursor()
    try:
        groups = Prefetch(_row_groups(_papers_in_file_order(cur, n_files), schema), 1)
        try:
            keys = edge_keys(con)
            con.execute("DROP TABLE _ids")
            if isinstance(keys, EdgeTable):
                n_out, n_in = keys.counts(len(ids))
                n_edges = int(n_out.sum())
                write_edges: Callable[[], Any] = lambda: _write_citations_streamed(  # noqa: E731
                    CITATIONS.path(out_dir), ids, keys
                )
            else:
                citing = (keys >> 32).astype(np.int32)
                cited = (keys & 0xFFFFFFFF).astype(np.int32)
                del keys
                n_out = np.bincount(citing, minlength=len(ids)).astype(np.int64)
                n_in = np.bincount(cited, minlength=len(ids)).astype(np.int64)
                n_edges = len(citing)
                write_edges = lambda: _write_citations(  # noqa: E731
                    CITATIONS.path(out_dir), ids, citing, cited
                )
            with ThreadPoolExecutor(max_workers=1) as pool:
                job = pool.submit(write_edges)
                _write_papers(CORPUS_PAPERS.path(out_dir), schema, iter(groups), seqs, n_out, n_in)
                written = job.result()
        finally:
            groups.close()  # stops the helper thread before the cursor closes
    finally:
        cur.close()
    if written is not None and written != n_edges:  # an internal invariant
        raise RuntimeError(f"wrote {written} citation edges but counted {n_edges}")
    return len(ids), n_edges
