"""What an article encoder is: the input it reads and the two shapes of output it gives.

A single-vector encoder (SciBERT, SPECTER, SciNCL, MiniLM, the random baseline) maps each
paper to one vector. A multi-vector encoder (Aspire) maps each paper to one vector per
abstract sentence and returns them flat with offsets. Both carry the similarity they were
trained for, because the search must use it:

- ``"ip"``: inner product of the vectors as returned; ``"cos"``: cosine, whatever length
  the encoder returns: the encode stage stores each vector divided by its norm
  (:func:`mdcr.encoders.store.cosine_form`), so search, benchmark rank, fusion and the
  exports all rank by the inner product of the stored vectors, one rule on every path;
  ``"l2"``: Euclidean distance (scored as minus the squared distance, which orders
  candidates the same way as minus the distance).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from mdcr.core.errors import ConfigError, EncoderError, first_line

# The options an encoder is built with are declared once, beside the encode stage's fields.
from mdcr.retrievers.options import METRICS as METRICS
from mdcr.retrievers.options import RUNTIME_OPTIONS as RUNTIME_OPTIONS
from mdcr.retrievers.options import EncoderOptions as EncoderOptions
from mdcr.retrievers.options import Metric


@dataclass(frozen=True)
class PaperText:
    """The text an encoder sees for one paper: its id, title and abstract."""

    paper_id: str
    title: str
    abstract: str


@runtime_checkable
class Encoder(Protocol):
    """Maps papers to one vector each: ``encode(texts) -> (n, dim) float32``."""

    name: str
    dim: int
    metric: Metric

    def encode(self, texts: Sequence[PaperText]) -> np.ndarray: ...


@runtime_checkable
class MultiVectorEncoder(Protocol):
    """Maps papers to several vectors each.

    ``encode(texts) -> (vectors (m, dim) float32, offsets (n + 1,) int64)``: the vectors of
    paper ``i`` are ``vectors[offsets[i]:offsets[i + 1]]``; every paper has at least one.
    """

    name: str
    dim: int
    metric: Metric
    multi_vector: Literal[True]

    def encode(self, texts: Sequence[PaperText]) -> tuple[np.ndarray, np.ndarray]: ...


def is_asymmetric(encoder: object) -> bool:
    """True for an encoder that encodes a paper differently as a query and as a document
    (it sets ``asymmetric = True`` and its ``encode`` takes ``role``)."""
    return _flag(encoder, "asymmetric")


def is_multi_vector(encoder: object) -> bool:
    """True for a multi-vector encoder (it sets ``multi_vector = True``)."""
    return _flag(encoder, "multi_vector")


def _flag(encoder: object, attr: str) -> bool:
    """A boolean attribute of an encoder (False when it has none); any other value (``"yes"``,
    1, None) is a one-line error, never read as False."""
    value = getattr(encoder, attr, False)
    if isinstance(value, bool | np.bool_):
        return bool(value)
    name = getattr(encoder, "name", type(encoder).__name__)
    raise ConfigError(
        f"encoder '{name}' sets {attr} = {value!r}, not a bool; set it to True or False "
        f"(or leave it out for False)"
    )


def encoder_identity(encoder: object) -> dict[str, Any]:
    """What determines an encoder's vectors: two stores with equal identities are reusable.

    Encoders may define ``identity`` (a dict: model id, revision, pooling, max length, input
    format ...); name, dim, metric and multi-vector are always included. Batch size, device
    and compute precision are left out on purpose: they change the float16 vectors at most
    in the last bits.
    """
    ident: dict[str, Any] = dict(getattr(encoder, "identity", None) or {})
    ident.update(
        name=getattr(encoder, "name", type(encoder).__name__),
        dim=int(getattr(encoder, "dim", 0)),
        metric=str(getattr(encoder, "metric", "")),
        multi_vector=is_multi_vector(encoder),
    )
    return ident


def encoder_failed(spec: str, exc: Exception, what: str) -> EncoderError:
    """The one line for an exception raised inside an encoder's ``encode``."""
    hint = (
        "lower the encode setting batch_tokens, or run it on the CPU (device cpu)"
        if "out of memory" in str(exc).lower()
        else "fix its encode"
    )
    return EncoderError(
        f"encoder '{spec}' raised {first_line(exc)} while encoding {what}; {hint} (--debug "
        "shows the traceback)"
    )
