"""Typed stage configs: frozen dataclasses, loaded from TOML or the command line, validated.

Each config field is declared once, as one of three kinds:

- :func:`param`: a parameter. It can change the outputs, so it is hashed into the
  fingerprint by its value, a default as much as a given one: a default changed in code
  (a BM25 grid, a paper constant) gives new outputs, never the old ones. Values are
  hashed canonically (as their declared type: ``1`` and ``1.0`` for a float are one value;
  lists and tuples alike; mappings by sorted key). ``param(..., resolved=True)`` marks
  one whose *resolved* value is hashed instead, through the stage's identity (the encode
  stage's ``precision = "auto"`` is hashed as the ``fp32`` or ``bf16`` it becomes).
- :func:`setting`: how the work is done (threads, device, batch size, workers, backend,
  engine). It cannot change the outputs beyond the last bits of floating point, so it is
  validated and recorded in the manifest but never hashed: changing it resumes and reuses.
- :func:`input_path`: an input artifact (a path, or ``@step`` inside a pipeline), hashed
  by the fingerprint of what it points to.

Fields shared by several configs are declared once in a keyword-only mixin (the engine
settings, the encoder options) and listed after the config's own.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from mdcr.core.errors import ConfigError

# The recipe's canonical text, owned by mdcr.core.fingerprints (imported here as before).
from mdcr.core.fingerprints import canonical_json as canonical_json

T = TypeVar("T")

_MISSING = dataclasses.MISSING


def param(default: Any = _MISSING, *, help: str = "", resolved: bool = False) -> Any:
    """A parameter of a stage config (hashed into the fingerprint by value).

    ``resolved=True``: the stage's identity hashes the value this parameter resolves to
    (for example ``"auto"`` -> ``"fp32"``), so the raw value is left out of the hash.
    """
    meta = {"help": help, "kind": "param", "resolved": resolved}
    if default is _MISSING:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def setting(default: Any, *, help: str = "") -> Any:
    """An execution setting (threads, device, batch size) that must not change the outputs.

    Settings are validated and recorded in the manifest like parameters, but left out of the
    fingerprint, so running with more threads or on a GPU reuses the same artifacts.
    """
    return dataclasses.field(default=default, metadata={"help": help, "kind": "setting"})


def input_path(default: Any = _MISSING, *, help: str = "", multiple: bool = False) -> Any:
    """An input artifact: a path, or ``@step`` naming an earlier pipeline step.

    With ``multiple=True`` the value is a tuple of such references.
    """
    meta = {"help": help, "kind": "input", "multiple": multiple}
    if default is _MISSING:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def config_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """A config's fields: its own first, then those of the keyword-only mixins it shares
    with other configs (the engine settings), each group in declaration order."""
    fields = [f for f in dataclasses.fields(cls) if f.init]
    return [f for f in fields if not f.kw_only] + [f for f in fields if f.kw_only]


def is_input(f: dataclasses.Field[Any]) -> bool:
    return f.metadata.get("kind") == "input"


def field_kind(f: dataclasses.Field[Any]) -> str:
    """``param``, ``setting`` or ``input``; a field declared otherwise is a ConfigError."""
    kind = f.metadata.get("kind")
    if kind not in ("param", "setting", "input"):
        raise ConfigError(
            f"config field '{f.name}' is declared without param(), setting() or input_path()"
        )
    return str(kind)


def has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not _MISSING or f.default_factory is not _MISSING


def default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default is not _MISSING:
        return f.default
    if f.default_factory is not _MISSING:
        return f.default_factory()
    return _MISSING


def recorded_default(f: dataclasses.Field[Any]) -> Any:
    """A field's default as a manifest records it (tuples as lists)."""
    d = default_of(f)
    return list(d) if isinstance(d, tuple) else d


def type_name(tp: Any) -> str:
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in get_args(tp))
    if origin is tuple:
        return f"list of {type_name(get_args(tp)[0])}"
    if tp is type(None):
        return "none"
    return getattr(tp, "__name__", str(tp))


def _coerce(tp: Any, value: Any, where: str, from_text: bool) -> Any:
    """Convert ``value`` to type ``tp`` or raise a one-line ConfigError."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        none_text = from_text and value in ("none", "null", "")
        if (value is None or none_text) and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(a, value, where, from_text)
            except ConfigError as exc:
                errors.append(exc)
        if len(errors) == 1:  # ``X | None``: what X accepts (unset is leaving the key out)
            raise errors[0]
        raise ConfigError(f"{where}: expected {type_name(tp)}, got {value!r}")
    if origin is Literal:
        choices = get_args(tp)
        if value in choices:
            return value
        raise ConfigError(
            f"{where}: {value!r} is not valid; valid options: "
            + ", ".join(repr(c) for c in choices)
        )
    if origin is tuple:
        (inner, *_rest) = get_args(tp)
        if from_text and isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise ConfigError(f"{where}: expected a list of {type_name(inner)}, got {value!r}")
        return tuple(_coerce(inner, v, f"{where}[{i}]", from_text) for i, v in enumerate(value))
    if tp is bool:
        if isinstance(value, bool):
            return value
        if from_text and isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
            return value.lower() in ("true", "1")
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if from_text and isinstance(value, str):
            try:
                return int(value.replace("_", ""))
            except ValueError:
                pass
        raise ConfigError(f"{where}: expected an integer, got {value!r}")
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if from_text and isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ConfigError(f"{where}: expected a number, got {value!r}")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"{where}: expected a string, got {value!r}")
    raise ConfigError(f"{where}: unsupported config type {tp!r}")  # pragma: no cover


def unknown_key(cls: type, key: str, where: str) -> ConfigError:
    """The one line for a key ``cls`` does not have, listing the valid ones."""
    valid = ", ".join(sorted(f.name for f in config_fields(cls)))
    return ConfigError(f"{where}: unknown key '{key}'; valid keys: {valid}")


def from_mapping(
    cls: type[T], data: Mapping[str, Any], where: str, *, from_text: bool = False
) -> T:
    """Build and validate a config dataclass from a mapping (TOML table or CLI options).

    Unknown keys, wrong types and missing required keys raise a one-line ConfigError that
    names the key and the valid options. ``from_text`` allows string values to be parsed
    (command-line overrides such as ``--set pools.sizes=1000,2000``).
    """
    fields = {f.name: f for f in config_fields(cls)}
    for key in data:
        if key not in fields:
            raise unknown_key(cls, key, where)
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, value in data.items():
        values[key] = _coerce(hints[key], value, f"{where}.{key}", from_text)
    missing = [n for n, f in fields.items() if n not in values and not has_default(f)]
    if missing:
        raise ConfigError(f"{where}: missing required key '{missing[0]}'")
    obj = cls(**values)
    validate = getattr(obj, "validate", None)
    if callable(validate):
        validate()
    return obj


def parse_values(cls: type, changes: Mapping[str, str], where: str) -> dict[str, Any]:
    """Command-line text values of some of ``cls``'s keys, parsed to their types."""
    fields = {f.name for f in config_fields(cls)}
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, text in changes.items():
        if key not in fields:
            raise unknown_key(cls, key, where)
        values[key] = _coerce(hints[key], text, f"{where}.{key}", True)
    return values


def override(cfg: T, changes: Mapping[str, str], where: str) -> T:
    """A copy of ``cfg`` with text values (command-line ``--set``) parsed and applied."""
    values = parse_values(type(cfg), changes, where)
    new = dataclasses.replace(cfg, **values)  # type: ignore[type-var]
    validate = getattr(new, "validate", None)
    if callable(validate):
        validate()
    return new


def _jsonable(value: Any, where: str) -> Any:
    """A value as JSON, canonically: tuples and lists as lists, mappings with string keys
    (``canonical_json`` sorts them), a nested config as its parameters."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list):
        return [_jsonable(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        if all(f.metadata.get("kind") in ("param", "setting", "input") for f in fields):
            return params_of(value, hashed=True)  # a nested config: its parameters
        return {f.name: _jsonable(getattr(value, f.name), f"{where}.{f.name}") for f in fields}
    raise ConfigError(f"{where}: a value of type {type(value).__name__} cannot be hashed")


def _typed(hint: Any, value: Any, where: str) -> Any:
    """``value`` as its declared type (an int given for a float is that float), so that
    equal values hash equally however they were written."""
    try:
        return _coerce(hint, value, where, False)
    except ConfigError:  # a type the loaders do not handle (a nested config): as it is
        return value


def params_of(cfg: Any, *, hashed: bool) -> dict[str, Any]:
    """The config's parameters (not settings, not inputs) as JSON-able values.

    ``hashed=True``: what goes into the fingerprint: every parameter by its value, those at
    their default included, canonically typed; without those hashed by their resolved
    value through the stage's identity (``param(resolved=True)``).
    """
    try:
        hints = typing.get_type_hints(type(cfg))
    except NameError:  # a class whose annotations name what its module lacks: values as given
        hints = {}
    out: dict[str, Any] = {}
    for f in config_fields(type(cfg)):
        if field_kind(f) != "param":
            continue
        if hashed and f.metadata.get("resolved"):
            continue
        where = f"{type(cfg).__name__}.{f.name}"
        value = getattr(cfg, f.name)
        if hashed:
            value = _typed(hints.get(f.name, Any), value, where)
        out[f.name] = _jsonable(value, where)
    return out


def settings_of(cfg: Any) -> dict[str, Any]:
    """The config's settings (never hashed; recorded in the manifest) as JSON-able values."""
    return {
        f.name: _jsonable(getattr(cfg, f.name), f"{type(cfg).__name__}.{f.name}")
        for f in config_fields(type(cfg))
        if field_kind(f) == "setting"
    }


def inputs_of(cfg: Any) -> dict[str, tuple[str, ...]]:
    """The config's input references, each as a tuple (empty when unset)."""
    out: dict[str, tuple[str, ...]] = {}
    for f in config_fields(type(cfg)):
        if not is_input(f):
            continue
        value = getattr(cfg, f.name)
        if value is None or value == "":
            out[f.name] = ()
        elif isinstance(value, tuple):
            out[f.name] = value
        else:
            out[f.name] = (value,)
    return out
