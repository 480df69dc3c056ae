"""The Ray engine against the local engine, on a real Ray instance with two CPUs.

One small pipeline (tests/integration/ray_pipeline.toml: a tiny BERT through the hf family,
as MiniLM runs, and the random encoder with Faiss search, the BM25 sweep for tuning and
Lucene for the runs, score, report) runs once on the local engine and once on Ray, where
the worker encoding one shard dies in the middle of it; then:

- the Ray run wrote byte-identical outputs (every file of every manifest, reports
  included);
- the killed worker was restarted and its shard retried by Ray, and the encode output is
  still byte-identical;
- an encode stopped after some shards on one engine is finished by the other, without
  writing the finished shards again.

Ray runs as on a cluster: ``ray start --head --block`` (two CPUs) for the module, and
each ``mdcr`` run a separate process that joins it through ``$RAY_ADDRESS``, so the test
process itself never loads Ray. Every run works in the same folder (``<base>/home``,
renamed afterwards), because reports name their input folders.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.encoders.fixtures import make_tiny_bert

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PIPELINE = Path(__file__).with_name("ray_pipeline.toml")
UPSTREAM = ("synth", "prefilter", "pools")  # copied into a new home: not what is compared
SCALED_OUT = ("encode", "search", "bm25-tune", "bm25")
ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "RAY_AUTH_MODE": "disabled",  # a head on 127.0.0.1 for this test only
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def ray_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Ray head with two CPUs for the whole module (``ray start --head --block``)."""
    pytest.importorskip("ray", reason="the ray extra is not installed (mdcr[ray])")
    port = _free_port()
    log = (tmp_path_factory.mktemp("ray-head") / "head.log").open("w", buffering=1)
    head = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("ray")),
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=2",
            "--num-gpus=0",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **ENV},
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in Path(log.name).read_text():
            assert head.poll() is None, f"ray start failed; see {log.name}"
            assert time.monotonic() < deadline, f"Ray did not start in 120 s; see {log.name}"
            time.sleep(0.5)
        yield address
    finally:
        head.terminate()  # `ray start --block` stops the processes it started
        head.wait(timeout=60)
        log.close()


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's folder: the runs' homes, and the dense encoder's tiny BERT (``bert``)."""
    base = tmp_path_factory.mktemp("engines")
    make_tiny_bert(base / "bert")
    return base


def _prepare(base: Path, upstream: Path | None = None) -> Path:
    home = base / "home"
    assert not home.exists()
    home.mkdir()
    if upstream is not None:
        for stage in UPSTREAM:
            shutil.copytree(upstream / stage, home / stage)
    return home


def _mdcr(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``mdcr run`` of the test pipeline in its own process, the dense encoder the tiny
    BERT beside ``home``."""
    dense = f"encode_dense.encoder=hf:{home.parent / 'bert'}"
    return subprocess.run(
        [
            *(sys.executable, "-m", "mdcr.cli", "run", str(PIPELINE), "--home", str(home)),
            *("-q", "--set", dense, *args),
        ],
        env={**os.environ, **ENV, **env},
        cwd=REPO,
        capture_output=True,
        text=True,
    )


def _ok(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr[-3000:]


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
    _ok(_mdcr(home))
    return _keep(base, "local")


def _encode_of_dim(home: Path, dim: int) -> tuple[str, dict[str, Any]]:
    """``encode/fingerprint`` and manifest of the encode of vectors of ``dim`` dimensions:
    32 the tiny BERT's (hidden size 32), 16 the random encoder's."""
    (found,) = [(k, m) for k, m in manifests(home, "encode").items() if m["info"]["dim"] == dim]
    return found


@pytest.fixture(scope="module")
def ray_home(ray_address: str, base: Path, local_home: Path) -> Path:
    """The whole pipeline on Ray, from the local run's pools; the worker encoding the random
    encoder's shard 3 (the first encode's) exits (``os._exit``) after encoding it and
    before writing it."""
    home = _prepare(base, upstream=local_home)
    fault = f"encode-shard-3=exit-once:{base / 'worker-killed'}"
    _ok(_mdcr(home, "--engine", "ray", "--ray-address", ray_address, MDCR_FAULT=fault))
    return _keep(base, "ray")


def test_ray_engine_writes_byte_identical_outputs(local_home: Path, ray_home: Path) -> None:
    local, on_ray = output_hashes(local_home), output_hashes(ray_home)
    stages = {key.split("/")[0] for key in on_ray}
    assert {*SCALED_OUT, "score", "report"} <= stages
    assert on_ray == local  # embeddings, dense runs, BM25 runs, grid, scores, reports
    assert any(k.startswith("report/") and k.endswith("report.md") for k in on_ray)
    # Ray built its own Lucene indexes, in its own store; the local run's were not used.
    assert any((ray_home / "lucene-index").iterdir())
    for stage in SCALED_OUT:
        for key, m in manifests(ray_home, stage).items():
            assert m["settings"]["executor"] == "ray", key
            executor = m["info"]["executor"]
            assert executor["name"] == "ray" and executor["cpus"] == 2, key
            assert executor["workers"] >= 1, key
            assert manifests(local_home, stage)[key]["info"]["executor"] == {"name": "local"}
    for dim in (16, 32):  # the random encoder's and the tiny BERT's
        _, m = _encode_of_dim(ray_home, dim)
        assert m["info"]["executor"]["workers"] == 2  # 8 shards shared by two actors


def test_a_killed_encode_worker_is_retried_with_identical_output(
    base: Path, local_home: Path, ray_home: Path
) -> None:
    assert (base / "worker-killed").is_file()  # the worker did die there
    _, m = _encode_of_dim(ray_home, 16)
    assert m["info"]["shards_written"] == {"document": list(range(8))}
    assert output_hashes(ray_home, "encode") == output_hashes(local_home, "encode")


@pytest.mark.parametrize(("first", "then"), [("ray", "local"), ("local", "ray")])
def test_an_encode_stopped_on_one_engine_resumes_on_the_other(
    ray_address: str, base: Path, local_home: Path, first: str, then: str
) -> None:
    home = _prepare(base, upstream=local_home)
    args = ("--until", "encode_random")  # no model to load
    stopped = _mdcr(
        home, "--engine", first, *args, RAY_ADDRESS=ray_address, MDCR_FAULT="encode-shard-4=raise"
    )
    assert stopped.returncode == 2
    assert stopped.stderr.strip().splitlines()[-1] == (
        "mdcr: error: fault injected at encode-shard-4 (MDCR_FAULT); unset MDCR_FAULT and "
        "re-run to resume"
    )
    (work,) = (home / "encode").glob(".*.partial")
    finished = {p.name: p.stat().st_mtime_ns for p in work.glob("ids_*.parquet")}
    done = sorted(int(name[4:9]) for name in finished)
    assert done[:4] == [0, 1, 2, 3] and 4 not in done

    _ok(_mdcr(home, "--engine", then, *args, RAY_ADDRESS=ray_address))
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


MAP_SCRIPT = """
import functools, json, sys
from mdcr.core.stage import keeping_for_run
from mdcr.engine.ray import connect
from mdcr.core.errors import InputDataError
from tests.integration.ray_helpers import add_or_fail, worker_and_state

engine = connect("", 0, shared=[sys.argv[1]])
setup = functools.partial(int, 10)
out = {"sums": list(engine.map(add_or_fail, [5, 1, 3, 4], setup=setup))}
try:
    list(engine.map(add_or_fail, [1, 2, 3], setup=setup))
except InputDataError as exc:
    out["error"] = [type(exc).__name__, str(exc)]
out["info"] = engine.info()
runs = []
with keeping_for_run():  # three stages of one run; the third wants both CPUs for one worker
    for value, items in ((1, [1, 2, 3, 4]), (2, [1, 2, 3, 4]), (3, [1])):
        runs.append(list(engine.map(worker_and_state, items, setup=functools.partial(int, value))))
runs.append(list(engine.map(worker_and_state, [1, 2], setup=functools.partial(int, 4))))
out["runs"] = runs
with open(sys.argv[2], "w") as f:  # not stdout: Ray's own log lines reach it too
    json.dump(out, f)
"""


def test_ray_map_keeps_order_passes_mdcr_errors_and_reuses_workers_within_a_run(
    ray_address: str, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    result = tmp_path / "result.json"
    done = subprocess.run(
        [sys.executable, "-c", MAP_SCRIPT, str(shared), str(result)],
        env={**os.environ, **ENV, "RAY_ADDRESS": ray_address},
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    _ok(done)
    out = json.loads(result.read_text())
    assert out["sums"] == [15, 11, 13, 14]
    assert out["error"] == ["InputDataError", "paper 2 is bad; fix it"]
    assert out["info"] == {
        "name": "ray",
        "address": ray_address,
        "nodes": 1,
        "cpus": 2,
        "gpus": 0,
        "workers": 2,
    }
    assert not list(shared.iterdir())  # the storage probe's marker is gone again
    first, second, third, alone = ({pid for pid, _ in run} for run in out["runs"])
    assert [sorted({state for _, state in run}) for run in out["runs"]] == [[1], [2], [3], [4]]
    assert len(first) == 2 and second == first  # the next stage of the run reused them
    assert not third & first  # other CPUs: new workers, the kept ones stopped
    assert not alone & (first | third)  # outside a run nothing is kept
    assert all(_gone(pid) for pid in first | third)  # stopped when the run ended


def _gone(pid: int, wait_s: float = 30.0) -> bool:
    """The process ``pid`` exits within ``wait_s`` seconds."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False
