"""Rows of paper ids in an embedding store, with the lookup structure built once.

``pyarrow.compute.index_in(queries, value_set=ids)`` hashes the whole value set on every
call: with a store of 13.8M papers (every pool paper of the paper's experiments) that is
5-11 s per call on 2 cores, paid twice per pool (papers and queries) for each of 138 pools,
so a search stage's cost grew with pools x store size. :class:`IdLookup` sorts the ids
once, as fixed-width byte strings, and answers each lookup by binary search: O(q log n)
per call, equal to ``index_in`` (tests/unit/encoders/test_id_lookup.py).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def fixed_width(ids: pa.Array, width: int) -> np.ndarray:
    """UTF-8 bytes of each string, NUL-padded to ``width``, as a ``S<width>`` array.

    Built from Arrow's buffers without a Python object per id. Strings longer than
    ``width`` must not occur (the caller checks); a null is the empty string. Ids that
    differ only by trailing NUL characters compare equal (paper ids hold none)."""
    ids = ids.cast(pa.string())
    if ids.null_count:
        ids = pc.fill_null(ids, "")
    n = len(ids)
    out = np.zeros((n, max(width, 1)), dtype=np.uint8)
    if n == 0:
        return out.view(f"S{max(width, 1)}").reshape(n)
    if width and pc.all(pc.string_is_ascii(ids)).as_py():
        # One character is one byte: Arrow pads every id to the width in C++.
        ids = pc.utf8_rpad(ids, width=width, padding="\x00")
    offsets_buf, data_buf = ids.buffers()[1], ids.buffers()[2]
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[ids.offset : ids.offset + n + 1]
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    )
    lengths = np.diff(offsets)
    total = int(lengths.sum())
    chunk = data[offsets[0] : offsets[0] + total]
    if width and total == n * width:  # every id has the full width: the data is the array already
        return chunk.view(f"S{width}").reshape(n)
    if total:
        flat = out.reshape(-1)
        shift = np.arange(n, dtype=np.int64) * out.shape[1] - (offsets[:-1] - offsets[0])
        flat[np.repeat(shift, lengths) + np.arange(total, dtype=np.int64)] = chunk
    return out.view(f"S{max(width, 1)}").reshape(n)


class IdLookup:
    """Row of each paper id among ``ids`` (unique), -1 where absent."""

    def __init__(self, ids: pa.Array) -> None:
        ids = ids.cast(pa.string())
        self.width = int(pc.max(pc.binary_length(ids)).as_py() or 0) if len(ids) else 0
        keys = fixed_width(ids, self.width)
        self.order = np.argsort(keys, kind="stable")
        self.sorted_keys = keys[self.order]

    def rows(self, queries: pa.Array) -> np.ndarray:
        """int64 rows of ``queries`` in the ids, -1 for an id that is not there."""
        n = len(queries)
        out = np.full(n, -1, dtype=np.int64)
        if n == 0 or len(self.sorted_keys) == 0:
            return out
        queries = queries.cast(pa.string())
        valid = queries.is_valid().to_numpy(zero_copy_only=False)
        lengths = pc.fill_null(pc.binary_length(queries), 0).to_numpy(zero_copy_only=False)
        fits = valid & (lengths <= self.width)
        keys = fixed_width(pc.if_else(pa.array(fits), queries, ""), self.width)
        pos = np.minimum(np.searchsorted(self.sorted_keys, keys), len(self.sorted_keys) - 1)
        found = fits & (self.sorted_keys[pos] == keys)
        out[found] = self.order[pos[found]]
        return out
