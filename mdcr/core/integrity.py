"""Stored outputs are what their manifests say: each file a manifest records is checked
against it before the output is used.

A manifest records every output file's ``bytes``, ``sha256`` and ``xxh3_128`` (a fast
non-cryptographic hash: xxHash's XXH3, 128 bits, about 12 GB/s here against 1.5 GB/s for
sha256; :mod:`mdcr.core.store`). Four depths of check (``hashes``):

- ``"none"``: each recorded file exists and has the recorded size (a ``stat`` per file;
  what ``mdcr ls`` does, so it stays fast);
- ``"cheap"``: sizes, and the sha256 of every file too when the output's recorded files
  total at most :data:`CHEAP_HASH_BYTES` (64 MiB): what the store does before it calls an
  output up to date (a step whose output nothing reads now reads none of its bytes);
- ``"read"``: sizes and the XXH3 of every file, whatever its size: what is done before
  any byte of an output is read by a stage (its inputs), before encode copies vectors from
  an earlier output and before ``Store.find`` hands an output to its reader, so a file
  changed in place at the same size is never read (``scripts/bench_integrity.py``
  measures the check against the read it guards);
- ``"all"``: sizes and every file's sha256 (``mdcr verify``).

A file hashed once in a process is not hashed again while its size, modification time and
inode stay the same.
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
Hashes = Literal["none", "cheap", "read", "all"]
# The manifest keys of a file's two hashes.
SHA256, FAST = "sha256", "xxh3_128"
HASHES = (SHA256, FAST)

# (file path, hash kind) -> (size, mtime_ns, inode, digest) of a file whose hash matched
# its manifest.
_HASHED: dict[tuple[str, str], tuple[int, int, int, str]] = {}


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
    """The first way ``folder`` differs from ``manifest`` (module docstring), else None;
    a damage a reader found earlier (:func:`mark_damaged`) is found by every check."""
    marked = _marked(folder)
    if marked is not None:
        return marked
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
        if not isinstance(size, int) or not all(isinstance(record.get(k), str) for k in HASHES):
            return Damage(name, "has no size and hashes in its manifest (an edited one)")
        if st.st_size != size:
            return Damage(name, f"has {st.st_size:,} bytes; its manifest records {size:,}")
        stats[name] = st
    if hashes == "none":
        return None
    if hashes == "cheap" and sum(st.st_size for st in stats.values()) > CHEAP_HASH_BYTES:
        return None
    kind = FAST if hashes == "read" else SHA256
    for name, record in sorted(files.items()):
        if not _same_hash(folder / name, stats[name], kind, str(record[kind])):
            return Damage(
                name, f"does not have the {kind} its manifest records (its bytes changed)"
            )
    return None


def file_hashes(path: Path) -> dict[str, str]:
    """A file's sha256 and XXH3-128, from one read."""
    import xxhash

    sha, fast = hashlib.sha256(), xxhash.xxh3_128()
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            sha.update(block)
            fast.update(block)
    return {SHA256: sha.hexdigest(), FAST: fast.hexdigest()}


def _digest(path: Path, kind: str) -> str:
    import xxhash

    h: Any = xxhash.xxh3_128() if kind == FAST else hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return str(h.hexdigest())


def _same_hash(path: Path, st: os.stat_result, kind: str, want: str) -> bool:
    key = (st.st_size, st.st_mtime_ns, st.st_ino, want)
    if _HASHED.get((str(path), kind)) == key:
        return True
    try:
        got = _digest(path, kind)
    except OSError:
        return False
    if got != want:
        return False
    _HASHED[(str(path), kind)] = key
    return True


def remember(path: Path, hashes: dict[str, str]) -> None:
    """Record that ``path`` has ``hashes`` (just written and hashed by the store), so that
    a check in this process does not hash it again while it stays as it is."""
    try:
        st = os.stat(path)
    except OSError:
        return
    for kind, value in hashes.items():
        _HASHED[(str(path), kind)] = (st.st_size, st.st_mtime_ns, st.st_ino, value)


def damage_mark(folder: Path) -> Path:
    """Where a damage found by a reader is kept: ``<stage>/.<fp>.damaged`` beside the
    output (the store removes it when the output is built again)."""
    return folder.parent / f".{folder.name}.damaged"


def mark_damaged(folder: Path, found: Damage) -> None:
    """Remember that ``folder`` is damaged: a full check before a read found what the
    cheap check before reuse cannot (a large file changed in place at the same size), so
    the next run that plans its step builds it again rather than calling it up to date."""
    from mdcr.core.atomic import atomic_write_text

    atomic_write_text(damage_mark(folder), f"{found.file}\t{found.problem}\n")


def _marked(folder: Path) -> Damage | None:
    try:
        text = damage_mark(folder).read_text()
    except OSError:
        return None
    name, _, problem = text.strip().partition("\t")
    return Damage(name, problem or "was found damaged when it was read")


def describe(folder: Path, manifest: dict[str, Any], found: Damage) -> str:
    """``the <stage> output '<folder>' is damaged: <file> <problem>``."""
    stage = str(manifest.get("stage", "")) or folder.parent.name
    return f"the {stage} output '{folder}' is damaged: {found}"


def check_input(name: str, folder: Path, manifest: dict[str, Any]) -> None:
    """A stage's input, checked before the stage reads it: a damaged one is a one-line
    :class:`ManifestMismatchError` naming the output, the file and the fix."""
    from mdcr.core.hints import given_as

    found = damage(folder, manifest, hashes="read")
    if found is None:
        return
    mark_damaged(folder, found)
    given = given_as(folder)  # named as the user gave it (--pools), else the stage's key
    raise ManifestMismatchError(
        f"{given or f'input {name!r}'}: {describe(folder, manifest, found)}; "
        f"{fix(folder, manifest)}, then this one"
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
