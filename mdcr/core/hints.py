"""Hints in the syntax of what the user typed: a command line, a pipeline file, or Python.

An error that tells the user to set an option says how in the form they use:
``--on-short warn`` after ``mdcr benchmark build``, ``on_short = "warn"`` in a pipeline
file's benchmark step, ``on_short="warn"`` from Python. The CLI sets the form
(:func:`typed_in`) before it runs a stage command or a pipeline file; the default, for
the Python API, is the keyword form.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

Syntax = Literal["cli", "file", "python"]
_SYNTAX: contextvars.ContextVar[tuple[Syntax, str]] = contextvars.ContextVar(
    "mdcr_hint_syntax", default=("python", "")
)


@contextmanager
def typed_in(syntax: Syntax, stage: str = "") -> Iterator[None]:
    """Hints raised inside are written for ``syntax`` (``stage``: the command typed)."""
    token = _SYNTAX.set((syntax, stage))
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
    syntax, current = _SYNTAX.get()
    if syntax == "cli":
        from mdcr.core.stage import stages

        shown = ",".join(map(str, value)) if isinstance(value, tuple | list) else str(value)
        flag = f"--{key.replace('_', '-')} {shown}"
        if current == "evaluate" and stage == "encode":
            return f"`--encode-set {key}={shown}`"
        if stage == current:
            return f"`{flag}`"
        spec = stages().get(stage)
        words = " ".join(spec.words) if spec is not None else stage
        return f"`mdcr {words} {flag}`"
    if syntax == "file":
        where = "its" if stage == current else f"the {stage}"
        return f"`{key} = {_toml(value)}` in {where} step of the pipeline file"
    return f"`{key}={value!r}` ({stage} stage)"


def no_split_hint(model: str, run: Any, split: str) -> str:
    """A run that searched none of a split's pools: which command searches them."""
    splits = option("bm25", "splits", ("val", "test"))
    if model == "bm25":
        return f"this BM25 run ('{run}') has no {split} pools; run {splits}"
    return (
        f"the run of '{model}' ('{run}') has no {split} pools; search the {split} pools "
        "with that model (a search covers every pool)"
    )


def require_splits(model: str, run: Any, pools: dict[tuple[str, str], str], covered: set) -> None:
    """A model's run must cover some pool of every split a benchmark builds from
    (``pools``: (split, field) -> pool id; ``covered``: the pool ids the run ranks)."""
    from mdcr.core.errors import InputDataError

    for split in sorted({sp for sp, _ in pools}, key=("val", "test").index):
        if not any(p in covered for (sp, _), p in pools.items() if sp == split):
            raise InputDataError(no_split_hint(model, run, split))
