"""An encoder identified by what it computes: its vectors for a fixed set of probe papers.

A ``py:`` encoder or a model object handed to ``mdcr.evaluate`` may compute from more than
its source says: weights loaded from a file, an environment variable, a helper imported by
a computed name. After it is built, its fingerprint therefore also hashes its vectors for
the probe papers (:data:`PROBE_FILE`: 32 real S2ORC titles and abstracts, one or two per
field), in every role it has (documents, and queries for an asymmetric encoder), as the
store keeps them (float16): any change of behaviour that moves one of those vectors
changes the fingerprint, whatever caused it. A change that moves no probe vector (a
branch only long texts take, a constant only some other input reaches) cannot be seen
this way; an encoder declares ``version`` (or, for one whose state cannot be hashed,
``cache_key``) for those.

The probe runs once per plan, one paper per call of ``encode``, so that the batch size (a
setting) cannot move a vector through its padding.
"""

from __future__ import annotations

import functools
import hashlib
import json
from importlib import resources
from typing import Any

import numpy as np

from mdcr.core.errors import InputDataError, MdcrError
from mdcr.encoders.base import PaperText, encoder_failed, is_asymmetric, is_multi_vector

PROBE_FILE = "probe_papers.json"
# Said with an error met on a probe paper, which the user never gave.
WHY = "mdcr encodes 32 fixed papers to identify an encoder by what it computes"


@functools.cache
def probe_papers() -> tuple[PaperText, ...]:
    """The probe papers, in their fixed order (``mdcr/data/probe_papers.json``)."""
    text = resources.files("mdcr").joinpath("data", PROBE_FILE).read_text(encoding="utf-8")
    rows = json.loads(text)["papers"]
    return tuple(PaperText(r["paper_id"], r["title"], r["abstract"]) for r in rows)


def probe_roles(encoder: Any) -> list[str | None]:
    """The roles an encoder is probed in: ``None`` (its one role), or both of an
    asymmetric encoder's."""
    return ["document", "query"] if is_asymmetric(encoder) else [None]


def probe_digest(spec: str, encoder: Any) -> str:
    """sha256 of the encoder's vectors for the probe papers (a paper per call; a
    multi-vector encoder's vectors of one paper by their count too) in each of its roles,
    as float16 (the store's default form); an encoder that raises or returns vectors the
    store would refuse is a one-line error naming it."""
    from mdcr.encoders.store import checked_vectors

    papers = list(probe_papers())
    multi = is_multi_vector(encoder)
    h = hashlib.sha256()
    for role in probe_roles(encoder):
        for paper in papers:
            try:
                one = [paper]
                result = encoder.encode(one) if role is None else encoder.encode(one, role=role)
            except MdcrError:
                raise
            except Exception as exc:  # the encoder's own code may raise anything
                what = f"probe paper {paper.paper_id} ({WHY})"
                raise encoder_failed(spec, exc, what) from exc
            try:
                vectors, _ = checked_vectors(spec, result, one, encoder.dim, multi, "float32")
            except InputDataError as exc:
                raise InputDataError(f"{exc} [on probe paper {paper.paper_id}: {WHY}]") from None
            with np.errstate(over="ignore"):
                stored = np.ascontiguousarray(vectors.astype(np.float16))
            h.update(f"{role}\0{stored.shape}\0".encode())
            h.update(stored.view(np.uint8).tobytes())
    return "sha256:" + h.hexdigest()[:32]
