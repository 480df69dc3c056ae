"""IdLookup equals pyarrow's index_in, which it replaces for repeated lookups in one store."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mdcr.encoders.id_lookup import IdLookup, fixed_width


def _reference(queries: pa.Array, ids: pa.Array) -> np.ndarray:
    found = pc.index_in(queries, value_set=ids)
    return np.asarray(found.fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


@pytest.mark.parametrize("non_ascii", [False, True], ids=["ascii", "utf8"])
def test_lookup_equals_index_in_on_mixed_ids(non_ascii: bool) -> None:
    rng = np.random.default_rng(7)
    words = [f"{rng.integers(0, 10 ** rng.integers(1, 12))}" for _ in range(5000)]
    words += ["a" * 40, "x y", "0", "00", "10", "1"] + (["É-ü-中文"] if non_ascii else [])
    ids = pa.array(list(dict.fromkeys(words)), pa.string())
    present = [ids[i].as_py() for i in rng.integers(0, len(ids), 800)]
    absent = ["a" * 41, "missing", "", "0000", "É", "1 "]
    queries = pa.array(present + absent + [None], pa.string())
    lookup = IdLookup(ids)
    got = lookup.rows(queries)
    assert got.tolist() == _reference(queries, ids).tolist()
    assert (got[: len(present)] >= 0).all() and (got[len(present) :] == -1).all()


def test_lookup_from_a_sliced_array_and_empty_inputs() -> None:
    ids = pa.array(["p3", "p1", "p22", "p0", "p5"], pa.string()).slice(1, 3)  # p1 p22 p0
    lookup = IdLookup(ids)
    queries = pa.array(["p0", "p3", "p22", "p1"], pa.string()).slice(0, 4)
    assert lookup.rows(queries).tolist() == [2, -1, 1, 0]
    assert lookup.rows(pa.array([], pa.string())).tolist() == []
    assert IdLookup(pa.array([], pa.string())).rows(queries).tolist() == [-1] * 4


@pytest.mark.parametrize("width", [3, 8])
def test_fixed_width_pads_utf8_bytes(width: int) -> None:
    arr = pa.array(["ab", "", "é"], pa.string())
    out = fixed_width(arr, width)
    assert out.dtype == np.dtype(f"S{width}")
    assert out.tolist() == [b"ab", b"", "é".encode()]
