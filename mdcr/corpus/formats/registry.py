"""The prefilter's input formats: one registered entry per layout it reads.

An :class:`InputFormat` holds all that the prefilter and its dry run need to know of a
layout: its name (a value of ``prefilter.format``), how to recognise a folder in that
layout (``detect``, for ``format = "auto"``), the files it reads (``files``, which raises
the one-line errors of a bad layout), its scan (the files into the tables the shared
steps read: :class:`Scanned`), what the dry run says it reads (``label``,
``describe``) and its size model (``size``: the records and the work of an input, as an
:class:`InputSize`; without one, the planned input's records priced by ``rate_key``, a key
of ``mdcr/data/stage_rates.json``, per record read), and the lines it adds to the funnel
in the log (``funnel_lines``).

``format = "auto"`` takes the one registered format whose ``detect`` recognises the
folder; none: the default format (the one registered without ``detect``, S2ORC); more
than one: a one-line error asking to name it. An unknown format is a one-line error
listing the valid ones. Each built-in format is one module holding its reader, scan, size
model and registration (:mod:`mdcr.corpus.formats.s2orc`, :mod:`mdcr.corpus.formats.s2ag`),
named by entry points of the group ``mdcr.input_formats`` and imported on first use, as
every registry finds its plug-ins. Adding a format is one ``FORMATS.register`` call next to
its definition.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.registry import Registry
from mdcr.corpus import jsonl
from mdcr.corpus.prefilter.output import outbound_edge_keys
from mdcr.corpus.prefilter.scan import DatasetScan

if TYPE_CHECKING:
    import duckdb

    from mdcr.core.stage import PlanFacts, Work

AUTO = "auto"


@dataclass
class Scanned:
    """What a format's scan leaves for the shared steps.

    ``flags``: the table with one row per paper record (its ``reason``, NULL unless
    malformed, and the four rule flags ``ok_year``, ``ok_title``, ``ok_abstract``,
    ``ok_cit``); table ``recs`` holds (at least) the survivors with the columns
    :func:`~mdcr.corpus.prefilter.output.write_outputs` reads (seq, paper_id, title,
    abstract, year, fields, and ``outbound`` for the default ``edge_keys``), in file
    order. ``details`` are added to the funnel as they are.
    """

    scans: list[DatasetScan]
    records_read: int
    records_valid: int
    lines_read: int  # every dataset's (S2AG: papers, abstracts and citations)
    malformed_lines: int
    duplicates: tuple[int, list[str]]
    flags: str
    paper_files: int
    reasons: dict[str, int]
    reported: list[jsonl.MalformedLine]
    edge_keys: Callable[[duckdb.DuckDBPyConnection], Any] = outbound_edge_keys
    details: dict[str, Any] = field(default_factory=dict)


# scan(con, cfg, folder, temp_dir, threads, progress): cfg is the PrefilterConfig; progress
# is called with 1 per file scanned.
ScanFn = Callable[
    ["duckdb.DuckDBPyConnection", Any, Path, Path, int, "Callable[[int], Any] | None"], Scanned
]


@dataclass(frozen=True)
class InputSize:
    """The dry run's size of an input: its paper ``records``, its ``work`` (a rate key and
    units) and the words it adds after the layout (``layout_words``, e.g. its gzipped size)
    and after the input's path (``source_words``, e.g. the records counted)."""

    records: int
    work: Work
    layout_words: str = ""
    source_words: str = ""


# size(cfg, source, inputs, upstream): cfg is the PrefilterConfig; source the input folder
# (None: not given), upstream the plan facts of planned inputs.
SizeFn = Callable[
    [Any, "Path | None", "dict[str, list[Path]]", "Mapping[Path, PlanFacts]"], InputSize
]


@dataclass(frozen=True)
class InputFormat:
    """One input layout of the prefilter (see the module's docstring)."""

    name: str
    label: str  # what the dry run says it reads, e.g. "S2ORC shards"
    files: Callable[[Path], list[Path]]
    scan: ScanFn
    # Whether a folder is in this layout (for "auto"); None: the default format.
    detect: Callable[[Path], bool] | None = None
    # The dry run's words for it under a config (cfg: the PrefilterConfig); None: the label.
    describe: Callable[[Any], str] | None = None
    # Lines added to the funnel table in the log, from the funnel (with ``details``).
    funnel_lines: Callable[[dict[str, Any]], str] | None = None
    rate_key: str = "prefilter"
    # The dry run's size model; None: the planned input's records priced by ``rate_key``.
    size: SizeFn | None = None

    def description(self, cfg: Any) -> str:
        return self.describe(cfg) if self.describe is not None else self.label


def _check_format(fmt: InputFormat) -> None:
    """A reserved name, or a second default format (one without ``detect``), is an error."""
    if fmt.name == AUTO or not fmt.name:
        raise ConfigError(f"input format name {fmt.name!r} is reserved; choose another")
    held = FORMATS.items()  # the built-ins first (a no-op while they register)
    default = [f.name for f in held.values() if f.detect is None and f.name != fmt.name]
    if fmt.detect is None and default:
        raise ConfigError(
            f"input format '{fmt.name}' has no detect function, and '{default[0]}' is already "
            "the default format; give it one"
        )


# Every input format by name, registered by the modules of the entry-point group
# mdcr.input_formats.
FORMATS: Registry[InputFormat] = Registry(
    "input format", key=lambda fmt: fmt.name, group="mdcr.input_formats", check=_check_format
)


def input_formats() -> dict[str, InputFormat]:
    """All registered formats: the default one (S2ORC) first, then the others in
    registration order (the built-in ones first)."""
    formats = FORMATS.items()
    ordered = sorted(formats.values(), key=lambda f: f.detect is not None)  # stable
    return {f.name: f for f in ordered}


def format_choices() -> tuple[str, ...]:
    """The valid values of ``prefilter.format``: "auto" and every registered name."""
    return (AUTO, *input_formats())


def check_format(name: str, where: str = "prefilter.format") -> None:
    """A one-line ConfigError when ``name`` is neither "auto" nor a registered format."""
    choices = format_choices()
    if name not in choices:
        raise ConfigError(
            f"{where}: {name!r} is not valid; valid options: " + ", ".join(repr(c) for c in choices)
        )


def get_format(name: str) -> InputFormat:
    """The registered format called ``name`` (not "auto")."""
    check_format(name)
    if name == AUTO:
        raise ConfigError("get_format: 'auto' names no format; use resolve_format")
    return input_formats()[name]


def resolve_format(name: str, folder: Path) -> InputFormat:
    """The format of ``folder``: ``name``, or for "auto" the one whose ``detect``
    recognises the folder, else the default format."""
    if name != AUTO:
        return get_format(name)
    formats = input_formats()
    found = [f for f in formats.values() if f.detect is not None and f.detect(Path(folder))]
    if len(found) > 1:
        names = " and ".join(f.name for f in found)
        raise InputDataError(
            f"'{folder}' looks like {names} at once; set prefilter.format (--format) to one"
        )
    if found:
        return found[0]
    default = [f for f in formats.values() if f.detect is None]
    if not default:
        raise ConfigError(
            f"no input format recognises '{folder}'; set prefilter.format (--format) to one "
            f"of {', '.join(formats)}"
        )
    return default[0]


def auto_label() -> str:
    """The dry run's words for "auto": every format's label, e.g. "S2ORC shards or an S2AG
    release"."""
    return " or ".join(f.label for f in input_formats().values())


def sizing_format(name: str, source: Path | None) -> InputFormat:
    """The format whose size model prices ``source`` in the dry run: ``name``, or for "auto"
    the format that recognises it (the default format when there is no source yet)."""
    if source is not None:
        return resolve_format(name, source)
    if name != AUTO:
        return get_format(name)
    return next(f for f in input_formats().values() if f.detect is None)
