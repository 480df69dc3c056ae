"""Degenerate vectors: an encoder's output that cannot rank papers is an error, not a score.

An encoder that gives every paper the same vector, or zero vectors under a metric that
needs a direction, still yields a ranking for every query: by paper id, the tie-break.
Scored, that ranking looks like a result (MAP 0.068 on the demo corpus). So the encode
stage counts, shard by shard, on the vectors as stored (float16 or float32):

- **zero vectors** under ``cos`` or ``ip``: a zero vector has no direction; under cos it
  cannot be normalised and under ip it scores 0 against every paper. (Under ``l2`` the
  origin is a point like any other; not counted.)
- **one vector shared by papers of different texts**: the shard's most common vector
  (other than the zero vectors counted above) and how many papers have it (papers with
  the same title and abstract rightly share one).

The counts are summed over all shards of a role (encoded, copied from an earlier output,
or finished by an earlier run alike: each is counted where it is written or, when found
finished, read back), and then:

- zero vectors: up to ``WARN_SHARE`` (1%) of the vectors, a counted warning, and the
  output is made (a few odd texts should not cost a run over 16M papers); more, a
  one-line error;
- a shared vector: on more than ``SAME_SHARE`` (half) of the vectors ("the same vector for
  every paper"), a one-line error; on more than ``WARN_SHARE``, a counted warning.

A dim of 0, NaN and inf are errors at once (:func:`mdcr.encoders.store.checked_vectors`).
The error comes before ``encoder.json`` and the manifest are written, so a failing encode
leaves no finished output; a rerun of the same encoder reads its finished shards back and
fails the same way, and a fixed encoder has another fingerprint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mdcr.core.errors import InputDataError

WARN_SHARE = 0.01
SAME_SHARE = 0.5
DIRECTED_METRICS = ("cos", "ip")


def check_dim(spec: str, dim: Any) -> None:
    """A vector size below 1 is a one-line error naming the encoder."""
    if not isinstance(dim, int | np.integer) or int(dim) < 1:
        raise InputDataError(
            f"encoder '{spec}' has dim {dim!r}: vectors of no numbers cannot rank papers; "
            "make dim the size of the vectors it returns (>= 1)"
        )


@dataclass(frozen=True)
class VectorCounts:
    """One shard's counts: its vectors, the zero ones (under cos and ip), and its most
    common vector (as stored), the vectors equal to it and up to two distinct text
    hashes of their papers."""

    vectors: int = 0
    zero: int = 0
    zero_example: str | None = None
    mode: bytes = b""
    mode_count: int = 0
    mode_texts: tuple[int, ...] = ()
    mode_example: str | None = None


def count_shard(
    vectors: np.ndarray,
    offsets: np.ndarray | None,
    ids: Sequence[str],
    hashes: np.ndarray,
    metric: str,
) -> VectorCounts:
    """The counts of one shard (``offsets`` for a multi-vector encoder, else None)."""
    x = np.ascontiguousarray(vectors)
    n = len(x)
    if n == 0:
        return VectorCounts()
    owner = np.arange(n) if offsets is None else np.repeat(np.arange(len(ids)), np.diff(offsets))
    zero, zero_example = 0, None
    rows = np.arange(n)  # the rows that may share a vector (zero ones are counted apart)
    if metric in DIRECTED_METRICS:
        is_zero = ~(x != 0).any(axis=1)
        zero = int(is_zero.sum())
        if zero:
            zero_example = ids[int(owner[np.flatnonzero(is_zero)[0]])]
            rows = np.flatnonzero(~is_zero)
    if len(rows) == 0:
        return VectorCounts(vectors=n, zero=zero, zero_example=zero_example)
    # The most common vector: rows grouped by a hash of their bytes, then checked equal.
    row_hash = np.fromiter((hash(x[r].tobytes()) for r in rows), dtype=np.int64, count=len(rows))
    _, inverse, counts = np.unique(row_hash, return_inverse=True, return_counts=True)
    members = rows[np.flatnonzero(inverse.ravel() == int(np.argmax(counts)))]
    first = int(members[0])
    members = members[(x[members] == x[first]).all(axis=1)]
    texts = np.unique(np.asarray(hashes, dtype=np.uint64)[owner[members]])[:2]
    return VectorCounts(
        vectors=n,
        zero=zero,
        zero_example=zero_example,
        mode=x[first].tobytes(),
        mode_count=len(members),
        mode_texts=tuple(int(h) for h in texts),
        mode_example=ids[int(owner[first])],
    )


def count_stored(folder: Path, names: tuple[str, str, str], metric: str) -> VectorCounts:
    """The counts of a shard an earlier run (or try) finished, read back from its files
    (``names``: :func:`mdcr.encoders.store.shard_names`)."""
    import pyarrow.parquet as pq

    ids_name, emb_name, off_name = names
    table = pq.read_table(folder / ids_name)
    ids = table["paper_id"].to_pylist()
    if "text_hash" in table.column_names:
        hashes = table["text_hash"].to_numpy().astype(np.uint64)
    else:
        hashes = np.zeros(len(ids), np.uint64)
    offsets = np.load(folder / off_name) if (folder / off_name).is_file() else None
    return count_shard(np.load(folder / emb_name, mmap_mode="r"), offsets, ids, hashes, metric)


@dataclass
class VectorCheck:
    """The counts of all shards of one role, and the verdict on them."""

    vectors: int = 0
    zero: int = 0
    zero_example: str | None = None
    # most common vector -> [vectors, text hashes, an example paper]
    modes: dict[bytes, list[Any]] = field(default_factory=dict)

    def add(self, part: VectorCounts) -> None:
        self.vectors += part.vectors
        self.zero += part.zero
        self.zero_example = self.zero_example or part.zero_example
        if part.mode_count:
            entry = self.modes.setdefault(part.mode, [0, set(), part.mode_example])
            entry[0] += part.mode_count
            entry[1].update(part.mode_texts)

    def shared(self) -> tuple[int, str | None]:
        """Vectors with the most common vector that papers of different texts share,
        and an example paper (0, None when there is no such vector)."""
        best = max(
            (entry for entry in self.modes.values() if len(entry[1]) > 1),
            key=lambda e: e[0],
            default=None,
        )
        return (0, None) if best is None else (int(best[0]), best[2])

    def summary(self) -> dict[str, int]:
        return {"vectors": self.vectors, "zero": self.zero, "shared": self.shared()[0]}

    def verdict(self, spec: str, metric: str, role: str) -> str | None:
        """Raise the one-line error for degenerate vectors; return the warning, if any."""
        n = self.vectors
        shared, shared_example = self.shared()
        what = "vectors" if role == "document" else f"{role} vectors"
        problems, fatal = [], False
        if self.zero:
            fatal |= self.zero > WARN_SHARE * n
            problems.append(
                f"{self.zero:,} of {n:,} {what} are zero (metric {metric}: no direction; "
                f"e.g. paper '{self.zero_example}')"
            )
        if shared > WARN_SHARE * n:
            fatal |= shared > SAME_SHARE * n
            problems.append(
                f"{shared:,} of {n:,} {what} are one and the same vector for papers of "
                f"different texts (e.g. paper '{shared_example}')"
            )
        if not problems:
            return None
        line = f"encoder '{spec}': {'; '.join(problems)}"
        if fatal:
            raise InputDataError(
                f"{line}; rankings from such vectors follow paper ids (or are the same for "
                "every query), not the texts; fix the encoder (more than 1% zero vectors, or "
                "one vector for more than half of the papers, is an error)"
            )
        return f"{line}; kept, but those papers rank by paper id, not by text"
