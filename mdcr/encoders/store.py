"""The embedding store: float16 shards with their paper ids, written atomically, read by mmap.

Layout of an ``encode`` output folder::

    encoder.json           identity (model, revision, pooling ...), dim, metric, multi_vector
    ids_00000.parquet      paper_id (string) of each row of the shard, sorted, and
                           text_hash (uint64) of the title and abstract it was encoded from
    emb_00000.npy          float16 (rows, dim), or float32 with storage = "float32";
                           multi-vector: (sentences, dim)
    offsets_00000.npy      multi-vector only: int64 (rows + 1); paper i's vectors are
                           emb[offsets[i]:offsets[i + 1]]
    query_ids_00000.parquet, query_emb_00000.npy, ...
                           asymmetric encoders only: the query papers, encoded as queries

Vectors are keyed by (paper, role): a symmetric encoder (every model of the paper) encodes
each paper once, and its queries are read from the document shards; an asymmetric one
(query and document prompts that differ) also has query shards.

A shard counts as finished when its ids file exists: vectors and offsets are written
first, the ids file last, each through a temporary name and ``os.replace``. A crashed run
therefore leaves only finished shards (plus temporary files that are overwritten).

Reading keeps memory small: the ids of all shards form one Arrow string array (lookups go
through Arrow's hash-based ``index_in``, not a Python dict of millions of strings), and
vectors are memory-mapped and gathered shard by shard.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from mdcr.encoders.id_lookup import IdLookup

from mdcr.core.atomic import atomic_path
from mdcr.core.errors import InputDataError, ManifestMismatchError

ENCODER_JSON = "encoder.json"
ROLE_PREFIX = {"document": "", "query": "query_"}


def shard_names(i: int, role: str = "document") -> tuple[str, str, str]:
    """File names (ids, vectors, offsets) of shard ``i`` of a role."""
    p = ROLE_PREFIX[role]
    return f"{p}ids_{i:05d}.parquet", f"{p}emb_{i:05d}.npy", f"{p}offsets_{i:05d}.npy"


def shard_done(folder: Path, i: int, role: str = "document") -> bool:
    ids_name, emb_name, _ = shard_names(i, role)
    return (folder / ids_name).is_file() and (folder / emb_name).is_file()


def finished_shards(folder: Path) -> int:
    """Shards (of any role) written in full in an encode's work folder."""
    return sum(
        1
        for ids in folder.glob("*ids_*.parquet")
        if (folder / ids.name.replace("ids_", "emb_").replace(".parquet", ".npy")).is_file()
    )


def text_hashes(titles: Sequence[str | None], abstracts: Sequence[str | None]) -> np.ndarray:
    """A 64-bit hash of each paper's (title, abstract): vectors are copied between outputs
    of one encoder only where these are equal."""
    out = np.empty(len(titles), dtype=np.uint64)
    for i, (t, a) in enumerate(zip(titles, abstracts, strict=True)):
        t, a = t or "", a or ""
        digest = hashlib.blake2b(f"{len(t)}:{t}{a}".encode(), digest_size=8).digest()
        out[i] = int.from_bytes(digest, "little")
    return out


FLOAT16_MAX = float(np.finfo(np.float16).max)


def checked_vectors(
    spec: str,
    result: Any,
    papers: Sequence[Any],
    dim: int,
    multi: bool,
    storage: str = "float16",
    metric: str = "ip",
) -> tuple[np.ndarray, np.ndarray | None]:
    """An encoder's output, checked and in the form the store keeps it: (vectors, offsets
    or None).

    A dim below 1, wrong type, shape, dtype or row count, NaN or inf, and values float16
    storage cannot hold are one-line errors that name the encoder, the problem and the
    fix. For ``metric="cos"`` the vectors are made unit length first
    (:func:`cosine_form`), so every path that reads them ranks by cosine. Zero and repeated
    vectors are counted later (:mod:`mdcr.encoders.degenerate`).
    """
    from mdcr.encoders.degenerate import check_dim

    check_dim(spec, dim)
    where = f"encoder '{spec}'"
    offsets: np.ndarray | None = None
    if multi:
        if not (isinstance(result, tuple) and len(result) == 2):
            raise InputDataError(
                f"{where} is multi-vector but returned {type(result).__name__}; return "
                "(vectors (m, dim), offsets (n + 1,))"
            )
        vectors, offsets = np.asarray(result[0]), np.asarray(result[1])
        n_off = len(papers) + 1
        if (
            offsets.ndim != 1
            or len(offsets) != n_off
            or not np.issubdtype(offsets.dtype, np.integer)
        ):
            raise InputDataError(
                f"{where} returned offsets of shape {offsets.shape} ({offsets.dtype}) for "
                f"{len(papers)} papers; return {n_off} integer offsets"
            )
        steps = np.diff(offsets)
        if offsets[0] != 0 or (steps < 1).any() or offsets[-1] != len(vectors):
            raise InputDataError(
                f"{where} returned offsets that do not start at 0, give every paper at least "
                f"one vector and end at the {len(vectors)} vectors; fix its offsets"
            )
        offsets = offsets.astype(np.int64)
    else:
        if not isinstance(result, np.ndarray):
            raise InputDataError(
                f"{where} returned {type(result).__name__}; return a numpy array "
                f"(n, {dim}) of floats"
            )
        vectors = result
        if vectors.ndim != 2 or vectors.shape[0] != len(papers):
            raise InputDataError(
                f"{where} returned an array of shape {vectors.shape} for {len(papers)} papers; "
                f"return one row per paper, in the order given: ({len(papers)}, {dim})"
            )
    if vectors.ndim != 2 or vectors.shape[1] != dim:
        raise InputDataError(
            f"{where} returned vectors of shape {vectors.shape}, but declares dim {dim}; "
            "make dim the vector size"
        )
    if not np.issubdtype(vectors.dtype, np.floating):
        raise InputDataError(
            f"{where} returned {vectors.dtype} vectors; return float32 (or another float type)"
        )
    finite = np.isfinite(vectors).all(axis=1)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        row = bad if offsets is None else int(np.searchsorted(offsets, bad, side="right") - 1)
        raise InputDataError(
            f"{where} returned NaN or inf for {int((~finite).sum())} vector(s) (e.g. paper "
            f"'{papers[row].paper_id}'); fix the encoder (empty text? a division by zero?)"
        )
    if metric == "cos":
        vectors = cosine_form(vectors)
    peak = float(np.abs(vectors).max()) if vectors.size else 0.0
    if storage == "float16" and peak > FLOAT16_MAX:
        raise InputDataError(
            f"{where} returned values up to {peak:.3g}, beyond what float16 storage holds "
            f"({FLOAT16_MAX:g}); store float32 with --encode-set storage=float32 (or scale "
            "the vectors down by a constant: rankings by ip and l2 do not change)"
        )
    return vectors, offsets


# A vector whose float32 norm is within this of 1 is unit length already (an encoder that
# normalises its own output: MiniLM's are within 1.2e-7); it is stored as given.
UNIT_TOLERANCE = 1e-6


def cosine_form(vectors: np.ndarray) -> np.ndarray:
    """Vectors of a ``metric="cos"`` encoder as the store keeps them: each divided by its
    norm (in float32), so that the inner product of two stored vectors is their cosine on
    every path (search, benchmark rank, fusion and exports read what is stored). Vectors
    already of unit length (:data:`UNIT_TOLERANCE`) are kept bit for bit, and zero vectors
    stay zero (they are counted as degenerate)."""
    x32 = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(x32, axis=1)
    off = np.abs(norms - 1.0) > UNIT_TOLERANCE
    if not off.any():
        return vectors
    out = np.array(x32, copy=True)
    scale = np.where(norms[off] > 0, norms[off], 1.0).astype(np.float32)
    out[off] = x32[off] / scale[:, None]
    return out


def unit_vectors16(x: np.ndarray) -> np.ndarray:
    """Unit vectors in float16, as cosine search compares them (normalised in float32)."""
    x32 = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x32, axis=1, keepdims=True)
    return (x32 / np.maximum(norms, 1e-12)).astype(np.float16)


def write_shard(
    folder: Path,
    i: int,
    ids: Sequence[str],
    vectors: np.ndarray,
    offsets: np.ndarray | None = None,
    hashes: np.ndarray | None = None,
    role: str = "document",
    storage: str = "float16",
) -> list[str]:
    """Write shard ``i`` of a role atomically (ids last); returns the file names written.

    ``hashes``: the :func:`text_hashes` of the papers (0 when not given)."""
    ids_name, emb_name, off_name = shard_names(i, role)
    names = [emb_name]
    with atomic_path(folder / emb_name) as tmp, tmp.open("wb") as f:
        np.save(f, np.ascontiguousarray(vectors, dtype=np.dtype(storage)))
    if offsets is not None:
        names.append(off_name)
        with atomic_path(folder / off_name) as tmp, tmp.open("wb") as f:
            np.save(f, np.asarray(offsets, dtype=np.int64))
    if hashes is None:
        hashes = np.zeros(len(ids), dtype=np.uint64)
    table = pa.table(
        {
            "paper_id": pa.array(list(ids), pa.string()),
            "text_hash": pa.array(np.asarray(hashes, dtype=np.uint64), pa.uint64()),
        }
    )
    with atomic_path(folder / ids_name) as tmp:
        pq.write_table(table, tmp)
    names.append(ids_name)
    return names


def assemble(
    n: int,
    parts: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray | None]],
    dim: int,
    storage: str = "float16",
) -> tuple[np.ndarray, np.ndarray | None]:
    """Merge partial results into one shard in row order.

    Each part is ``(positions in the shard, vectors, offsets or None)``. With offsets
    (multi-vector) the result is ``(vectors, offsets)``, else ``(vectors, None)``.
    """
    if not any(off is not None for _, _, off in parts):
        out = np.zeros((n, dim), dtype=np.dtype(storage))
        for pos, vecs, _ in parts:
            out[pos] = vecs
        return out, None
    multi = [(pos, vecs, np.asarray(off)) for pos, vecs, off in parts]
    counts = np.zeros(n, dtype=np.int64)
    for pos, _, off in multi:
        counts[pos] = np.diff(off)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    out = np.zeros((int(offsets[-1]), dim), dtype=np.dtype(storage))
    for pos, vecs, off in multi:
        out[_ranges(offsets[pos], offsets[pos] + np.diff(off))] = vecs
    return out, offsets


def _check_whole(folder: Path) -> None:
    """A finished encode output whose files are not the sizes its manifest records is a
    one-line error, never a traceback from a short memory map (:mod:`mdcr.core.integrity`)."""
    from mdcr.core.integrity import damage, describe, fix
    from mdcr.core.manifests import read_manifest

    manifest = read_manifest(folder)
    found = damage(folder, manifest, hashes="none") if manifest is not None else None
    if manifest is not None and found is not None:
        raise ManifestMismatchError(f"{describe(folder, manifest, found)}; {fix(folder, manifest)}")


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, e)`` for each pair, vectorised."""
    lens = ends - starts
    total = int(lens.sum())
    return np.repeat(starts, lens) + (np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens))


class EmbeddingStore:
    """Read access to an ``encode`` output folder, in one role: ``"document"`` (every
    paper) or ``"query"`` (the query papers' query vectors; for a symmetric encoder the
    same as their document vectors)."""

    def __init__(self, folder: Path, role: str = "document") -> None:
        self.folder = folder
        meta_path = folder / ENCODER_JSON
        if not meta_path.is_file():
            raise InputDataError(
                f"'{folder}' is not an embedding store (no {ENCODER_JSON}); "
                "point to an encode stage's output"
            )
        _check_whole(folder)
        self.meta: dict[str, Any] = json.loads(meta_path.read_text())
        self.dim = int(self.meta["dim"])
        self.metric = str(self.meta["metric"])
        self.multi_vector = _flag(self.meta, "multi_vector", meta_path)
        self.name = str(self.meta["identity"].get("name", ""))
        self.asymmetric = _flag(self.meta, "asymmetric", meta_path)
        self.dtype = np.dtype(self.meta.get("storage", "float16"))
        if role not in ROLE_PREFIX:
            raise InputDataError(f"role '{role}' is not valid; valid roles: document, query")
        self.role = role if self.asymmetric else "document"
        pattern = re.compile(rf"^{ROLE_PREFIX[self.role]}ids_(\d{{5}})\.parquet$")
        shards = sorted(int(m.group(1)) for p in folder.iterdir() if (m := pattern.match(p.name)))
        self.shards = shards
        id_parts = [
            pq.read_table(folder / shard_names(i, self.role)[0])["paper_id"] for i in shards
        ]
        ids = pa.chunked_array(id_parts, pa.string()).combine_chunks() if id_parts else None
        self.ids: pa.Array = ids if ids is not None else pa.array([], pa.string())
        doc_counts = np.array([len(p) for p in id_parts], dtype=np.int64)
        self._doc_starts = np.concatenate([[0], np.cumsum(doc_counts)])
        self._mm: dict[int, np.ndarray] = {}
        self._off: dict[int, np.ndarray] = {}
        self._hashes: np.ndarray | None = None
        self._lookup: IdLookup | None = None  # built on the first lookup, then reused
        vec_counts = np.array([self._emb(i).shape[0] for i in shards], dtype=np.int64)
        self._vec_starts = np.concatenate([[0], np.cumsum(vec_counts)])

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def identity(self) -> dict[str, Any]:
        return dict(self.meta["identity"])

    def _emb(self, shard: int) -> np.ndarray:
        if shard not in self._mm:
            self._mm[shard] = np.load(self.folder / shard_names(shard, self.role)[1], mmap_mode="r")
        return self._mm[shard]

    def _offsets(self, k: int) -> np.ndarray:
        """Offsets of the k-th shard (by position in ``self.shards``), global vector rows."""
        if k not in self._off:
            local = np.load(self.folder / shard_names(self.shards[k], self.role)[2])
            self._off[k] = local + self._vec_starts[k]
        return self._off[k]

    def rows(self, paper_ids: pa.Array | Sequence[str]) -> np.ndarray:
        """Row of each paper id in the store (int64), -1 where it is missing."""
        arr = paper_ids if isinstance(paper_ids, pa.Array) else pa.array(paper_ids, pa.string())
        if len(arr) == 0:
            return np.zeros(0, dtype=np.int64)
        if self._lookup is None:
            from mdcr.encoders.id_lookup import IdLookup

            self._lookup = IdLookup(self.ids)
        return self._lookup.rows(arr)

    def text_hashes(self, rows: np.ndarray) -> np.ndarray:
        """The text hash each paper at ``rows`` was encoded from (0: not recorded)."""
        if self._hashes is None:
            parts = []
            for i in self.shards:
                file = self.folder / shard_names(i, self.role)[0]
                if "text_hash" in pq.read_schema(file).names:
                    col = pq.read_table(file, columns=["text_hash"])["text_hash"]
                    parts.append(col.to_numpy().astype(np.uint64))
                else:
                    parts.append(np.zeros(pq.ParquetFile(file).metadata.num_rows, np.uint64))
            self._hashes = np.concatenate(parts) if parts else np.zeros(0, np.uint64)
        return self._hashes[np.asarray(rows, dtype=np.int64)]

    def require_rows(self, paper_ids: pa.Array | Sequence[str], what: str) -> np.ndarray:
        """Rows of ``paper_ids``; a missing one is a one-line InputDataError."""
        rows = self.rows(paper_ids)
        missing = np.flatnonzero(rows < 0)
        if missing.size:
            first = paper_ids[int(missing[0])]
            first = first.as_py() if isinstance(first, pa.Scalar) else first
            raise InputDataError(
                f"{missing.size} {what} have no embedding in '{self.folder}' (e.g. '{first}'); "
                "re-run encode with these papers among its targets"
            )
        return rows

    def _gather(self, vec_rows: np.ndarray) -> np.ndarray:
        """Vectors (the store's dtype) at global vector rows, in the given order."""
        out = np.empty((len(vec_rows), self.dim), dtype=self.dtype)
        if len(vec_rows) == 0:
            return out
        shard_pos = np.searchsorted(self._vec_starts, vec_rows, side="right") - 1
        for k in np.unique(shard_pos):
            where = np.flatnonzero(shard_pos == k)
            local = vec_rows[where] - self._vec_starts[k]
            order = np.argsort(local, kind="stable")
            out[where[order]] = self._emb(self.shards[int(k)])[local[order]]
        return out

    def vectors(self, rows: np.ndarray) -> np.ndarray:
        """Single-vector store: ``(len(rows), dim)`` in the order of ``rows`` (float16, or
        float32 for a store written with ``storage = "float32"``)."""
        if self.multi_vector:
            raise InputDataError(f"'{self.folder}' holds multi-vector embeddings; use doc_vectors")
        return self._gather(np.asarray(rows, dtype=np.int64))

    def vector_counts(self, rows: np.ndarray) -> np.ndarray:
        """How many vectors each paper at ``rows`` has (1 in a single-vector store)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not self.multi_vector:
            return np.ones(len(rows), dtype=np.int64)
        starts, ends = self._vector_ranges(rows)
        return ends - starts

    def _vector_ranges(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Global vector rows [start, end) of each paper at ``rows`` (multi-vector store)."""
        starts = np.empty(len(rows), dtype=np.int64)
        ends = np.empty(len(rows), dtype=np.int64)
        shard_pos = np.searchsorted(self._doc_starts, rows, side="right") - 1
        for k in np.unique(shard_pos):
            where = np.flatnonzero(shard_pos == k)
            local = rows[where] - self._doc_starts[k]
            off = self._offsets(int(k))
            starts[where], ends[where] = off[local], off[local + 1]
        return starts, ends

    def doc_vectors(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Vectors of the papers at ``rows`` and their offsets (``len(rows) + 1``)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not self.multi_vector:
            return self._gather(rows), np.arange(len(rows) + 1, dtype=np.int64)
        starts, ends = self._vector_ranges(rows)
        counts = ends - starts
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return self._gather(_ranges(starts, ends)), offsets


def _flag(meta: dict[str, Any], key: str, path: Path) -> bool:
    """A boolean of ``encoder.json`` (False when absent); another value is an error, never
    read as a bool (``"no"`` would read as True)."""
    value = meta.get(key, False)
    if not isinstance(value, bool):
        raise InputDataError(
            f"'{path}': {key} is {value!r}, not true or false; this store was not written "
            "by mdcr's encode stage or was edited: encode again"
        )
    return value
