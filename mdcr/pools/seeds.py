"""Seeds and sampling keys: every random choice is a function of (seed, purpose) and an id.

A sample of ``n`` papers is the ``n`` papers with the smallest key
``md5("<derived seed>:<paper_id>")`` (hex digest, ties by paper_id), where the derived
seed hashes the user's seed together with what is being sampled (stage, setup, split,
field, size, repetition). The key depends on nothing but the id and the seed, so a sample
does not depend on row order, thread count or DuckDB version (md5 is md5), and anyone can
recompute it with ``hashlib``.
"""

from __future__ import annotations

import hashlib

SEP = "\x1f"


def derive_seed(seed: int, *parts: object) -> int:
    """A 60-bit seed for one purpose, e.g. ``derive_seed(0, "pools", "dataset", "test")``."""
    text = SEP.join(["mdcr", str(seed), *(str(p) for p in parts)])
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:15], 16)


def salt(derived: int) -> str:
    """The prefix hashed with each paper id (the SQL side is ``md5(salt || paper_id)``)."""
    return f"{derived}:"


def sample_key(derived: int, paper_id: str) -> str:
    """The sampling key of ``paper_id`` (a Python twin of the SQL expression)."""
    return hashlib.md5((salt(derived) + paper_id).encode("utf-8")).hexdigest()


def key_sql(column: str = "paper_id") -> str:
    """SQL for the sampling key of ``column``, with the salt as the first ``?`` parameter."""
    return f"md5(?::VARCHAR || {column})"
