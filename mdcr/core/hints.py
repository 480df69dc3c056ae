"""Hints in the syntax of what the user typed: a command line, a pipeline file, or Python.

An error that tells the user to set an option says how in the form they use:
``--on-short warn`` after ``mdcr benchmark build``, ``on_short = "warn"`` in a pipeline
file's benchmark step, ``on_short="warn"`` from Python. The CLI sets the form
(:func:`typed_in`) before it runs a stage command or a pipeline file; the default, for
the Python API, is the keyword form. A command that sets another stage's options with a
flag of its own names that flag (``set_flags``: ``mdcr evaluate`` sets encode's with
``--encode-set KEY=VALUE``). An error about a key or a folder the user gave through a
command of their own names it as given (:func:`key`, :func:`given_as`: ``--split`` or
``splits=``, ``--pools PATH`` or ``pools=PATH``), never by a stage's internal key. The
hints of one domain live with it (:mod:`mdcr.benchmark.coverage`: a run without a
split's pools).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Syntax = Literal["cli", "file", "python"]


@dataclass(frozen=True)
class Typed:
    """What the user typed: its ``syntax``, the ``stage`` (command) typed, ``set_flags``
    (stage -> the flag of that command that sets the stage's options as ``KEY=VALUE``),
    ``arguments`` (``"stage.key"`` -> the flag or argument that gave it: ``--split``,
    ``splits=``) and ``paths`` (a folder the user gave -> the flag or argument it came by)."""

    syntax: Syntax = "python"
    stage: str = ""
    set_flags: Mapping[str, str] = field(default_factory=dict)
    arguments: Mapping[str, str] = field(default_factory=dict)
    paths: Mapping[Path, str] = field(default_factory=dict)


_SYNTAX: contextvars.ContextVar[Typed | None] = contextvars.ContextVar(
    "mdcr_hint_syntax", default=None
)


def _typed() -> Typed:
    return _SYNTAX.get() or Typed()


@contextmanager
def typed_in(
    syntax: Syntax,
    stage: str = "",
    set_flags: Mapping[str, str] | None = None,
    arguments: Mapping[str, str] | None = None,
    paths: Mapping[Path, str] | None = None,
) -> Iterator[None]:
    """Hints raised inside are written for ``syntax`` (the rest: :class:`Typed`)."""
    resolved = {Path(p).resolve(): words for p, words in (paths or {}).items()}
    token = _SYNTAX.set(
        Typed(syntax, stage, dict(set_flags or {}), dict(arguments or {}), resolved)
    )
    try:
        yield
    finally:
        _SYNTAX.reset(token)


def key(stage: str, name: str) -> str:
    """Stage ``stage``'s key ``name`` in the words the user gave it: the flag or argument
    of the command that set it (``--split`` of ``mdcr evaluate``, ``splits=`` in Python),
    ``--encode-set max_length``, the stage command's own flag, else ``stage.name`` (a
    pipeline file's key)."""
    typed = _typed()
    given = typed.arguments.get(f"{stage}.{name}")
    if given:
        return given
    if stage in typed.set_flags:
        flag = typed.set_flags[stage]
        return f"{flag} {name}" if typed.syntax == "cli" else f"{flag}[{name!r}]"
    if typed.syntax == "cli" and stage == typed.stage:
        return f"--{name.replace('_', '-')}"
    return f"{stage}.{name}"


def flag(cli: str, python: str) -> str:
    """An argument of a command as the user writes it: ``cli`` (``--pools``) on the
    command line, ``python`` (``pools=``) in Python."""
    return cli if _typed().syntax == "cli" else python


def given_as(path: Path) -> str | None:
    """The flag or argument by which the user gave folder ``path`` (``--pools``,
    ``pools=``), or None when it came another way (a pipeline's step, an earlier output)."""
    return _typed().paths.get(Path(path).resolve())


def _toml(value: Any) -> str:
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else str(value)


def option(stage: str, key: str, value: Any) -> str:
    """How to set stage ``stage``'s option ``key`` to ``value`` where the user is."""
    typed = _typed()
    syntax, current, set_flags = typed.syntax, typed.stage, typed.set_flags
    if syntax == "cli":
        from mdcr.core.stage import stages

        shown = ",".join(map(str, value)) if isinstance(value, tuple | list) else str(value)
        flag = f"--{key.replace('_', '-')} {shown}"
        if stage in set_flags:
            return f"`{set_flags[stage]} {key}={shown}`"
        if stage == current:
            return f"`{flag}`"
        spec = stages().get(stage)
        words = " ".join(spec.words) if spec is not None else stage
        return f"`mdcr {words} {flag}`"
    if syntax == "file":
        where = "its" if stage == current else f"the {stage}"
        return f"`{key} = {_toml(value)}` in {where} step of the pipeline file"
    return f"`{key}={value!r}` ({stage} stage)"
