"""The store's catalog on a small real store: `mdcr ls`, `mdcr show`, `mdcr gc` (CLI and
Python API), and every stage command ending with its output folder."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

import mdcr
from mdcr.cli import main

STAGES = ("synth", "prefilter", "pools", "encode", "search", "score")


def _mdcr(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """synth -> prefilter -> pools -> encode (random) -> search -> score, each a stage
    command; plus a second encode (dim 32) that nothing uses."""
    home = tmp_path_factory.mktemp("catalog") / "home"
    printed: dict[str, str] = {}

    def stage(key: str, *argv: str) -> Path:
        rc, out, err = _mdcr(*argv, "--home", str(home), "-q")
        assert rc == 0, err
        printed[key] = out
        return Path(out.strip().splitlines()[-1])

    synth = stage("synth", "synth", "--n-papers", "2500", "--n-shards", "2")
    pre = stage("prefilter", "prefilter", "--input", str(synth))
    pools = stage(
        "pools", "pools", "--corpus", str(pre), "--n-queries-dataset", "6",
        "--dataset-sizes", "300", "--fields", "Medicine", "--field-queries", "3",
        "--field-pool-size", "200", "--on-short-field", "warn",
    )  # fmt: skip
    enc = stage("encode", "encode", "--encoder", "random", "--corpus", str(pre),
                "--targets", str(pools))  # fmt: skip
    unused = stage("unused", "encode", "--encoder", "random", "--dim", "32",
                   "--corpus", str(pre), "--targets", str(pools))  # fmt: skip
    search = stage("search", "search", "--pools", str(pools), "--embeddings", str(enc))
    score = stage("score", "score", "--pools", str(pools), "--runs", str(search))
    folders = {"synth": synth, "prefilter": pre, "pools": pools, "encode": enc}
    folders |= {"unused": unused, "search": search, "score": score}
    return {"home": home, "folders": folders, "printed": printed}


def test_every_stage_command_ends_with_its_output_folder(built: dict[str, Any]) -> None:
    home = built["home"]
    for key, out in built["printed"].items():
        lines = out.strip().splitlines()
        folder = Path(lines[-1])
        manifest = json.loads((folder / "manifest.json").read_text())
        stage = "encode" if key == "unused" else key
        assert manifest["stage"] == stage and folder == home / stage / manifest["fingerprint"]
        assert lines == [str(folder)]  # stdout holds the folder alone


def _rows(out: str) -> list[str]:
    """The table lines of `mdcr ls` (after the store line and the header, before the
    hints of other stores written recently)."""
    hints = ("also written recently: ", "... and ")
    lines = [ln for ln in out.strip().splitlines() if not ln.startswith(hints)]
    assert lines[0].startswith("store: ") and lines[1].split()[:2] == ["STAGE", "FINGERPRINT"]
    return lines[2:]


def test_ls_lists_every_output_with_its_facts(built: dict[str, Any]) -> None:
    home, folders = built["home"], built["folders"]
    rc, out, _ = _mdcr("ls", "--home", str(home))
    assert rc == 0 and out.splitlines()[0] == f"store: {home} (--home)"
    rows = _rows(out)
    assert {tuple(r.split()[:2]) for r in rows} == {
        (f.parent.name, f.name) for f in folders.values()
    }
    order = ["synth", "prefilter", "pools", "encode", "encode", "search", "score"]
    assert [r.split()[0] for r in rows] == order  # pipeline order
    assert all(r.endswith("  complete") for r in rows)
    line = {r.split()[1]: r for r in rows}
    assert "n_papers=2500 n_shards=2" in line[folders["synth"].name]
    assert re.search(r"  random  .*dim=32 ", line[folders["unused"].name])
    assert "dim=" not in line[folders["encode"].name]  # parameters at their default left out
    assert re.search(r"  \d{4}-\d\d-\d\d \d\d:\d\d  ", line[folders["pools"].name])

    table = mdcr.ls(home=home)  # the API: the same rows, with sizes in bytes
    assert list(table["fingerprint"]) == [r.split()[1] for r in rows]
    for key, folder in folders.items():
        row = table[table["fingerprint"] == folder.name].iloc[0]
        assert row["bytes"] == _size(folder), key
        assert row["path"] == str(folder) and row["state"] == "complete"
        assert row["stage"] == folder.parent.name and row["date"] in line[folder.name]
    assert table.set_index("fingerprint").loc[folders["search"].name, "name"] == "random"


def test_ls_names_the_other_stores_written_recently(
    built: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outputs written to another store (evaluate writes to the store holding its pools)
    are pointed to by `mdcr ls` of the store it reads; a store written long ago is not."""
    import time

    from mdcr.core import recent

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    other = tmp_path / "other"
    rc, _, err = _mdcr("synth", "--n-papers", "300", "--n-shards", "1", "--home", str(other))
    assert rc == 0 and f"store: {other} (--home)" in err
    record = json.loads((tmp_path / "cache" / "mdcr" / "recent-stores.json").read_text())
    assert list(record["stores"]) == [str(other)]
    home = built["home"]
    lines = _mdcr("ls", "--home", str(home))[1].splitlines()
    assert lines[0] == f"store: {home} (--home)"
    assert lines[-1].startswith(f"also written recently: {other} (")  # under the table
    assert lines[-1].endswith(f"`mdcr ls --home {other}` lists it")
    lines = _mdcr("ls", "--home", str(other))[1].splitlines()  # itself: no hint
    assert not any(ln.startswith("also written") for ln in lines)
    recent.note(home, now=time.time() - (recent.DAYS + 1) * 86_400)  # long ago: dropped
    assert list(recent.read()) == [str(other)]
    recent.note(home)
    assert list(recent.read()) == [str(home), str(other)]  # newest first


def test_ls_of_a_stage_or_a_retriever(built: dict[str, Any]) -> None:
    home, folders = built["home"], built["folders"]
    rows = _rows(_mdcr("ls", "encode", "--home", str(home))[1])
    assert {r.split()[1] for r in rows} == {folders["encode"].name, folders["unused"].name}
    rows = _rows(_mdcr("ls", "--retriever", "random", "--home", str(home))[1])
    assert {r.split()[0] for r in rows} == {"encode", "search", "score"}
    assert set(mdcr.ls("search", home=home)["fingerprint"]) == {folders["search"].name}
    assert _mdcr("ls", "--retriever", "nobody", "--home", str(home))[1].splitlines()[-1] == (
        "no outputs about 'nobody'"
    )


def test_show_says_what_an_output_is_made_of_and_who_uses_it(built: dict[str, Any]) -> None:
    home, f = built["home"], built["folders"]
    rc, out, _ = _mdcr("show", f["prefilter"].name[:6], "--home", str(home))
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == f"store: {home} (--home)"  # which store it read, as ls and gc say
    assert lines[1] == f"prefilter/{f['prefilter'].name}  complete"
    assert f"  inputs:    input = synth/{f['synth'].name}  {f['synth']}" in lines
    used = " ".join(ln for ln in lines if ln.startswith(("  used by:", " " * 13)))
    for key in ("pools", "encode", "unused"):
        assert f"{f[key].parent.name}/{f[key].name}" in used
    papers = pq.ParquetFile(f["prefilter"] / "papers.parquet").metadata.num_rows
    assert any(f"papers.parquet ({papers:,} rows," in ln for ln in lines)

    shown = mdcr.show(f["unused"], home=home)  # a folder works too
    assert shown["stage"] == "encode" and shown["used_by"] == []
    assert "no other output (`mdcr gc --dry-run` lists it)" in shown["text"]
    rc, out, err = _mdcr("show", str(f["score"]), "--json")  # a folder of another store
    manifest = json.loads(out)
    assert manifest == json.loads((f["score"] / "manifest.json").read_text())
    assert err.splitlines() == [f"store: {home} (the store holding the folder given)"]


def test_show_gives_a_score_output_s_main_numbers(built: dict[str, Any]) -> None:
    score = built["folders"]["score"]
    shown = mdcr.show(score.name, home=built["home"])
    per_pool = pd.read_parquet(score / "per_pool.parquet")
    for setup in ("dataset", "field"):
        sel = per_pool[
            (per_pool["setup"] == setup) & (per_pool["split"] == "test")
            & (per_pool["metric"] == "map@500") & (per_pool["retriever"] == "random")
        ]  # fmt: skip
        line = next(n for n in shown["numbers"] if n.startswith("random") and f"{setup} test" in n)
        # x100 with the report's one decimal, under the report's labels
        assert f"MAP {sel['value'].mean() * 100:.1f}  nDCG " in line and "  R@30 " in line
        assert line.endswith(f"({len(sel)} pools)") and "map@500" not in line
    assert "x100" in shown["numbers"][0]


def test_show_errors_are_one_line(built: dict[str, Any], tmp_path: Path) -> None:
    home = built["home"]
    for ref, message in [
        ("ffffffffff", "no output with fingerprint 'ffffffffff'"),
        ("ab", "is neither a folder nor a fingerprint (at least 4 of its hex digits)"),
        (str(tmp_path), "is not a store output"),
    ]:
        rc, _, err = _mdcr("show", ref, "--home", str(home))
        assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
    twin = tmp_path / "home"  # two outputs whose fingerprints start alike
    for fp in ("abcd000000000001", "abcd000000000002"):
        shutil.copytree(built["folders"]["synth"], twin / "synth" / fp)
        manifest = json.loads((twin / "synth" / fp / "manifest.json").read_text())
        manifest["fingerprint"] = fp
        (twin / "synth" / fp / "manifest.json").write_text(json.dumps(manifest))
    rc, _, err = _mdcr("show", "abcd", "--home", str(twin))
    assert rc == 2 and "'abcd' matches 2 outputs" in err
    assert _mdcr("show", "abcd000000000002", "--home", str(twin))[0] == 0


def test_gc_lists_what_no_result_uses_then_removes_it(
    built: dict[str, Any], tmp_path: Path
) -> None:
    from mdcr.core.locks import exclusive

    home = tmp_path / "home"
    shutil.copytree(built["home"], home)
    f = {k: home / v.parent.name / v.name for k, v in built["folders"].items()}
    left = home / "encode" / ".0123456789abcdef.partial"  # an interrupted run's work
    left.mkdir()
    (left / "ids_00000.parquet").write_bytes(b"x" * 1000)
    busy = home / "search" / ".fedcba9876543210.partial"  # a run at work now
    busy.mkdir()

    with exclusive(home / "search" / ".fedcba9876543210.lock", what="a search", quiet=True):
        rc, out, _ = _mdcr("gc", "--dry-run", "--home", str(home))
        assert rc == 0
        lines = out.strip().splitlines()[1:]
        listed = {ln.split()[0] for ln in lines[:-1]}
        assert listed == {f"encode/{f['unused'].name}", "encode/.0123456789abcdef.partial"}
        total = _size(f["unused"]) + 1000
        assert lines[-1].startswith("would remove 2 folder(s), ")
        assert {*mdcr.gc(home=home)["bytes"]} == {_size(f["unused"]), 1000}
        assert sum(mdcr.gc(home=home)["bytes"]) == total
        assert f["unused"].is_dir() and left.is_dir()  # a dry run removes nothing

        assert _mdcr("gc", "--yes", "--home", str(home))[0] == 0
    assert not f["unused"].exists() and not left.exists() and busy.is_dir()
    assert all(f[k].is_dir() for k in f if k != "unused")
    assert (
        _mdcr("gc", "--home", str(home))[1]
        .strip()
        .splitlines()[-1]
        .startswith("would remove 1 folder(s)")
    )  # the run that was at work has stopped: its folder is now left over
    assert len(mdcr.gc("encode", home=home)) == 0  # of one stage only
