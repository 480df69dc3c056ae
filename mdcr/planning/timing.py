"""Wall-time estimates for ``mdcr run --dry-run``: each stage's work priced by measured rates.

A stage's plan states its work (:class:`~mdcr.core.stage.Work`): the key of a rate, units that
grow linearly (records, papers, queries) and pairs (pool size x queries, for search and
BM25). A rate is ``fixed_s + unit_s * units + pair_s * pairs`` seconds on the machine it
was measured on: the 2-core development machine, in the rehearsals of the paper at
1/1000, 1/100 and 1/10 of its scale (``scripts/bench_paper.py``), fitted by
``scripts/bench_paper.py --fit`` into ``mdcr/data/stage_rates.json``.

The target machine is one GPU machine unless stated otherwise:
``MDCR_PLAN_CORES`` (default 16) and ``MDCR_PLAN_GPUS`` (default 1). Stated assumptions:

- a stage that uses every core (:data:`PARALLEL`) runs ``cores / 2 x
  MDCR_PLAN_CORE_EFFICIENCY`` (default 0.75) times faster than on the 2 measured cores;
  the others run as fast as measured;
- on a GPU, a model encoder and the dense search run at the rates measured on the card
  that ``mdcr/data/gpu_rates.json`` names (``scripts/bench_encode.py`` and
  ``scripts/bench_search.py``, which ``scripts/gpu_check.sh`` runs on a lent GPU machine),
  per GPU: BERT-base papers per second (``MDCR_PLAN_PAPERS_PER_S`` states another rate),
  and the search's upload, build and exact top-k per row and per pair. An encoder
  ``cost`` times BERT-base's (MiniLM 0.2) is priced in BERT-base papers;
- without a GPU, a model encoder runs at the CPU rate measured for MiniLM in the
  rehearsal, counted in BERT-base papers.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib import resources
from typing import Any

from mdcr.core.stage import Work

REFERENCE_CORES = 2
CORES = 16
GPUS = 1
CORE_EFFICIENCY = 0.75
RATES_FILE = "stage_rates.json"
GPU_RATES_FILE = "gpu_rates.json"
# Rate keys of the work that spreads over every core (DuckDB, Faiss, Lucene's searcher
# threads, the sweep's threads, ranx's numba loops, torch's CPU kernels).
PARALLEL = frozenset(
    {
        "prefilter",
        "prefilter-s2ag",
        "search",
        "search-multi-vector",
        "bm25",
        "bm25-tune",
        "score",
        "encode-model",
        "benchmark-rank-bm25",
    }
)
MODEL_ENCODE = "encode-model"
# Rate keys of the work a GPU does when the machine has one (priced by gpu_rates.json).
GPU_WORK = frozenset({"search", "search-multi-vector"})


def _env(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value >= 0 else default


@dataclass(frozen=True)
class Machine:
    """The machine an estimate is for: its cores and GPUs."""

    cores: int
    gpus: int
    efficiency: float = CORE_EFFICIENCY
    papers_per_s: float | None = None  # per GPU; None: the measured rate (gpu_rates.json)

    @classmethod
    def target(cls) -> Machine:
        """The machine the dry run estimates for (``MDCR_PLAN_*``; one GPU machine)."""
        return cls(
            cores=max(1, int(_env("MDCR_PLAN_CORES", CORES))),
            gpus=int(_env("MDCR_PLAN_GPUS", GPUS)),
            efficiency=_env("MDCR_PLAN_CORE_EFFICIENCY", CORE_EFFICIENCY),
            papers_per_s=_env("MDCR_PLAN_PAPERS_PER_S", 0.0) or None,
        )

    def describe(self) -> str:
        gpus = f"{self.gpus} GPU" + ("s" if self.gpus != 1 else "") if self.gpus else "no GPU"
        return f"{self.cores} cores, {gpus}"

    def speedup(self) -> float:
        """How much faster parallel work runs here than on the measured 2 cores."""
        if self.cores <= REFERENCE_CORES:
            return self.cores / REFERENCE_CORES
        return max(1.0, self.cores / REFERENCE_CORES * self.efficiency)


@dataclass(frozen=True)
class Rate:
    """Seconds on the measured machine: ``fixed_s + unit_s * units + pair_s * pairs``."""

    fixed_s: float
    unit_s: float
    pair_s: float = 0.0

    def seconds(self, units: float, pairs: float) -> float:
        return self.fixed_s + self.unit_s * units + self.pair_s * pairs


@dataclass(frozen=True)
class GpuRates:
    """The GPU rates the dry run prices with, and the card they were measured on."""

    card: str
    papers_per_s: float
    rates: dict[str, Rate]


def load_gpu_rates() -> GpuRates:
    """The GPU rates shipped with mdcr (``mdcr/data/gpu_rates.json``)."""
    text = resources.files("mdcr").joinpath(f"data/{GPU_RATES_FILE}").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return GpuRates(
        card=str(data["card"]),
        papers_per_s=float(data["encode_papers_per_s"]),
        rates={key: Rate(**value) for key, value in data["rates"].items()},
    )


def load_rates() -> dict[str, Rate]:
    """The measured rates shipped with mdcr (``mdcr/data/stage_rates.json``): those fitted
    to the rehearsals, and those a benchmark measured (``benchmark_rates``)."""
    text = resources.files("mdcr").joinpath(f"data/{RATES_FILE}").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    rates = {**data["rates"], **data.get("benchmark_rates", {})}
    return {key: Rate(**value) for key, value in rates.items()}


@dataclass(frozen=True)
class Estimate:
    """A stage's estimated wall time on a machine, and how it was priced."""

    seconds: float
    basis: str


def estimate(
    work: Work,
    machine: Machine,
    rates: dict[str, Rate] | None = None,
    gpu: GpuRates | None = None,
) -> Estimate:
    """Price ``work`` on ``machine`` with the measured rates (see the module docstring)."""
    rates = load_rates() if rates is None else rates
    if machine.gpus > 0 and (work.rate == MODEL_ENCODE or work.rate in GPU_WORK):
        gpu = load_gpu_rates() if gpu is None else gpu
        if work.rate == MODEL_ENCODE:
            if machine.papers_per_s is not None:
                per_s, how = machine.papers_per_s, "stated rate"
            else:
                per_s, how = gpu.papers_per_s, f"measured on an {gpu.card}"
            seconds = work.units / (per_s * machine.gpus)
            return Estimate(seconds, f"{per_s:,.0f} BERT-base papers/s per GPU ({how})")
        on_gpu = gpu.rates[work.rate]
        seconds = on_gpu.fixed_s + (on_gpu.seconds(work.units, work.pairs) - on_gpu.fixed_s) / (
            machine.gpus
        )
        return Estimate(seconds, f"rate '{work.rate}' measured on an {gpu.card}, per GPU")
    rate = rates.get(work.rate)
    if rate is None:
        return Estimate(0.0, f"no measured rate for '{work.rate}'")
    scale = machine.speedup() if work.rate in PARALLEL else 1.0
    seconds = rate.fixed_s + (rate.seconds(work.units, work.pairs) - rate.fixed_s) / scale
    how = "all cores" if work.rate in PARALLEL else "one core's pace"
    return Estimate(seconds, f"rate '{work.rate}' measured on 2 cores, {how}")


def duration_text(seconds: float) -> str:
    """``42 s``, ``12 min``, ``3.4 h``: rounded for an estimate."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
