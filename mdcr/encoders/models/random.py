"""The random baseline: a chance floor that runs through the same store and search path.

Each paper's vector depends only on ``(seed, paper_id)`` (a BLAKE2b hash seeds a PCG64
generator), never on which other papers are encoded or in what order, so the same paper
gets the same vector in every pool, shard and run. Vectors are Gaussian and normalised
(metric ``"cos"``): every direction is equally likely, so each query's ranking is a
uniformly random order that ignores the text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from mdcr.core.errors import ConfigError
from mdcr.encoders.base import Metric, PaperText

DEFAULT_DIM = 768


def paper_vector(paper_id: str, *, seed: int, dim: int) -> np.ndarray:
    """The random (unnormalised, float64) vector of one paper."""
    digest = hashlib.blake2b(f"mdcr-random\0{seed}\0{paper_id}".encode(), digest_size=16)
    rng = np.random.Generator(np.random.PCG64(int.from_bytes(digest.digest(), "little")))
    return rng.standard_normal(dim)


class RandomEncoder:
    """One seeded random unit vector per paper, derived from ``(seed, paper_id)``."""

    multi_vector = False

    def __init__(self, *, dim: int = DEFAULT_DIM, seed: int = 0, name: str = "random") -> None:
        if dim < 1:
            raise ConfigError(f"random encoder: dim {dim} is not valid; use a positive integer")
        self.name = name
        self.dim = dim
        self.seed = seed
        self.metric: Metric = "cos"
        self.identity = {"model_id": "random", "seed": seed, "revision": "1"}

    def encode(self, texts: Sequence[PaperText]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            v = paper_vector(t.paper_id, seed=self.seed, dim=self.dim)
            out[i] = v / np.linalg.norm(v)
        return out
