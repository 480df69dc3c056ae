"""What makes an encoder's vectors, for the fingerprint: its code and its weights.

The encode stage hashes this identity (plus its parameters and the resolved precision), so
a changed encoder never returns a cached vector:

- a hub model (``scibert``, ``specter``, ``hf:org/name`` ...): the commit its revision
  resolves to, from the hub or, offline, from the local Hugging Face cache; the model is
  then loaded at exactly that commit;
- a local folder (``hf:/path``, ``minilm``'s packaged weights): the sha256 of every file
  in it (weights, config, tokenizer, sentence-transformers modules);
- ``py:<module>:<attr>``: the code part of its identity (the built state and the probe
  vectors are added by :mod:`mdcr.encoders.registry` and :mod:`mdcr.encoders.probe`): the
  sha256 of the user source files it runs (the standard library, installed packages and
  mdcr itself are left out), plus the encoder's ``version`` string if it declares one
  (:func:`encoder_source_files`):

  1. the module (and the module defining the attribute), its packages' ``__init__.py``,
     and every user module they import, followed recursively: ``import`` and ``from ...
     import`` statements and ``importlib.import_module("name")`` / ``__import__("name")``
     calls with a literal name, wherever they are in the file;
  2. the user modules, functions and classes the module's globals point to after it is
     imported, however they were loaded (a file elsewhere loaded by path), followed
     through their own imports and globals;
  3. every user file whose code ran, or that ``importlib.import_module`` returned, while
     the encoder was imported, built and probed (:func:`watch_code`): a helper loaded by a
     computed name and kept in a dict, a closure or an attribute, or imported inside
     ``encode``. A file it never loads is neither hashed nor imported.

  Code loaded only while it encodes, on a path the probe papers do not take, cannot be
  seen before the run: the encode stage records such files in the manifest
  (``unhashed_user_files``) and warns in one line, again on every run that reuses the
  output; declare ``version`` for it. A hashed file edited in a running process (a
  notebook) is reloaded before the encoder runs again.

Library versions (torch, transformers) are recorded in every manifest but not hashed.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib
import importlib.util
import os
import re
import sys
import sysconfig
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mdcr.core.errors import ConfigError, UnresolvedIdentityError

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
    from mdcr.core.hints import option

    raise UnresolvedIdentityError(
        f"cannot tell which commit of model '{model_id}' (revision {rev}) to use: {reason} "
        "and it is not in the local Hugging Face cache; download it, or set "
        f"{option('encode', 'revision', '<40-hex commit>')} with the model cached"
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
    """Whether ``path`` is a source file of the user's: an absolute path to a ``.py`` file
    outside the standard library, installed packages and mdcr (one deleted since it was
    loaded included: hashing it then fails in one line, never silently). A module whose
    ``__file__`` is relative (``torch.classes``: ``_classes.py``) is never the user's,
    whatever the working folder holds."""
    if not path.is_absolute() or path.suffix != ".py":
        return False
    resolved = path.resolve()
    return not any(resolved.is_relative_to(d) for d in libraries)


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
        elif isinstance(node, ast.Call) and (literal := _import_call(node)):
            parts = literal.split(".")
            names += [".".join(parts[: i + 1]) for i in range(len(parts))]
    return names


def _import_call(node: ast.Call) -> str | None:
    """The module an ``importlib.import_module("a.b")`` or ``__import__("a.b")`` call with
    a literal absolute name loads."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value if first.value and not first.value.startswith(".") else None
    return None


def _spec_file(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    return Path(spec.origin)


def user_source_files(module_name: str, file: Path | None = None) -> dict[str, Path]:
    """The user's source files a module consists of: itself, its packages' ``__init__.py``
    and what they import, recursively.

    Keys are module names, values their files (``file``: the module's own, when it was
    loaded from a path rather than found by name). Files of the standard library, of
    installed packages and of mdcr are left out.
    """
    libraries = _library_dirs()
    found: dict[str, Path] = {}
    library_tops: set[str] = set()  # top-level packages that are not the user's
    origin = file
    todo = [module_name]
    while todo:
        name = todo.pop()
        top = name.split(".")[0]
        if name in found or top in library_tops:
            continue
        given = origin if name == module_name else None
        if top != name and top not in found and given is None:
            top_file = _spec_file(top)
            if top_file is not None and not _is_user_file(top_file, libraries):
                library_tops.add(top)  # never look inside an installed package
                continue
        file = given or _spec_file(name)
        if file is None or not _is_user_file(file, libraries):
            continue
        found[name] = file
        package = name if file.name == "__init__.py" else name.rpartition(".")[0]
        try:
            tree = ast.parse(file.read_bytes(), filename=str(file))
        except (SyntaxError, ValueError):  # hashed; its imports cannot be followed
            tree = ast.Module(body=[], type_ignores=[])
        parents = name.split(".")[:-1]  # their __init__.py run first on import
        todo += [".".join(parents[: i + 1]) for i in range(len(parents))]
        todo += [n for n in _imported_names(tree, package or None) if n not in found]
    return found


def is_user_module(name: str) -> bool:
    """Whether module ``name`` is the user's code (not the standard library, an installed
    package or mdcr): a file outside those, ``__main__`` (a notebook), or code that was
    loaded from a path without a module registered for it."""

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
    return _files_identity(files)


def _files_identity(files: dict[str, Path]) -> dict[str, Any]:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(f"{name}\0{file_sha256(files[name])}\0".encode())
    return {"code": "sha256:" + h.hexdigest()[:32], "files": sorted(files)}


def _code_places(value: Any) -> tuple[str, Path, dict[str, Any]] | None:
    """``(module name, file, namespace)`` of a user module, function or class that a
    module's global points to (however it was loaded), else None."""
    import types

    if isinstance(value, types.ModuleType):
        file = getattr(value, "__file__", None)
        return (value.__name__, Path(file), vars(value)) if isinstance(file, str) else None
    if isinstance(value, type):
        module = sys.modules.get(value.__module__)
        if module is not None:
            return _code_places(module)
        value = next((v for v in vars(value).values() if isinstance(v, types.FunctionType)), None)
    if isinstance(value, types.FunctionType):
        return (str(value.__module__), Path(value.__code__.co_filename), value.__globals__)
    return None


def encoder_source_files(module_name: str, obj: Any = None) -> dict[str, Path]:
    """The user's source files a ``py:`` encoder runs, by module name (the rule is in this
    module's docstring): its module and what that imports, the ``.py`` files of its
    folder, and the user modules, functions and classes its globals point to, followed
    through their own imports and globals."""

    libraries = _library_dirs()
    names = [module_name]
    if obj is not None:
        defining = getattr(obj if isinstance(obj, type) else type(obj), "__module__", None)
        if callable(obj) and not isinstance(obj, type) and hasattr(obj, "__module__"):
            defining = obj.__module__  # a factory function
        if defining and defining not in names:
            names.append(defining)
    found: dict[Path, str] = {}

    def add(files: dict[str, Path]) -> None:
        for label, path in files.items():
            found.setdefault(path.resolve(), label)

    for name in names:
        add(user_source_files(name))
    spaces = [vars(sys.modules[n]) for n in names if n in sys.modules]
    scanned: set[int] = set()
    while spaces:
        space = spaces.pop()
        if id(space) in scanned:
            continue
        scanned.add(id(space))
        for value in list(space.values()):
            place = _code_places(value)
            if place is None or not _is_user_file(place[1], libraries):
                continue
            label, path, namespace = place
            if path.resolve() not in found:
                add(user_source_files(label, path))
            spaces.append(namespace)
    for path in sorted(_LOADED_BY.get(module_name, ())):  # loaded or run (watch_code)
        if path.resolve() not in found:
            add(user_source_files(_module_of(path), path))
    files: dict[str, Path] = {}
    for path, label in sorted(found.items(), key=lambda item: item[1]):
        files[label if label not in files else str(path)] = path
    return files


def python_identity(module_name: str, obj: Any) -> dict[str, Any]:
    """The code part of a ``py:`` encoder's identity: the hash of the user source files it
    runs (:func:`encoder_source_files`, which takes in the files :func:`watch_code` saw
    run while it was imported, built and probed) and its declared version."""
    out = _files_identity(encoder_source_files(module_name, obj))
    version = getattr(obj, "version", None)
    if version is not None:
        out["version"] = str(version)
    return out


# sha256 of each user source file when mdcr last (re)loaded code from it, so that an edited
# module is reloaded before its encoder runs again in the same process (a notebook).
_LOADED: dict[Path, str] = {}
# Files of the modules the user imported before mdcr first imported their encoder: scored
# as the user holds them, never reloaded (:func:`_import_fresh`).
_HELD: set[Path] = set()
# Encoder modules mdcr has imported in this process.
_SEEN: set[str] = set()
# module name -> the user files its encoder loaded or ran in this process: on its first
# import, and while it was imported, built and probed (kept, so that every later plan in
# the process hashes the same files)
_LOADED_BY: dict[str, set[Path]] = {}


@functools.cache
def _resolved(file: str) -> Path:
    """A loaded module's file, resolved once a process: :func:`_module_of` compares the
    files of every loaded module (thousands, with torch and transformers) on each call."""
    return Path(file).resolve()


def _module_of(path: Path) -> str:
    """A name for the user file ``path`` that does not depend on where the project lies:
    the loaded module whose file it is, else its dotted name under the first entry of
    ``sys.path`` that holds it (a file loaded by path), else its stem."""

    resolved = path.resolve()
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and _resolved(file) == resolved:
            return name
    for entry in sys.path:
        root = Path(entry or ".").resolve()
        if resolved.is_relative_to(root):
            parts = resolved.relative_to(root).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            return ".".join(parts)
    return resolved.stem


def _files_of_imports(calls: set[tuple[Any, Any]]) -> set[str]:
    """The files of the modules that ``importlib.import_module(name, package)`` calls
    returned."""

    out = set()
    for name, package in calls:
        if not isinstance(name, str):
            continue
        try:
            full = importlib.util.resolve_name(name, package) if name.startswith(".") else name
        except (ImportError, ValueError):
            continue
        file = getattr(sys.modules.get(full), "__file__", None)
        if isinstance(file, str):
            out.add(file)
    return out


@contextlib.contextmanager
def watch_code(module_name: str, *, hash_them: bool = True) -> Iterator[set[Path]]:
    """The user source files whose code runs inside the block (in this thread and in the
    threads started in it), filled in when the block ends.

    With ``hash_them`` (while the ``py:`` encoder of ``module_name`` is imported, built and
    probed), they count as its code from then on in this process: what it imports by a
    computed name, keeps in a dict, a closure or an attribute, or imports inside
    ``encode`` is hashed with it (:func:`encoder_source_files`), and reloaded when edited.
    """
    import threading

    ran: set[str] = set()
    imported: set[tuple[Any, Any]] = set()  # import_module's (name, package) calls
    user: set[Path] = set()
    previous, previous_threads = sys.getprofile(), threading.getprofile()
    if previous is not None and not callable(previous):  # a C profiler (cProfile) is on:
        yield user  # left in place, nothing watched (the probe still sees behaviour)
        return
    import_code = importlib.import_module.__code__

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            ran.add(code.co_filename)
            if code is import_code:  # a module already loaded runs no code of its own
                imported.add((frame.f_locals.get("name"), frame.f_locals.get("package")))
        if previous is not None:
            previous(frame, event, arg)  # type: ignore[arg-type]

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        yield user
    finally:
        sys.setprofile(previous)
        threading.setprofile(previous_threads)  # type: ignore[arg-type]
        libraries = _library_dirs()
        ran.update(_files_of_imports(imported))
        files = {Path(f).resolve() for f in ran if f.endswith(".py") and Path(f).is_file()}
        user.update(f for f in files if _is_user_file(f, libraries))
        if hash_them:
            _LOADED_BY.setdefault(module_name, set()).update(user)
            for path in user - _HELD:  # what ran is on disk now; an edit is reloaded
                _LOADED.setdefault(path, file_sha256(path))


def _loaded_since(before: set[str]) -> set[str]:
    """The modules loaded since ``before`` (names in ``sys.modules``), not counting new
    names of modules loaded before (multiprocessing names the running script
    ``__mp_main__`` too: that is no module the encoder imported)."""
    held = {id(sys.modules[name]) for name in before if name in sys.modules}
    return {
        name
        for name, module in list(sys.modules.items())
        if name not in before and id(module) not in held
    }


def _user_files_loaded(names: set[str]) -> set[Path]:

    libraries = _library_dirs()
    out = set()
    for name in names:
        file = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(file, str) and _is_user_file(Path(file), libraries):
            out.add(Path(file).resolve())
    return out


def _import_fresh(module_name: str) -> Any:
    """Import ``module_name`` as the code the fingerprint hashes.

    A module the user imported before mdcr first imported this encoder (``import m`` in a
    notebook, then ``mdcr.evaluate("py:m:Enc")``) is the user's: it is scored as the user
    holds it, its attributes as set (``m.SCALE = 3``), on every call, and never reloaded
    (its state and code are hashed as they are in memory: :func:`python_identity` and the
    built object's state digest). A module mdcr imported itself is reloaded, with the user
    modules of the code it runs, when a file of it changed on disk since mdcr loaded it
    (the edit-and-rescore loop of a running process); the modules it imports go first and
    itself last.
    """

    before = set(sys.modules)
    module = importlib.import_module(module_name)
    first_sight = module_name not in _SEEN
    _SEEN.add(module_name)
    if module_name not in before:
        _LOADED_BY.setdefault(module_name, set()).update(_user_files_loaded(_loaded_since(before)))
    files = encoder_source_files(module_name)
    digests = {path.resolve(): file_sha256(path) for path in files.values()}
    if first_sight and module_name in before:  # the user's own import: theirs as it is
        _HELD.update(digests)
    stale = {p for p, digest in digests.items() if p in _LOADED and _LOADED[p] != digest}
    stale -= _HELD
    if stale:
        imported = {p.resolve(): n for n, p in user_source_files(module_name).items()}
        by_file = {
            _resolved(f): name
            for name, m in list(sys.modules.items())
            if isinstance(f := getattr(m, "__file__", None), str)
        }
        names = {by_file[p] for p in stale if p in by_file}
        names |= {n for p, n in imported.items() if p not in _HELD}
        for path in stale:
            _drop_bytecode(path)
        for name in sorted(names, key=lambda n: (n == module_name, -n.count("."), n)):
            if name in sys.modules:
                _drop_bytecode(sys.modules[name])
                importlib.reload(sys.modules[name])
        module = sys.modules[module_name]
        files = encoder_source_files(module_name)
        digests = {path.resolve(): file_sha256(path) for path in files.values()}
    _LOADED.update({p: d for p, d in digests.items() if p not in _HELD})
    return module


def _drop_bytecode(source: Path | types.ModuleType) -> None:
    """Remove the bytecode Python cached for ``source`` (a file, or a module: where it
    cached it), so that a reload compiles the file as it is: the cache is trusted by the
    source's mtime in whole seconds and its size, and an edit within the same second that
    keeps the size (``SCALE = 1`` to ``SCALE = 7``) would otherwise run the old code under
    the new file's hash."""
    with contextlib.suppress(OSError, ValueError, NotImplementedError, TypeError):
        if isinstance(source, types.ModuleType):
            cached = getattr(source, "__cached__", None)
            if isinstance(cached, str):
                Path(cached).unlink(missing_ok=True)
        else:
            Path(importlib.util.cache_from_source(str(source))).unlink(missing_ok=True)


def unhashed_user_files(arg: str, since: set[str], ran: set[Path]) -> list[str]:
    """User source files that the ``py:<arg>`` encoder loaded while it encoded (the module
    names loaded since ``since``) or whose code ran then (``ran``, from
    :func:`watch_code`), and that its fingerprint does not hash: code on a path the probe
    papers did not take."""

    module_name, attr = arg.split(":")
    obj = getattr(sys.modules.get(module_name), attr, None)
    hashed = {p.resolve() for p in encoder_source_files(module_name, obj).values()}
    loaded = ran | _user_files_loaded(_loaded_since(since))
    return sorted(str(p) for p in loaded - hashed)


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
