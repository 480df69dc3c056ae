"""One hash recipe (mdcr.core.fingerprints.digest): canonical JSON -> sha256 -> hex, checked
against an independent computation; the stage fingerprint and the in-memory model digest
are that recipe."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pytest

from mdcr.core.fingerprints import FINGERPRINT_LEN, canonical_json, digest, fingerprint


def _independent(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_the_recipe_is_canonical_json_sha256_hex() -> None:
    value = {"b": [1, 2.5, None], "a": {"z": "Šnajder", "y": True}}
    assert digest(value) == _independent(value) and len(digest(value)) == 64
    assert canonical_json(value) == '{"a":{"y":true,"z":"Šnajder"},"b":[1,2.5,null]}'
    assert digest({"a": {"y": True, "z": "Šnajder"}, "b": [1, 2.5, None]}) == digest(value)
    assert digest({"a": 1}) != digest({"a": 1.5})
    with pytest.raises(TypeError):  # never hashed by its repr
        digest({"a": object()})


def test_a_stage_fingerprint_is_the_recipe() -> None:
    body = {"stage": "toy@1", "params": {"n": 3}, "inputs": {"corpus": ["raw:abc"]}}
    assert (
        fingerprint("toy", "1", {"n": 3}, {"corpus": ["raw:abc"]})
        == (_independent(body)[:FINGERPRINT_LEN])
    )
    with_identity = {**body, "identity": {"commit": "c" * 40}}
    assert (
        fingerprint("toy", "1", {"n": 3}, {"corpus": ["raw:abc"]}, {"commit": "c" * 40})
        == (_independent(with_identity)[:FINGERPRINT_LEN])
    )


class _Lengths:
    """A model object for mdcr.evaluate: its vector is each text's length and word count."""

    scale = 1.0

    def encode(self, sentences: list[str], **kwargs: Any) -> np.ndarray:
        return np.array([[len(s) * self.scale, len(s.split()) + 1.0] for s in sentences])


def test_the_in_memory_digest_is_the_recipe_over_the_identity() -> None:
    from mdcr.encoders.models.in_memory import register_model, registered

    spec = register_model(_Lengths(), name="lengths")
    label, _, short = spec.removeprefix("mem:").partition("@")
    _, identity = registered(f"{label}@{short}")
    assert label == "lengths" and short == _independent(identity)[:FINGERPRINT_LEN]
    assert "state" in identity and "probe" in identity  # byte digests, values in the recipe
    other = _Lengths()
    other.scale = 2.0
    assert register_model(other, name="lengths") != spec
