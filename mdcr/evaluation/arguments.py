"""``mdcr evaluate``'s arguments as the user writes them: flags on the command line
(``--pools``), keyword arguments in Python (``pools=``), so that an error names what the
user typed, never a stage's internal key (:mod:`mdcr.core.hints`)."""

from __future__ import annotations

from mdcr.core.hints import flag

# mdcr evaluate's arguments: (the command line's flag, the Python API's argument).
_ARGUMENTS = {
    "benchmark": ("--benchmark", "benchmark="),
    "pools": ("--pools", "pools="),
    "encoder": ("--encoder", "model"),
    "encode-set": ("--encode-set", "encode_options"),
    "name": ("--name", "name="),
    "split": ("--split", "splits="),
}


def arg(name: str, syntax: str | None = None) -> str:
    """``mdcr evaluate``'s argument ``name`` as the user writes it: ``--pools`` on the
    command line, ``pools=`` in Python (``syntax``; default: where the user is now,
    :func:`mdcr.core.hints.flag`)."""
    cli, python = _ARGUMENTS[name]
    if syntax is not None:
        return cli if syntax == "cli" else python
    return flag(cli, python)
