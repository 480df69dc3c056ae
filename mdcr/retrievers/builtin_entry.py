"""Which built-in retriever a run is: its identity, never its name.

The built-in retrievers are the records of :mod:`mdcr.retrievers.builtin` (and BM25); this
module reads stage manifests only, so scoring and reporting use it without importing the
encoders.

A retriever stands for one of the paper's models (Tables 1-4, 7, 8), for a published MDCR
row, or for an MDCR negative type (``bm25``, ``specter``, ``scincl``, or any other
built-in name) only when its identity says it is that built-in entry. The name a run
records (``encoder.name``, ``--name``, ``score.names``) never decides: a ``py:`` encoder,
an ``hf:`` model, a model object or a scores file may call itself ``specter``.

The identity of a stage output, recorded in its manifest as ``info.retriever_identity``
(and derived from its inputs' manifests for outputs made before mdcr recorded it):

- an ``encode`` output of a built-in spec (``specter``, ``minilm``, ...):
  ``{"builtin": <registry key>, "model": <its resolved identity: the hub commit, a
  folder's digest>, "options": <model options set away from their defaults>}``;
- a ``bm25`` output, and a ``benchmark-rank`` output of method ``bm25``:
  ``{"builtin": "bm25"}``;
- a ``search`` output, and a ``benchmark-rank`` output of method ``embeddings``: the
  identity of the embeddings it searched with;
- anything else (``py:``, ``hf:`` and ``mem:`` encoders, scores files, unknown folders):
  None.

A retriever gets the paper's or a published number only as a built-in entry at its
default setup: no model option changed (``revision`` aside: the commit is in ``model``,
and a published row that names a commit must match it).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mdcr.contracts.facts import RETRIEVER_IDENTITY
from mdcr.retrievers.builtin import BM25, builtin_names, paper_names

BM25_IDENTITY: dict[str, Any] = {"builtin": BM25.name}
# Encode parameters that do not change which model computes the vectors, or how.
_NOT_MODEL_OPTIONS = ("encoder", "shard_size", "storage", "precision", "revision")


def encode_identity(
    params: Mapping[str, Any], identity: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The identity of an encode output from its manifest's ``params`` and ``identity``."""
    from mdcr.retrievers.options import recorded_option_defaults

    spec = str(params.get("encoder", ""))
    if spec not in builtin_names():
        return None
    defaults = recorded_option_defaults()
    options = {
        k: v
        for k, v in sorted(params.items())
        if k not in _NOT_MODEL_OPTIONS and k in defaults and v != defaults[k]
    }
    return {"builtin": spec, "model": dict(identity.get("encoder") or {}), "options": options}


def identity_of(folder: Path) -> dict[str, Any] | None:
    """The registry identity of an encode, search, bm25 or benchmark-rank output (None
    for anything that is not a built-in entry, and for folders no stage made)."""
    from mdcr.core.manifests import open_output

    out = open_output(folder)
    if out is None:
        return None
    info = out.manifest.get("info", {})
    if RETRIEVER_IDENTITY in info:
        recorded = info[RETRIEVER_IDENTITY]
        return dict(recorded) if isinstance(recorded, Mapping) else None
    if out.stage == "encode":
        return encode_identity(out.manifest.get("params", {}), out.manifest.get("identity", {}))
    if out.stage == "bm25":
        return dict(BM25_IDENTITY)
    method = info.get("method")
    if out.stage == "benchmark-rank" and method == "bm25":
        return dict(BM25_IDENTITY)
    if out.stage == "search" or (out.stage == "benchmark-rank" and method == "embeddings"):
        return _input_identity(folder, "embeddings")
    return None


def _input_identity(folder: Path, name: str) -> dict[str, Any] | None:
    """The identity of the one ``name`` input an output was made from, if still there."""
    from mdcr.contracts.outputs import input_paths
    from mdcr.core.errors import MdcrError

    try:
        found = input_paths(folder, name)
    except MdcrError:  # the input changed since: it no longer tells what ran
        return None
    return identity_of(found[0]) if len(found) == 1 and found[0].exists() else None


def run_identity(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The identity of a run a ``score`` output records (``retriever_runs`` entry): as
    recorded, else that of the run folder if it still has the recorded fingerprint."""
    if "identity" in entry:
        recorded = entry["identity"]
        return dict(recorded) if isinstance(recorded, Mapping) else None
    from mdcr.core.fingerprints import artifact_fingerprint

    path = Path(str(entry.get("path", "")))
    if not path.is_dir() or artifact_fingerprint(path) != entry.get("fingerprint"):
        return None
    return identity_of(path)


def builtin_key(identity: Mapping[str, Any] | None) -> str | None:
    """The built-in registry key an identity is (None for anything else)."""
    key = identity.get("builtin") if identity else None
    return str(key) if key in builtin_names() else None


def default_setup(identity: Mapping[str, Any] | None) -> str | None:
    """The built-in key when the identity is that entry with no model option changed."""
    key = builtin_key(identity)
    return key if key is not None and identity and not identity.get("options") else None


def paper_model(identity: Mapping[str, Any] | None) -> str | None:
    """The paper's name of the model a retriever is (None unless it is one of the paper's
    models, built in and at its default setup)."""
    key = default_setup(identity)
    return paper_names().get(key) if key else None


def model_commit(identity: Mapping[str, Any] | None) -> str | None:
    """The hub commit a built-in model's weights were loaded at (None if not a hub model)."""
    model = identity.get("model") if identity else None
    commit = model.get("commit") if isinstance(model, Mapping) else None
    return str(commit) if commit else None


def require_builtin(folder: Path, name: str, where: str) -> None:
    """Refuse a run named after a built-in entry that is not that entry (one line)."""
    from mdcr.core.errors import ConfigError

    if name in builtin_names() and builtin_key(identity_of(folder)) != name:
        how = "the bm25 stage" if name == BM25.name else f"--encoder {name}"
        raise ConfigError(
            f"{where}: the run named '{name}' ('{folder}') is not the built-in registry "
            f"entry '{name}' (an encoder of your own, an hf: model or a model object may "
            f"not stand for it); give a run of {how}, or name your encoder otherwise and "
            "use that name"
        )


def describe(identity: Mapping[str, Any] | None) -> str:
    """One short phrase for reports: which registry entry a retriever is."""
    key = builtin_key(identity)
    if key is None:
        return "not a built-in entry"
    options = (identity or {}).get("options") or {}
    commit = model_commit(identity)
    parts = [f"built-in `{key}`"]
    if commit:
        parts.append(f"commit {commit[:12]}")
    if options:
        parts.append("options " + ", ".join(f"{k}={v}" for k, v in options.items()))
    return ", ".join(parts)
