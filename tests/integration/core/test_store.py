"""Store: fingerprints, manifests, up-to-date detection, atomicity and resume."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mdcr.core.atomic import atomic_path, atomic_write_text
from mdcr.core.errors import ManifestMismatchError
from mdcr.core.fingerprints import artifact_fingerprint, fingerprint, path_fingerprint
from mdcr.core.manifests import read_manifest
from mdcr.core.store import Store
from tests.support.toy_stages import (
    DOUBLE,
    SHARDS,
    SOURCE,
    DoubleConfig,
    ShardsConfig,
    SourceConfig,
)

REPO = Path(__file__).resolve().parents[3]


def test_fingerprint_is_stable_and_sensitive() -> None:
    a = fingerprint("s", "1", {"k": 1}, {"x": ["abc"]})
    assert a == fingerprint("s", "1", {"k": 1}, {"x": ["abc"]})
    assert len(a) == 16
    others = {
        fingerprint("s", "2", {"k": 1}, {"x": ["abc"]}),
        fingerprint("t", "1", {"k": 1}, {"x": ["abc"]}),
        fingerprint("s", "1", {"k": 2}, {"x": ["abc"]}),
        fingerprint("s", "1", {"k": 1}, {"x": ["abd"]}),
    }
    assert a not in others and len(others) == 4


def test_run_writes_manifest_with_hashes_rows_and_versions(tmp_path: Path) -> None:
    store = Store(tmp_path)
    art = store.execute(SOURCE, SourceConfig(n=7), {}, quiet=True)
    assert not art.up_to_date
    assert art.path == tmp_path / "toy-source" / art.fingerprint
    manifest = json.loads((art.path / "manifest.json").read_text())
    out = manifest["outputs"]["values.parquet"]
    data = (art.path / "values.parquet").read_bytes()
    assert out["sha256"] == hashlib.sha256(data).hexdigest()
    assert out["rows"] == 7 == pq.read_table(art.path / "values.parquet").num_rows
    assert manifest["params"] == {"n": 7, "label": "x"}
    assert manifest["info"] == {"sum": 21}
    assert manifest["complete"] is True
    assert "duckdb" in manifest["packages"] and "python" in manifest["packages"]
    assert manifest["timings"]["wall_s"] >= 0


def test_rerun_is_up_to_date_and_does_not_rewrite(tmp_path: Path, capsys) -> None:
    store = Store(tmp_path)
    first = store.execute(SOURCE, SourceConfig(n=3), {})
    mtime = (first.path / "values.parquet").stat().st_mtime_ns
    second = store.execute(SOURCE, SourceConfig(n=3), {})
    assert second.up_to_date and second.path == first.path
    assert (first.path / "values.parquet").stat().st_mtime_ns == mtime
    assert "up to date" in capsys.readouterr().err


def test_a_default_hashes_as_its_value(tmp_path: Path) -> None:
    store = Store(tmp_path)
    fp_default = store.plan(SOURCE, SourceConfig(), {}).fingerprint
    fp_explicit = store.plan(SOURCE, SourceConfig(n=5, label="x"), {}).fingerprint
    fp_changed = store.plan(SOURCE, SourceConfig(n=6), {}).fingerprint
    assert fp_default == fp_explicit != fp_changed


def test_a_default_changed_in_code_never_reuses_old_outputs(tmp_path: Path) -> None:
    """The same stage (name and version) whose config's default moved from 5 to 6, as an
    edited paper constant or BM25 grid would: its default run is a new output."""
    from dataclasses import dataclass

    from mdcr.core.config import param
    from mdcr.core.stage import StageSpec

    @dataclass(frozen=True)
    class EditedSourceConfig:
        n: int = param(6, help="rows")
        label: str = param("x", help="a label")

    edited = StageSpec(SOURCE.name, SOURCE.version, EditedSourceConfig, SOURCE.run, "edited")
    store = Store(tmp_path)
    old = store.execute(SOURCE, SourceConfig(), {}, quiet=True)
    new = store.execute(edited, EditedSourceConfig(), {}, quiet=True)
    assert not new.up_to_date and new.fingerprint != old.fingerprint
    assert pq.read_table(new.path / "values.parquet").num_rows == 6
    # Given explicitly, the old default is the old output.
    assert store.plan(edited, EditedSourceConfig(n=5), {}).fingerprint == old.fingerprint


def test_new_fingerprint_when_input_changes(tmp_path: Path) -> None:
    store = Store(tmp_path)
    a = store.execute(SOURCE, SourceConfig(n=3), {}, quiet=True)
    b = store.execute(SOURCE, SourceConfig(n=4), {}, quiet=True)
    da = store.execute(DOUBLE, DoubleConfig(source="@a"), {"source": [a.path]}, quiet=True)
    db = store.execute(DOUBLE, DoubleConfig(source="@b"), {"source": [b.path]}, quiet=True)
    assert da.fingerprint != db.fingerprint
    assert pq.read_table(db.path / "doubled.parquet")["value"].to_pylist() == [0, 2, 4, 6]
    manifest = read_manifest(da.path)
    assert manifest is not None
    assert manifest["inputs"]["source"][0]["fingerprint"] == a.fingerprint


def test_raw_input_fingerprint_follows_content_not_mtime(tmp_path: Path) -> None:
    d = tmp_path / "raw"
    d.mkdir()
    (d / "a.jsonl").write_text('{"x": 1}\n')
    fp = path_fingerprint(d)
    os.utime(d / "a.jsonl", (1, 1))
    assert path_fingerprint(d) == fp
    (d / "a.jsonl").write_text('{"x": 2}\n')
    assert path_fingerprint(d) != fp
    assert artifact_fingerprint(d).startswith("raw:")


def test_atomic_write_keeps_old_content_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    atomic_write_text(target, "old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]


def test_declared_but_missing_output_is_an_error(tmp_path: Path) -> None:
    from dataclasses import dataclass

    from mdcr.core.stage import StageContext, StageSpec

    @dataclass(frozen=True)
    class Empty:
        pass

    def run(cfg: Empty, ctx: StageContext) -> None:
        ctx.output("never.parquet")

    spec = StageSpec("toy-missing", "1", Empty, run, "declares but does not write")
    with pytest.raises(ManifestMismatchError, match=r"never\.parquet"):
        Store(tmp_path).execute(spec, Empty(), {}, quiet=True)
    # A failed stage that cannot resume leaves nothing: no output, no work folder, no lock.
    assert list((tmp_path / "toy-missing").iterdir()) == []


def test_killed_run_leaves_nothing_that_counts_as_done(tmp_path: Path) -> None:
    """SIGKILL a stage mid-write: no output folder is taken as done; a re-run completes."""
    script = textwrap.dedent(
        f"""
        import sys; sys.path.insert(0, {str(REPO)!r})
        from pathlib import Path
        from mdcr.core.store import Store
        from tests.support.toy_stages import SOURCE, SourceConfig
        Store(Path({str(tmp_path)!r})).execute(SOURCE, SourceConfig(n=9), {{}}, quiet=True)
        """
    )
    env = {**os.environ, "TOY_HOLD_SECONDS": "60"}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env)
    store = Store(tmp_path)
    planned = store.plan(SOURCE, SourceConfig(n=9), {})
    fp, final = planned.fingerprint, planned.folder
    work = store.work_folder("toy-source", fp)
    deadline = time.time() + 30
    while not (work / "started").exists():
        assert time.time() < deadline, "stage never started"
        assert proc.poll() is None, "stage exited early"
        time.sleep(0.05)
    assert (work / "values.parquet").exists()  # the half-finished output is there...
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not final.exists()  # ...but nothing was published
    assert not store.is_done(final, fp)
    art = store.execute(SOURCE, SourceConfig(n=9), {}, quiet=True)
    assert not art.up_to_date and store.is_done(final, fp)
    assert not work.exists()


def test_folder_with_incomplete_manifest_is_not_done(tmp_path: Path) -> None:
    store = Store(tmp_path)
    art = store.execute(SOURCE, SourceConfig(n=2), {}, quiet=True)
    manifest = json.loads((art.path / "manifest.json").read_text())
    manifest["complete"] = False
    (art.path / "manifest.json").write_text(json.dumps(manifest))
    assert not store.is_done(art.path, art.fingerprint)
    again = store.execute(SOURCE, SourceConfig(n=2), {}, quiet=True)
    assert not again.up_to_date and store.is_done(art.path, art.fingerprint)


def test_resumable_stage_continues_after_crash(tmp_path: Path, monkeypatch) -> None:
    store = Store(tmp_path)
    monkeypatch.setenv("TOY_FAIL_AT", "2")
    with pytest.raises(RuntimeError, match="simulated crash"):
        store.execute(SHARDS, ShardsConfig(), {}, quiet=True)
    planned = store.plan(SHARDS, ShardsConfig(), {})
    fp, final = planned.fingerprint, planned.folder
    assert not final.exists()
    assert sorted(p.name for p in store.work_folder("toy-shards", fp).iterdir()) == [
        "shard_0.txt",
        "shard_1.txt",
    ]
    monkeypatch.delenv("TOY_FAIL_AT")
    art = store.execute(SHARDS, ShardsConfig(), {}, quiet=True)
    manifest = read_manifest(art.path)
    assert manifest is not None
    assert manifest["info"] == {"skipped_0": True, "skipped_1": True}
    assert sorted(manifest["outputs"]) == [f"shard_{i}.txt" for i in range(4)]


def test_a_failed_run_keeps_its_work_folder_only_with_finished_units(
    tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A resumable stage that counts its finished units: failing before the first one
    leaves nothing (no work folder, no lock); failing after one keeps it to resume."""
    import dataclasses

    counted = dataclasses.replace(
        SHARDS, finished_units=lambda work: len(list(work.glob("shard_*.txt")))
    )
    store = Store(tmp_path)
    monkeypatch.setenv("TOY_FAIL_AT", "0")
    for _ in range(3):
        with pytest.raises(RuntimeError, match="simulated crash"):
            store.execute(counted, ShardsConfig(), {}, quiet=True)
    assert list((tmp_path / "toy-shards").iterdir()) == []
    monkeypatch.setenv("TOY_FAIL_AT", "1")
    with pytest.raises(RuntimeError, match="simulated crash"):
        store.execute(counted, ShardsConfig(), {}, quiet=True)
    (work,) = (tmp_path / "toy-shards").iterdir()
    assert work.name.endswith(".partial") and [p.name for p in work.iterdir()] == ["shard_0.txt"]
    monkeypatch.delenv("TOY_FAIL_AT")
    manifest = read_manifest(store.execute(counted, ShardsConfig(), {}, quiet=True).path)
    assert manifest is not None and manifest["info"] == {"skipped_0": True}


def test_a_store_home_that_is_a_file_is_a_one_line_error(tmp_path: Path) -> None:
    from mdcr.core.errors import ConfigError
    from mdcr.core.store import Store

    (tmp_path / "afile").write_text("")
    with pytest.raises(ConfigError, match="is a file, not a folder; give a folder with --home"):
        Store(tmp_path / "afile")
    assert Store(tmp_path / "new").home == tmp_path / "new"  # a folder not made yet is fine
