"""Atomic file writes: readers see a file's old content or its new, never a part."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


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
