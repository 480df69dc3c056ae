"""Stores written recently: a small record in the user's cache, for ``mdcr ls``'s hint.

Which store a command uses depends on where it runs and what it is given
(:mod:`mdcr.core.home`): ``mdcr evaluate --pools DIR`` writes to the store holding ``DIR``,
while ``mdcr ls`` from a working folder reads the project's store or the user's. So every
store notes itself here before its first write (:func:`note`), and ``mdcr ls`` names the
other stores written in the last :data:`DAYS` days (:func:`hint_lines`).

The record is ``recent-stores.json`` in the user cache folder (``$XDG_CACHE_HOME/mdcr``,
else ``~/.cache/mdcr``, whatever ``$MDCR_HOME`` says): ``{"stores": {PATH: "when (UTC)"}}``,
written atomically; entries older than :data:`DAYS` days are dropped when it is written. It
is a hint only: a record that cannot be read or written is ignored, never an error.
"""

from __future__ import annotations

import calendar
import json
import time
from pathlib import Path

from mdcr.core.home import user_cache_home

RECORD = "recent-stores.json"
DAYS = 30
_STAMP = "%Y-%m-%dT%H:%M:%SZ"
_SHOWN = 3  # stores named by ls at most


def record_path() -> Path:
    """Where the record lies: the user cache folder's ``recent-stores.json``."""
    return user_cache_home().path / RECORD


def _age_days(stamp: str, now: float) -> float:
    try:
        then = calendar.timegm(time.strptime(stamp, _STAMP))
    except (ValueError, OverflowError):
        return float("inf")
    return (now - then) / 86_400


def read(now: float | None = None, days: int = DAYS) -> dict[str, str]:
    """{store path: when it was last written (UTC)} of the last ``days`` days, newest
    first; empty when there is no readable record."""
    now = time.time() if now is None else now
    try:
        data = json.loads(record_path().read_text())
    except (OSError, ValueError):
        return {}
    stores = data.get("stores") if isinstance(data, dict) else None
    if not isinstance(stores, dict):
        return {}
    kept = {
        str(k): v for k, v in stores.items() if isinstance(v, str) and _age_days(v, now) <= days
    }
    return dict(sorted(kept.items(), key=lambda kv: kv[1], reverse=True))


def note(home: Path, now: float | None = None) -> None:
    """Record that the store ``home`` is written now (atomically; failures ignored)."""
    from mdcr.core.atomic import atomic_write_text

    now = time.time() if now is None else now
    stores = read(now)
    stores[str(home)] = time.strftime(_STAMP, time.gmtime(now))
    text = json.dumps({"stores": dict(sorted(stores.items()))}, indent=1) + "\n"
    try:
        record_path().parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(record_path(), text)
    except OSError:
        pass  # a hint, never a reason to fail a run


def others(home: Path, now: float | None = None) -> list[tuple[Path, str]]:
    """The stores other than ``home`` written in the last :data:`DAYS` days that still
    exist, newest first, with when."""
    found = [
        (Path(p), when) for p, when in read(now).items() if Path(p) != home and Path(p).is_dir()
    ]
    return sorted(found, key=lambda item: item[1], reverse=True)


def hint_lines(home: Path) -> list[str]:
    """``mdcr ls``'s hint: the other stores written recently (none: no lines)."""
    found = others(home)
    lines = [
        f"also written recently: {p} ({when[:10]} {when[11:16]} UTC); `mdcr ls --home {p}` lists it"
        for p, when in found[:_SHOWN]
    ]
    if len(found) > _SHOWN:
        lines.append(f"... and {len(found) - _SHOWN} more store(s) in {record_path()}")
    return lines
