"""The engine setting: a setting (recorded, never hashed), one-line errors, the local
engine, the shared-storage probe and the fault hook. The Ray engine itself runs in
tests/integration/test_ray_engine.py."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import operator
import subprocess
import sys
from pathlib import Path

import pytest

from mdcr.cli import main
from mdcr.core.config import config_fields, field_kind, from_mapping, params_of, settings_of
from mdcr.core.errors import ConfigError
from mdcr.core.fingerprints import fingerprint
from mdcr.core.pipeline import load_pipeline, set_engine
from mdcr.core.stage import get_stage
from mdcr.engine import engine_values
from mdcr.engine.faults import FaultInjected, fault_point
from mdcr.engine.local import LocalEngine
from mdcr.engine.ray import probe, unreachable_error

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "pipelines" / "demo.toml"
SCALED_OUT = {
    "encode": {"corpus": "c", "encoder": "random"},
    "search": {"pools": "p", "embeddings": "e"},
    "bm25": {"corpus": "c", "pools": "p"},
    "bm25-tune": {"corpus": "c", "pools": "p"},
}
RAY = {"executor": "ray", "ray_address": "head:6379", "ray_workers": 16}


@pytest.mark.parametrize("stage", sorted(SCALED_OUT))
def test_the_engine_is_a_setting_recorded_but_never_hashed(stage: str) -> None:
    spec = get_stage(stage)
    kinds = {f.name: field_kind(f) for f in config_fields(spec.config)}
    assert {kinds[k] for k in RAY} == {"setting"}
    local = from_mapping(spec.config, SCALED_OUT[stage], stage)
    on_ray = from_mapping(spec.config, {**SCALED_OUT[stage], **RAY}, stage)
    assert settings_of(on_ray) | RAY == settings_of(on_ray)
    assert settings_of(local)["executor"] == "local"
    assert params_of(local, hashed=True) == params_of(on_ray, hashed=True)
    inputs = {"corpus": ["raw:0"]}
    assert fingerprint(stage, spec.version, params_of(local, hashed=True), inputs) == (
        fingerprint(stage, spec.version, params_of(on_ray, hashed=True), inputs)
    )


def test_the_engine_settings_are_declared_once_for_every_stage_that_scales_out() -> None:
    from mdcr.engine import EngineSettings

    declared = [f.name for f in dataclasses.fields(EngineSettings)]
    assert declared == ["executor", "ray_address", "ray_workers"]
    for stage in SCALED_OUT:
        config = get_stage(stage).config
        assert issubclass(config, EngineSettings), stage
        assert [f.name for f in config_fields(config)][-3:] == declared  # listed last
        assert not [n for n in declared if n in inspect.get_annotations(config)]


@pytest.mark.parametrize("stage", ["bm25", "bm25-tune"])
def test_what_computes_bm25_is_its_backend_and_engine_is_no_key_of_it(stage: str) -> None:
    """``backend`` names what computes BM25 (Lucene or the sweep); ``engine`` is no key of
    the stage (the engine is ``executor``): a one-line error listing the valid keys."""
    from mdcr.core.config import parse_values

    config = get_stage(stage).config
    unknown = r"unknown key 'engine'; valid keys: .*backend.*executor"
    with pytest.raises(ConfigError, match=unknown):  # a pipeline file's key
        from_mapping(config, {**SCALED_OUT[stage], "engine": "sweep"}, stage)
    with pytest.raises(ConfigError, match=unknown):  # `mdcr run --set step.engine=...`
        parse_values(config, {"engine": "lucene"}, stage)
    cfg = from_mapping(config, {**SCALED_OUT[stage], "backend": "lucene"}, stage)
    assert settings_of(cfg)["backend"] == "lucene"


def test_engine_ray_without_ray_is_one_line_naming_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    assert main(["run", str(DEMO), "--engine", "ray", "--home", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "'ray' needs Ray, which is not installed" in err and "pip install 'mdcr[ray]'" in err
    assert not any(tmp_path.iterdir())  # checked before anything ran


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--ray-workers", "-2"], "ray_workers: -2 is negative; use >= 0"),
        (["--engine", "spark"], "invalid choice: 'spark'"),
    ],
)
def test_bad_engine_options_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code: int | str | None
    try:
        code = main(["run", str(DEMO), "--home", str(tmp_path), *argv])
    except SystemExit as exc:  # argparse's own choices check
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert message in err.splitlines()[-1]
    assert not any(tmp_path.iterdir())


def test_engine_options_set_every_step_that_scales_out() -> None:
    pipeline = load_pipeline(DEMO)
    changed = set_engine(pipeline, engine_values("ray", "", 4))
    for before, after in zip(pipeline.steps, changed.steps, strict=True):
        if before.spec.name in SCALED_OUT:
            assert (after.cfg.executor, after.cfg.ray_workers) == ("ray", 4)
            assert before.cfg.executor == "local"
        else:
            assert after.cfg is before.cfg
    assert set_engine(pipeline, engine_values()) is pipeline  # nothing given: each step's own
    with pytest.raises(ConfigError, match="--engine 'spark' is not valid"):
        engine_values("spark")


def test_local_engine_sets_up_once_and_keeps_order() -> None:
    calls: list[int] = []

    def setup() -> int:
        calls.append(1)
        return 100

    engine = LocalEngine()
    assert list(engine.map(operator.add, [3, 1, 2], setup=setup)) == [103, 101, 102]
    assert calls == [1]
    assert list(engine.map(operator.add, [], setup=functools.partial(int, 1))) == []
    assert engine.info() == {"name": "local"} and engine.in_process


def test_the_storage_probe_names_what_a_node_cannot_read(tmp_path: Path) -> None:
    good, wrong, missing = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    good.write_text("token")
    wrong.write_text("another run's token")
    assert probe([str(good), str(wrong), str(missing)], "token") == [str(wrong), str(missing)]
    assert probe([], "token", reads=[str(tmp_path), str(tmp_path / "no-input")]) == [
        str(tmp_path / "no-input")
    ]
    message = str(unreachable_error("10.0.0.7", str(tmp_path / ".ray-check-0123")))
    assert len(message.splitlines()) == 1
    assert f"Ray node 10.0.0.7 cannot see '{tmp_path}'" in message and "MDCR_HOME" in message
    assert f"cannot see '{tmp_path / 'pools'}'" in str(
        unreachable_error("n", str(tmp_path / "pools"))
    )


def test_fault_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fault_point("encode-shard-1")  # unset: nothing happens
    monkeypatch.setenv("MDCR_FAULT", "encode-shard-1=raise")
    fault_point("encode-shard-2")
    with pytest.raises(FaultInjected, match="fault injected at encode-shard-1"):
        fault_point("encode-shard-1")
    marker = tmp_path / "died"
    code = "from mdcr.engine.faults import fault_point; fault_point('x'); print('alive')"
    env = {"MDCR_FAULT": f"x=exit-once:{marker}", "PATH": "/usr/bin:/bin"}
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    again = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert (first.returncode, first.stdout) == (17, "") and marker.is_file()
    assert (again.returncode, again.stdout) == (0, "alive\n")


def test_ray_wall_time_divides_the_parallel_part_by_the_workers() -> None:
    from mdcr.engine.plan import planned_workers, ray_seconds

    # 700 shards of 10 s each: 7,000 s locally; 100 workers run them in 7 waves.
    assert ray_seconds(7000.0, units=700, workers=100) == pytest.approx(70.0)
    # The serial part stays; more workers than units do not help; nor below the largest unit.
    assert ray_seconds(7000.0, units=700, workers=100, serial_s=30.0) == pytest.approx(100.0)
    assert ray_seconds(100.0, units=4, workers=16) == pytest.approx(25.0)
    assert ray_seconds(100.0, units=4, workers=16, largest_unit_s=60.0) == pytest.approx(60.0)
    assert ray_seconds(0.0, units=0, workers=8, serial_s=5.0) == 5.0
    with pytest.raises(ConfigError, match="--ray-workers: 0 is not valid"):
        ray_seconds(1.0, units=1, workers=0)
    cfg = from_mapping(get_stage("search").config, {"pools": "p", "embeddings": "e"}, "s")
    assert planned_workers(dataclasses.replace(cfg, ray_workers=12)) == 12


def test_dry_run_on_ray_splits_each_step_into_its_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The paper's plan with --engine ray on 100 workers: encode shards on GPUs, pools on
    CPUs, never faster than the largest pool; the other steps as on one machine."""
    from mdcr.core.pipeline import planned_work
    from mdcr.core.store import Store
    from mdcr.engine.plan import ray_step_estimate
    from mdcr.planning.timing import Machine, estimate

    monkeypatch.setenv("S2ORC_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pipeline = load_pipeline(REPO / "pipelines" / "paper.toml", [])
    works = planned_work(pipeline, Store(tmp_path / "home"))
    machine = Machine(cores=16, gpus=1)
    cfg = dataclasses.replace(pipeline.step("search_scibert").cfg, ray_workers=100)
    search = works["search_scibert"]
    assert search.parts == 138 and search.largest == pytest.approx(2e6 * 3800 / 8.664e10)
    wall, line = ray_step_estimate(cfg, search, machine)
    one_worker = estimate(search, Machine(cores=1, gpus=0)).seconds
    assert wall >= (one_worker - 5) * search.largest  # the largest pool bounds it
    assert wall < one_worker / 10
    assert line.startswith("on Ray with 100 worker(s) of 1 CPU: ~")
    enc_cfg = dataclasses.replace(pipeline.step("enc_scibert").cfg, ray_workers=8)
    enc = works["enc_scibert"]
    assert enc.parts == -(-13_836_690 // 20_000)
    wall, line = ray_step_estimate(enc_cfg, enc, machine)
    assert wall == pytest.approx(estimate(enc, machine).seconds / 8, rel=0.01)  # 8 GPUs
    assert "of 1 GPU" in line
