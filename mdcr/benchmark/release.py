"""The official MDCR release: where it comes from, ``mdcr download mdcr``, and provenance.

"Official" means the release itself, proven by provenance. The release publishes no
checksums, so the proof is a record made when the files are fetched: ``mdcr download mdcr``
fetches the four release files from the addresses in the MDCR README (with a progress bar,
resuming an interrupted transfer with an HTTP Range request, each file written as
``<name>.part`` and renamed when complete) and records in ``provenance.json`` beside them
each file's address, when it was fetched, its size and its sha256. Files fetched by hand are
registered with ``mdcr download mdcr --register DIR``: their sha256 is recorded as
"declared by the user".

A benchmark's origin (:func:`origin_of`), over every file an import reads:

- ``official``: each file has a record with its size and sha256, made by a download from
  the official address of that file;
- ``declared``: the same, with at least one file registered by hand; shown as
  "official (declared by the user)";
- ``mdcr-format``: anything else (no record, a file that differs from its record, a
  download from another address): "an MDCR-format benchmark".

Only an official benchmark (either of the first two) stands beside published numbers
(:func:`mdcr.scoring.published.comparable_with_published`).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mdcr.contracts.facts import DECLARED, MDCR_FORMAT, OFFICIAL, BenchmarkOrigin
from mdcr.core.atomic import atomic_write_text
from mdcr.core.errors import InputDataError
from mdcr.core.fingerprints import sha256_file
from mdcr.core.home import Home

# The four release files and their addresses, as the "Data" section of the MDCR README
# gives them: github.com/zoranmedic/mdcr, README.md (the same links at commits 5968682 and
# 01ce93c). The release publishes no checksums.
RELEASE_BASE_URL = "https://takelab.fer.hr/data/mdcr/"
RELEASE_FILES = ("mdcr_val.json", "mdcr_test.json", "mdcr_val_data.jsonl", "mdcr_test_data.jsonl")
RELEASE_URLS = {name: RELEASE_BASE_URL + name for name in RELEASE_FILES}
# Each release file's size in bytes, where known. The release publishes neither sizes nor
# checksums and mdcr has none from a download it can vouch for, so none is known yet:
# `--register` then checks the names and the release's format, and says sizes were not
# checked. A size added here is checked, byte for byte.
RELEASE_SIZES: dict[str, int | None] = dict.fromkeys(RELEASE_FILES)

PROVENANCE = "provenance.json"
# Another base address (a mirror, or the tests' local server). Files fetched from it are
# recorded with that address and are not official.
BASE_URL_ENV = "MDCR_RELEASE_BASE_URL"
DOWNLOADED = "downloaded"
DECLARED_BY_USER = "declared by the user"

_CHUNK = 1 << 20


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def release_urls(base_url: str | None = None) -> dict[str, str]:
    """Each release file's address: the official ones, or under ``base_url`` (else
    ``$MDCR_RELEASE_BASE_URL``) when given."""
    base = base_url or os.environ.get(BASE_URL_ENV) or RELEASE_BASE_URL
    base = base if base.endswith("/") else base + "/"
    return {name: base + name for name in RELEASE_FILES}


def store_folder(home: Home, quiet: bool = False) -> Path:
    """The folder ``mdcr download mdcr`` fetches into by default: ``<store>/downloads/mdcr``
    of the store found as for every command (``--home``, ``$MDCR_HOME``, a marker, the
    user cache), said before the first write as a store says it."""
    if not quiet:
        print(f"store: {home.describe()}", file=sys.stderr, flush=True)
    return home.path / "downloads" / "mdcr"


# ------------------------------------------------------------------ provenance records


def read_provenance(folder: Path) -> dict[str, dict[str, Any]]:
    """The records of ``folder/provenance.json`` by file name ({} when there is none)."""
    path = folder / PROVENANCE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputDataError(
            f"cannot read '{path}' ({exc}); delete it and download (or --register) again"
        ) from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not all(isinstance(r, dict) for r in files.values()):
        raise InputDataError(
            f"'{path}' is not a provenance record of mdcr; delete it and download again"
        )
    return files


def _write_provenance(folder: Path, records: Mapping[str, dict[str, Any]]) -> None:
    from mdcr import __version__

    files = {**read_provenance(folder), **records}
    body = {
        "about": "The MDCR release files in this folder: where each came from, when, its "
        "size and sha256 (written by mdcr; the release itself publishes no checksums).",
        "files": dict(sorted(files.items())),
        "written_by": f"mdcr {__version__}",
    }
    atomic_write_text(folder / PROVENANCE, json.dumps(body, indent=2) + "\n")


def _matches(path: Path, record: Mapping[str, Any]) -> bool:
    return (
        path.is_file()
        and path.stat().st_size == record.get("size")
        and sha256_file(path) == record.get("sha256")
    )


def origin_of(files: Sequence[Path]) -> tuple[BenchmarkOrigin, dict[str, str]]:
    """The origin of the files an import reads, and each file's sha256 (by name).

    Every file must match its record in the ``provenance.json`` of its folder, made by a
    download from the file's official address (``official``) or registered by hand
    (``declared``); else the files are an MDCR-format benchmark, and the detail says why.
    """
    sums = {p.name: sha256_file(p) for p in files}
    why: list[str] = []
    how: set[str] = set()
    dates: set[str] = set()
    records: dict[Path, dict[str, dict[str, Any]]] = {}
    for p in files:
        if p.parent not in records:
            try:
                records[p.parent] = read_provenance(p.parent)
            except InputDataError:
                records[p.parent] = {}
        record = records[p.parent].get(p.name)
        if not records[p.parent]:
            why.append(f"no {PROVENANCE} in '{p.parent}' (mdcr download mdcr makes one)")
            continue
        if record is None:
            why.append(f"'{p.name}' has no record in {PROVENANCE}")
            continue
        if record.get("sha256") != sums[p.name] or record.get("size") != p.stat().st_size:
            why.append(f"'{p.name}' differs from its record in {PROVENANCE} (sha256)")
            continue
        if record.get("url") != RELEASE_URLS.get(p.name):
            why.append(f"'{p.name}' came from {record.get('url')}, not the official address")
            continue
        if record.get("how") not in (DOWNLOADED, DECLARED_BY_USER):
            why.append(f"'{p.name}': its record says neither downloaded nor declared")
            continue
        how.add(str(record["how"]))
        dates.add(str(record.get("fetched_at") or record.get("recorded_at") or "")[:10])
    if why:
        return BenchmarkOrigin(MDCR_FORMAT, "; ".join(dict.fromkeys(why))), sums
    names = ", ".join(p.name for p in files)
    when = ", ".join(sorted(d for d in dates if d))
    if DECLARED_BY_USER in how:
        detail = (
            f"{names}: sha256 as declared by the user (registered with mdcr download mdcr "
            f"--register on {when}), not checked against a download"
        )
        return BenchmarkOrigin(DECLARED, detail), sums
    detail = f"{names}: sha256 as downloaded by mdcr from {RELEASE_BASE_URL} on {when}"
    return BenchmarkOrigin(OFFICIAL, detail), sums


# ------------------------------------------------------------------ download


class _Cut(Exception):
    """A transfer that ended before its announced length."""


def _content_range(value: str | None) -> tuple[int | None, int | None]:
    """(first byte, total size) of a ``Content-Range`` header; None where absent."""
    m = re.match(r"bytes (\d+)-\d+/(\d+|\*)", value or "")
    if m:
        return int(m.group(1)), (int(m.group(2)) if m.group(2) != "*" else None)
    m = re.match(r"bytes \*/(\d+)", value or "")
    return (None, int(m.group(1))) if m else (None, None)


def _read(resp: Any) -> bytes:
    """The next chunk of a response; a connection that ends early is a :class:`_Cut`."""
    import http.client

    try:
        return bytes(resp.read(_CHUNK))
    except (http.client.HTTPException, OSError) as exc:  # IncompleteRead, a reset connection
        raise _Cut(f"the transfer was cut ({exc.__class__.__name__})") from None


def _transfer(url: str, part: Path, *, quiet: bool, timeout: float) -> None:
    """One request for the rest of ``url`` into ``part``; raises :class:`_Cut` when the
    transfer ends short (the caller resumes)."""
    have, validator = _resume_point(url, part)
    resp = _request(url, part, have, validator, timeout)
    if resp is None:  # the part was already complete
        return
    with resp:
        total = _receive(resp, url, part, have, quiet)
    size = part.stat().st_size
    if total is not None and size < total:
        raise _Cut(f"the transfer ended at byte {size} of {total}")
    if total is not None and size > total:
        part.unlink()
        raise _Cut(f"{size} bytes arrived where {total} were announced")


def _resume_point(url: str, part: Path) -> tuple[int, str | None]:
    """(bytes of ``part`` to resume after, the validator they were fetched under): 0 when
    there is no part or it holds another address's bytes."""
    meta = part.with_name(part.name + ".json")
    have = part.stat().st_size if part.is_file() else 0
    validator = None
    if have:
        try:
            saved = json.loads(meta.read_text())
        except (OSError, json.JSONDecodeError):
            saved = {}
        if saved.get("url") != url:  # a part of something else: start over
            have = 0
        validator = saved.get("validator")
    return have, validator


def _request(url: str, part: Path, have: int, validator: str | None, timeout: float) -> Any:
    """The response to a request for ``url`` from byte ``have`` on (If-Range: the
    validator), or None when the server says the part is already complete."""
    import http.client
    import urllib.error
    import urllib.request

    from mdcr import __version__

    headers = {"User-Agent": f"mdcr/{__version__}"}
    if have:
        headers["Range"] = f"bytes={have}-"
        if validator:
            headers["If-Range"] = validator
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as exc:
        _, total = _content_range(exc.headers.get("Content-Range"))
        if exc.code == 416 and have and total == have:  # the part was already complete
            return None
        if exc.code == 416:
            part.unlink(missing_ok=True)
            raise _Cut(f"the server refused to resume at byte {have}") from None
        raise InputDataError(
            f"cannot download {url}: HTTP {exc.code} {exc.reason}; check the address "
            f"(the MDCR README at github.com/zoranmedic/mdcr lists the release's files)"
        ) from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
        raise _Cut(f"no answer from the server ({exc})") from None


def _receive(resp: Any, url: str, part: Path, have: int, quiet: bool) -> int | None:
    """Append a ranged answer to ``part`` (or write a whole one over it), with a progress
    bar; record the address and validator beside it. Returns the announced total size."""
    from tqdm.auto import tqdm

    if resp.status == 206:
        start, total = _content_range(resp.headers.get("Content-Range"))
        if start != have:
            part.unlink(missing_ok=True)
            raise _Cut(f"the server resumed at byte {start}, not {have}")
        mode = "ab" if have else "wb"
    else:  # the whole file (the server ignored the range, or the file changed)
        have, mode = 0, "wb"
        length = resp.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
    new_validator = resp.headers.get("ETag") or resp.headers.get("Last-Modified")
    meta = part.with_name(part.name + ".json")
    atomic_write_text(meta, json.dumps({"url": url, "validator": new_validator}) + "\n")
    bar = tqdm(
        total=total,
        initial=have,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=part.name.removesuffix(".part"),
        disable=quiet,
        file=sys.stderr,
        dynamic_ncols=True,
    )
    with bar, part.open(mode) as f:
        while chunk := _read(resp):
            f.write(chunk)
            bar.update(len(chunk))
    return total


def fetch(url: str, target: Path, *, quiet: bool, timeout: float, retries: int) -> None:
    """Download ``url`` to ``target`` through ``target.part``: resumed after a cut
    transfer (up to ``retries`` times here, and by running again), renamed when complete."""
    part = target.with_name(target.name + ".part")
    for attempt in range(retries + 1):
        try:
            _transfer(url, part, quiet=quiet, timeout=timeout)
            break
        except _Cut as exc:
            if attempt == retries:
                raise InputDataError(
                    f"cannot download {url} ({exc}); run mdcr download mdcr again to resume "
                    f"from '{part}'"
                ) from None
            if not quiet:
                have = part.stat().st_size if part.is_file() else 0
                print(
                    f"{target.name}: {exc}; resuming at byte {have} (try {attempt + 2})",
                    file=sys.stderr,
                    flush=True,
                )
            time.sleep(min(0.2 * 2**attempt, 10.0))
    os.replace(part, target)
    part.with_name(part.name + ".json").unlink(missing_ok=True)


def download_release(
    to: Path,
    *,
    base_url: str | None = None,
    quiet: bool = False,
    timeout: float = 60.0,
    retries: int = 5,
    wait: bool = True,
) -> dict[str, dict[str, Any]]:
    """Fetch the four release files into ``to`` and record their provenance.

    A file that already matches its record from the same address is kept. One process at
    a time downloads into a folder (a second waits, or with ``wait=False`` stops naming
    the first). Returns the records by file name.
    """
    from mdcr.core.locks import exclusive

    to.mkdir(parents=True, exist_ok=True)
    urls = release_urls(base_url)
    lock = to / ".download.lock"
    with exclusive(lock, what=f"the download into '{to}'", wait=wait, quiet=quiet):
        done = read_provenance(to)
        records: dict[str, dict[str, Any]] = {}
        for name, url in urls.items():
            target, old = to / name, done.get(name)
            if old and old.get("url") == url and _matches(target, old):
                if not quiet:
                    print(f"{name}: up to date ({old['sha256'][:12]})", file=sys.stderr)
                records[name] = old
                continue
            fetch(url, target, quiet=quiet, timeout=timeout, retries=retries)
            records[name] = {
                "url": url,
                "how": DOWNLOADED,
                "fetched_at": _now(),
                "size": target.stat().st_size,
                "sha256": sha256_file(target),
            }
            _write_provenance(to, {name: records[name]})
    return records


def _check_release_files(folder: Path, present: Sequence[str], *, quiet: bool) -> None:
    """Only the release's files are registered: each file's size where the release's is
    known (:data:`RELEASE_SIZES`), else its format (a benchmark JSON in the release's
    layout; a data file of ``paper_id``/``title``/``abstract`` lines). One-line errors."""
    from mdcr.benchmark.formats import read_papers_jsonl, read_release_json

    unchecked = []
    for name in present:
        path = folder / name
        size, expected = path.stat().st_size, RELEASE_SIZES.get(name)
        if expected is not None:
            if size != expected:
                raise InputDataError(
                    f"--register: '{path}' is {size} bytes, but the release's {name} is "
                    f"{expected}: it is not the release file; fetch it from {RELEASE_URLS[name]} "
                    "(or run mdcr download mdcr)"
                )
            continue
        unchecked.append(name)
        try:
            if name.endswith(".json"):
                read_release_json(path)
            else:
                read_papers_jsonl(path)
        except InputDataError as exc:
            raise InputDataError(
                f"--register: '{path}' is not a release file ({exc}); register only the files "
                f"fetched from {RELEASE_URLS[name]} (or run mdcr download mdcr)"
            ) from None
    if unchecked and not quiet:
        print(
            f"{', '.join(unchecked)}: names and format checked; sizes not checked (the "
            "release publishes none, and mdcr knows none)",
            file=sys.stderr,
        )


def register_release(folder: Path, *, quiet: bool = False) -> dict[str, dict[str, Any]]:
    """Record the sha256 of release files fetched by hand, as declared by the user.

    Only the release's files are registered: by name, and by size where the release's is
    known, else by format (:func:`_check_release_files`). A file that matches its download
    record keeps that record. Returns the records of the files registered, by name.
    """
    if not folder.is_dir():
        raise InputDataError(f"--register: '{folder}' is not a folder; give the release's folder")
    present = [name for name in RELEASE_FILES if (folder / name).is_file()]
    if not any(name.endswith(".json") for name in present):
        raise InputDataError(
            f"--register: '{folder}' holds neither mdcr_val.json nor mdcr_test.json; give "
            "the folder of the files fetched from the addresses in the MDCR README"
        )
    _check_release_files(folder, present, quiet=quiet)
    old = read_provenance(folder)
    records: dict[str, dict[str, Any]] = {}
    for name in present:
        path = folder / name
        if name in old and old[name].get("how") == DOWNLOADED and _matches(path, old[name]):
            records[name] = old[name]
            continue
        records[name] = {
            "url": RELEASE_URLS[name],
            "how": DECLARED_BY_USER,
            "recorded_at": _now(),
            "size": path.stat().st_size,
            "sha256": sha256_file(path),
        }
        if not quiet:
            print(f"{name}: sha256 recorded as declared by the user", file=sys.stderr)
    _write_provenance(folder, records)
    return records
