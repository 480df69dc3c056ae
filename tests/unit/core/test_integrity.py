"""Stored outputs are what their manifests say: a finished output whose files were
truncated, deleted or replaced is never read, is reported in one line (``ls``, ``show``,
``verify``, ``gc``) and is built again by the next run that needs it."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mdcr
from mdcr.cli import main
from mdcr.contracts.facts import EncodeInfo
from mdcr.core.errors import ConfigError, ManifestMismatchError
from mdcr.core.integrity import damage
from mdcr.core.manifests import read_manifest
from mdcr.core.pipeline import load_pipeline, run_pipeline
from mdcr.core.store import Store
from mdcr.encoders.store import EmbeddingStore
from tests.unit.toy_stages import DOUBLE, SOURCE, DoubleConfig, SourceConfig

EMB = "emb_00000.npy"


def _mdcr(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- the store, on two toy stages ------------------------------------------------------


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_damaged_output_is_not_up_to_date_and_is_built_again(tmp_path: Path, capsys) -> None:
    store = Store(tmp_path)
    first = store.execute(SOURCE, SourceConfig(n=7), {}, quiet=True)
    good = _sha(first.path / "values.parquet")
    _truncate(first.path / "values.parquet")
    assert not store.is_done(first.path, first.fingerprint)
    again = store.execute(SOURCE, SourceConfig(n=7), {}, quiet=True)
    err = capsys.readouterr().err
    assert not again.up_to_date and again.path == first.path
    assert _sha(again.path / "values.parquet") == good
    assert len(err.strip().splitlines()) == 1
    assert "values.parquet has" in err and "building it again" in err


def test_gc_removes_a_damaged_output_used_by_another(tmp_path: Path) -> None:
    store = Store(tmp_path)
    src = store.execute(SOURCE, SourceConfig(n=7), {}, quiet=True)
    dbl = store.execute(DOUBLE, DoubleConfig(source=str(src.path)), {"source": [src.path]})
    _truncate(src.path / "values.parquet")
    table = mdcr.gc("toy-source", dry_run=False, home=tmp_path)
    assert list(table["fingerprint"]) == [src.fingerprint]
    assert table["reason"][0].startswith("damaged: values.parquet has")
    assert not src.path.exists() and dbl.path.exists()


def test_a_stage_never_reads_a_damaged_input(tmp_path: Path) -> None:
    store = Store(tmp_path)
    src = store.execute(SOURCE, SourceConfig(n=7), {}, quiet=True)
    (src.path / "values.parquet").unlink()
    with pytest.raises(ManifestMismatchError, match=r"input 'source': .*values.parquet is missing"):
        store.execute(
            DOUBLE, DoubleConfig(source=str(src.path)), {"source": [src.path]}, quiet=True
        )
    assert not (tmp_path / "toy-double").exists() or not any((tmp_path / "toy-double").iterdir())


def test_a_file_of_the_same_size_is_found_by_its_hash(tmp_path: Path) -> None:
    store = Store(tmp_path)
    src = store.execute(SOURCE, SourceConfig(n=7, label="a"), {}, quiet=True)
    other = store.execute(SOURCE, SourceConfig(n=7, label="b"), {}, quiet=True)
    target = src.path / "values.parquet"
    shutil.copyfile(other.path / "values.parquet", target)  # same size, other bytes
    manifest = read_manifest(src.path)
    assert manifest is not None
    assert damage(src.path, manifest, hashes="none") is None  # sizes agree
    assert "sha256" in str(damage(src.path, manifest, hashes="cheap"))
    assert "xxh3_128" in str(damage(src.path, manifest, hashes="read"))
    with pytest.raises(ManifestMismatchError, match="xxh3_128"):  # before a stage reads it
        store.execute(
            DOUBLE, DoubleConfig(source=str(src.path)), {"source": [src.path]}, quiet=True
        )


def test_a_manifest_without_sizes_or_hashes_is_damage(tmp_path: Path) -> None:
    store = Store(tmp_path)
    src = store.execute(SOURCE, SourceConfig(n=7), {}, quiet=True)
    path = src.path / "manifest.json"
    for key in ("bytes", "sha256", "xxh3_128"):
        manifest = json.loads(path.read_text())
        del manifest["outputs"]["values.parquet"][key]  # an edited manifest
        found = damage(src.path, manifest, hashes="none")
        assert found is not None and "no size and hashes" in str(found)


PIPE = """
[pipeline]
name = "toy"

[[step]]
stage = "toy-source"
id = "src"
n = 4

[[step]]
stage = "toy-double"
id = "dbl"
source = "@src"
"""


def test_a_pipeline_plans_a_damaged_step_and_builds_it_again(tmp_path: Path, capsys) -> None:
    (tmp_path / "p.toml").write_text(PIPE)
    pipe, store = load_pipeline(tmp_path / "p.toml"), Store(tmp_path / "home")
    first = run_pipeline(pipe, store, quiet=True)
    values = first["src"].path / "values.parquet"
    good = _sha(values)
    _truncate(values)
    capsys.readouterr()
    run_pipeline(pipe, store, dry_run=True)
    plan = capsys.readouterr().out
    assert "will run (damaged: values.parquet has" in plan
    with pytest.raises(ConfigError, match=r"needs 'src', whose output is damaged: values\.parquet"):
        run_pipeline(pipe, store, only="dbl", quiet=True)
    again = run_pipeline(pipe, store, quiet=True)
    assert not again["src"].up_to_date and again["dbl"].up_to_date
    assert _sha(values) == good


# --- an encode output, through the CLI -------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """synth -> prefilter -> pools -> encode (random) -> search -> score, stage commands."""
    home = tmp_path_factory.mktemp("integrity") / "home"

    def stage(*argv: str) -> Path:
        rc, out, err = _mdcr(*argv, "--home", str(home), "-q")
        assert rc == 0, err
        return Path(out.strip().splitlines()[-1])

    synth = stage("synth", "--n-papers", "1500", "--n-shards", "1")
    pre = stage("prefilter", "--input", str(synth))
    pools = stage(
        "pools", "--corpus", str(pre), "--n-queries-dataset", "6", "--dataset-sizes", "300",
        "--fields", "Medicine", "--field-queries", "3", "--field-pool-size", "200",
        "--on-short-field", "warn",
    )  # fmt: skip
    enc = stage("encode", "--encoder", "random", "--corpus", str(pre), "--targets", str(pools))
    search = stage("search", "--pools", str(pools), "--embeddings", str(enc))
    score = stage("score", "--pools", str(pools), "--runs", str(search))
    folders = {"prefilter": pre, "pools": pools, "encode": enc, "search": search, "score": score}
    return {"home": home, "folders": folders}


@pytest.fixture
def copy(built: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """A copy of the built store, to damage."""
    home = tmp_path / "home"
    shutil.copytree(built["home"], home)
    folders = {k: home / p.relative_to(built["home"]) for k, p in built["folders"].items()}
    return {"home": home, "folders": folders}


def _damage(how: str, path: Path) -> None:
    if how == "truncated":
        _truncate(path)
    elif how == "deleted":
        path.unlink()
    else:  # replaced by another file of the same shape and size
        old = np.load(path)
        new = np.random.default_rng(1).standard_normal(old.shape).astype(old.dtype)
        np.save(path, new)


@pytest.mark.parametrize("how", ["truncated", "deleted", "replaced"])
def test_a_damaged_encode_output_is_reported_and_built_again(
    copy: dict[str, Any], built: dict[str, Any], how: str
) -> None:
    home, f = copy["home"], copy["folders"]
    enc, emb = f["encode"], f["encode"] / EMB
    good_bytes, good_sha = emb.stat().st_size, _sha(emb)
    _damage(how, emb)
    if how == "replaced":
        assert emb.stat().st_size == good_bytes and _sha(emb) != good_sha
    fp = enc.name

    # ls: damaged where a size tells (ls only stats files); show names the file
    rc, out, _ = _mdcr("ls", "encode", "--home", str(home))
    row = next(line for line in out.splitlines() if fp in line)
    assert row.split()[-1] == ("complete" if how == "replaced" else "damaged")
    if how != "replaced":
        rc, out, _ = _mdcr("show", fp[:8], "--home", str(home))
        assert rc == 0 and f"damaged:   {EMB}" in out
        gc = _mdcr("gc", "--home", str(home))[1]
        assert f"encode/{fp}" in gc and f"damaged: {EMB}" in gc

    # verify: one line for the damaged output, a summary, exit status 1
    rc, out, _ = _mdcr("verify", "--home", str(home))
    lines = out.strip().splitlines()[1:]
    assert rc == 1 and len(lines) == 2, out
    assert lines[0].startswith(f"encode/{fp}  damaged: {EMB} ")
    assert lines[1].startswith("checked 6 output(s)") and lines[1].endswith("1 damaged")
    assert _mdcr("verify", f["score"].name[:8], "--home", str(home))[0] == 0
    table = mdcr.verify(home=home)
    assert list(table.loc[~table["ok"], "fingerprint"]) == [fp]

    # a stage that reads it stops in one line, before reading anything
    shutil.rmtree(f["search"])
    shutil.rmtree(f["score"])
    args = ("--pools", str(f["pools"]), "--embeddings", str(enc), "--home", str(home), "-q")
    rc, out, err = _mdcr("search", *args)
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"input 'embeddings': the encode output '{enc}' is damaged: {EMB}" in err
    if how != "replaced":  # read directly: a one-line error, not a short memory map
        with pytest.raises(ManifestMismatchError, match=EMB):
            EmbeddingStore(enc)

    # the next encode run builds it again, byte for byte, and the results are the same
    enc_args = ("--encoder", "random", "--corpus", str(f["prefilter"]), "--targets")
    rc, out, err = _mdcr("encode", *enc_args, str(f["pools"]), "--home", str(home), "-q")
    assert rc == 0 and Path(out.strip()) == enc, err
    assert "is damaged" in err and "building it again" in err
    assert _sha(emb) == good_sha
    assert _mdcr("verify", "--home", str(home))[0] == 0
    search = _mdcr("search", *args)[1].strip()
    score = _mdcr("score", "--pools", str(f["pools"]), "--runs", search, "--home", str(home))
    means = read_manifest(Path(score[1].strip()))
    before = read_manifest(built["folders"]["score"])
    assert means is not None and before is not None
    assert means["info"]["means"] == before["info"]["means"]


def test_a_damaged_output_is_never_copied_from(copy: dict[str, Any]) -> None:
    """encode copies vectors from earlier outputs of the same encoder: never a damaged one."""
    home, enc = copy["home"], copy["folders"]["encode"]
    key = read_manifest(enc)["info"]["encoder_key"]  # type: ignore[index]
    store = Store(home)
    assert [o.path for o in store.find("encode", EncodeInfo, encoder_key=key)] == [enc]
    _truncate(enc / EMB)
    assert store.find("encode", EncodeInfo, encoder_key=key) == []


def test_verify_a_sound_store(built: dict[str, Any]) -> None:
    rc, out, _ = _mdcr("verify", "--home", str(built["home"]))
    assert rc == 0
    assert out.strip().splitlines()[-1].endswith("all as their manifests record")
    assert mdcr.verify(home=built["home"])["ok"].all()


def test_a_damaged_file_read_outside_a_stage_is_one_line(
    copy: dict[str, Any], tmp_path: Path
) -> None:
    """Exports and the Python API read outputs through their contracts: checked too."""
    home, f = copy["home"], copy["folders"]
    _truncate(f["search"] / "runs.parquet")
    args = ("--run", str(f["search"]), "--qrels", str(f["pools"]), "--out", str(tmp_path / "x"))
    rc, _, err = _mdcr("export", *args, "--home", str(home))
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"the search output '{f['search']}' is damaged: runs.parquet has" in err
    with pytest.raises(ManifestMismatchError, match="re-run the search step"):
        mdcr.load_run(f["search"])


def test_a_large_output_changed_in_place_is_never_read_and_is_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Above the cheap-hash limit only sizes are checked before an output is called up to
    date; every byte is hashed (XXH3) before it is read, and what that finds is kept
    beside the output, so the next run builds it again rather than reusing it."""
    from mdcr.core import integrity

    monkeypatch.setattr(integrity, "CHEAP_HASH_BYTES", 0)  # every output is "large"
    store = Store(tmp_path)
    src = store.execute(SOURCE, SourceConfig(n=7, label="a"), {}, quiet=True)
    other = store.execute(SOURCE, SourceConfig(n=7, label="b"), {}, quiet=True)
    good = _sha(src.path / "values.parquet")
    shutil.copyfile(other.path / "values.parquet", src.path / "values.parquet")  # same size
    assert store.is_done(src.path, src.fingerprint)  # sizes agree: up to date unread
    cfg = DoubleConfig(source=str(src.path))
    with pytest.raises(ManifestMismatchError, match="xxh3_128 its manifest records"):
        store.execute(DOUBLE, cfg, {"source": [src.path]}, quiet=True)
    assert not store.is_done(src.path, src.fingerprint)  # remembered beside it
    rc, out, _ = _mdcr("verify", "--home", str(tmp_path))
    assert rc == 1 and "damaged: values.parquet does not have the xxh3_128" in out
    again = store.execute(SOURCE, SourceConfig(n=7, label="a"), {}, quiet=True)
    assert not again.up_to_date and _sha(again.path / "values.parquet") == good
    assert not integrity.damage_mark(src.path).exists()
    doubled = store.execute(DOUBLE, cfg, {"source": [src.path]}, quiet=True)
    assert not doubled.up_to_date
    capsys.readouterr()


@pytest.mark.parametrize("how", ["truncated", "missing", "not complete"])
def test_an_output_whose_manifest_cannot_be_read_is_damaged_for_verify(
    tmp_path: Path, how: str
) -> None:
    store = Store(tmp_path)
    src = store.execute(SOURCE, SourceConfig(n=7), {}, quiet=True)
    store.execute(SOURCE, SourceConfig(n=8), {}, quiet=True)
    path = src.path / "manifest.json"
    if how == "truncated":
        path.write_text(path.read_text()[:200])
    elif how == "missing":
        path.unlink()
    else:
        manifest = json.loads(path.read_text())
        manifest["complete"] = False
        path.write_text(json.dumps(manifest))
    rc, out, _ = _mdcr("verify", "--home", str(tmp_path))
    assert rc == 1, out
    assert f"{src.path.parent.name}/{src.fingerprint}  damaged: manifest.json" in out
    assert "checked 2 output(s)" in out and "1 damaged" in out
    again = store.execute(SOURCE, SourceConfig(n=7), {}, quiet=True)
    assert not again.up_to_date and read_manifest(again.path) is not None
