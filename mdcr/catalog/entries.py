"""The store's catalog: what it holds (``mdcr ls``), one output (``mdcr show``), and what
no result uses (``mdcr gc``).

Everything here is read from the store's folders and manifests; nothing is kept beside
them. An entry is one folder of ``<home>/<stage>/``, named by a fingerprint:

- ``complete``: a finished output (its ``manifest.json`` names it), or a Lucene index
  (``lucene-index/<fp>/`` with its ``mdcr-index.json``);
- ``running``: a work folder (``.<fp>.partial/``, an index's ``.<fp>.tmp-<pid>/``) whose
  lock a live process holds;
- ``unfinished``: a work folder nobody works on (an interrupted run; a resumable stage
  resumes from it);
- ``damaged``: a finished output whose folder is not what its manifest records (a file
  missing or of another size; :mod:`mdcr.core.integrity`), or an output folder whose
  manifest is missing or cannot be read (the store renames a folder into place only after
  its manifest is written). No stage reads it; the next run that needs it builds it again.
  ``verify`` also compares every file's sha256.

What ``gc`` lists (the rule, in one place): results are the outputs of
:data:`RESULT_STAGES`; an output is kept when a result uses it, directly or through other
kept outputs (the inputs its manifest records, and the Lucene indexes it records having
searched, ``info.indexes``). Everything else that is complete, every damaged output (kept
or not: it is built again when needed) and every unfinished work folder, is listed with
its size; running work never is. ``gc --yes`` removes what it
lists, each under its lock (one being built meanwhile is skipped).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mdcr.core.errors import ConfigError
from mdcr.core.integrity import Damage, damage, damage_mark
from mdcr.core.locks import LockBusyError, busy_holder, exclusive
from mdcr.core.manifests import MANIFEST, read_manifest
from mdcr.index.lucene.indexes import INDEX_STAGE, read_index_meta

COMPLETE, RUNNING, UNFINISHED, DAMAGED = "complete", "running", "unfinished", "damaged"
MADE = (COMPLETE, DAMAGED)  # states of a folder with a complete manifest
# Outputs people read: gc keeps them and everything they use.
RESULT_STAGES = ("score", "report", "benchmark-score", "benchmark-jaccard")
_FP = r"[0-9a-f]{16}"
_OUTPUT = re.compile(rf"^({_FP})$")
_WORK = re.compile(rf"^\.({_FP})\.(partial|tmp-\d+)$")


@dataclass(frozen=True)
class Entry:
    """One folder of the store: a stage output, a Lucene index, or work in progress.

    ``manifest``: the output's manifest (an index's ``mdcr-index.json``); empty for work
    folders. ``holder``: who works on it (``running`` only). ``bytes``: its size on disk.
    ``damage``: the file that is not what the manifest records (``damaged`` only).
    """

    stage: str
    fingerprint: str
    path: Path
    state: str
    manifest: dict[str, Any] = field(default_factory=dict)
    bytes: int = 0
    holder: str = ""
    damage: Damage | None = None

    @property
    def key(self) -> str:
        return f"{self.stage}/{self.fingerprint}"

    @property
    def where(self) -> str:
        """Its folder under the store: ``<stage>/<fp>``, or a work folder's own name."""
        return f"{self.stage}/{self.path.name}"

    @property
    def lock(self) -> Path:
        return self.path.parent / f".{self.fingerprint}.lock"

    @property
    def is_index(self) -> bool:
        return self.stage == INDEX_STAGE

    @property
    def info(self) -> dict[str, Any]:
        info = self.manifest.get("info", {})
        return info if isinstance(info, dict) else {}

    @property
    def params(self) -> dict[str, Any]:
        params = self.manifest.get("params", {})
        return params if isinstance(params, dict) else {}

    def input_fingerprints(self) -> list[str]:
        """Fingerprints of the outputs it was made from (its manifest's inputs)."""
        inputs = self.manifest.get("inputs", {})
        if self.is_index or not isinstance(inputs, dict):
            return []
        return [
            str(item.get("fingerprint", ""))
            for items in inputs.values()
            for item in (items if isinstance(items, list) else [])
            if isinstance(item, dict)
        ]

    def index_fingerprints(self) -> list[str]:
        """The Lucene indexes it records having searched (``info.indexes``)."""
        indexes = self.info.get("indexes", {})
        return sorted({str(v) for v in indexes.values()}) if isinstance(indexes, dict) else []

    def names(self) -> list[str]:
        """The retrievers or encoders it is about (for ``ls`` and ``--retriever``)."""
        info, params = self.info, self.params
        out: list[str] = []
        if info.get("retriever"):
            out.append(str(info["retriever"]))
        if isinstance(info.get("retrievers"), list):
            out += [str(r) for r in info["retrievers"]]
        scored = info.get("runs")  # ScoreInfo.runs
        if isinstance(scored, list):  # score: the runs it scored
            out += [str(r.get("retriever")) for r in scored if isinstance(r, dict)]
        if isinstance(info.get("suggested_models"), list):
            out += [str(r) for r in info["suggested_models"]]
        for key in ("encoder", "retriever"):  # an encode or rank output's own spec
            value = params.get(key)
            if isinstance(value, str) and value and value not in out:
                out.append(value)
        if self.is_index:
            out.append(str(self.manifest.get("first_pool") or self.manifest.get("collection", "")))
        return [n for n in dict.fromkeys(out) if n]

    @property
    def date(self) -> str:
        """When it was made (UTC, to the minute): the manifest's start time, an index's
        build time, else the folder's modification time."""
        started = self.manifest.get("timings", {}).get("started") if not self.is_index else None
        stamp = started or self.manifest.get("built")
        if isinstance(stamp, str) and len(stamp) >= 16:
            return stamp[:10] + " " + stamp[11:16]
        try:
            return time.strftime("%Y-%m-%d %H:%M", time.gmtime(self.path.stat().st_mtime))
        except OSError:
            return ""


def folder_bytes(path: Path) -> int:
    """Bytes of every file under ``path`` (links not followed)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # a file removed meanwhile
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _read(stage: str, folder: Path) -> dict[str, Any] | None:
    if stage == INDEX_STAGE:
        return read_index_meta(folder)
    manifest = read_manifest(folder)
    if manifest is None or manifest.get("stage") != stage:
        return None
    return manifest


def entry_at(folder: Path, *, size: bool = True) -> Entry | None:
    """The entry a store folder ``<stage>/<fp>`` (or a work folder) is, else None."""
    stage = folder.parent.name
    out = _OUTPUT.match(folder.name)
    work = _WORK.match(folder.name)
    if not folder.is_dir() or (out is None and work is None):
        return None
    nbytes = folder_bytes(folder) if size else 0
    if out is not None:
        manifest = _read(stage, folder)
        if manifest is not None and str(manifest.get("fingerprint", "")) == folder.name:
            broken = None if stage == INDEX_STAGE else damage(folder, manifest, hashes="none")
            state = COMPLETE if broken is None else DAMAGED
            return Entry(stage, folder.name, folder, state, manifest, nbytes, damage=broken)
        # The store renames a folder into place only after its manifest is written: one
        # without a readable manifest naming it was damaged since.
        return Entry(stage, folder.name, folder, DAMAGED, {}, nbytes, damage=_no_manifest(folder))
    assert work is not None
    fp = work.group(1)
    holder = busy_holder(folder.parent / f".{fp}.lock")
    if work.group(2).startswith("tmp-"):  # an index being built: its pid says if it lives
        pid = int(work.group(2)[4:])
        if holder is None and _alive(pid) and pid != os.getpid():
            return Entry(stage, fp, folder, RUNNING, {}, nbytes, f"PID {pid}")
    if holder is not None:
        return Entry(stage, fp, folder, RUNNING, {}, nbytes, holder.describe())
    return Entry(stage, fp, folder, UNFINISHED, {}, nbytes)


def _no_manifest(folder: Path) -> Damage:
    """What is wrong with the manifest of an output folder that has no valid one."""
    name = "mdcr-index.json" if folder.parent.name == INDEX_STAGE else MANIFEST
    path = folder / name
    if not path.is_file():
        return Damage(name, "is missing")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return Damage(name, "cannot be read (truncated, or not JSON)")
    if not isinstance(data, dict) or data.get("complete") is not True:
        return Damage(name, "is not marked complete")
    return Damage(name, "names another stage or fingerprint than its folder")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def scan(home: Path, stage: str | None = None, *, size: bool = True) -> list[Entry]:
    """Every entry of the store under ``home`` (of ``stage`` only, when given), by stage
    folder and then date."""
    if stage is not None:
        folders = [d.name for d in home.iterdir() if d.is_dir()] if home.is_dir() else []
        check_stages([stage], [f for f in folders if not f.startswith(".")])
    if not home.is_dir():
        return []
    entries: list[Entry] = []
    for stage_dir in sorted(home.iterdir()):
        if stage_dir.name.startswith(".") or not stage_dir.is_dir():
            continue
        if stage is not None and stage_dir.name != stage:
            continue
        for child in sorted(stage_dir.iterdir()):
            entry = entry_at(child, size=size)
            if entry is not None:
                entries.append(entry)
    order = {name: i for i, name in enumerate(_stage_order())}
    entries.sort(key=lambda e: (order.get(e.stage, len(order)), e.stage, e.date, e.fingerprint))
    return entries


def check_stages(names: Iterable[str], present: Iterable[str] = ()) -> None:
    """A one-line error for a name that is no stage (``mdcr ls encoder``), listing the
    valid ones: the registered stages, the Lucene indexes, and the stage folders
    ``present`` in the store (a stage registered by code not loaded now)."""
    valid = _stage_order()
    valid += sorted(set(present) - set(valid))
    for name in names:
        if name not in valid:
            import difflib

            near = difflib.get_close_matches(name, valid, n=1)
            hint = f"did you mean '{near[0]}'? " if near else ""
            raise ConfigError(f"unknown stage '{name}'; {hint}valid stages: {', '.join(valid)}")


def _stage_order() -> list[str]:
    """Stage names in pipeline order (:func:`mdcr.core.stage.stages`), then the Lucene
    indexes."""
    from mdcr.core.stage import stages

    return [*stages(), INDEX_STAGE]


def select(entries: Iterable[Entry], retriever: str | None = None) -> list[Entry]:
    """The entries about ``retriever`` (an encoder or retriever name, or an encoder spec)."""
    if not retriever:
        return list(entries)
    return [e for e in entries if retriever in e.names()]


def find(home: Path, ref: str) -> Entry:
    """The entry ``ref`` names: a folder (of this store or another), a fingerprint, or a
    unique start of one (``stage/`` before it is allowed), as ``mdcr show`` takes it."""
    path = Path(ref).expanduser()
    if path.is_file():  # a file of an output (report.md): its folder
        path = path.parent
    if path.is_dir():
        entry = entry_at(path.absolute())
        if entry is None:
            raise ConfigError(
                f"'{ref}' is not a store output (a folder <stage>/<fingerprint>); "
                "`mdcr ls` lists the outputs"
            )
        return entry
    stage, _, prefix = ref.rpartition("/")
    if len(prefix) < 4 or not re.fullmatch(r"[0-9a-f]+", prefix):
        raise ConfigError(
            f"'{ref}' is neither a folder nor a fingerprint (at least 4 of its hex digits); "
            "`mdcr ls` lists the outputs"
        )
    hits = [
        e
        for e in scan(home, stage or None, size=False)
        if e.fingerprint.startswith(prefix) and e.state in MADE
    ] or [e for e in scan(home, stage or None, size=False) if e.fingerprint.startswith(prefix)]
    if not hits:
        raise ConfigError(f"no output with fingerprint '{ref}' in the store {home}; see `mdcr ls`")
    if len({e.key for e in hits}) > 1:
        shown = ", ".join(e.key for e in hits[:4]) + (", ..." if len(hits) > 4 else "")
        raise ConfigError(f"'{ref}' matches {len(hits)} outputs ({shown}); give more of it")
    return entry_at(hits[0].path) or hits[0]


def users(entries: Iterable[Entry]) -> dict[str, list[Entry]]:
    """fingerprint -> the complete entries that use it (as an input, or as an index)."""
    out: dict[str, list[Entry]] = {}
    for e in entries:
        if e.state not in MADE:
            continue
        for fp in {*e.input_fingerprints(), *e.index_fingerprints()}:
            out.setdefault(fp, []).append(e)
    return out


@dataclass(frozen=True)
class Garbage:
    """An entry ``gc`` would remove, and why."""

    entry: Entry
    reason: str


def garbage(entries: list[Entry], stages: Iterable[str] = ()) -> list[Garbage]:
    """What no result uses, and unfinished work (module docstring); of ``stages`` only,
    when given."""
    check_stages(stages, {e.stage for e in entries})
    complete = [e for e in entries if e.state in MADE]
    by_fp: dict[str, list[Entry]] = {}
    for e in complete:
        by_fp.setdefault(e.fingerprint, []).append(e)
    kept: set[str] = set()
    todo = [e for e in complete if e.stage in RESULT_STAGES]
    while todo:
        e = todo.pop()
        if e.key in kept:
            continue
        kept.add(e.key)
        for fp in [*e.input_fingerprints(), *e.index_fingerprints()]:
            todo += by_fp.get(fp, [])
    wanted = set(stages)
    out = []
    for e in entries:
        if (wanted and e.stage not in wanted) or e.state == RUNNING:
            continue
        if e.state == DAMAGED:
            why = f"damaged: {e.damage}; a run that needs it builds it again"
        elif e.key in kept:
            continue
        elif e.state == UNFINISHED:
            why = "unfinished: work of an interrupted run (re-running it resumes where it can)"
            if _OUTPUT.match(e.path.name):
                why = "unfinished: an output folder without a complete manifest"
        elif e.is_index:
            why = "index no kept output searched"
        else:
            why = "no result uses it"
        out.append(Garbage(e, why))
    return out


def remove(items: Iterable[Garbage], echo: Callable[[str], None] = print) -> tuple[int, int]:
    """Remove each entry under its lock (skipping one a process works on now); returns
    (entries removed, bytes freed)."""
    removed = freed = 0
    for g in items:
        e = g.entry
        try:
            with exclusive(e.lock, what=e.key, wait=False, quiet=True):
                if not e.path.exists():
                    continue
                now = entry_at(e.path, size=False)
                if e.state in MADE and (now is None or now.state != e.state):
                    continue  # replaced (or rebuilt) meanwhile
                shutil.rmtree(e.path)
                damage_mark(e.path).unlink(missing_ok=True)
        except LockBusyError:
            echo(f"skipped {e.key}: a process works on it now")
            continue
        removed += 1
        freed += e.bytes
    return removed, freed


def index_summary(entries: Iterable[Entry]) -> tuple[int, int]:
    """(complete Lucene indexes, their bytes)."""
    found = [e for e in entries if e.is_index and e.state == COMPLETE]
    return len(found), sum(e.bytes for e in found)


@dataclass(frozen=True)
class Verified:
    """``verify``: an output, and the file that is not what its manifest records (None:
    every file has its recorded size and sha256)."""

    entry: Entry
    damage: Damage | None


def verify(entries: Iterable[Entry]) -> list[Verified]:
    """Every finished output of ``entries`` (Lucene indexes record no file hashes and are
    left out), each file's size and full sha256 compared with its manifest."""
    return [
        Verified(e, damage(e.path, e.manifest, hashes="all") if e.manifest else e.damage)
        for e in entries
        if e.state in MADE and (not e.is_index or not e.manifest)
    ]
