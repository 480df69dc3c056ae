"""Adding an export format is one registration next to its definition: a qrels TSV of
pools, registered here in one call, is a ``--format`` choice of ``mdcr export`` and runs
through the command's dispatch; its lines are the pools' qrels, read back independently.
The registry is restored after each test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from mdcr.cli import build_parser, main
from mdcr.core.config import from_mapping
from mdcr.core.store import Store
from mdcr.exports.registry import EXPORTS, Export, ExportRequest
from tests.unit.scoring.fakes import POOLS, FakePoolsConfig


def export_qrels_tsv(request: ExportRequest) -> list[str]:
    """The pools' qrels as ``qrels.tsv``: pool_id, query_id, paper_id, relevance."""
    from mdcr.contracts.artifacts import QRELS

    assert request.qrels is not None
    qrels = QRELS.read_pandas(request.qrels).sort_values(["pool_id", "query_id", "paper_id"])
    path = request.out / "qrels.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    qrels.to_csv(path, sep="\t", index=False, header=False)
    return [f"{path}: {len(qrels)} lines"]


@pytest.fixture
def qrels_tsv() -> Iterator[Export]:
    # The whole of adding an export format:
    yield EXPORTS.register(
        Export(
            format="qrels-tsv",
            kind="pools",
            write=export_qrels_tsv,
            help="a pools output's qrels as qrels.tsv",
            usage="--pools POOLS (a pools output), and no --run",
            writes="qrels.tsv",
            run="refused",
            qrels="required",
        )
    )
    EXPORTS.unregister("qrels-tsv:pools")


@pytest.fixture
def pools(tmp_path: Path) -> Path:
    cfg = from_mapping(FakePoolsConfig, {"fields": ["Biology", "Medicine"]}, "p")
    return Store(tmp_path / "home").execute(POOLS, cfg, {}, quiet=True).path


@pytest.mark.usefixtures("qrels_tsv")
def test_a_registered_format_runs_through_mdcr_export(
    pools: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["export", "--format", "qrels-tsv", "--pools", str(pools), "--out", str(out)]) == 0
    expected = pd.read_parquet(pools / "qrels.parquet")
    lines = (out / "qrels.tsv").read_text().splitlines()
    assert len(lines) == len(expected) > 0
    assert capsys.readouterr().out == f"{out / 'qrels.tsv'}: {len(expected)} lines\n"
    written = {tuple(line.split("\t")) for line in lines}
    assert written == {
        (str(r.pool_id), str(r.query_id), str(r.paper_id), str(int(r.relevance)))
        for r in expected.itertuples()
    }
    # The command's choices and help come from the registry.
    export = build_parser()._subparsers._group_actions[0].choices["export"]  # type: ignore[union-attr]
    action = next(a for a in export._actions if a.dest == "format")
    assert action.choices == ["beir", "mteb-results", "per-query", "qrels-tsv", "trec"]
    assert "qrels-tsv: a pools output's qrels as qrels.tsv" in action.help


@pytest.mark.usefixtures("qrels_tsv")
def test_the_registry_refuses_what_the_format_does_not_take(
    pools: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    # A benchmark kind it was not registered for, an input it refuses, a flag it never reads.
    argv = ["export", "--format", "qrels-tsv", "--run", str(pools), "--qrels", str(pools)]
    assert main([*argv, "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        "mdcr: error: export --format qrels-tsv: give --pools POOLS (a pools output), "
        "and no --run\n"
    )
    argv = ["export", "--format", "qrels-tsv", "--pools", str(pools), "--encoder", "minilm"]
    assert main([*argv, "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        "mdcr: error: export --encoder: only with --format beir of a benchmark output or "
        "--format beir of a pools output\n"
    )
    assert not out.exists()
    with pytest.raises(Exception, match="export 'qrels-tsv:pools' is registered already"):
        EXPORTS.register(Export("qrels-tsv", "pools", export_qrels_tsv, "", "", ""))
