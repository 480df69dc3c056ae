"""The Ray engine against the local engine, on a real local Ray instance (two CPUs).

One small pipeline (tests/integration/ray_pipeline.toml: MiniLM and random encoders with
Faiss search, the BM25 sweep for tuning and Lucene for the runs, score, report) runs on
the local engine once; then:

- the same pipeline with ``--engine ray`` writes byte-identical outputs (every file of
  every manifest, reports included);
- an encode worker that dies in the middle of a shard is restarted and retried by Ray,
  and the output is still byte-identical;
- an encode stopped after some shards on one engine is finished by the other, without
  writing the finished shards again.

Every run works in the same folder (``<base>/home``, renamed afterwards), because reports
name their input folders.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mdcr.cli import main
from mdcr.errors import InputDataError

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PIPELINE = Path(__file__).with_name("ray_pipeline.toml")
UPSTREAM = ("synth", "prefilter", "pools")  # copied into a new home: not what is compared
SCALED_OUT = ("encode", "search", "bm25-tune", "bm25")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[Any]:
    """One local Ray instance with two CPUs for the whole module; the stages join it."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (mdcr[ray])")
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("engines")


def _prepare(base: Path, upstream: Path | None = None) -> Path:
    home = base / "home"
    assert not home.exists()
    home.mkdir()
    if upstream is not None:
        for stage in UPSTREAM:
            shutil.copytree(upstream / stage, home / stage)
    return home


def _mdcr(home: Path, *args: str, index_dir: Path) -> int:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MDCR_INDEX_DIR", str(index_dir))
        return main(["run", str(PIPELINE), "--home", str(home), "-q", *args])


def _keep(base: Path, name: str) -> Path:
    kept = base / name
    (base / "home").rename(kept)
    return kept


def manifests(home: Path, stage: str | None = None) -> dict[str, dict[str, Any]]:
    """``stage/fingerprint`` -> manifest of every finished output under ``home``."""
    pattern = f"{stage or '*'}/*/manifest.json"
    return {
        f"{m.parent.parent.name}/{m.parent.name}": json.loads(m.read_text())
        for m in sorted(home.glob(pattern))
    }


def output_hashes(home: Path, stage: str | None = None) -> dict[str, str]:
    """``stage/fingerprint/file`` -> sha256, of every output file the manifests name."""
    return {
        f"{key}/{name}": out["sha256"]
        for key, m in manifests(home, stage).items()
        for name, out in m["outputs"].items()
    }


@pytest.fixture(scope="module")
def local_home(base: Path) -> Path:
    """The whole pipeline on the local engine (the reference)."""
    home = _prepare(base)
    assert _mdcr(home, index_dir=base / "indexes-local") == 0
    return _keep(base, "local")


def test_ray_engine_writes_byte_identical_outputs(
    ray_instance: Any, base: Path, local_home: Path
) -> None:
    home = _prepare(base, upstream=local_home)
    index_dir = base / "indexes-ray"
    assert _mdcr(home, "--engine", "ray", index_dir=index_dir) == 0
    ray_home = _keep(base, "ray")

    local, on_ray = output_hashes(local_home), output_hashes(ray_home)
    stages = {key.split("/")[0] for key in on_ray}
    assert {*SCALED_OUT, "score", "report"} <= stages
    assert on_ray == local  # embeddings, dense runs, BM25 runs, grid, scores, reports
    assert any(k.startswith("report/") and k.endswith("report.md") for k in on_ray)
    # Ray built its own Lucene indexes; the local run's were not used.
    assert any(index_dir.iterdir())
    for stage in SCALED_OUT:
        for key, m in manifests(ray_home, stage).items():
            assert m["settings"]["executor"] == "ray", key
            executor = m["info"]["executor"]
            assert executor["name"] == "ray" and executor["cpus"] == 2, key
            assert executor["workers"] >= 1, key
            assert manifests(local_home, stage)[key]["info"]["executor"] == {"name": "local"}
    minilm = next(m for m in manifests(ray_home, "encode").values() if m["info"]["dim"] == 384)
    assert minilm["info"]["executor"]["workers"] == 2  # 8 shards shared by two actors


def test_a_killed_encode_worker_is_retried_with_identical_output(
    ray_instance: Any, base: Path, local_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = base / "worker-killed"
    # The worker encoding shard 3 exits (os._exit) after encoding and before writing it.
    monkeypatch.setenv("MDCR_FAULT", f"encode-shard-3=exit-once:{marker}")
    home = _prepare(base, upstream=local_home)
    args = ("--engine", "ray", "--until", "encode_minilm")
    assert _mdcr(home, *args, index_dir=base / "indexes-ray") == 0
    killed = _keep(base, "killed")

    assert marker.is_file()  # the worker did die there
    (key, m), *_ = manifests(killed, "encode").items()
    assert m["info"]["shards_written"] == {"document": list(range(8))}
    assert output_hashes(killed, "encode") == {
        k: v for k, v in output_hashes(local_home, "encode").items() if k.startswith(key)
    }


@pytest.mark.parametrize(("first", "then"), [("ray", "local"), ("local", "ray")])
def test_an_encode_stopped_on_one_engine_resumes_on_the_other(
    ray_instance: Any,
    base: Path,
    local_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    first: str,
    then: str,
) -> None:
    home = _prepare(base, upstream=local_home)
    args = ("--until", "encode_minilm")
    monkeypatch.setenv("MDCR_FAULT", "encode-shard-4=raise")
    assert _mdcr(home, "--engine", first, *args, index_dir=base / "indexes") == 2
    (work,) = (home / "encode").glob(".*.partial")
    finished = {p.name: p.stat().st_mtime_ns for p in work.glob("ids_*.parquet")}
    done = sorted(int(name[4:9]) for name in finished)
    assert done[:4] == [0, 1, 2, 3] and 4 not in done

    monkeypatch.delenv("MDCR_FAULT")
    assert _mdcr(home, "--engine", then, *args, index_dir=base / "indexes") == 0
    resumed = _keep(base, f"resumed-{first}-{then}")

    (key, m), *_ = manifests(resumed, "encode").items()
    assert m["settings"]["executor"] == then
    assert m["info"]["shards_written"] == {"document": [i for i in range(8) if i not in done]}
    assert m["info"]["counts"]["resumed"] == 100 * len(done)  # every finished shard is full
    out = resumed / key
    assert {n: (out / n).stat().st_mtime_ns for n in finished} == finished  # not rewritten
    assert output_hashes(resumed, "encode") == {
        k: v for k, v in output_hashes(local_home, "encode").items() if k.startswith(key)
    }


def _add_or_fail(state: int, item: int) -> int:
    if item == 2:
        raise InputDataError("paper 2 is bad; fix it")
    return state + item


def test_ray_map_keeps_order_and_passes_mdcr_errors_as_one_line(
    ray_instance: Any, tmp_path: Path
) -> None:
    from mdcr.engine.ray import connect

    engine = connect("", 0, shared=[tmp_path])  # joins the module's instance; storage seen
    assert not list(tmp_path.iterdir())  # the probe's marker is gone again
    setup = functools.partial(int, 10)
    assert list(engine.map(_add_or_fail, [5, 1, 3, 4], setup=setup)) == [15, 11, 13, 14]
    with pytest.raises(InputDataError) as err:
        list(engine.map(_add_or_fail, [1, 2, 3], setup=setup))
    assert str(err.value) == "paper 2 is bad; fix it"
    assert engine.info()["workers"] == 2 and engine.worker_gpus("auto") == 0.0
