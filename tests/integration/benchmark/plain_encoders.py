"""Two ``py:`` encoders for the input checks of ``mdcr evaluate``: one built without an
``options`` parameter (so it takes no encode options), one that says ``asymmetric = "yes"``
(a string where a bool is meant)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from mdcr.encoders.base import Metric


def _vector(paper_id: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(paper_id.encode()).digest()[:4], "little")
    return np.random.default_rng(seed).standard_normal(8).astype(np.float32)


class NoOptions:
    """Takes no options: its constructor has no ``options`` parameter."""

    name = "no-options"
    dim = 8
    metric: Metric = "cos"

    def encode(self, texts: Sequence[Any], role: str = "document") -> np.ndarray:
        return np.stack([_vector(str(t.paper_id)) for t in texts])


class SaysYes(NoOptions):
    """Means to be asymmetric, but says so with a string."""

    name = "says-yes"
    asymmetric = "yes"
