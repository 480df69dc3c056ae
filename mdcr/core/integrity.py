"""Stored outputs are what their manifests say: each file a manifest records is checked
against it before the output is used.

A manifest records every output file's ``bytes`` and ``sha256`` (:mod:`mdcr.core.store`). Three
depths of check (``hashes``):

- ``"none"``: each recorded file exists and has the recorded size (a ``stat`` per file;
  what ``mdcr ls`` does, so it stays fast);
- ``"cheap"``: sizes, and the sha256 of every file too when the output's recorded files
  total at most :data:`CHEAP_HASH_BYTES` (64 MiB): what the store does before it reuses an
  output as up to date, before a stage reads an input, and before encode copies vectors
  from an earlier output. A file hashed once in a process is not hashed again while its
  size, modification time and inode stay the same;
- ``"all"``: sizes and every file's sha256 (``mdcr verify``).

An old manifest without ``bytes`` is checked for the files' existence (and hashes) only.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mdcr.core.errors import ManifestMismatchError
from mdcr.core.manifests import read_manifest

CHEAP_HASH_BYTES = 64 * 1024 * 1024
Hashes = Literal["none", "cheap", "all"]

# (file path) -> (size, mtime_ns, inode, sha256) of a file whose hash matched its manifest.
_HASHED: dict[str, tuple[int, int, int, str]] = {}


@dataclass(frozen=True)
class Damage:
    """The first file of an output that is not what its manifest records."""

    file: str
    problem: str

    def __str__(self) -> str:
        return f"{self.file} {self.problem}"


def recorded_files(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The output files a manifest records, by name (relative to the output folder)."""
    outputs = manifest.get("outputs", {})
    if not isinstance(outputs, dict):
        return {}
    return {str(k): v for k, v in outputs.items() if isinstance(v, dict)}


def damage(folder: Path, manifest: dict[str, Any], *, hashes: Hashes = "cheap") -> Damage | None:
    """The first way ``folder`` differs from ``manifest`` (module docstring), else None."""
    files = recorded_files(manifest)
    stats: dict[str, os.stat_result] = {}
    for name, record in sorted(files.items()):
        try:
            st = os.stat(folder / name)
        except (FileNotFoundError, NotADirectoryError):
            return Damage(name, "is missing")
        except OSError as exc:
            return Damage(name, f"cannot be read ({exc.strerror or exc})")
        size = record.get("bytes")
        if isinstance(size, int) and st.st_size != size:
            return Damage(name, f"has {st.st_size:,} bytes; its manifest records {size:,}")
        stats[name] = st
    if hashes == "none":
        return None
    if hashes == "cheap" and sum(st.st_size for st in stats.values()) > CHEAP_HASH_BYTES:
        return None
    for name, record in sorted(files.items()):
        want = record.get("sha256")
        if isinstance(want, str) and not _same_hash(folder / name, stats[name], want):
            return Damage(name, "does not have the sha256 its manifest records (its bytes changed)")
    return None


def _same_hash(path: Path, st: os.stat_result, want: str) -> bool:
    key = (st.st_size, st.st_mtime_ns, st.st_ino, want)
    if _HASHED.get(str(path)) == key:
        return True
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while block := f.read(1 << 20):
                h.update(block)
    except OSError:
        return False
    if h.hexdigest() != want:
        return False
    _HASHED[str(path)] = key
    return True


def remember(path: Path, sha256: str) -> None:
    """Record that ``path`` has ``sha256`` (just written and hashed by the store), so that
    a check in this process does not hash it again while it stays as it is."""
    try:
        st = os.stat(path)
    except OSError:
        return
    _HASHED[str(path)] = (st.st_size, st.st_mtime_ns, st.st_ino, sha256)


def describe(folder: Path, manifest: dict[str, Any], found: Damage) -> str:
    """``the <stage> output '<folder>' is damaged: <file> <problem>``."""
    stage = str(manifest.get("stage", "")) or folder.parent.name
    return f"the {stage} output '{folder}' is damaged: {found}"


def check_input(name: str, folder: Path, manifest: dict[str, Any]) -> None:
    """A stage's input, checked before the stage reads it: a damaged one is a one-line
    :class:`ManifestMismatchError` naming the output, the file and the fix."""
    found = damage(folder, manifest, hashes="cheap")
    if found is None:
        return
    raise ManifestMismatchError(
        f"input '{name}': {describe(folder, manifest, found)}; {fix(folder, manifest)}, "
        "then this one"
    )


def fix(folder: Path, manifest: dict[str, Any]) -> str:
    """What to do about a damaged output: run the step that made it again."""
    stage = str(manifest.get("stage", "")) or folder.parent.name
    return (
        f"re-run the {stage} step that made it (the same command or `mdcr run` rebuilds a "
        "damaged output)"
    )


def check_file(path: Path) -> None:
    """One file of a finished output, before it is read: it exists and has the size its
    output's manifest records (nothing to check for a file no manifest records)."""
    folder = path.parent
    manifest = read_manifest(folder)
    record = recorded_files(manifest).get(path.name) if manifest is not None else None
    if manifest is None or record is None:
        return
    found = damage(folder, {"outputs": {path.name: record}}, hashes="none")
    if found is not None:
        raise ManifestMismatchError(f"{describe(folder, manifest, found)}; {fix(folder, manifest)}")
