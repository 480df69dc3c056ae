"""Scoring: per-pool scores, aggregation, significance and intervals, chance baselines, and
the reports (tables, plots).

The measures themselves are :mod:`mdcr.measures`; importing it first sets numba's cache
folder before ranx (used here too, for significance and TREC files) loads numba.
"""

from __future__ import annotations

import mdcr.measures  # noqa: F401  (sets NUMBA_CACHE_DIR before numba is imported)
