"""An encoder identified by what it computes: its vectors for probe papers.

A ``py:`` encoder or a model object handed to ``mdcr.evaluate`` may compute from more than
its source says: weights loaded from a file, an environment variable, a helper imported by
a computed name. After it is built, its fingerprint therefore also hashes its vectors for
probe papers, in every role it has (documents, and queries for an asymmetric encoder), in
the form the store keeps them (float16; unit length for ``metric="cos"``), so any change
of behaviour that moves one of those vectors changes the fingerprint, whatever caused it:

- **the fixed probe** (:data:`PROBE_FILE`: 32 real S2ORC titles and abstracts, one or two
  per field, 201–1,545 characters): part of the encoder's identity, the same on every
  dataset (it names and compares retrievers and keys the reuse of vectors across outputs);
- **the input probe** (:func:`input_probe_papers`): the :data:`LONGEST` longest papers the
  encode step will be given and a seeded sample of :data:`SAMPLED` more, hashed into that
  encode output's fingerprint only, so a change reached only by texts longer than any
  fixed probe paper, or by another field's, re-encodes.

Every probe paper is encoded one per call (so the batch size, a setting, cannot move a
vector through its padding), and the first :data:`AGAIN` fixed ones a second time, after
all the others. An encoder whose two vectors for the same paper differ is **not
deterministic** (unseeded random vectors, dropout left on): its identity
then records that (:data:`NONDETERMINISTIC`) in place of the vectors, so the same code and
state keep one fingerprint, and the encode stage says so in one line, records it in the
manifest (``info.reproducible``) and marks every output made from it as not reproducible.

What stays unseen: a change that moves no probe vector (a constant only some other input
reaches, a batch-dependent branch); an encoder declares ``version`` (or, for one whose
state cannot be hashed, ``cache_key``) for those.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from mdcr.core.errors import InputDataError, MdcrError
from mdcr.encoders.base import PaperText, encoder_failed, is_asymmetric, is_multi_vector

PROBE_FILE = "probe_papers.json"
# Said with an error met on a probe paper: the fixed ones the user never gave, or papers of
# the user's inputs encoded before the run.
WHY = "mdcr encodes fixed probe papers to identify an encoder by what it computes"
WHY_INPUTS = (
    "one of the papers of its inputs that mdcr encodes first to identify an encoder by what "
    "it computes"
)
# What an identity holds in place of the probe vectors of an encoder that is not
# deterministic.
NONDETERMINISTIC = "nondeterministic"
# The input probe: the longest papers of the encode's inputs and a seeded sample of more.
LONGEST = 8
SAMPLED = 8
# Fixed probe papers encoded a second time (one call each, after all the first ones): an
# encoder that is not deterministic differs on any of them.
AGAIN = 4


@functools.cache
def probe_papers() -> tuple[PaperText, ...]:
    """The fixed probe papers, in their fixed order (``mdcr/data/probe_papers.json``)."""
    text = resources.files("mdcr").joinpath("data", PROBE_FILE).read_text(encoding="utf-8")
    rows = json.loads(text)["papers"]
    return tuple(PaperText(r["paper_id"], r["title"], r["abstract"]) for r in rows)


def probe_roles(encoder: Any) -> list[str | None]:
    """The roles an encoder is probed in: ``None`` (its one role), or both of an
    asymmetric encoder's."""
    return ["document", "query"] if is_asymmetric(encoder) else [None]


@dataclass(frozen=True)
class Probe:
    """An encoder's vectors for probe papers: the sha256 of their first encoding, and how
    far the second encoding of some of them strayed from it (0.0: the same bits)."""

    digest: str
    largest_difference: float

    @property
    def deterministic(self) -> bool:
        return self.largest_difference == 0.0

    @property
    def identity(self) -> str:
        """What an identity hashes: the digest, or :data:`NONDETERMINISTIC`."""
        return self.digest if self.deterministic else NONDETERMINISTIC


def _encode_one(
    spec: str, encoder: Any, paper: PaperText, role: str | None, why: str
) -> np.ndarray:
    """One paper's vectors in the store's form (float16; unit length for cosine); ``why``
    it is encoded, said with an error."""
    from mdcr.encoders.store import checked_vectors

    one = [paper]
    try:
        result = encoder.encode(one) if role is None else encoder.encode(one, role=role)
    except MdcrError:
        raise
    except Exception as exc:  # the encoder's own code may raise anything
        raise encoder_failed(spec, exc, f"probe paper {paper.paper_id} ({why})") from exc
    try:
        vectors, _ = checked_vectors(
            spec, result, one, encoder.dim, is_multi_vector(encoder), "float32", encoder.metric
        )
    except InputDataError as exc:
        raise InputDataError(f"{exc} [on probe paper {paper.paper_id}: {why}]") from None
    with np.errstate(over="ignore"):
        return np.ascontiguousarray(vectors.astype(np.float16))


def probe(
    spec: str, encoder: Any, papers: Sequence[PaperText] | None = None, *, again: int = AGAIN
) -> Probe:
    """The encoder's vectors for ``papers`` (default: the fixed probe papers) in each of
    its roles, one paper per call (a multi-vector encoder's vectors of one paper by their
    count too), the first ``again`` papers encoded a second time to tell whether it is
    deterministic; an encoder that raises or returns vectors the store would refuse is a
    one-line error naming it."""
    chosen = list(probe_papers() if papers is None else papers)
    why = WHY if papers is None else WHY_INPUTS
    h = hashlib.sha256()
    largest = 0.0
    for role in probe_roles(encoder):
        first = [_encode_one(spec, encoder, paper, role, why) for paper in chosen]
        for paper, stored in zip(chosen[:again], first, strict=False):
            second = _encode_one(spec, encoder, paper, role, why)
            if second.shape != stored.shape:
                largest = float("inf")
            elif second.tobytes() != stored.tobytes():
                diff = np.abs(second.astype(np.float32) - stored.astype(np.float32))
                largest = max(largest, float(np.nan_to_num(diff, nan=np.inf).max()))
        for stored in first:
            h.update(f"{role}\0{stored.shape}\0".encode())
            h.update(stored.view(np.uint8).tobytes())
    return Probe("sha256:" + h.hexdigest()[:32], largest)


def nondeterministic_line(spec: str) -> str:
    """What mdcr says of an encoder whose vectors for the same paper differ between calls."""
    return (
        f"encoder '{spec}' is not deterministic: the same probe paper encoded twice gave "
        "different vectors, so its vectors and every number made from them are one draw and "
        "not reproducible; seed it (and turn dropout off: model.eval()) to make them so"
    )


def input_probe_papers(corpus: Path, targets: list[Path], which: str) -> list[PaperText]:
    """The input probe of an encode: of the papers it will be given (``which``: ``"all"``,
    ``"queries"`` or ``"documents"``, as :func:`mdcr.encoders.texts.write_texts` selects
    them), the :data:`LONGEST` longest (title plus abstract, in characters; ties by
    paper_id) and :data:`SAMPLED` more drawn by a seeded hash of their ids, in that order.
    Empty when the inputs name no papers."""
    import duckdb

    from mdcr.encoders.texts import collect_targets, sql_path

    corpus_sql = f"read_parquet({sql_path(corpus)})"
    con = duckdb.connect()
    try:
        collect_targets(con, corpus, corpus_sql, targets, which)
        texts = (
            "SELECT t.paper_id, coalesce(c.title, '') AS title, "
            "coalesce(c.abstract, '') AS abstract "
            f"FROM targets t JOIN {corpus_sql} c ON c.paper_id = t.paper_id"
        )
        longest = con.execute(
            f"SELECT * FROM ({texts}) ORDER BY length(title) + length(abstract) DESC, "
            f"paper_id LIMIT {LONGEST}"
        ).fetchall()
        taken = ", ".join("'" + str(r[0]).replace("'", "''") + "'" for r in longest) or "NULL"
        sampled = con.execute(
            f"SELECT * FROM ({texts}) WHERE paper_id NOT IN ({taken}) "
            f"ORDER BY md5('mdcr-probe' || paper_id), paper_id LIMIT {SAMPLED}"
        ).fetchall()
    finally:
        con.close()
    return [PaperText(str(i), str(t), str(a)) for i, t, a in [*longest, *sampled]]
