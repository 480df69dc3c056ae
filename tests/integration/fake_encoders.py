"""Stand-ins for the paper's encoders in tests (the model hub is not reachable in CI).

Each is a hashed bag of words over the title and abstract, salted by its name, so that
the five encoders rank differently but all find topical neighbours. They are named after
the paper's models with a ``-standin`` suffix: being user encoders, they may not carry a
built-in's name into the paper comparison or the benchmark's negative types (a run is the
built-in ``specter`` by its built-in entry only). The two Aspire stand-ins are
multi-vector (one vector per abstract sentence), as Aspire is.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from mdcr.encoders.base import Metric, PaperText

DIM = 128
_WORD = re.compile(r"[a-z]{3,}")


def bow_by_word(text: str, salt: str) -> np.ndarray:
    """The stand-ins' vector of ``text``: each word (3+ letters) adds +-1 in a slot, both
    from its hash salted by the encoder's name; unit length."""
    v = np.zeros(DIM, dtype=np.float32)
    for w in _WORD.findall(text.lower()):
        h = hashlib.blake2b(f"{salt}|{w}".encode(), digest_size=4).digest()
        v[int.from_bytes(h[:3], "little") % DIM] += 1.0 if h[3] & 1 else -1.0
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


@lru_cache(maxsize=1_000_000)
def _slot(salt: str, word: str) -> tuple[int, float]:
    """The slot a word adds to under ``salt``, and the sign it adds."""
    h = hashlib.blake2b(f"{salt}|{word}".encode(), digest_size=4).digest()
    return int.from_bytes(h[:3], "little") % DIM, 1.0 if h[3] & 1 else -1.0


def _bow(text: str, salt: str) -> np.ndarray:
    """:func:`bow_by_word`'s vector, each word hashed once a process and the slots summed
    by numpy: the counts are small integers, exact in float32 in any order, so the vectors
    are the same bit for bit (tests/integration/test_paper_pipeline.py checks it on a
    pipeline's own papers). A pipeline test that encodes thousands of papers with five
    stand-ins spent most of its encoding time hashing."""
    pairs = [_slot(salt, w) for w in _WORD.findall(text.lower())]
    if not pairs:
        return np.zeros(DIM, dtype=np.float32)
    slots, signs = zip(*pairs, strict=True)
    v = np.bincount(slots, weights=signs, minlength=DIM).astype(np.float32)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


class _Single:
    name = "fake"
    multi_vector = False
    metric: Metric = "cos"
    dim = DIM

    def __init__(self, options: Any = None) -> None:
        self.identity = {"model_id": f"fake-{self.name}", "revision": "1"}

    def encode(self, texts: Sequence[PaperText]) -> np.ndarray:
        return np.stack([_bow(f"{t.title} {t.abstract}", self.name) for t in texts])


class _Multi:
    name = "fake-multi"
    multi_vector = True
    metric: Metric = "l2"
    dim = DIM

    def __init__(self, options: Any = None) -> None:
        self.identity = {"model_id": f"fake-{self.name}", "revision": "1"}

    def encode(self, texts: Sequence[PaperText]) -> tuple[np.ndarray, np.ndarray]:
        vecs, offsets = [], [0]
        for t in texts:
            sents = [s for s in re.split(r"(?<=\.)\s+", t.abstract) if s.strip()] or [t.title]
            vecs += [_bow(f"{t.title} {s}", self.name) for s in sents]
            offsets.append(len(vecs))
        return np.stack(vecs), np.asarray(offsets, dtype=np.int64)


class SciBERT(_Single):
    name = "scibert-standin"


class Specter(_Single):
    name = "specter-standin"


class SciNCL(_Single):
    name = "scincl-standin"


class AspireBM(_Multi):
    name = "aspire-bm-standin"


class AspireCS(_Multi):
    name = "aspire-cs-standin"
