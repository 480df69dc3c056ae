"""Fingerprints: what the store hashes for a stage run and for an input.

The rule, in one place (docs/architecture.md, "The store's promise"): a stage run's
fingerprint hashes the stage's name and version, its parameters (defaults included), the
fingerprints of its inputs and the identity of the code and weights it runs; an input's
fingerprint is its manifest's when a stage made it, else its content's. Never mtimes,
never anything random.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from mdcr.core.config import canonical_json
from mdcr.core.errors import InputDataError, ManifestMismatchError
from mdcr.core.manifests import MANIFEST, read_manifest

FINGERPRINT_LEN = 16
# Raw inputs up to this size are hashed whole; larger ones by size plus their first and
# last MiB per file (hashing 100 GB of S2ORC shards on every run would cost minutes).
FULL_HASH_LIMIT = 256 * 1024 * 1024
_SAMPLE = 1024 * 1024


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
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()[:FINGERPRINT_LEN]


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
