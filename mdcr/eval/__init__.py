"""Evaluation: per-query metrics, aggregation, significance, chance baselines, tables, plots.

ranx compiles its metrics with numba on first use (seconds). numba caches the compiled code
next to the installed package by default, which may be read-only; unless the user chose a
folder, the cache goes to a per-user folder so that later runs start in about a second.
This must happen before numba is first imported, hence here.
"""

from __future__ import annotations

import os
from pathlib import Path


def _default_numba_cache() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "mdcr" / "numba")


os.environ.setdefault("NUMBA_CACHE_DIR", _default_numba_cache())
