"""Engines: where a stage's independent units of work (encode shards, pools) run.

- ``local`` (the default): in this process, one unit after another.
- ``ray``: on a Ray cluster (``--ray-address`` or ``$RAY_ADDRESS``), or on a Ray instance
  started here when none is named; one actor per CPU slot (per GPU where the stage uses
  GPUs), scheduled, restarted and retried by Ray itself (:mod:`mdcr.engine.ray`).

The engine is a *setting*, declared once (:class:`EngineSettings`, ``executor``,
``ray_address``, ``ray_workers``) and shared by each config that can scale out (encode,
search, bm25, bm25-tune); ``mdcr run --engine ray`` sets them on every step. It changes
where the work runs, never what it writes, so it is recorded in the manifest and never
hashed. The key is ``executor``, the flag of ``mdcr run`` and ``mdcr evaluate`` is
``--engine``; what computes within a stage is its ``backend`` (search: Faiss or torch;
bm25: Lucene or the sweep).

A stage uses an engine through one call, :meth:`Engine.map`: ``setup()`` builds each
worker's state once (a model, open files), ``fn(state, item)`` does one unit and returns
a small result, and results come back in the order of ``items``. Workers write their
files into the stage's work folder themselves, atomically, so the store stays the single
source of truth: a stage skips finished units before it maps, whichever engine made them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from mdcr.core.config import setting
from mdcr.core.errors import ConfigError, MissingDependencyError
from mdcr.core.stage import StageContext

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

EXECUTORS = ("local", "ray")
EXECUTOR_HELP = (
    "engine that runs the work: local (this process) or ray (a Ray cluster, or a local Ray "
    "instance); never changes outputs"
)
RAY_ADDRESS_HELP = (
    "Ray cluster address (host:6379 or ray://host:10001); '' = $RAY_ADDRESS, else a local "
    "Ray instance"
)
RAY_WORKERS_HELP = "Ray workers (actors); 0 = one per CPU (per GPU where the stage uses GPUs)"


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """The engine settings of a stage whose units of work can run elsewhere (a mixin of
    the encode, search, bm25 and bm25-tune configs; never hashed). Validate them with
    :func:`check_engine_settings`."""

    executor: Literal["local", "ray"] = setting("local", help=EXECUTOR_HELP)
    ray_address: str = setting("", help=RAY_ADDRESS_HELP)
    ray_workers: int = setting(0, help=RAY_WORKERS_HELP)


class Engine(Protocol):
    """Runs a stage's units of work; see the module docstring.

    ``in_process``: ``setup`` runs in this process, so it may hand over objects the stage
    already holds (a loaded model) instead of building them again.
    """

    name: str
    in_process: bool

    def map(
        self,
        fn: Callable[[S, T], R],
        items: Sequence[T],
        *,
        setup: Callable[[], S],
        gpus: float = 0.0,
    ) -> Iterator[R]:
        """``fn(state, item)`` for every item, results in order; ``state = setup()`` once
        per worker. ``gpus``: GPUs per worker (the ray engine; 0 = CPU workers)."""
        ...

    def info(self) -> dict[str, Any]:
        """What ran the work, for the manifest."""
        ...

    def worker_gpus(self, device: str) -> float:
        """GPUs to give each worker of a stage whose device setting is ``device``."""
        ...

    def worker_cpus(self, gpus: float) -> int:
        """CPUs each worker that uses ``gpus`` GPUs may keep busy (its input's threads)."""
        ...


def check_engine_settings(cfg: Any, where: str) -> None:
    """One-line errors for bad engine settings, and for ``ray`` without Ray installed."""
    if cfg.ray_workers < 0:
        raise ConfigError(f"{where}.ray_workers: {cfg.ray_workers} is negative; use >= 0")
    if cfg.executor == "ray" and importlib.util.find_spec("ray") is None:
        raise MissingDependencyError(
            f"{where}.executor: 'ray' needs Ray, which is not installed; install it with: "
            "pip install 'mdcr[ray]'"
        )


def open_engine(
    cfg: Any, ctx: StageContext, *, shared: Sequence[Path] = (), reads: Sequence[Path] = ()
) -> Engine:
    """The engine ``cfg.executor`` names, ready to map; recorded in the manifest.

    ``shared``: folders besides the stage's work folder that workers write (the Lucene
    index folder); ``reads``: the inputs they read. With Ray, every node must see them.
    """
    engine: Engine
    if cfg.executor == "ray":
        from mdcr.engine.ray import connect

        engine = connect(
            cfg.ray_address,
            cfg.ray_workers,
            shared=[ctx.out, *shared],
            reads=reads,
            quiet=ctx.quiet,
        )
    else:
        from mdcr.engine.local import LocalEngine

        engine = LocalEngine()
    # The engine keeps this dict up to date (workers used), so the manifest has the end state.
    ctx.record("executor", engine.info())
    return engine


def engine_values(
    executor: str | None = None, ray_address: str | None = None, ray_workers: int | None = None
) -> dict[str, Any]:
    """The engine settings given (``None``: not given), checked, as config values."""
    values: dict[str, Any] = {}
    if executor is not None:
        if executor not in EXECUTORS:
            raise ConfigError(f"--engine {executor!r} is not valid; valid: {', '.join(EXECUTORS)}")
        values["executor"] = executor
    if ray_address is not None:
        values["ray_address"] = ray_address
    if ray_workers is not None:
        values["ray_workers"] = ray_workers
    return values
