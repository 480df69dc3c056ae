"""A deterministic digest of everything an in-memory model's outputs can depend on.

:func:`state_digest` walks an object's state at any depth and hashes what it finds:

- numbers, strings, bytes and ``None`` by value; lists, tuples and dicts in order; sets by
  their members' digests, sorted (set order changes with ``PYTHONHASHSEED``);
- numpy arrays and scalars: dtype, shape and bytes; torch tensors: dtype, shape and the
  bytes of their CPU copy; torch modules: every attribute (parameters, buffers,
  sub-modules, config, hooks) except the ``training`` flag, which ``encode`` sets itself;
- not where and how the model runs, a setting: a tensor's device, a ``torch.device``,
  attributes named ``device``, ``_device``, ``device_map``, ``_device_map``,
  ``hf_device_map`` or ``_target_device``, and those a class lists in ``state_settings``
  (what it derives from the device, and what exists only to run it, such as thread
  pools, locks, statistics or copies of a model on other devices); nor where it was read
  from, the dict keys ``local_files_only``, ``cache_dir``, ``force_download``,
  ``resume_download`` and ``proxies`` (a tokenizer's ``init_kwargs``): hashed by name alone;
- classes, functions and modules of installed packages by their qualified name (library
  versions are recorded in manifests, not hashed); those of the user's code also by their
  code: a class's attributes and methods, a function's bytecode, constants, defaults,
  closure and the globals it reads, so a class defined in a notebook cell is covered;
- any other object by what pickle would save of it (``__reduce_ex__``): a plain object's
  ``__dict__`` and slots, a C object's declared state (a tokenizer's JSON, a random
  generator's state).

An object whose state cannot be read (an open file, a socket, a lock, a generator, a C
object that declares no state) raises :class:`UnhashableState` naming the attribute path,
so that no model is cached under an identity that would not see it change. Objects met
twice (cycles, shared sub-objects) are hashed once and referred to by their first visit.
"""

from __future__ import annotations

import collections
import copyreg
import enum
import hashlib
import io
import socket
import struct
import sys
import types
import weakref
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

_MAX_DEPTH = 400


class UnhashableState(Exception):
    """Part of an object's state cannot be hashed; ``path`` says where, ``what`` why."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(f"{path}: {what}")
        self.path = path
        self.what = what


def _lock_types() -> tuple[type, ...]:
    import _thread
    import threading

    return (_thread.LockType, type(threading.RLock()))


# Objects whose state is outside Python's reach: hashing their attributes would hide that.
_NEVER: tuple[tuple[type, ...], str] = (
    (
        io.IOBase,
        socket.socket,
        *_lock_types(),
        types.GeneratorType,
        types.CoroutineType,
        types.AsyncGeneratorType,
        types.FrameType,
        types.TracebackType,
    ),
    "its state cannot be read",
)
_SCALARS = (type(None), bool, int, float, complex, str, bytes, bytearray)
_SINGLETONS = {id(Ellipsis): "Ellipsis", id(NotImplemented): "NotImplemented"}
_DESCRIPTORS = (
    types.MethodWrapperType,
    types.WrapperDescriptorType,
    types.MethodDescriptorType,
    types.ClassMethodDescriptorType,
    types.GetSetDescriptorType,
    types.MemberDescriptorType,
)
# Attributes that say where and how a model runs, settings (as the device of a tensor
# is): the device, and the encode options that are settings (the precision is hashed by
# what it resolves to, beside the state). A class adds its own in ``state_settings``.
_SETTINGS = frozenset(
    (
        "device",
        "_device",
        "device_map",
        "_device_map",
        "hf_device_map",
        "_target_device",
        "precision",
        "batch_tokens",
        "workers",
    )
)
# Keys of the keyword arguments a model or tokenizer keeps from its loading (a tokenizer's
# ``init_kwargs``) that say where it was read from, not what it computes: settings too, so
# that one folder read offline (``HF_HUB_OFFLINE=1``, ``local_files_only=True``) and online
# is one model.
_LOADING_KEYS = frozenset(
    ("local_files_only", "cache_dir", "force_download", "resume_download", "proxies")
)
# Class attributes that are no code: Python's own, and pickle's cache of slot names.
_CLASS_NOISE = ("__dict__", "__weakref__", "__doc__", "__module__", "__qualname__", "__slotnames__")
_NEWOBJ = (copyreg.__newobj__, copyreg.__newobj_ex__, copyreg._reconstructor)  # type: ignore[attr-defined]


def _settings_of(obj: Any) -> frozenset[str]:
    """The attribute names of ``obj`` that are settings: the common ones, and those its
    class declares in ``state_settings``."""
    declared = getattr(type(obj), "state_settings", ())
    return _SETTINGS | frozenset(declared) if declared else _SETTINGS


def _qualname(obj: Any) -> str:
    module = getattr(obj, "__module__", None) or ""
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or "?"
    return f"{module}.{name}"


class _Walker:
    """One walk: a running sha256, the objects seen (by id) and the user modules met."""

    def __init__(self, is_user_module: Callable[[str], bool], known: dict[int, str]) -> None:
        self.h = hashlib.sha256()
        self.is_user_module = is_user_module
        self.known = known  # id(tensor) -> its key in a weights digest hashed beside this one
        self.seen: dict[int, int] = {}
        self.alive: list[Any] = []  # objects made during the walk keep their ids unique
        self.user_modules: set[str] = set()
        self.per_call: set[int] = set()  # Rust tokenizers whose truncation is set per call
        self._user: dict[str, bool] = {}

    # -- output --------------------------------------------------------------------------

    def put(self, tag: str, data: bytes | str = b"") -> None:
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        self.h.update(f"{tag}:{len(raw)}:".encode())
        self.h.update(raw)

    def user(self, module: str | None) -> bool:
        if not module:
            return False
        if module not in self._user:
            self._user[module] = self.is_user_module(module)
        if self._user[module]:
            self.user_modules.add(module)
        return self._user[module]

    # -- the walk ------------------------------------------------------------------------

    def walk(self, obj: Any, path: str, depth: int = 0) -> None:
        kind = type(obj)
        if kind in _SCALARS:
            self._scalar(obj)
            return
        if id(obj) in _SINGLETONS:
            self.put("const", _SINGLETONS[id(obj)])
            return
        if depth > _MAX_DEPTH:
            raise UnhashableState(path, f"it is nested more than {_MAX_DEPTH} levels deep")
        first = self.seen.get(id(obj))
        if first is not None:
            self.put("ref", str(first))
            return
        self.seen[id(obj)] = len(self.seen)
        self.alive.append(obj)
        self._object(obj, path, depth + 1)

    def _scalar(self, obj: Any) -> None:
        kind = type(obj)
        if kind is float:
            self.put("float", struct.pack("<d", obj))
        elif kind is complex:
            self.put("complex", struct.pack("<dd", obj.real, obj.imag))
        elif kind in (bytes, bytearray):
            self.put(kind.__name__, bytes(obj))
        else:
            self.put(kind.__name__, repr(obj))

    def _object(self, obj: Any, path: str, depth: int) -> None:
        if isinstance(obj, _NEVER[0]):
            raise UnhashableState(path, f"a {_qualname(type(obj))}: {_NEVER[1]}")
        if isinstance(obj, enum.Enum):
            self.put("enum", f"{_qualname(type(obj))}.{obj.name}")
            return
        if self._numeric(obj, path):
            return
        if isinstance(obj, type | types.ModuleType | types.FunctionType | types.MethodType):
            self._code(obj, path, depth)
            return
        if isinstance(obj, (types.BuiltinFunctionType, *_DESCRIPTORS, types.CodeType)):
            self._code(obj, path, depth)
            return
        if isinstance(obj, staticmethod | classmethod):
            self.put("wrapped", type(obj).__name__)
            self.walk(obj.__func__, path, depth)
            return
        if isinstance(obj, property):
            self.put("property")
            for part in (obj.fget, obj.fset, obj.fdel):
                self.walk(part, path, depth)
            return
        if isinstance(obj, PurePath):
            self.put("path", str(obj))
            return
        if isinstance(obj, weakref.ref):
            self.put("weakref")
            self.walk(obj(), path, depth)
            return
        if self._container(obj, path, depth):
            return
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(obj, torch.nn.Module):
            self._module(obj, path, depth)
            return
        if type(obj).__module__ == "logging" and hasattr(obj, "getEffectiveLevel"):
            self.put("logger", str(getattr(obj, "name", "")))  # logs change no output
            return
        if _is_hf_tokenizer(obj):
            self.per_call.add(id(getattr(obj, "_tokenizer", None)))
        elif id(obj) in self.per_call and hasattr(obj, "to_str"):
            self._backend_tokenizer(obj)
            return
        self._reduced(obj, path, depth)

    def _backend_tokenizer(self, tok: Any) -> None:
        """A transformers tokenizer's Rust tokenizer, without the truncation and padding
        that the wrapper sets on it from each call's arguments."""
        import json

        spec = json.loads(tok.to_str())
        spec.pop("truncation", None)
        spec.pop("padding", None)
        self.put("tokenizer", json.dumps(spec, sort_keys=True))

    def _numeric(self, obj: Any, path: str) -> bool:
        """Arrays, tensors, dtypes and devices; False for anything else."""
        np = sys.modules.get("numpy")
        if np is not None:
            if isinstance(obj, np.ndarray):
                if obj.dtype.hasobject:
                    self.put("ndarray-object", repr(obj.shape))
                    for i, item in enumerate(obj.reshape(-1).tolist()):
                        self.walk(item, f"{path}[{i}]")
                else:
                    self.put("ndarray", f"{obj.dtype.descr}{obj.shape}")
                    self.put("data", np.ascontiguousarray(obj).tobytes())
                return True
            if isinstance(obj, np.generic):
                self.put("npscalar", obj.dtype.str)
                self.put("data", obj.tobytes())
                return True
            if isinstance(obj, np.dtype):
                self.put("npdtype", str(obj.descr))
                return True
        torch = sys.modules.get("torch")
        if torch is None:
            return False
        if isinstance(obj, torch.Tensor):
            self._tensor(obj, path, torch)
            return True
        if isinstance(obj, torch.dtype):
            self.put("dtype", str(obj))
            return True
        if isinstance(obj, torch.device):
            self.put("device")  # where it runs is a setting
            return True
        return False

    def _tensor(self, t: Any, path: str, torch: Any) -> None:
        key = self.known.get(id(t))
        if key is not None:
            self.put("known", key)
            return
        if t.is_meta:
            raise UnhashableState(path, "a tensor on the meta device has no values to hash")
        try:
            c = (t.to_dense() if t.layout != torch.strided else t).detach().cpu().contiguous()
            data = c.reshape(-1).view(torch.uint8).numpy().tobytes()
        except (RuntimeError, TypeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UnhashableState(path, f"a {t.dtype} tensor ({first})") from None
        self.put("tensor", f"{c.dtype}{tuple(c.shape)}")
        self.put("data", data)

    def _container(self, obj: Any, path: str, depth: int) -> bool:
        if isinstance(obj, list | tuple):
            self.put(type(obj).__name__ if type(obj) in (list, tuple) else _qualname(type(obj)))
            self.put("len", str(len(obj)))
            for i, item in enumerate(obj):
                self.walk(item, f"{path}[{i}]", depth)
        elif isinstance(obj, dict | types.MappingProxyType):
            self.put("dict" if type(obj) is dict else _qualname(type(obj)))
            self.put("len", str(len(obj)))
            for k, v in list(obj.items()):
                self.walk(k, path, depth)
                if isinstance(k, str) and k in _LOADING_KEYS:
                    self.put("setting")
                else:
                    self.walk(v, f"{path}[{k!r}]", depth)
            if isinstance(obj, collections.defaultdict):
                self.walk(obj.default_factory, f"{path}.default_factory", depth)
        elif isinstance(obj, set | frozenset):
            self.put(type(obj).__name__ if type(obj) in (set, frozenset) else _qualname(type(obj)))
            self.put("members", "".join(sorted(self._apart(m, path, depth) for m in obj)))
        else:
            return False
        extra = getattr(obj, "__dict__", None)  # a subclass's own attributes
        if extra:
            self._attributes(extra, path, depth, _settings_of(obj))
        return True

    def _apart(self, obj: Any, path: str, depth: int) -> str:
        """The digest of ``obj`` on its own (a set member: its place has no order)."""
        sub = _Walker(self.is_user_module, self.known)
        sub._user, sub.per_call = self._user, self.per_call
        sub.walk(obj, f"{path}{{...}}", depth)
        self.user_modules |= sub.user_modules
        return sub.h.hexdigest()

    def _attributes(
        self,
        attrs: Any,
        path: str,
        depth: int,
        settings: frozenset[str] = _SETTINGS,
    ) -> None:
        if not isinstance(attrs, dict):
            self.walk(attrs, path, depth)
            return
        items = list(attrs.items())
        self.put("attrs", str(len(items)))
        for k, v in items:
            self.walk(k, path, depth)
            if k in settings:
                self.put("setting")
            else:
                self.walk(v, f"{path}.{k}", depth)

    def _module(self, module: Any, path: str, depth: int) -> None:
        """A torch module: its class and every attribute but ``training``; parameters,
        buffers and sub-modules by their names in the module tree."""
        self._code(type(module), path, depth)
        for k, v in list(vars(module).items()):
            if k == "training" or k in _SETTINGS:
                continue
            self.walk(k, path, depth)
            if k in ("_parameters", "_buffers", "_modules") and isinstance(v, dict):
                self.put("children", str(len(v)))
                for name, child in list(v.items()):
                    self.walk(name, path, depth)
                    self.walk(child, f"{path}.{name}", depth)
            else:
                self.walk(v, f"{path}.{k}", depth)

    # -- code ----------------------------------------------------------------------------

    def _code(self, obj: Any, path: str, depth: int) -> None:
        if isinstance(obj, types.ModuleType):
            self.put("module", obj.__name__)
            self.user(obj.__name__)
        elif isinstance(obj, type):
            self.put("class", _qualname(obj))
            if self.user(obj.__module__):
                self._class_body(obj, depth)
        elif isinstance(obj, types.MethodType):
            self.put("method")
            self.walk(obj.__func__, path, depth)
            self.walk(obj.__self__, path, depth)
        elif isinstance(obj, types.FunctionType):
            self._function(obj, path, depth)
        elif isinstance(obj, types.CodeType):
            self._bytecode(obj, path, depth)
        elif isinstance(obj, types.BuiltinFunctionType):
            owner = obj.__self__
            if owner is None or isinstance(owner, types.ModuleType):
                self.put("builtin", f"{getattr(owner, '__name__', '')}.{obj.__name__}")
            else:  # a C method bound to an object: the object counts
                self.put("bound", obj.__name__)
                self.walk(owner, path, depth)
        else:  # slot wrappers and descriptors of C types
            owner = getattr(obj, "__objclass__", None) or getattr(obj, "__self__", None)
            self.put("descriptor", f"{_qualname(type(obj))}:{obj.__name__}")
            self.walk(owner, path, depth)

    def _class_body(self, cls: type, depth: int) -> None:
        """A user class's own attributes and methods, and its base classes."""
        for k, v in list(vars(cls).items()):
            if k in _CLASS_NOISE:
                continue
            self.walk(k, cls.__qualname__, depth)
            self.walk(v, f"{cls.__qualname__}.{k}", depth)
        for base in cls.__bases__:
            self.walk(base, cls.__qualname__, depth)

    def _function(self, fn: types.FunctionType, path: str, depth: int) -> None:
        self.put("function", _qualname(fn))
        mine = fn.__module__ is None or self.user(fn.__module__)
        where = fn.__qualname__
        if mine:
            self._bytecode(fn.__code__, where, depth)
        for part in (fn.__defaults__, fn.__kwdefaults__):
            self.walk(part, f"{where}.<defaults>", depth)
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                value = None
            self.walk(value, f"{where}.<closure {name}>", depth)
        if mine:  # the module globals the code reads (a notebook's have no file)
            for name in sorted(_names(fn.__code__)):  # attribute names too: skipped here
                if name in fn.__globals__:
                    self.walk(name, where, depth)
                    self.walk(fn.__globals__[name], f"{fn.__module__}.{name}", depth)

    def _bytecode(self, code: types.CodeType, path: str, depth: int) -> None:
        self.put("code", code.co_code)
        self.put("names", "\0".join((*code.co_names, "|", *code.co_varnames)))
        self.put("cells", "\0".join((*code.co_freevars, "|", *code.co_cellvars)))
        self.put(
            "args",
            f"{code.co_argcount},{code.co_posonlyargcount},{code.co_kwonlyargcount},"
            f"{code.co_flags}",
        )
        for const in code.co_consts:
            self.walk(const, path, depth)

    # -- anything else -------------------------------------------------------------------

    def _reduced(self, obj: Any, path: str, depth: int) -> None:
        """What pickle would save of ``obj``: its class and declared state."""
        try:
            reducer = copyreg.dispatch_table.get(type(obj))  # re.Pattern, numpy ufuncs
            reduced = reducer(obj) if reducer is not None else obj.__reduce_ex__(4)
        except Exception as exc:  # C objects without declared state raise TypeError
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UnhashableState(path, f"a {_qualname(type(obj))} ({first})") from None
        if isinstance(reduced, str):  # a module-level singleton, saved by name
            self.put("global", f"{getattr(obj, '__module__', '')}.{reduced}")
            return
        self.alive.append(reduced)
        func, args, *rest = (*reduced, None, None, None)[:5]
        if func in _NEWOBJ and isinstance(args, tuple) and args:
            self.put("object")
            self.walk(args[0], path, depth)  # the class
            self.walk(args[1:], f"{path}.<args>", depth)
        else:
            self.put("reduce")
            self.walk(func, path, depth)
            self.walk(args, f"{path}.<args>", depth)
        state, items, pairs = rest
        settings = _settings_of(obj)
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[1], dict):
            self._attributes(state[0], path, depth, settings)  # (__dict__, slots)
            self._attributes(state[1], path, depth, settings)
        else:
            self._attributes(state, path, depth, settings)
        if items is not None:
            self.walk(list(items), path, depth)
        if pairs is not None:
            self.walk(list(pairs), path, depth)


def _is_hf_tokenizer(obj: Any) -> bool:
    return any(
        c.__name__ == "PreTrainedTokenizerBase" and c.__module__.startswith("transformers.")
        for c in type(obj).__mro__
    )


def _names(code: types.CodeType) -> set[str]:
    """The global names a code object (and the code nested in it) may read."""
    out = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out |= _names(const)
    return out


def state_digest(
    obj: Any,
    is_user_module: Callable[[str], bool],
    *,
    root: str = "model",
    known: dict[int, str] | None = None,
) -> tuple[str, set[str]]:
    """``(sha256 hex digest, user modules met)`` of ``obj``'s state at any depth.

    ``is_user_module(name)`` tells the user's modules (hashed by code) from installed ones
    (hashed by name); ``known`` maps the ids of tensors hashed elsewhere (a module's
    weights digest) to their keys. Raises :class:`UnhashableState`.
    """
    walker = _Walker(is_user_module, known or {})
    walker.walk(obj, root)
    return walker.h.hexdigest(), walker.user_modules
