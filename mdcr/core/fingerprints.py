"""Fingerprints: what the store hashes for a stage run and for an input.

The rule, in one place (docs/architecture.md, "The store's promise"): a stage run's
fingerprint hashes the stage's name and version, its parameters (defaults included), the
fingerprints of its inputs and the identity of the code and weights it runs; an input's
fingerprint is its manifest's when a stage made it, else its content's. Never mtimes,
never anything random.

One recipe hashes a value (:func:`digest`): its canonical JSON (:func:`canonical_json`:
keys sorted, no spaces, UTF-8 as is) -> sha256 -> hex; a key is its first
:data:`FINGERPRINT_LEN` characters. Stage fingerprints, the Lucene index keys
(:func:`mdcr.index.lucene.indexes.index_fingerprint`) and the in-memory model digests
(``mem:<name>@<digest>``, :mod:`mdcr.encoders.models.in_memory`) are this recipe. What
cannot be a JSON value is hashed as bytes, and its hex digest is then a value fed into the
recipe: a file's content (:func:`sha256_file`; raw inputs, :func:`path_fingerprint`), a
pool's sorted paper ids (``ids_digest``), a model's weights and the walk of its whole
state (``mdcr.encoders.state_digest``: a running sha256 over each value's type tag and
bytes).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from mdcr.core.errors import InputDataError, ManifestMismatchError
from mdcr.core.manifests import MANIFEST, read_manifest

FINGERPRINT_LEN = 16
# Raw inputs up to this size are hashed whole; larger ones by size plus their first and
# last MiB per file (hashing 100 GB of S2ORC shards on every run would cost minutes).
FULL_HASH_LIMIT = 256 * 1024 * 1024
_SAMPLE = 1024 * 1024


def canonical_json(obj: Any) -> str:
    """``obj`` as the recipe's text: JSON with sorted keys, no spaces, UTF-8 as is (a value
    JSON cannot hold is a TypeError, never hashed by its repr)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(obj: Any) -> str:
    """The one hash recipe: ``obj``'s canonical JSON -> sha256 -> hex (64 characters)."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()


def fingerprint(
    stage: str,
    version: str,
    params: dict[str, Any],
    inputs: dict[str, Any],
    identity: dict[str, Any] | None = None,
) -> str:
    """Hash of stage name@version, hashed params, input fingerprints and the identity of
    the code and weights the stage runs (see :class:`mdcr.core.store.Planned`)."""
    body: dict[str, Any] = {"stage": f"{stage}@{version}", "params": params, "inputs": inputs}
    if identity:
        body["identity"] = identity
    return digest(body)[:FINGERPRINT_LEN]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _files_under(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))


def path_fingerprint(path: Path) -> str:
    """Content fingerprint of a raw input file or folder (one not made by a stage)."""
    if not path.exists():
        raise InputDataError(f"input path '{path}' does not exist; check the path")
    files = _files_under(path)
    total = sum(p.stat().st_size for p in files)
    h = hashlib.sha256()
    for p in files:
        rel = p.name if path.is_file() else str(p.relative_to(path))
        size = p.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        with p.open("rb") as f:
            if total <= FULL_HASH_LIMIT:
                while block := f.read(1 << 20):
                    h.update(block)
            else:
                h.update(f.read(_SAMPLE))
                if size > _SAMPLE:
                    f.seek(max(size - _SAMPLE, _SAMPLE))
                    h.update(f.read(_SAMPLE))
    return "raw:" + h.hexdigest()[:FINGERPRINT_LEN]


def artifact_fingerprint(path: Path) -> str:
    """Fingerprint of an input: its manifest's if a stage made it, else its content's."""
    manifest = read_manifest(path) if path.is_dir() else None
    if manifest is not None:
        return str(manifest["fingerprint"])
    if path.is_dir() and (path / MANIFEST).exists():
        raise ManifestMismatchError(
            f"'{path}' has an incomplete manifest (a stage was interrupted); re-run that stage"
        )
    return path_fingerprint(path)
