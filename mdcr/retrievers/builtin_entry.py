"""Which built-in entry a run is: what ran, never its name.

The built-in entries are the records of :mod:`mdcr.retrievers.builtin` (and BM25); this
module reads stage manifests only, so scoring and reporting use it without importing the
encoders.

A retriever stands for one of the paper's models (Tables 1-4, 7, 8), for a published MDCR
row, or for an MDCR negative type (``bm25``, ``specter``, ``scincl``, or any other
built-in name) only when its built-in entry is that one. The name a run records
(``encoder.name``, ``--name``, ``score.names``) never decides: a ``py:`` encoder, an
``hf:`` model, a model object or a scores file may call itself ``specter``.

Every output that encodes or ranks records its built-in entry in its manifest
(``info.builtin_entry``, :data:`mdcr.contracts.facts.BUILTIN_ENTRY`):

- ``encode`` of a built-in spec (``specter``, ``minilm``, ...): ``{"builtin": <registry
  key>, "model": <the encoder's identity: the hub commit, a folder's digest>, "options":
  <model options given>}`` (:func:`encode_entry`);
- ``bm25``, and ``benchmark-rank`` of method ``bm25``: ``{"builtin": "bm25"}``;
- ``search``, and ``benchmark-rank`` of method ``embeddings``: the entry of the embeddings
  it searched with;
- anything else (``py:``, ``hf:`` and ``mem:`` encoders, scores files, fused runs): None.

A retriever gets the paper's or a published number only as a built-in entry at its
default setup: no model option given (``revision`` aside: the commit is in ``model``, and
a published row that names a commit must match it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mdcr.contracts.facts import BUILTIN_ENTRY
from mdcr.retrievers.builtin import BM25, builtin_names, paper_names

BM25_ENTRY: dict[str, Any] = {"builtin": BM25.name}
# Encode parameters that do not change which model computes the vectors, or how.
_NOT_MODEL_OPTIONS = ("encoder", "shard_size", "storage", "precision", "revision")


def encode_entry(params: Mapping[str, Any], identity: Mapping[str, Any]) -> dict[str, Any] | None:
    """The built-in entry of an encode run, from its hashed ``params`` and its stage
    ``identity`` (whose ``encoder`` part is the model's identity)."""
    from mdcr.retrievers.options import MODEL_OPTIONS

    spec = str(params.get("encoder", ""))
    if spec not in builtin_names():
        return None
    options = {
        k: v
        for k, v in sorted(params.items())
        if k in MODEL_OPTIONS and k not in _NOT_MODEL_OPTIONS and v is not None
    }
    return {"builtin": spec, "model": dict(identity.get("encoder") or {}), "options": options}


def entry_of(folder: Path) -> dict[str, Any] | None:
    """The built-in entry an output recorded (None: not a built-in entry, or a folder no
    stage made)."""
    from mdcr.core.manifests import open_output

    out = open_output(folder)
    recorded = out.info(BUILTIN_ENTRY) if out is not None else None
    return dict(recorded) if isinstance(recorded, Mapping) else None


def builtin_key(entry: Mapping[str, Any] | None) -> str | None:
    """The built-in registry key of an entry (None for anything else)."""
    key = entry.get("builtin") if entry else None
    return str(key) if key in builtin_names() else None


def default_setup(entry: Mapping[str, Any] | None) -> str | None:
    """The built-in key when the entry has no model option given."""
    key = builtin_key(entry)
    return key if key is not None and entry and not entry.get("options") else None


def paper_model(entry: Mapping[str, Any] | None) -> str | None:
    """The paper's name of the model a retriever is (None unless it is one of the paper's
    models, built in and at its default setup)."""
    key = default_setup(entry)
    return paper_names().get(key) if key else None


def model_commit(entry: Mapping[str, Any] | None) -> str | None:
    """The hub commit a built-in model's weights were loaded at (None if not a hub model)."""
    model = entry.get("model") if entry else None
    commit = model.get("commit") if isinstance(model, Mapping) else None
    return str(commit) if commit else None


def require_builtin(folder: Path, name: str, where: str) -> None:
    """Refuse a run named after a built-in entry that is not that entry (one line)."""
    from mdcr.core.errors import ConfigError

    if name in builtin_names() and builtin_key(entry_of(folder)) != name:
        how = "the bm25 stage" if name == BM25.name else f"--encoder {name}"
        raise ConfigError(
            f"{where}: the run named '{name}' ('{folder}') is not the built-in entry "
            f"'{name}' (an encoder of your own, an hf: model or a model object may not "
            f"stand for it); give a run of {how}, or name your encoder otherwise and use "
            "that name"
        )


def describe(entry: Mapping[str, Any] | None) -> str:
    """One short phrase for reports: which built-in entry a retriever is."""
    key = builtin_key(entry)
    if key is None:
        return "not a built-in entry"
    options = (entry or {}).get("options") or {}
    commit = model_commit(entry)
    parts = [f"built-in `{key}`"]
    if commit:
        parts.append(f"commit {commit[:12]}")
    if options:
        parts.append("options " + ", ".join(f"{k}={v}" for k, v in options.items()))
    return ", ".join(parts)
