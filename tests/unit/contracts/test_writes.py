"""Consumers ask what an output holds (the contracts its stage declares it writes), never a
list of stage names: a new stage that declares the pools contract is taken where pools are."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mdcr.cli import main
from mdcr.contracts.artifacts import BENCHMARK, POOL_META, POOLS, QRELS, QUERIES
from mdcr.contracts.outputs import writes
from mdcr.core.config import input_path
from mdcr.core.inputs import resolve_inputs
from mdcr.core.stage import STAGES, StageContext, StageSpec
from mdcr.core.store import Store
from mdcr.exports.registry import input_kind
from tests.unit.encoders.fixtures import write_corpus, write_pools


@dataclass(frozen=True)
class CopyConfig:
    source: str = input_path(help="a folder of pools files")


def run_t_copy_pools(cfg: CopyConfig, ctx: StageContext) -> None:
    for contract in (QUERIES, POOLS, POOL_META, QRELS):
        shutil.copyfile(contract.path(ctx.input("source")), contract.output(ctx))


@pytest.fixture
def stages() -> Iterator[tuple[StageSpec, StageSpec]]:
    declared = STAGES.register(
        StageSpec(
            "t-copy-pools",
            "1",
            CopyConfig,
            run_t_copy_pools,
            help="pools copied",
            writes=(QUERIES, POOLS, POOL_META, QRELS),
        )
    )
    silent = STAGES.register(StageSpec("t-copy-files", "1", CopyConfig, run_t_copy_pools, help="x"))
    yield declared, silent
    STAGES.unregister("t-copy-pools")
    STAGES.unregister("t-copy-files")


def test_a_stage_declaring_the_pools_contract_is_taken_where_pools_are(
    stages: tuple[StageSpec, StageSpec], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = write_corpus(tmp_path / "corpus", 40)
    source = write_pools(
        tmp_path / "files",
        {"dataset/test/30/r0": ids[:30]},
        {"dataset/test/30/r0": {"p0031": ids[:3], "p0032": ids[3:5]}},
    )
    home = tmp_path / "home"
    outs = []
    for spec in stages:
        cfg = CopyConfig(source=str(source))
        outs.append(Store(home).execute(spec, cfg, resolve_inputs(cfg), quiet=True).path)
    declared, silent = outs
    assert writes(declared, POOLS) and writes(declared, QRELS)
    assert not writes(declared, BENCHMARK) and not writes(silent, POOLS)
    assert not writes(source, POOLS)  # a folder no stage made
    assert input_kind(declared) == "pools"
    cli = ["evaluate", "--corpus", str(tmp_path / "corpus"), "--home", str(home), "-q"]
    assert main([*cli, "--pools", str(declared), "--encoder", "random"]) == 0
    assert "random" in capsys.readouterr().out
    # The same files from a stage that does not declare them are not pools.
    assert main([*cli, "--pools", str(silent), "--encoder", "random"]) == 2
    assert "is not a pools (or beir-import) stage output" in capsys.readouterr().err
