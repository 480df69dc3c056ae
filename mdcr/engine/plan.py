"""Wall time on N workers, for ``--dry-run --engine ray``: the local plan's rates, divided.

The local plan (:mod:`mdcr.planning`) prices a step's work with rates measured on the
development machine. On Ray the same work runs as independent parts (encode shards,
pools) on N workers at once, each at the rate of one CPU (or one GPU): the wall time is
the driver's serial part plus the parallel part in waves of N parts, never less than the
largest single part (the biggest pool), plus the workers' start.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mdcr.core.errors import ConfigError, require
from mdcr.core.stage import Work

if TYPE_CHECKING:
    from mdcr.planning.timing import Machine


def ray_seconds(
    parallel_s: float,
    *,
    units: int,
    workers: int,
    serial_s: float = 0.0,
    largest_unit_s: float = 0.0,
    start_s: float = 0.0,
) -> float:
    """Estimated wall seconds of a stage whose ``units`` take ``parallel_s`` in total
    locally, on ``workers`` Ray workers; ``serial_s`` stays in the driver."""
    if workers < 1:
        raise ConfigError(f"--ray-workers: {workers} is not valid; use >= 1")
    if units <= 0 or parallel_s <= 0:
        return serial_s
    used = min(workers, units)
    waves = math.ceil(units / used) * (parallel_s / units)  # units of equal size, N at a time
    return serial_s + start_s + max(waves, largest_unit_s)


def planned_workers(cfg: Any, *, gpus: bool = False) -> int:
    """The workers a Ray run of ``cfg`` would have: ``ray_workers``; else the cluster's
    GPUs (a GPU stage on a cluster with GPUs) or CPUs, asked of the cluster named by
    ``ray_address`` or ``$RAY_ADDRESS``; else this machine's cores (a local instance)."""
    if cfg.ray_workers:
        return int(cfg.ray_workers)
    address = cfg.ray_address or os.environ.get("RAY_ADDRESS", "")
    if not address:
        return os.cpu_count() or 1
    ray = require("ray")
    if not ray.is_initialized():
        ray.init(address=address, logging_level=logging.WARNING)
    resources = ray.cluster_resources()
    if gpus and resources.get("GPU"):
        return int(resources["GPU"])
    return max(1, int(resources.get("CPU", 1)))


def ray_step_estimate(cfg: Any, work: Work, machine: Machine) -> tuple[float, str]:
    """A step's wall time on Ray and the dry run's line for it, from the local rates.

    Each worker is one CPU (or one GPU for a model encoder when the target machine has
    GPUs; with fewer parts than CPUs and no ``ray_workers``, one worker per part shares the
    CPUs out, as the engine does): the step's work priced for one such worker is split into
    its ``parts`` (shards, pools), run N at a time, never faster than its largest part;
    the rate's fixed part stays in the driver."""
    from mdcr.planning.timing import MODEL_ENCODE, duration_text, estimate, load_rates

    gpu = work.rate == MODEL_ENCODE and machine.gpus > 0
    workers = planned_workers(cfg, gpus=gpu)
    cores = 1
    if not cfg.ray_workers and not gpu and 0 < work.parts < workers:
        # Fewer parts than CPUs: the engine starts one actor per part, sharing the CPUs out.
        cores, workers = workers // work.parts, work.parts
    worker = replace(machine, cores=cores, gpus=1 if gpu else 0)
    one = estimate(work, worker).seconds
    rate = load_rates().get(work.rate)
    serial = rate.fixed_s if rate is not None and not gpu else 0.0
    parallel = max(0.0, one - serial)
    wall = ray_seconds(
        parallel,
        units=work.parts,
        workers=workers,
        serial_s=serial,
        largest_unit_s=parallel * work.largest,
    )
    each = "1 GPU" if gpu else f"{cores} CPU" + ("s" if cores > 1 else "")
    line = (
        f"on Ray with {workers} worker(s) of {each}: ~{duration_text(wall)} ({work.parts} "
        f"unit(s), the largest {work.largest:.0%} of the work; ~{duration_text(one)} on one "
        "worker)"
    )
    return wall, line
