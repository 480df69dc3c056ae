"""The artifact store: stage runs planned, run once into atomic output folders under locks.

The parts it composes live beside it: what a fingerprint hashes in
:mod:`mdcr.core.fingerprints`, manifests in :mod:`mdcr.core.manifests`, atomic file writes in
:mod:`mdcr.core.atomic`, the facts stages record (and :meth:`Store.find` matches) in
:mod:`mdcr.contracts.facts`, and a config's input references resolved in :mod:`mdcr.core.inputs`.

Layout under the store's home (found by :func:`mdcr.core.home.find_home`: ``--home``,
``$MDCR_HOME``, the nearest ``mdcr.toml`` or ``.mdcr``, else the user cache)::

    <stage>/<fingerprint>/            a finished output: files + manifest.json
    <stage>/.<fingerprint>.partial/   work in progress (kept across crashes for resumable stages)
    <stage>/.<fingerprint>.lock       held while a process works on that output
    lucene-index/<fingerprint>/       a Lucene index (mdcr/index/lucene/), shared by stages

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
``manifest.json`` exists and names the same fingerprint, and every file it records is
there with its recorded size (and sha256, where hashing is cheap: :mod:`mdcr.core.integrity`);
a damaged one is never read, but removed and built again. The manifest is written last,
atomically, and the work folder is then renamed into place, so a killed run never leaves
something that looks finished. One process at a time works on an output (a lock file);
a failed run leaves its work folder only when a later run can resume from it (a resumable
stage's finished shards or pools), else nothing.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mdcr.core.config import params_of, settings_of
from mdcr.core.errors import ConfigError, ManifestMismatchError, StorageError, storage_error
from mdcr.core.fingerprints import artifact_fingerprint, fingerprint
from mdcr.core.integrity import (
    HASHES,
    Damage,
    check_input,
    damage,
    damage_mark,
    describe,
    file_hashes,
    mark_damaged,
    remember,
)
from mdcr.core.locks import exclusive
from mdcr.core.manifests import (
    Output,
    count_rows,
    open_output,
    package_versions,
    read_manifest,
    write_manifest,
)
from mdcr.core.stage import REUSE_WARNINGS, UNREPRODUCIBLE, StageContext, StageSpec


def default_home() -> Path:
    """The store's home when none is given: ``$MDCR_HOME``, the nearest ``mdcr.toml`` or
    ``.mdcr`` up from the current folder, else the user cache (:mod:`mdcr.core.home`)."""
    from mdcr.core.home import find_home

    return find_home().path


class FindsBy(Protocol):
    """A facts class as :meth:`Store.find` uses it: what a stage's outputs must have
    recorded for the given fields (manifest key -> value)."""

    def match_record(self, stage: str, given: Mapping[str, Any]) -> dict[str, Any]: ...


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


@dataclass
class Store:
    """The artifact store under ``home``.

    ``wait``: a run whose output another process is building waits for it (True) or
    stops at once naming the holder (False, ``--no-wait``). ``source``: how the home was
    found (:class:`mdcr.core.home.Home`), printed with it (``store: HOME (SOURCE)``) before the
    first output this store builds, when the store also notes itself in the user cache's
    record of stores written recently (:mod:`mdcr.core.recent`).
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
        identity = spec.identity(cfg, inputs) if spec.identity is not None else {}
        fp = fingerprint(spec.name, spec.version, params_of(cfg, hashed=True), input_fps, identity)
        return Planned(spec, cfg, inputs, identity, fp, self.folder(spec.name, fp))

    def is_done(self, folder: Path, fp: str) -> bool:
        """Whether ``folder`` is the finished output ``fp``, whole: a complete manifest
        naming ``fp``, and every file it records there with its size (and its sha256,
        where hashing is cheap: :mod:`mdcr.core.integrity`)."""
        manifest = read_manifest(folder)
        if manifest is None or manifest.get("fingerprint") != fp:
            return False
        return damage(folder, manifest) is None

    def damage(self, folder: Path, fp: str) -> Damage | None:
        """How the finished output ``fp`` at ``folder`` differs from its manifest (None:
        it does not, or it is not a finished output)."""
        manifest = read_manifest(folder)
        if manifest is None or manifest.get("fingerprint") != fp:
            return None
        return damage(folder, manifest)

    def output(self, path: Path) -> Output | None:
        """The finished output at ``path`` (None when it is not one)."""
        return open_output(path)

    def find(self, stage: str, facts: FindsBy | None = None, **given: Any) -> list[Output]:
        """Finished outputs of ``stage`` whose recorded ``facts`` have every given value.

        This is how a stage locates earlier outputs (the encode outputs of one encoder,
        the score outputs of one set of pools) without reading manifests itself. The keys
        are the fields of ``facts``, the facts class the stage records (the store knows
        none: a contract, :mod:`mdcr.contracts.facts`, is handed to it); any other key is
        a one-line error naming the valid ones. No facts and no keys: every output.
        """
        if facts is None and given:
            raise ConfigError(
                f"Store.find('{stage}', {', '.join(given)}=...): pass the facts class the "
                f"{stage} stage records, e.g. Store.find('{stage}', ScoreInfo, ...)"
            )
        wanted = facts.match_record(stage, given) if facts is not None else {}
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
            if all(out.info(k, _ABSENT) == v for k, v in wanted.items()):
                broken = damage(folder, out.manifest, hashes="read")
                if broken is not None:  # never read; a run that needs it rebuilds it
                    mark_damaged(folder, broken)
                    _warn_once(f"skipping {describe(folder, out.manifest, broken)}")
                    continue
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
            return self._reused(final, fp, quiet=quiet, label=label)
        with exclusive(
            self.lock_file(spec.name, fp), what=str(final), wait=self.wait, label=label, quiet=quiet
        ):
            if self.is_done(final, fp):  # finished by the process we waited for
                return self._reused(final, fp, quiet=quiet, label=label)
            broken = self.damage(final, fp)
            if broken is not None:  # not what its manifest says: never used, built again
                self._announce(quiet)
                manifest = read_manifest(final) or {}
                print(
                    f"[{label}] {describe(final, manifest, broken)}; removing it and "
                    "building it again",
                    file=sys.stderr,
                    flush=True,
                )
                shutil.rmtree(final)
            return self._build(planned, quiet=quiet, label=label)

    def _reused(self, final: Path, fp: str, *, quiet: bool, label: str) -> Artifact:
        """A finished output, found up to date: said, with the warnings its run gave (a
        ``py:`` encoder's unhashed code), which hold for every run that uses it."""
        if not quiet:
            print(f"[{label}] up to date: {final}", file=sys.stderr, flush=True)
        manifest = read_manifest(final) or {}
        for warning in (manifest.get("info") or {}).get(REUSE_WARNINGS, []):
            print(f"[{label}] warning: {warning}", file=sys.stderr, flush=True)
        return Artifact(final, fp, up_to_date=True)

    def _announce(self, quiet: bool) -> None:
        """``store: HOME (how it was found)``, once, before this store's first write; the
        store is noted for `mdcr ls`'s hint of the stores written recently."""
        if not self._announced:
            if not quiet:
                where = f" ({self.source})" if self.source else ""
                print(f"store: {self.home}{where}", file=sys.stderr, flush=True)
            from mdcr.core.recent import note

            note(self.home)
            self._announced = True

    def _build(self, planned: Planned, *, quiet: bool, label: str) -> Artifact:
        spec, fp, final = planned.spec, planned.fingerprint, planned.folder
        for name, paths in sorted(planned.inputs.items()):  # what the stage reads is whole
            for path in paths:
                made = open_output(path)
                if made is not None:
                    check_input(name, path, made.manifest)
        work = self.work_folder(spec.name, fp)
        self._announce(quiet)
        if work.exists() and not spec.resumable:
            shutil.rmtree(work)
        elif work.exists() and not quiet:
            print(f"[{label}] resuming from {work}", file=sys.stderr, flush=True)
        work.mkdir(parents=True, exist_ok=True)
        ctx = StageContext(
            out=work, inputs=planned.inputs, quiet=quiet, identity=planned.identity, store=self
        )
        for paths in planned.inputs.values():  # made from what is not reproducible: nor is it
            for path in paths:
                for reason in _unreproducible(path):
                    ctx.unreproducible(reason)
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
                **file_hashes(path),
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
                for name, paths in _given(planned.inputs).items()
            },
            "outputs": outputs,
            "info": ctx.info,
            "timings": {"started": started, "wall_s": round(wall, 3), **ctx.timings},
            "packages": package_versions(),
            "complete": True,
        }
        write_manifest(work, manifest)
        if final.exists():  # a stale folder without a valid manifest
            shutil.rmtree(final)
        os.replace(work, final)
        damage_mark(final).unlink(missing_ok=True)  # built again: whole
        for name, record in outputs.items():  # hashed above: not again in this process
            remember(final / name, {k: str(record[k]) for k in HASHES})


_ABSENT = object()
_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        print(f"mdcr: {message}", file=sys.stderr, flush=True)


def _unreproducible(folder: Path) -> list[str]:
    """Why the output at ``folder`` is not reproducible (empty: it is, or it is no output)."""
    made = open_output(folder)
    reasons = (made.manifest.get("info") or {}).get(UNREPRODUCIBLE, []) if made else []
    return [str(r) for r in reasons] if isinstance(reasons, list) else []


def resumes_from(spec: StageSpec, work: Path) -> bool:
    """Whether a failed run's work folder holds work a later run resumes from: a resumable
    stage's folder with finished units (all of it, for a stage that does not count them)."""
    if not spec.resumable:
        return False
    return spec.finished_units is None or spec.finished_units(work) > 0


def _given(inputs: dict[str, list[Path]]) -> dict[str, list[Path]]:
    return {k: v for k, v in inputs.items() if v}
