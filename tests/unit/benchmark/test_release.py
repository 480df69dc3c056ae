"""``mdcr download mdcr`` against a local server: resume, atomic files, provenance, and the
origin (official or not) that the provenance proves."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from mdcr.benchmark import release
from mdcr.benchmark.release import (
    DECLARED_BY_USER,
    DOWNLOADED,
    PROVENANCE,
    RELEASE_FILES,
    download_release,
    fetch,
    origin_of,
    register_release,
)
from mdcr.cli import main
from mdcr.contracts.facts import DECLARED, MDCR_FORMAT, OFFICIAL
from mdcr.core.errors import InputDataError
from tests.support.release_server import release_bytes, serve

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "mdcr_format_fixture"
FILES = release_bytes(FIXTURE)
TEST_FILES = ("mdcr_test.json", "mdcr_test_data.jsonl")


def _official_here(monkeypatch: pytest.MonkeyPatch, base_url: str) -> None:
    """Make the local server's addresses the official ones (the only way a test can fetch
    from "the official addresses" without the internet)."""
    monkeypatch.setattr(release, "RELEASE_BASE_URL", base_url)
    monkeypatch.setattr(release, "RELEASE_URLS", {n: base_url + n for n in RELEASE_FILES})


def test_the_official_addresses_are_the_mdcr_readme_ones() -> None:
    assert release.RELEASE_URLS == {
        "mdcr_val.json": "https://takelab.fer.hr/data/mdcr/mdcr_val.json",
        "mdcr_test.json": "https://takelab.fer.hr/data/mdcr/mdcr_test.json",
        "mdcr_val_data.jsonl": "https://takelab.fer.hr/data/mdcr/mdcr_val_data.jsonl",
        "mdcr_test_data.jsonl": "https://takelab.fer.hr/data/mdcr/mdcr_test_data.jsonl",
    }


def test_a_cut_transfer_resumes_with_a_range_request(tmp_path: Path) -> None:
    """Every first response is cut halfway: each file is resumed at the byte where it
    stopped, ends byte-identical, and is recorded with its address, size and sha256."""
    with serve(FILES, cut_first=True) as served:
        records = download_release(tmp_path, base_url=served.base_url, quiet=True)
    for name, body in FILES.items():
        assert (tmp_path / name).read_bytes() == body
        half = len(body) // 2
        assert served.requests.count((name, None)) == 1
        assert (name, f"bytes={half}-") in served.requests
        rec = records[name]
        assert rec["url"] == served.base_url + name and rec["how"] == DOWNLOADED
        assert rec["sha256"] == hashlib.sha256(body).hexdigest() and rec["size"] == len(body)
        assert rec["fetched_at"].endswith("Z")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*FILES, PROVENANCE])
    on_disk = json.loads((tmp_path / PROVENANCE).read_text())["files"]
    assert on_disk == records


def test_an_interrupted_download_leaves_a_part_file_and_resumes_next_run(tmp_path: Path) -> None:
    """A run that gives up leaves only ``<name>.part`` (never a file under the final name);
    the next run asks for the rest and completes it."""
    name = "mdcr_test_data.jsonl"
    target = tmp_path / name
    with serve(FILES, cut_first=True) as served:
        url = served.base_url + name
        with pytest.raises(InputDataError, match=r"run mdcr download mdcr again to resume"):
            fetch(url, target, quiet=True, timeout=5, retries=0)
        part = tmp_path / f"{name}.part"
        have = part.stat().st_size
        assert not target.exists() and have == len(FILES[name]) // 2
        fetch(url, target, quiet=True, timeout=5, retries=0)
        assert served.requests[-1] == (name, f"bytes={have}-")
    assert target.read_bytes() == FILES[name] and not part.exists()


def test_a_server_that_ignores_ranges_gives_the_whole_file(tmp_path: Path) -> None:
    with serve(FILES, cut_first=True, ranges=False) as served:
        download_release(tmp_path, base_url=served.base_url, quiet=True)
    assert all((tmp_path / n).read_bytes() == b for n, b in FILES.items())


def test_a_download_from_another_address_is_not_official(tmp_path: Path) -> None:
    with serve(FILES) as served:
        download_release(tmp_path, base_url=served.base_url, quiet=True)
    origin, sums = origin_of([tmp_path / n for n in TEST_FILES])
    assert origin.kind == MDCR_FORMAT and not origin.official
    assert f"came from {served.base_url}mdcr_test.json, not the official address" in origin.detail
    assert sums == {n: hashlib.sha256(FILES[n]).hexdigest() for n in TEST_FILES}


def test_official_only_while_the_files_match_their_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Downloaded from the official addresses: official. A changed file (no published
    checksum, so the record made at download time is the reference) is not; a second
    download fetches only that file again."""
    with serve(FILES) as served:
        _official_here(monkeypatch, served.base_url)
        download_release(tmp_path, quiet=True)
        files = [tmp_path / n for n in TEST_FILES]
        origin, _ = origin_of(files)
        assert origin.kind == OFFICIAL and origin.label == "official"
        changed = tmp_path / "mdcr_test.json"
        changed.write_bytes(changed.read_bytes().replace(b"1004", b"1009", 1))
        origin, _ = origin_of(files)
        assert origin.kind == MDCR_FORMAT
        assert "'mdcr_test.json' differs from its record in provenance.json" in origin.detail
        before = list(served.requests)
        download_release(tmp_path, quiet=True)
        assert [n for n, _ in served.requests[len(before) :]] == ["mdcr_test.json"]
        assert origin_of(files)[0].kind == OFFICIAL
    (tmp_path / PROVENANCE).unlink()
    origin, _ = origin_of(files)
    assert origin.kind == MDCR_FORMAT and f"no provenance.json in '{tmp_path}'" in origin.detail


def test_files_fetched_by_hand_are_declared_by_the_user(tmp_path: Path) -> None:
    for name in TEST_FILES:
        shutil.copy(FIXTURE / name, tmp_path / name)
    files = [tmp_path / n for n in TEST_FILES]
    assert origin_of(files)[0].kind == MDCR_FORMAT
    records = register_release(tmp_path, quiet=True)
    assert sorted(records) == sorted(TEST_FILES)
    assert all(r["how"] == DECLARED_BY_USER for r in records.values())
    assert records["mdcr_test.json"]["url"] == release.RELEASE_URLS["mdcr_test.json"]
    (tmp_path / "mdcr_val.json").write_bytes(b"{}")
    origin, _ = origin_of([tmp_path / "mdcr_val.json", *files])
    assert origin.detail == "'mdcr_val.json' has no record in provenance.json"
    origin, _ = origin_of(files)
    assert origin.kind == DECLARED and origin.official
    assert origin.label == "official (declared by the user)"
    assert origin.files("test") == "the official (declared by the user) MDCR test files"
    assert "declared by the user" in origin.line()


def test_the_download_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    with serve(FILES) as served:
        monkeypatch.setenv(release.BASE_URL_ENV, served.base_url)
        assert main(["download", "mdcr", "--to", str(tmp_path / "rel"), "-q"]) == 0
    out = capsys.readouterr().out
    assert out.count("\tdownloaded") == 4 and f"provenance: {tmp_path / 'rel'}" in out
    by_hand = tmp_path / "by_hand"
    by_hand.mkdir()
    shutil.copy(FIXTURE / "mdcr_test.json", by_hand / "mdcr_test.json")
    assert main(["download", "mdcr", "--register", str(by_hand), "-q"]) == 0
    assert "\tdeclared by the user" in capsys.readouterr().out
    assert main(["download", "mdcr", "--register", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip()
    assert "is not a folder" in err and len(err.splitlines()) == 1


def test_a_missing_file_on_the_server_is_a_one_line_error(tmp_path: Path) -> None:
    with (
        serve({"mdcr_val.json": b"{}"}) as served,
        pytest.raises(InputDataError, match=r"HTTP 404"),
    ):
        download_release(tmp_path, base_url=served.base_url, quiet=True)
    assert not (tmp_path / "mdcr_test.json").exists()
    assert json.loads((tmp_path / PROVENANCE).read_text())["files"].keys() == {"mdcr_val.json"}


@pytest.mark.parametrize("where", ["before", "after"])
def test_download_fetches_into_the_store_home_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, where: str
) -> None:
    """``mdcr --home X download mdcr`` (and ``download mdcr --home X``) writes under X, as
    every command finds its store; from a local server, never the internet."""
    home = tmp_path / "store"
    monkeypatch.setenv("MDCR_HOME", str(tmp_path / "elsewhere"))
    argv = ["download", "mdcr"]
    argv = ["--home", str(home), *argv] if where == "before" else [*argv, "--home", str(home)]
    with serve(FILES) as served:
        monkeypatch.setenv(release.BASE_URL_ENV, served.base_url)
        assert main(argv) == 0
    captured = capsys.readouterr()
    folder = home / "downloads" / "mdcr"
    assert f"provenance: {folder / PROVENANCE}" in captured.out
    assert f"store: {home} (--home)" in captured.err
    assert sorted(p.name for p in folder.iterdir() if p.name in FILES) == sorted(FILES)
    assert not (tmp_path / "elsewhere").exists()


def test_register_takes_only_files_in_the_release_format(tmp_path: Path, capsys) -> None:
    """Sizes unknown: names and format are checked, and the command says sizes were not."""
    folder = tmp_path / "any"
    folder.mkdir()
    (folder / "mdcr_test.json").write_text('{"not": "a benchmark"}')
    assert main(["download", "mdcr", "--register", str(folder)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is not a release file" in err
    assert release.RELEASE_URLS["mdcr_test.json"] in err
    assert not (folder / PROVENANCE).exists()
    shutil.copy(FIXTURE / "mdcr_test.json", folder / "mdcr_test.json")
    (folder / "mdcr_test_data.jsonl").write_text("[1, 2]\n")
    assert main(["download", "mdcr", "--register", str(folder)]) == 2
    assert "mdcr_test_data.jsonl' is not a release file" in capsys.readouterr().err
    shutil.copy(FIXTURE / "mdcr_test_data.jsonl", folder / "mdcr_test_data.jsonl")
    assert main(["download", "mdcr", "--register", str(folder)]) == 0
    assert "sizes not checked" in capsys.readouterr().err


def test_register_checks_sizes_where_the_release_s_are_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in TEST_FILES:
        shutil.copy(FIXTURE / name, tmp_path / name)
    sizes = {n: len(b) for n, b in FILES.items()}
    monkeypatch.setattr(release, "RELEASE_SIZES", {**sizes, "mdcr_test.json": 3})
    with pytest.raises(InputDataError, match=r"is \d+ bytes, but the release's mdcr_test.json"):
        register_release(tmp_path, quiet=True)
    assert not (tmp_path / PROVENANCE).exists()
    monkeypatch.setattr(release, "RELEASE_SIZES", sizes)
    assert sorted(register_release(tmp_path, quiet=True)) == sorted(TEST_FILES)
