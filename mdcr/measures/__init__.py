"""Measures: one typed, registered entry per measure (``registry.py``), their values
computed with ranx (``compute.py``) and their expectation under a random ranking
(``chance.py``). A core package: it imports only mdcr's core modules (errors, paper, the
user cache folder), so every stage that scores (``index`` for BM25 tuning, ``scoring``,
``benchmark``) uses the same entries without importing one another.

ranx compiles its measures with numba on first use (seconds). numba caches the compiled
code next to the installed package by default, which may be read-only; unless the user
chose a folder, the cache goes to the user cache folder (:func:`default_numba_cache`, the
XDG rule of :func:`mdcr.core.home.user_cache_dir`) so that later runs start in about a
second. This must happen before numba is first imported, hence here (``mdcr.scoring``, which
also runs ranx, imports this package first).
"""

from __future__ import annotations

import os

from mdcr.core.home import user_cache_home


def default_numba_cache() -> str:
    """numba's cache unless ``$NUMBA_CACHE_DIR`` names one: ``numba`` in the user cache
    folder (``$XDG_CACHE_HOME/mdcr``, an absolute one only, else ``~/.cache/mdcr``)."""
    return str(user_cache_home().path / "numba")


os.environ.setdefault("NUMBA_CACHE_DIR", default_numba_cache())
