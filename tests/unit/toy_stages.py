"""Two small real stages used by the store, pipeline and CLI tests.

``toy-source`` writes a Parquet table of n rows; ``toy-double`` reads one and writes each
value doubled. They are registered under names no real stage uses.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from mdcr.core.config import input_path, param
from mdcr.core.stage import STAGES, StageContext, StageSpec


@dataclass(frozen=True)
class SourceConfig:
    n: int = param(5, help="rows")
    label: str = param("x", help="a label")


def run_source(cfg: SourceConfig, ctx: StageContext) -> None:
    table = pa.table({"value": list(range(cfg.n)), "label": [cfg.label] * cfg.n})
    pq.write_table(table, ctx.output("values.parquet", rows=cfg.n))
    # A test sets this to hold the stage mid-write so that it can be killed there.
    hold = os.environ.get("TOY_HOLD_SECONDS")
    if hold:
        (ctx.out / "started").write_text("1")
        time.sleep(float(hold))
    ctx.record("sum", sum(range(cfg.n)))


@dataclass(frozen=True)
class DoubleConfig:
    source: str = input_path(help="a toy-source output")
    factor: int = param(2, help="multiplier")


def run_double(cfg: DoubleConfig, ctx: StageContext) -> None:
    values = pq.read_table(ctx.input("source") / "values.parquet")["value"].to_pylist()
    out = pa.table({"value": [v * cfg.factor for v in values]})
    pq.write_table(out, ctx.output("doubled.parquet"))


@dataclass(frozen=True)
class ShardsConfig:
    n_shards: int = param(4, help="shards")


def run_shards(cfg: ShardsConfig, ctx: StageContext) -> None:
    """A resumable stage: skips shards already finished by an interrupted run."""
    fail_at = int(os.environ.get("TOY_FAIL_AT", "-1"))
    for i in range(cfg.n_shards):
        path = ctx.out / f"shard_{i}.txt"
        if path.exists():
            ctx.record(f"skipped_{i}", True)
        else:
            if i == fail_at:
                raise RuntimeError("simulated crash")
            path.write_text(f"shard {i}\n")
        ctx.output(path.name, rows=1)


SOURCE = STAGES.register(StageSpec("toy-source", "1", SourceConfig, run_source, "toy source"))
DOUBLE = STAGES.register(StageSpec("toy-double", "1", DoubleConfig, run_double, "toy double"))
SHARDS = STAGES.register(
    StageSpec("toy-shards", "1", ShardsConfig, run_shards, "toy shards", resumable=True)
)
