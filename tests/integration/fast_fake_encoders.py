"""The stand-ins of tests/integration/fake_encoders.py, with each word's hash computed once.

The stand-ins hash every word of every paper (blake2b, salted by the encoder's name); a
pipeline test that encodes thousands of papers with five of them spends most of its
encoding time there. These subclasses keep each (salt, word)'s slot and sign in a cache
and add them up with numpy: the counts are small integers, exact in float32 in any
order, so the vectors are the originals' bit for bit (tests/integration/
test_paper_pipeline.py checks that on real stage inputs). Names, identities, dimension
and metric are the originals'.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from mdcr.encoders.base import PaperText
from tests.integration import fake_encoders as slow
from tests.integration.fake_encoders import _WORD, DIM


@lru_cache(maxsize=1_000_000)
def _slot(salt: str, word: str) -> tuple[int, float]:
    """The dimension a word adds to under ``salt``, and the sign it adds."""
    h = hashlib.blake2b(f"{salt}|{word}".encode(), digest_size=4).digest()
    return int.from_bytes(h[:3], "little") % DIM, 1.0 if h[3] & 1 else -1.0


def bow(text: str, salt: str) -> np.ndarray:
    """fake_encoders._bow's vector of ``text``: the same float32 values."""
    pairs = [_slot(salt, w) for w in _WORD.findall(text.lower())]
    if pairs:
        slots, signs = zip(*pairs, strict=True)
        v = np.bincount(slots, weights=signs, minlength=DIM).astype(np.float32)
    else:
        v = np.zeros(DIM, dtype=np.float32)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


class _Single(slow._Single):
    def encode(self, texts: Sequence[PaperText]) -> np.ndarray:
        return np.stack([bow(f"{t.title} {t.abstract}", self.name) for t in texts])


class _Multi(slow._Multi):
    def encode(self, texts: Sequence[PaperText]) -> tuple[np.ndarray, np.ndarray]:
        vecs, offsets = [], [0]
        for t in texts:
            sents = [s for s in re.split(r"(?<=\.)\s+", t.abstract) if s.strip()] or [t.title]
            vecs += [bow(f"{t.title} {s}", self.name) for s in sents]
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
