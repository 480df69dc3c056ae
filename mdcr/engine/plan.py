"""Wall time on N workers, for ``--dry-run --engine ray``: the local plan's rates, divided.

The local plan (:mod:`mdcr.planning`) estimates a stage's seconds on this machine from
per-unit rates (papers per second, queries per second). On Ray the same units run on N
workers at once, each at the local rate: the wall time is the driver's serial part plus
the parallel part in waves of N units (never less than the largest single unit, such as
the biggest pool), plus the workers' start (Ray, then each worker loading its model).
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any

from mdcr.errors import ConfigError, require


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


def ray_plan_line(local_s: float, units: int, workers: int, **parts: float) -> str:
    """One line for the dry run: the estimate on ``workers`` workers beside the local one."""
    wall = ray_seconds(local_s - parts.get("serial_s", 0.0), units=units, workers=workers, **parts)
    return (
        f"on Ray with {workers} worker(s): about {_duration(wall)} "
        f"({units} unit(s); {_duration(local_s)} on the local engine)"
    )


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
