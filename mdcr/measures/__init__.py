"""Measures: one typed, registered entry per measure (``registry.py``), their values
computed with ranx (``compute.py``) and their expectation under a random ranking
(``chance.py``). A core package: it imports only mdcr's core modules (errors, paper), so
every stage that scores (``index`` for BM25 tuning, ``eval``, ``benchmark``) uses the
same entries without importing one another.

ranx compiles its measures with numba on first use (seconds). numba caches the compiled
code next to the installed package by default, which may be read-only; unless the user
chose a folder, the cache goes to a per-user folder so that later runs start in about a
second. This must happen before numba is first imported, hence here (``mdcr.scoring``, which
also runs ranx, imports this package first).
"""

from __future__ import annotations

import os
from pathlib import Path


def _default_numba_cache() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "mdcr" / "numba")


os.environ.setdefault("NUMBA_CACHE_DIR", _default_numba_cache())
