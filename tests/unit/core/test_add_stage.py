"""Adding a stage is one registration next to its definition: the registry, the CLI's
subcommand, the pipeline runner and the store take it from there."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mdcr.cli import main
from mdcr.core.config import param
from mdcr.core.errors import ConfigError
from mdcr.core.manifests import read_manifest
from mdcr.core.stage import STAGES, StageContext, StageSpec, get_stage, stages


@dataclass(frozen=True)
class CountConfig:
    n: int = param(3, help="how many lines")


def run_t_count(cfg: CountConfig, ctx: StageContext) -> None:
    ctx.output("lines.txt", rows=cfg.n).write_text("".join(f"{i}\n" for i in range(cfg.n)))


@pytest.fixture
def t_count() -> Iterator[StageSpec]:
    # The whole of adding a stage:
    spec = STAGES.register(StageSpec("t-count", "1", CountConfig, run_t_count, help="count lines"))
    yield spec
    STAGES.unregister("t-count")


def test_a_stage_registered_once_runs_from_the_command_line(
    t_count: StageSpec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert get_stage("t-count") is t_count and "t-count" in stages()
    assert main(["t-count", "--n", "4", "--home", str(tmp_path)]) == 0
    folder = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert folder.parent == tmp_path / "t-count"
    assert (folder / "lines.txt").read_text().splitlines() == ["0", "1", "2", "3"]
    manifest = read_manifest(folder)
    assert manifest is not None and manifest["params"] == {"n": 4}
    assert manifest["outputs"]["lines.txt"]["rows"] == 4


def test_a_second_stage_under_a_taken_name_is_refused(t_count: StageSpec) -> None:
    other = StageSpec("t-count", "2", CountConfig, run_t_count, help="another")
    with pytest.raises(ConfigError, match="stage 't-count' is registered already"):
        STAGES.register(other)
    STAGES.register(t_count)  # the same spec again (a module imported twice) is no error


def test_an_unknown_stage_is_one_line_listing_the_registered_ones(t_count: StageSpec) -> None:
    with pytest.raises(ConfigError) as err:
        get_stage("t-cuont")
    assert "\n" not in str(err.value)
    assert "unknown stage 't-cuont'; valid: " in str(err.value) and "t-count" in str(err.value)
