"""What makes an encoder's vectors, for the fingerprint: its code and its weights.

The encode stage hashes this identity (plus its parameters and the resolved precision), so
a changed encoder never returns a cached vector:

- a hub model (``scibert``, ``specter``, ``hf:org/name`` ...): the commit its revision
  resolves to, from the hub or, offline, from the local Hugging Face cache; the model is
  then loaded at exactly that commit;
- a local folder (``hf:/path``, ``minilm``'s packaged weights): the sha256 of every file
  in it (weights, config, tokenizer, sentence-transformers modules);
- ``py:<module>:<attr>``: the sha256 of the module's source and of every source file of
  the user's that it imports, followed recursively (the standard library, installed
  packages and mdcr itself are left out), plus the encoder's ``version`` string if it
  declares one. Data files a ``py:`` encoder reads are not seen: declare ``version``.

Library versions (torch, transformers) are recorded in every manifest but not hashed.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import os
import re
import sysconfig
from pathlib import Path
from typing import Any

from mdcr.errors import ConfigError, UnresolvedIdentityError

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_MDCR_DIR = Path(__file__).resolve().parents[1]


# -- files ---------------------------------------------------------------------------------


def _files(folder: Path) -> list[Path]:
    """Every regular file under ``folder`` except hidden ones (``.git``, ``.cache``)."""
    out = []
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or not p.is_file():
            continue
        out.append(p)
    return out


def file_sha256(path: Path) -> str:
    """Content hash of one file, read every time: no cache keyed by size or mtime could be
    trusted (a rewrite of the same size within the clock's tick looks unchanged)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def folder_digest(folder: Path) -> str:
    """sha256 over the relative names and contents of the files of a model folder."""
    files = _files(folder)
    if not files:
        raise ConfigError(f"model folder '{folder}' holds no files; check the path")
    h = hashlib.sha256()
    for p in files:
        h.update(f"{p.relative_to(folder).as_posix()}\0{file_sha256(p)}\0".encode())
    return "sha256:" + h.hexdigest()[:32]


# -- hub commits ---------------------------------------------------------------------------


def _cache_root() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0", "false", "False")


def cached_commit(model_id: str, revision: str) -> str | None:
    """The commit ``revision`` points to in the local Hugging Face cache, if it is there."""
    ref = _cache_root() / ("models--" + model_id.replace("/", "--")) / "refs" / revision
    if ref.is_file():
        commit = ref.read_text().strip()
        return commit if _COMMIT.match(commit) else None
    return None


# Hub answers of this process: (model id, revision) -> (time, commit or None). A pipeline's
# plan asks once per model, not once per step; an answer is kept for a minute.
_HUB_ANSWERS: dict[tuple[str, str], tuple[float, str | None, str]] = {}
_HUB_TTL_S = 60.0


def _ask_hub(model_id: str, revision: str) -> tuple[str | None, str]:
    """(commit, reason it is None) from the hub, remembered for a minute."""
    import time

    key = (model_id, revision)
    hit = _HUB_ANSWERS.get(key)
    if hit is not None and time.monotonic() - hit[0] < _HUB_TTL_S:
        return hit[1], hit[2]
    commit: str | None = None
    reason = ""
    try:
        from huggingface_hub import HfApi

        sha = HfApi().model_info(model_id, revision=revision, timeout=10).sha
        commit = str(sha) if sha else None
        reason = "the hub gave no commit"
    except Exception as exc:  # the hub's errors are many; any of them means "not now"
        reason = f"the hub did not answer ({type(exc).__name__})"
    _HUB_ANSWERS[key] = (time.monotonic(), commit, reason)
    return commit, reason


def hub_commit(model_id: str, revision: str | None) -> str:
    """The commit a hub model's revision resolves to (a 40-hex revision is its own).

    Online, the hub says what the revision is now; offline (``HF_HUB_OFFLINE=1``) or when
    the hub cannot be reached, the local cache does. Neither: a one-line error.
    """
    if revision and _COMMIT.match(revision):
        return revision
    rev = revision or "main"
    reason = "HF_HUB_OFFLINE is set"
    if not _offline():
        online, reason = _ask_hub(model_id, rev)
        if online is not None:
            return online
    commit = cached_commit(model_id, rev)
    if commit is not None:
        return commit
    raise UnresolvedIdentityError(
        f"cannot tell which commit of model '{model_id}' (revision {rev}) to use: {reason} "
        "and it is not in the local Hugging Face cache; download it, or pass "
        "revision=<40-hex commit> with the model cached"
    )


def model_source_identity(source: str, revision: str | None) -> dict[str, Any]:
    """Identity of a model given as a local folder or a hub id."""
    path = Path(source).expanduser()
    if path.is_dir():
        return {"weights": folder_digest(path)}
    if path.exists():
        raise ConfigError(f"model path '{source}' is a file; give the model's folder")
    if source.startswith((".", "/", "~")):
        raise ConfigError(f"model folder '{source}' does not exist; check the path")
    return {"model_id": source, "commit": hub_commit(source, revision)}


# -- python code ---------------------------------------------------------------------------


def _library_dirs() -> tuple[Path, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    return (*(Path(d).resolve() for d in dirs), _MDCR_DIR)


def _is_user_file(path: Path, libraries: tuple[Path, ...]) -> bool:
    resolved = path.resolve()
    return resolved.suffix == ".py" and not any(resolved.is_relative_to(d) for d in libraries)


def _imported_names(tree: ast.AST, package: str | None) -> list[str]:
    """Module names an import statement may load (``from a import b`` may load ``a.b``)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                names += [".".join(parts[: i + 1]) for i in range(len(parts))]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                if not package:
                    continue
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
                base = ".".join([*anchor, base] if base else anchor)
            if not base:
                continue
            names.append(base)
            names += [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return names


def _spec_file(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    return Path(spec.origin)


def user_source_files(module_name: str) -> dict[str, Path]:
    """The user's source files a module consists of: itself and what it imports, recursively.

    Keys are module names, values their files. Files of the standard library, of installed
    packages and of mdcr are left out.
    """
    libraries = _library_dirs()
    found: dict[str, Path] = {}
    library_tops: set[str] = set()  # top-level packages that are not the user's
    todo = [module_name]
    while todo:
        name = todo.pop()
        top = name.split(".")[0]
        if name in found or top in library_tops:
            continue
        if top != name and top not in found:
            top_file = _spec_file(top)
            if top_file is not None and not _is_user_file(top_file, libraries):
                library_tops.add(top)  # never look inside an installed package
                continue
        file = _spec_file(name)
        if file is None or not _is_user_file(file, libraries):
            continue
        found[name] = file
        package = name if file.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(file.read_bytes(), filename=str(file))
        todo += [n for n in _imported_names(tree, package or None) if n not in found]
    return found


def is_user_module(name: str) -> bool:
    """Whether module ``name`` is the user's code (not the standard library, an installed
    package or mdcr): a file outside those, ``__main__`` (a notebook), or code that was
    loaded from a path without a module registered for it."""
    import sys

    if name == "__main__":
        return True
    module = sys.modules.get(name)
    if module is None:
        top = sys.modules.get(name.split(".")[0])
        if top is not None:
            return is_user_module(top.__name__)
        return name not in sys.builtin_module_names
    file = getattr(module, "__file__", None)
    return isinstance(file, str) and _is_user_file(Path(file), _library_dirs())


def code_identity(names: list[str]) -> dict[str, Any]:
    """``code`` (sha256) and ``files`` (module names) of the user source files that the
    modules ``names`` consist of, with what they import."""
    files: dict[str, Path] = {}
    for name in names:
        files.update(user_source_files(name))
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(f"{name}\0{file_sha256(files[name])}\0".encode())
    return {"code": "sha256:" + h.hexdigest()[:32], "files": sorted(files)}


def python_identity(module_name: str, obj: Any) -> dict[str, Any]:
    """Identity of a ``py:`` encoder: its user source files' hash and declared version."""
    names = [module_name]
    defining = getattr(obj if isinstance(obj, type) else type(obj), "__module__", None)
    if callable(obj) and not isinstance(obj, type) and hasattr(obj, "__module__"):
        defining = obj.__module__  # a factory function
    if defining and defining not in names:
        names.append(defining)
    out = code_identity(names)
    version = getattr(obj, "version", None)
    if version is not None:
        out["version"] = str(version)
    return out


# sha256 of each user module's file when mdcr last (re)loaded it, so that an edited
# module is reloaded before its encoder runs again in the same process (a notebook).
_LOADED: dict[str, str] = {}


def _import_fresh(module_name: str) -> Any:
    """Import ``module_name``; if it or a user module it imports was loaded before and has
    changed on disk since, reload them all (its imports first, itself last), so that the
    code that runs is the code the fingerprint hashes."""
    import sys

    before = set(sys.modules)
    module = importlib.import_module(module_name)
    files = user_source_files(module_name)
    digests = {name: file_sha256(path) for name, path in files.items()}
    stale = [n for n in files if n in before and _LOADED.get(n) != digests[n]]
    if stale:
        for name in sorted(files, key=lambda n: (n == module_name, -n.count("."), n)):
            if name in sys.modules:
                importlib.reload(sys.modules[name])
        module = sys.modules[module_name]
    _LOADED.update(digests)
    return module


def import_attr(spec: str, arg: str) -> tuple[str, Any]:
    """``(module name, object)`` of ``py:<module>:<attr>``, or a one-line ConfigError.

    User modules edited since they were loaded are reloaded first.
    """
    module_name, attr = arg.split(":")
    try:
        module = _import_fresh(module_name)
    except Exception as exc:  # the user's module may raise anything while importing
        raise ConfigError(
            f"encoder '{spec}': cannot import module '{module_name}' "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
            "check that it is on PYTHONPATH and imports cleanly"
        ) from exc
    if not hasattr(module, attr):
        raise ConfigError(f"encoder '{spec}': module '{module_name}' has no '{attr}'")
    return module_name, getattr(module, attr)
