"""Stages: a registry of pure functions from input artifacts and a typed config to outputs.

A stage module registers the :class:`StageSpec` of the one stage it holds
(``STAGES.register(spec)``, into :data:`STAGES`, one :class:`~mdcr.core.registry.Registry`;
``bm25-tune`` and ``bm25`` are ``mdcr/index/bm25/tune.py`` and ``search.py``, which share
``shared.py``), and is named by an entry point of the group ``mdcr.stages`` (mdcr's, in
pipeline order, in its ``pyproject.toml``), so that the registry imports it when first
read. Importing a stage module must be cheap: heavy libraries are imported inside the
stage functions. The CLI builds one subcommand per registered stage from its config
dataclass, and pipeline files name stages by the same names. A duplicate registration is an
error.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mdcr.core.errors import ConfigError
from mdcr.core.registry import Registry

T = TypeVar("T")


@dataclass(frozen=True)
class PlanFacts:
    """What a planned stage's output will hold, for the plans of the stages after it.

    ``papers``: distinct papers its outputs name (expected), ``papers_max`` at most;
    ``field_queries_per_split``: field-level queries per split (pools); ``records``: input
    records (synth); ``pool_papers`` / ``pool_pairs`` / ``pool_count``: per split, the
    papers of all its pools, the sum over pools of pool size x queries, and the pools
    (pools); ``pool_max_pairs``: the largest pool's size x queries; ``vectors_per_paper``
    and ``dim``: the vectors an embeddings output holds (encode).
    """

    papers: int = 0
    papers_max: int = 0
    queries: int = 0
    field_queries_per_split: int = 0
    records: int = 0
    pool_papers: Mapping[str, int] = field(default_factory=dict)
    pool_pairs: Mapping[str, int] = field(default_factory=dict)
    pool_count: Mapping[str, int] = field(default_factory=dict)
    pool_max_pairs: int = 0
    vectors_per_paper: float = 1.0
    dim: int = 0


@dataclass(frozen=True)
class Work:
    """A stage run's work for the time estimate (mdcr/planning/timing.py).

    ``rate``: the key of the measured rate that prices it; ``units``: work that grows
    linearly (papers, records, queries); ``pairs``: work that grows with pool size times
    queries (search, BM25). ``parts``: the independent pieces an engine can run at once
    (encode shards, pools; 0: none), ``largest``: the largest piece's share of the work.
    """

    rate: str
    units: float = 0.0
    pairs: float = 0.0
    parts: int = 0
    largest: float = 0.0


@dataclass(frozen=True)
class StagePlan:
    """A stage's plan for ``--dry-run``: text to print, facts for later plans, its work."""

    text: str
    facts: PlanFacts | None = None
    work: Work | None = None


# plan(cfg, inputs, upstream): upstream maps each planned (maybe unbuilt) input folder to
# the facts its stage's plan returned.
PlanFn = Callable[[Any, dict[str, list[Path]], Mapping[Path, PlanFacts]], StagePlan]
# identity(cfg, inputs): what the stage runs beyond mdcr's code, hashed (StageSpec).
IdentityFn = Callable[[Any, Mapping[str, list[Path]]], dict[str, Any]]


@dataclass(frozen=True)
class StageSpec:
    """A stage: its name, version (bump it when outputs change), config type and function.

    Each stage module defines ``run_<stage>(cfg, ctx)`` and, where it has them,
    ``plan_<stage>(cfg, inputs, upstream)`` and ``identify_<stage>(cfg, inputs)`` (``<stage>`` in
    snake case), and registers them here as ``run``, ``plan`` and ``identity``.

    ``identity(cfg, inputs)`` returns what the stage runs beyond mdcr's own code: the
    source or weights of an encoder, a resolved precision, what an encoder identified by
    its vectors computes for papers of its (resolved) ``inputs``. It is hashed into the
    fingerprint.

    ``resumable``: a failed run keeps its work folder for the next run to resume from.
    ``finished_units(work)`` counts the units (encode shards, BM25 pools) such a folder
    holds finished; a failed run with none leaves no work folder, as a stage that does not
    resume. Left unset, a resumable stage's work folder is always kept.
    """

    name: str
    version: str
    config: type
    run: Callable[[Any, StageContext], None]
    help: str
    resumable: bool = False
    # Optional: what the stage would do, for `mdcr run --dry-run`.
    plan: PlanFn | None = None
    identity: IdentityFn | None = None
    # The file a user wants first (e.g. "report.md"); `mdcr run` names it before the folder.
    main_output: str | None = None
    # The command-line words, when not the stage name (e.g. "benchmark build").
    command: str | None = None
    # For a resumable stage: the finished units of work a work folder holds.
    finished_units: Callable[[Path], int] | None = None
    # The artifact contracts its outputs hold (mdcr.contracts.artifacts: POOLS, BENCHMARK,
    # ...): later stages and the faces ask `writes(folder, CONTRACT)`
    # (mdcr.contracts.outputs), never a list of stage names.
    writes: tuple[Any, ...] = ()

    @property
    def words(self) -> tuple[str, ...]:
        return tuple((self.command or self.name).split())


# Every stage by name, registered by the modules of the entry-point group mdcr.stages.
STAGES: Registry[StageSpec] = Registry("stage", key=lambda spec: spec.name, group="mdcr.stages")


def stages() -> dict[str, StageSpec]:
    """All registered stages in pipeline order (their modules' order in the group
    ``mdcr.stages``; stages registered otherwise, such as the tests', last), importing the
    stage modules on first use."""
    specs = STAGES.items()
    rank = {module: i for i, module in enumerate(STAGES.modules())}
    order = sorted(specs, key=lambda name: rank.get(specs[name].run.__module__, len(rank)))
    return {name: specs[name] for name in order}


def get_stage(name: str) -> StageSpec:
    return STAGES.get(name)


# Progress bars forced on (True) or off (False) whatever a run's ``quiet`` says; None:
# shown unless quiet. The Python API sets it (``mdcr.evaluate(progress=...)``).
_BARS: ContextVar[bool | None] = ContextVar("mdcr_progress_bars", default=None)


@contextmanager
def progress_bars(show: bool | None) -> Iterator[None]:
    """Inside, stage progress bars are shown (True) or hidden (False) whatever ``quiet``
    says (None: as ``quiet`` says)."""
    token = _BARS.set(show)
    try:
        yield
    finally:
        _BARS.reset(token)


# What a stage keeps for the later stages of the same run, by name: (value, close). Set by
# :func:`keeping_for_run` (the pipeline runner); None outside a run.
_KEPT: ContextVar[dict[str, tuple[Any, Callable[[Any], None]]] | None] = ContextVar(
    "mdcr_kept_for_run", default=None
)


@contextmanager
def keeping_for_run() -> Iterator[None]:
    """Inside, a stage may keep what is costly to start (the Ray engine's workers) for the
    next stages (:func:`keep_for_run`); each kept thing is closed when the outermost block
    ends, also on an error."""
    if _KEPT.get() is not None:
        yield
        return
    kept: dict[str, tuple[Any, Callable[[Any], None]]] = {}
    token = _KEPT.set(kept)
    try:
        yield
    finally:
        _KEPT.reset(token)
        for value, close in kept.values():
            close(value)


def keep_for_run(name: str, value: Any, close: Callable[[Any], None]) -> bool:
    """Keep ``value`` under ``name`` for a later stage of this run (:func:`take_kept`),
    to be closed by ``close`` when the run ends. False outside a run: the caller closes it."""
    kept = _KEPT.get()
    if kept is None:
        return False
    if name in kept:  # one thing a name: the one kept before is closed now
        old, old_close = kept.pop(name)
        old_close(old)
    kept[name] = (value, close)
    return True


def take_kept(name: str) -> Any | None:
    """What an earlier stage of this run kept under ``name`` (the caller now owns it and
    keeps or closes it), else None."""
    kept = _KEPT.get()
    if kept is None or name not in kept:
        return None
    return kept.pop(name)[0]


# The manifest key (in ``info``) of the warnings a stage run gave, said again whenever its
# output is reused.
REUSE_WARNINGS = "warnings"
# The manifest key (in ``info``) of why an output is not reproducible (it was made from
# something that gives other results when run again, such as an encoder that is not
# deterministic): a stage says it of its own output, and the store carries it to every
# output made from that one.
UNREPRODUCIBLE = "unreproducible"


@dataclass
class StageContext:
    """What a running stage sees: where to write, its resolved inputs, and reporting helpers.

    ``out`` is a work folder that becomes the output folder only once the stage returns and
    its manifest is written. For resumable stages it survives a crash, so the stage can
    skip the shards it already finished.
    """

    out: Path
    inputs: dict[str, list[Path]]
    quiet: bool = False
    # What the stage's identity hook resolved at planning (hashed into the fingerprint):
    # a stage runs exactly that (e.g. the hub commit of a model).
    identity: dict[str, Any] = field(default_factory=dict)
    # The store the stage runs in, for stages that look up earlier outputs (Store.find).
    store: Any = None
    outputs: dict[str, int | None] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def input(self, name: str) -> Path:
        """The single path of input ``name``."""
        paths = self.inputs.get(name) or []
        if len(paths) != 1:
            raise ConfigError(f"input '{name}' must name exactly one artifact, got {len(paths)}")
        return paths[0]

    def output(self, filename: str, rows: int | None = None) -> Path:
        """Declare an output file (relative to ``out``); its sha256 goes into the manifest."""
        self.outputs[filename] = rows
        path = self.out / filename
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def record(self, key: str, value: Any) -> None:
        """Store a JSON-able fact (a funnel, a summary, a model revision) in the manifest."""
        self.info[key] = value

    def warn(self, msg: str) -> None:
        """Say ``msg`` as a warning now, and again on every later run that finds this
        output up to date (recorded in the manifest's ``info.warnings``)."""
        self.info.setdefault(REUSE_WARNINGS, []).append(msg)
        print(f"warning: {msg}", file=sys.stderr, flush=True)

    def unreproducible(self, reason: str) -> None:
        """Record that this output is not reproducible, and why (one phrase); every output
        made from it carries the reason too (``info.unreproducible``)."""
        reasons = self.info.setdefault(UNREPRODUCIBLE, [])
        if reason not in reasons:
            reasons.append(reason)

    def log(self, msg: str) -> None:
        if not self.quiet:
            print(msg, file=sys.stderr, flush=True)

    def progress(
        self,
        iterable: Iterable[T] | None = None,
        *,
        total: int | None = None,
        desc: str | None = None,
        unit: str = "it",
    ) -> Any:
        from tqdm.auto import tqdm  # a notebook's widget where it applies

        forced = _BARS.get()
        return tqdm(
            iterable,
            total=total,
            desc=desc,
            unit=unit,
            disable=self.quiet if forced is None else not forced,
            dynamic_ncols=True,
            file=sys.stderr,
        )

    def timed(self, name: str) -> _Timer:
        """``with ctx.timed("join"):`` records the step's wall time in the manifest."""
        return _Timer(self, name)


class _Timer:
    def __init__(self, ctx: StageContext, name: str) -> None:
        self.ctx, self.name = ctx, name

    def __enter__(self) -> _Timer:
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.ctx.timings[self.name] = round(time.perf_counter() - self.t0, 3)
