"""Hints in the syntax of what the user typed: a command line, a pipeline file, or Python.

An error that tells the user to set an option says how in the form they use:
``--on-short warn`` after ``mdcr benchmark build``, ``on_short = "warn"`` in a pipeline
file's benchmark step, ``on_short="warn"`` from Python. The CLI sets the form
(:func:`typed_in`) before it runs a stage command or a pipeline file; the default, for
the Python API, is the keyword form. A command that sets another stage's options with a
flag of its own names that flag (``set_flags``: ``mdcr evaluate`` sets encode's with
``--encode-set KEY=VALUE``). The hints of one domain live with it
(:mod:`mdcr.benchmark.coverage`: a run without a split's pools).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Literal

Syntax = Literal["cli", "file", "python"]
_SYNTAX: contextvars.ContextVar[tuple[Syntax, str, Mapping[str, str]]] = contextvars.ContextVar(
    "mdcr_hint_syntax", default=("python", "", {})
)


@contextmanager
def typed_in(
    syntax: Syntax, stage: str = "", set_flags: Mapping[str, str] | None = None
) -> Iterator[None]:
    """Hints raised inside are written for ``syntax`` (``stage``: the command typed;
    ``set_flags``: stage -> the flag of that command that sets the stage's options as
    ``KEY=VALUE``)."""
    token = _SYNTAX.set((syntax, stage, dict(set_flags or {})))
    try:
        yield
    finally:
        _SYNTAX.reset(token)


def _toml(value: Any) -> str:
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else str(value)


def option(stage: str, key: str, value: Any) -> str:
    """How to set stage ``stage``'s option ``key`` to ``value`` where the user is."""
    syntax, current, set_flags = _SYNTAX.get()
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
