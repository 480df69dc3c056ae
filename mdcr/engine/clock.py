"""The dry run's clock: each step's work priced by the measured rates
(:mod:`mdcr.planning.timing`) on the target machine, and on Ray by the workers that its
plan names (:mod:`mdcr.engine.plan`); registered with the kernel's runner
(:data:`mdcr.core.pipeline.CLOCKS`)."""

from __future__ import annotations

from typing import Any

from mdcr.core.pipeline import CLOCKS, WALL_TIME
from mdcr.core.stage import Work
from mdcr.engine.plan import ray_step_estimate
from mdcr.planning.timing import Machine, duration_text, estimate


def _on_ray(cfg: Any) -> bool:
    return getattr(cfg, "executor", "local") == "ray"


class WallClock:
    """Wall time on the target machine (``MDCR_PLAN_CORES``, ``MDCR_PLAN_GPUS``)."""

    name = WALL_TIME

    def step(self, cfg: Any, work: Work) -> tuple[float, list[str]]:
        machine = Machine.target()
        est = estimate(work, machine)
        lines = [f"time: ~{duration_text(est.seconds)} on {machine.describe()} ({est.basis})"]
        if _on_ray(cfg) and work.parts:
            seconds, line = ray_step_estimate(cfg, work, machine)
            return seconds, [*lines, line]
        return est.seconds, lines

    def table(self, timed: list[tuple[str, str, Any, float]]) -> list[str]:
        on_ray = any(_on_ray(cfg) for _, _, cfg, _ in timed)
        lines = [
            f"Estimated wall time on one machine with {Machine.target().describe()} "
            "(MDCR_PLAN_CORES, MDCR_PLAN_GPUS; rates measured in the paper's rehearsals and, "
            "for GPU work, on the card mdcr/data/gpu_rates.json names: mdcr/planning/timing.py)"
            + ("; steps marked 'on Ray' on the Ray workers their plan names:" if on_ray else ":")
        ]
        for step_id, stage, cfg, seconds in timed:
            where = "  (on Ray)" if _on_ray(cfg) else ""
            lines.append(f"  {step_id:<20} {stage:<18} {duration_text(seconds):>8}{where}")
        total = sum(seconds for *_, seconds in timed)
        lines.append(f"  {'total':<20} {'':<18} {duration_text(total):>8}")
        return lines


CLOCKS.register(WallClock())
