"""The exact search gives, on every path, the rows and float64 bits saved from the code
before it was written as one algorithm (``tests/data/exact_golden/``, whose README says
how the file was made): Faiss with the compiled and with numpy's sums, the torch backend
re-scoring on the host, on its device (the CPU here) and on several devices (simulated).

The cases: ties across the window's edge (widening), ``ip`` and ``l2``, signed zeros and
subnormals, vectors of norm 15 (every pair checked on the device) and pairs whose numpy
sums round (left to the host), k from 1 to past the pool, float32 stores and float32
queries against a float16 store, and multi-vector (best sentence pair) at three scales.

Regenerate (only from the code the file pins): ``python -m
tests.unit.index.test_exact_golden --write tests/data/exact_golden/exact_golden.npz``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mdcr.index import exact as exact_module
from mdcr.index.backends import FaissBackend, TorchBackend
from mdcr.index.exact import SearchStats, exact_topk, exact_topk_multi
from mdcr.retrievers.device import Device

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "exact_golden" / "exact_golden.npz"
PATHS = ("faiss", "faiss-numpy-sums", "torch-host", "torch-device", "torch-devices")
Run = tuple[list[np.ndarray], list[np.ndarray], int, int]


def _single(
    rng: np.random.Generator, n: int, nq: int, d: int, *, levels: int | None, scale: float
) -> dict[str, np.ndarray]:
    """float16 pool and queries, half the queries pool rows; with ``levels`` coarse values
    (ties) and 20 duplicated rows; rows 3 and 4 are +0.0 and -0.0."""
    if levels:
        db = rng.integers(-levels, levels + 1, size=(n, d)) / 4.0
        db[n // 2 : n // 2 + 20] = db[:20]
    else:
        db = rng.standard_normal((n, d)) / np.sqrt(d)
    db[3], db[4] = 0.0, -0.0
    db = (db * scale).astype(np.float16)
    q_rows = rng.choice(n, size=nq // 2, replace=False)
    other = rng.standard_normal((nq - nq // 2, d)) / np.sqrt(d) * scale
    if levels:
        other = np.round(other * 2) / 2
    other[0] = -np.abs(other[0])  # against the +0.0 row every product is -0.0
    queries = np.concatenate([db[q_rows], other.astype(np.float16)])
    exclude = np.concatenate([q_rows, -np.ones(nq - nq // 2, dtype=np.int64)])
    return {"db": db, "queries": queries, "exclude": exclude.astype(np.int64)}


def _adversarial(rng: np.random.Generator, n: int, nq: int, d: int) -> dict[str, np.ndarray]:
    """Large values with every fifth dimension tiny in query and row: numpy's float64 sums
    round, so the device leaves those pairs to the host."""
    db = rng.standard_normal((n, d)) * 4
    db[:, ::5] = rng.standard_normal((n, len(range(0, d, 5)))) * 1e-4
    db = db.astype(np.float16)
    q_rows = rng.choice(n, size=nq, replace=False)
    return {"db": db, "queries": db[q_rows].copy(), "exclude": q_rows.astype(np.int64)}


def _subnormals(rng: np.random.Generator, n: int, nq: int, d: int) -> dict[str, np.ndarray]:
    """Unit-scale rows with float16 subnormals, values at the normal boundary and exact
    cancellations (the compiled sums' edge cases)."""
    data = _single(rng, n, nq, d, levels=None, scale=1.0)
    db = data["db"].astype(np.float64)
    db[5] = 2.0**-24 * rng.integers(-3, 4, size=d)
    db[6, ::2] = 6e-5
    db[7] = -db[8]
    data["db"] = db.astype(np.float16)
    return data


def _multi(
    rng: np.random.Generator, n_docs: int, nq: int, d: int, *, levels: int | None, scale: float
) -> dict[str, np.ndarray]:
    """1 to 5 sentence vectors per document; the query documents are pool documents."""
    counts = rng.integers(1, 6, size=n_docs)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    if levels:
        sents = rng.integers(-levels, levels + 1, size=(offsets[-1], d)) / 2.0
    else:
        sents = rng.standard_normal((offsets[-1], d)) / np.sqrt(d)
    sents = (sents * scale).astype(np.float16)
    q_docs = rng.choice(n_docs, size=nq, replace=False)
    parts = [sents[offsets[i] : offsets[i + 1]] for i in q_docs]
    return {
        "db": sents,
        "doc_of": np.repeat(np.arange(n_docs, dtype=np.int64), counts),
        "queries": np.concatenate(parts),
        "offsets": np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64),
        "exclude": q_docs.astype(np.int64),
    }


def make_datasets() -> dict[str, dict[str, np.ndarray]]:
    """The inputs, from fixed seeds: name -> arrays (``db``, ``queries``, ``exclude``; for
    multi-vector also ``doc_of`` and ``offsets``)."""
    rng = np.random.default_rng
    sets = {
        "ties": _single(rng(1), 700, 40, 16, levels=2, scale=1.0),
        "unit": _single(rng(2), 700, 40, 16, levels=None, scale=1.0),
        "norm15": _single(rng(3), 700, 40, 16, levels=None, scale=15.0),
        "norm8-ties": _single(rng(4), 700, 40, 16, levels=2, scale=8.0),
        "adversarial": _adversarial(rng(5), 400, 12, 40),
        "subnormals": _subnormals(rng(8), 300, 16, 48),
        "defaults": _single(rng(9), 2000, 64, 24, levels=3, scale=1.0),
        "edges": _single(rng(10), 300, 20, 8, levels=1, scale=1.0),
        "multi-ties": _multi(rng(11), 250, 15, 8, levels=1, scale=0.25),
        "multi-unit": _multi(rng(11), 250, 15, 8, levels=None, scale=1.0),
        "multi-norm8": _multi(rng(11), 250, 15, 8, levels=1, scale=8.0),
        "multi-small-pool": _multi(rng(12), 6, 4, 4, levels=1, scale=1.0),
    }
    for name, seed, scale in (("norm8", 6, 8.0), ("unit", 7, 1.0)):
        data = _single(rng(seed), 500, 20, 12, levels=2 if scale > 1 else None, scale=scale)
        q32 = data["queries"].astype(np.float32) * np.float32(1.0 - 2.0**-21)
        sets[f"float32-queries-{name}"] = {**data, "queries": q32}
        if scale > 1:
            db32 = data["db"].astype(np.float32) * np.float32(1.0 + 2.0**-20)
            sets["float32-store"] = {**data, "db": db32, "queries": q32}
    return sets


def make_cases() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(case, data set, parameters) of every case."""
    small = {"margin": 3, "batch": 16}
    default = {"margin": 64, "batch": 1024}
    for metric in ("ip", "l2"):
        for data in ("ties", "unit", "norm15", "norm8-ties"):
            yield f"{data}-{metric}", data, {"k": 50, "metric": metric, **small}
        yield f"adversarial-{metric}", "adversarial", {"k": 30, "metric": metric, **default}
        for data in ("float32-store", "float32-queries-norm8", "float32-queries-unit"):
            yield f"{data}-{metric}", data, {"k": 40, "metric": metric, **default}
        yield f"subnormals-{metric}", "subnormals", {"k": 40, "metric": metric, **small}
        yield f"defaults-{metric}", "defaults", {"k": 100, "metric": metric, **default}
    for k in (1, 7, 299, 300, 1000):
        yield f"edges-k{k}", "edges", {"k": k, "metric": "ip", "margin": 0, "batch": 1024}
    for metric in ("ip", "l2"):
        for data in ("multi-ties", "multi-unit", "multi-norm8"):
            yield f"{data}-{metric}", data, {"k": 30, "metric": metric, "margin": 2, "batch": 4}
        params = {"k": 10, "metric": metric, "margin": 0, "batch": 7}
        yield f"multi-small-pool-{metric}", "multi-small-pool", params


@contextmanager
def _numpy_sums(active: bool) -> Iterator[None]:
    """The host re-scoring without its compiled kernel (numpy's sums everywhere)."""
    saved = exact_module.compiled_rescoring
    if active:
        exact_module.compiled_rescoring = lambda *a: False  # type: ignore[assignment]
    try:
        yield
    finally:
        exact_module.compiled_rescoring = saved  # type: ignore[assignment]


def _backend(path: str, db: np.ndarray, metric: str) -> Any:
    if path.startswith("faiss"):
        return FaissBackend(db, metric, Device())  # type: ignore[arg-type]
    device = path != "torch-host"
    backend = TorchBackend(db, metric, Device(), chunk_rows=97, rescore_on_device=device)  # type: ignore[arg-type]
    if path == "torch-devices":
        backend._rows = None  # the chunks apart, as on several GPUs: gathered chunk by chunk
    return backend


def run(
    path: str,
    params: dict[str, Any],
    data: dict[str, np.ndarray],
    stats: SearchStats | None = None,
) -> Run:
    """One case on one path: per query (rows, scores), widened and the widest window."""
    stats = stats if stats is not None else SearchStats()
    backend = _backend(path, data["db"], params["metric"])
    search: Callable[..., list[tuple[np.ndarray, np.ndarray]]]
    if "doc_of" in data:
        args: tuple[Any, ...] = (data["db"], data["doc_of"], data["queries"], data["offsets"])
        search = exact_topk_multi
    else:
        args, search = (data["db"], data["queries"]), exact_topk
    with _numpy_sums(path == "faiss-numpy-sums"):
        ranked = search(
            backend, *args, data["exclude"], params["k"], params["metric"],
            margin=params["margin"], batch=params["batch"], stats=stats,
        )  # fmt: skip
    return [r for r, _ in ranked], [s for _, s in ranked], stats.widened, stats.max_window


def _same(got: Run, rows: list[np.ndarray], scores: list[np.ndarray], stats: np.ndarray) -> None:
    assert len(got[0]) == len(rows)
    for g_rows, g_scores, w_rows, w_scores in zip(got[0], got[1], rows, scores, strict=True):
        assert g_rows.dtype == w_rows.dtype and g_scores.dtype == np.float64
        np.testing.assert_array_equal(g_rows, w_rows)
        assert np.array_equal(g_scores.view(np.int64), w_scores.view(np.int64))
    assert [got[2], got[3]] == stats.tolist()


def _split(flat: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    return np.split(flat, np.cumsum(lengths)[:-1]) if len(lengths) else []


def _save(arrays: dict[str, np.ndarray], prefix: str, got: Run) -> None:
    arrays[f"{prefix}.lengths"] = np.array([len(r) for r in got[0]], dtype=np.int64)
    arrays[f"{prefix}.rows"] = np.concatenate(got[0])
    arrays[f"{prefix}.scores"] = np.concatenate(got[1])
    arrays[f"{prefix}.stats"] = np.array(got[2:], dtype=np.int64)


def write(out: Path) -> None:
    """Run every case on every path and save the inputs and outputs: the first path's, and
    another path's own where it differs (float32 queries against a float16 store: numpy's
    sums form float32 products there, the compiled kernel exact ones)."""
    datasets = make_datasets()
    arrays = {f"{name}.{key}": v for name, data in datasets.items() for key, v in data.items()}
    for name, data_name, params in make_cases():
        first = run(PATHS[0], params, datasets[data_name])
        _save(arrays, f"{name}.out", first)
        for path in PATHS[1:]:
            got = run(path, params, datasets[data_name])
            try:
                _same(got, first[0], first[1], np.array(first[2:]))
            except AssertionError:
                print(f"{name}: {path} differs from {PATHS[0]}; saved apart")
                _save(arrays, f"{name}.out@{path}", got)
        arrays[f"{name}.params"] = np.array(json.dumps({"data": data_name, **params}))
        print(f"{name}: {len(first[0])} queries, widened {first[2]}, window {first[3]}")
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **arrays)


def _stored(golden: Any, prefix: str) -> dict[str, np.ndarray]:
    return {key[len(prefix) :]: golden[key] for key in golden if key.startswith(prefix)}


def _golden(name: str, path: str) -> tuple[dict[str, Any], dict[str, np.ndarray], tuple[Any, ...]]:
    """A saved case: its parameters, its data, and what ``path`` gave (rows and scores
    per query, the stats)."""
    with np.load(GOLDEN) as golden:
        params = json.loads(str(golden[f"{name}.params"]))
        data = _stored(golden, f"{params.pop('data')}.")
        out = _stored(golden, f"{name}.out")
    own = f"@{path}." if f"@{path}.rows" in out else "."
    lengths = out[f"{own}lengths"]
    want = _split(out[f"{own}rows"], lengths), _split(out[f"{own}scores"], lengths)
    return params, data, (*want, out[f"{own}stats"])


@pytest.mark.parametrize("name", [name for name, _, _ in make_cases()])
def test_every_path_gives_the_saved_rows_and_bits(name: str) -> None:
    for path in PATHS:
        params, data, want = _golden(name, path)
        _same(run(path, params, data), *want)


@pytest.mark.parametrize("name", ["ties-ip", "norm8-ties-l2", "edges-k7", "multi-ties-l2"])
def test_without_numba_the_saved_bits(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An install without numba (numpy's sums, the ordering's merge sorts run by numpy)
    gives the bits saved for numpy's sums."""
    from mdcr.index import exact_kernel

    if exact_kernel.numba is None:
        pytest.skip("numba is not installed: every other test here runs without it")
    monkeypatch.setattr(exact_kernel, "numba", None)
    for kernel in ("_rank_groups", "_ordered", "_firsts"):
        monkeypatch.setattr(exact_kernel, kernel, getattr(exact_kernel, kernel).py_func)
    params, data, want = _golden(name, "faiss-numpy-sums")
    stats = SearchStats()
    _same(run("faiss", params, data, stats), *want)
    assert stats.extra["compiled_rescoring"] == 0


def test_the_saved_cases_are_the_ones_described() -> None:
    """The file holds the cases :func:`make_cases` describes, on data of the shapes
    :func:`make_datasets` gives."""
    with np.load(GOLDEN) as golden:
        for name, data_name, params in make_cases():
            assert json.loads(str(golden[f"{name}.params"])) == {"data": data_name, **params}
        for name, data in make_datasets().items():
            assert {k: v.shape for k, v in _stored(golden, f"{name}.").items()} == {
                k: v.shape for k, v in data.items()
            }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", type=Path, required=True, help="the .npz file to write")
    write(parser.parse_args().write)
