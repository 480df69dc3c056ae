"""The export formats of ``mdcr export``: one registry keyed by format and input kind.

An :class:`Export` is one exporter: the ``--format`` value it answers (``format``), the
kind of output it exports (``kind``, below), the function that writes the files
(``write``, handed an :class:`ExportRequest`; it returns the lines the command prints), the
inputs it takes (``run`` and ``qrels``: "required", "optional" or "refused"; at least one
input is always needed) and the command's optional flags it reads (``options``). It is
registered by one call next to its definition, ``EXPORTS.register(Export(...))``, under the
key ``<format>:<kind>``, in a module named by an entry point of the group ``mdcr.exports``;
the command's ``--format`` choices, its help and its dispatch all read :data:`EXPORTS`.

Input kinds: which contract the exported outputs are, told by the contracts the stage that
made them declares it writes (``StageSpec.writes``). ``benchmark``: an MDCR benchmark and
what is made from it (outputs that write the benchmark, its pair scores or its metrics:
``benchmark``, ``benchmark-import``, ``benchmark-rank``, ``benchmark-score``); ``pools``: pools
and what is made from them (``pools``, ``beir-import``, ``search``, ``bm25``, ``score``
outputs) and a folder no stage made (a run or qrels copied out of a store). A ``--run`` and
a ``--qrels`` of different kinds are refused before any exporter runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mdcr.core.errors import ConfigError, MdcrError
from mdcr.core.registry import Registry

Need = Literal["required", "optional", "refused"]

KINDS = ("pools", "benchmark")
# The command's optional flags an export may read, with how a message names each.
OPTIONS = {
    "retriever": "--retriever",
    "encoder": "--encoder",
    "split": "--split",
    "ties": "--ties",
}


@dataclass(frozen=True)
class ExportRequest:
    """What ``mdcr export`` was given: the inputs (``run``: ``--run``; ``qrels``:
    ``--qrels``/``--pools``/``--benchmark``), the folder to write into and the optional
    flags (None: not given)."""

    out: Path
    run: Path | None = None
    qrels: Path | None = None
    retriever: str | None = None
    encoder: str | None = None
    split: str | None = None
    ties: str | None = None


@dataclass(frozen=True)
class Export:
    """One export format for one input kind (see the module's docstring)."""

    format: str
    kind: str
    write: Callable[[ExportRequest], list[str]]
    help: str  # one clause for --format's help, e.g. "runs and qrels as TREC files"
    usage: str  # what to give, for the one-line error of a wrong pair of inputs
    writes: str  # what lands in --out, e.g. "the TREC files"
    run: Need = "optional"
    qrels: Need = "optional"
    options: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        return f"{self.format}:{self.kind}"


def _check_export(export: Export) -> None:
    """An export of an unknown input kind, or reading an unknown flag, is refused."""
    if export.kind not in KINDS:
        raise ConfigError(
            f"export '{export.format}': kind {export.kind!r} is not valid; valid: "
            + ", ".join(KINDS)
        )
    unknown = sorted(export.options - set(OPTIONS))
    if unknown:
        raise ConfigError(
            f"export '{export.key}': unknown option(s) {', '.join(unknown)}; valid: "
            + ", ".join(OPTIONS)
        )


# Every export by "<format>:<kind>", registered by the modules of the entry-point group
# mdcr.exports.
EXPORTS: Registry[Export] = Registry(
    "export", key=lambda export: export.key, group="mdcr.exports", check=_check_export
)


def formats() -> list[str]:
    """The ``--format`` values: every registered format, sorted."""
    return sorted({e.format for e in EXPORTS.items().values()})


def formats_help() -> str:
    """``--format``'s help: each format with what it writes of each kind."""
    parts = []
    for fmt in formats():
        kinds = [e for e in EXPORTS.items().values() if e.format == fmt]
        parts.append(f"{fmt}: " + "; ".join(e.help for e in kinds))
    return " | ".join(parts)


def _stage_of(folder: Path) -> str | None:
    from mdcr.contracts.outputs import stage_of

    return stage_of(folder)


def input_kind(folder: Path) -> str:
    """The kind of an input folder, by what its stage writes: the benchmark kind for a
    benchmark, its pair scores or its metrics; every other folder is of the pools kind."""
    from mdcr.contracts.artifacts import BENCHMARK, BENCHMARK_METRICS, PAIR_SCORES
    from mdcr.contracts.outputs import writes

    return (
        "benchmark"
        if any(writes(folder, c) for c in (BENCHMARK, PAIR_SCORES, BENCHMARK_METRICS))
        else "pools"
    )


def find_export(fmt: str, request: ExportRequest) -> Export:
    """The export of ``fmt`` for the kind of the request's inputs; one-line errors for
    inputs of two kinds, a kind the format does not take, or a wrong set of inputs."""
    inputs = [p for p in (request.run, request.qrels) if p is not None]
    if not inputs:
        raise MdcrError("export: give --run FOLDER and/or --qrels FOLDER")
    kinds = {input_kind(p) for p in inputs}
    if len(kinds) > 1:
        assert request.run is not None and request.qrels is not None
        raise MdcrError(
            "export: pair a benchmark-rank output with a benchmark output, or a search/bm25 "
            "output with a pools output; "
            f"got '{request.run}' ({_stage_of(request.run) or 'no stage'}) and "
            f"'{request.qrels}' ({_stage_of(request.qrels) or 'no stage'})"
        )
    (kind,) = kinds
    of_format = {e.kind: e for e in EXPORTS.items().values() if e.format == fmt}
    if not of_format:
        raise ConfigError(f"export --format {fmt!r} is not valid; valid: {', '.join(formats())}")
    if kind not in of_format:
        stage = _stage_of(inputs[0]) or "folder of no stage"
        raise ConfigError(
            f"export --format {fmt}: '{inputs[0]}' is a {stage} ({kind} kind); "
            f"{fmt} exports {' and '.join(sorted(of_format))} outputs"
        )
    export = of_format[kind]
    for given, need in ((request.run, export.run), (request.qrels, export.qrels)):
        if (given is None and need == "required") or (given is not None and need == "refused"):
            raise MdcrError(f"export --format {fmt}: give {export.usage}")
    for name, flag in OPTIONS.items():
        if getattr(request, name) is not None and name not in export.options:
            takers = sorted(
                f"--format {e.format} of a {e.kind} output"
                for e in EXPORTS.items().values()
                if name in e.options
            )
            raise MdcrError(f"export {flag}: only with {' or '.join(takers) or 'no format'}")
    return export


def run_export(fmt: str, request: ExportRequest) -> list[str]:
    """Write the export ``fmt`` of the request's inputs into ``request.out``; the lines to
    print (the files or folders written)."""
    export = find_export(fmt, request)
    if request.out.exists() and not request.out.is_dir():
        raise ConfigError(
            f"export --out '{request.out}' is a file; give a folder ({export.writes} are "
            "written into it)"
        )
    return export.write(request)
