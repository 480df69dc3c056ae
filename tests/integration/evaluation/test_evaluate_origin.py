"""What ``mdcr evaluate`` calls a benchmark, and when published numbers stand beside ours:
only on the official release, proven by provenance; never on other files in its layout.
And a benchmark without its data file is a one-line error naming that file, leaving no
finished output behind."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from mdcr.benchmark import release
from mdcr.benchmark.formats import read_release_json, score_key, write_scores
from mdcr.benchmark.release import RELEASE_FILES, download_release, register_release
from mdcr.cli import main
from mdcr.core.manifests import read_manifest
from tests.support.release_server import release_bytes, serve

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "mdcr_format_fixture"
BM25_CARD = "map: 33.7\trecall_5: 28.5"  # the SPECTER2 card's BM25 row


@pytest.fixture(scope="module")
def scores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scores file for every pair of the fixture (a seeded hash of the pair)."""
    bench = read_release_json(FIXTURE / "mdcr_test.json")
    pairs = bench[["query_id", "paper_id"]].drop_duplicates()
    pairs["score"] = [
        int(hashlib.sha256(score_key(q, p).encode()).hexdigest()[:8], 16) / 2**32
        for q, p in zip(pairs["query_id"], pairs["paper_id"], strict=True)
    ]
    path = tmp_path_factory.mktemp("scores") / "scores.json"
    write_scores(pairs, path)
    return path


def _evaluate(
    benchmark: Path, home: Path, scores: Path, capsys, encoders: tuple[str, ...] = ("bm25",)
) -> tuple[str, str]:
    """Evaluate the built-in BM25 (which has a published MDCR row, the SPECTER2 card's, and
    a paper row) and the scores file named like SciNCL (which has published rows, but a
    scores file is not the model); returns the printout and report.md."""
    argv = ["evaluate", *(f"--encoder={e}" for e in encoders), "--scores", str(scores)]
    argv += ["--name", "scincl", "--split", "test"]
    assert main([*argv, "--benchmark", str(benchmark), "--home", str(home), "-q"]) == 0
    out = capsys.readouterr().out
    report = Path(out.strip().splitlines()[-1].removeprefix("report: ")).read_text()
    return out, report


def _no_published(out: str, report: str) -> None:
    assert "published AVG" not in out and "MDCR test files" not in out
    assert "No published results beside it" in out
    assert "Published MDCR" not in report and "Comparison with the paper" not in report
    assert "No paper or published numbers beside these" in report


def test_files_in_the_layout_without_provenance_get_no_published_rows(
    tmp_path: Path, scores: Path, capsys
) -> None:
    out, report = _evaluate(FIXTURE, tmp_path, scores, capsys)
    line = (
        "Benchmark: an MDCR-format benchmark, not the official MDCR release; no provenance.json "
        f"in '{FIXTURE}' (mdcr download mdcr makes one).\n"
    )
    assert out.startswith(line) and line in report
    _no_published(out, report)


def test_the_official_release_gets_published_rows(
    tmp_path: Path, scores: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Downloaded by mdcr from the official addresses (here the local server stands at
    those addresses): SciNCL's published rows and the paper's comparison are shown."""
    rel = tmp_path / "rel"
    with serve(release_bytes(FIXTURE)) as served:
        monkeypatch.setattr(release, "RELEASE_BASE_URL", served.base_url)
        monkeypatch.setattr(
            release, "RELEASE_URLS", {n: served.base_url + n for n in RELEASE_FILES}
        )
        download_release(rel, quiet=True)
    out, report = _evaluate(rel, tmp_path / "home", scores, capsys)
    assert out.startswith("Benchmark: the official MDCR release; ")
    card = "published AVG on the official MDCR test files (allenai/specter2 model card"
    assert card in out and BM25_CARD in out
    assert out.count("published AVG") == 1  # "scincl" is a scores file: not SciNCL's rows
    assert "Published MDCR test results, beside ours on the official MDCR test files:" in report
    assert "Comparison with the paper (test, AVG over fields; ours on the official MDCR" in report
    # The same files from any other address: an MDCR-format benchmark.
    monkeypatch.undo()
    out, report = _evaluate(rel, tmp_path / "home", scores, capsys)
    assert "not the official address" in out
    _no_published(out, report)


def test_files_registered_by_hand_say_declared_by_the_user(
    tmp_path: Path, scores: Path, capsys
) -> None:
    """Registering is a relabel: a new import output, whose label says who declared it."""
    rel = tmp_path / "rel"
    shutil.copytree(FIXTURE, rel)
    home = tmp_path / "home"
    _evaluate(rel, home, scores, capsys)
    register_release(rel, quiet=True)
    out, report = _evaluate(rel, home, scores, capsys)
    label = "published AVG on the official (declared by the user) MDCR test files (allenai"
    assert label in out and BM25_CARD in out
    assert out.startswith("Benchmark: the MDCR release, official (declared by the user); ")
    assert "beside ours on the official (declared by the user) MDCR test files:" in report
    assert "on the official MDCR test files" not in out + report
    imports = [read_manifest(p) for p in (home / "benchmark-import").iterdir() if p.is_dir()]
    kinds = sorted(m["info"]["origin"]["kind"] for m in imports if m is not None)
    assert kinds == ["declared", "mdcr-format"]


def test_a_missing_data_file_names_it_and_leaves_no_output(tmp_path: Path, capsys) -> None:
    """Without mdcr_test_data.jsonl an encoder has no texts: the error names the user's
    file (not a store folder), and no import output is left with a manifest."""
    only_json = tmp_path / "mdcr"
    only_json.mkdir()
    shutil.copy(FIXTURE / "mdcr_test.json", only_json / "mdcr_test.json")
    home = tmp_path / "home"
    argv = ["evaluate", "--encoder", "random", "--benchmark", str(only_json), "--home", str(home)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"'{only_json / 'mdcr_test_data.jsonl'}' does not exist" in err
    assert str(home) not in err
    imported = home / "benchmark-import"
    assert not imported.exists() or not list(imported.glob("*/manifest.json"))
    # The same with `mdcr benchmark import`; --no-texts imports the lists alone, and
    # encoding that import names the user's files again.
    assert main(["benchmark", "import", "--source", str(only_json), "--home", str(home)]) == 2
    assert "mdcr_test_data.jsonl' does not exist" in capsys.readouterr().err
    argv = ["benchmark", "import", "--source", str(only_json), "--no-texts", "--home", str(home)]
    assert main([*argv, "-q"]) == 0
    lists_only = Path(capsys.readouterr().out.strip().splitlines()[-1])  # the output folder
    argv = ["evaluate", "--encoder", "random", "--benchmark", str(lists_only), "--home", str(home)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert f"of '{only_json}' without titles and abstracts" in err and len(err.splitlines()) == 1


def test_scores_alone_need_no_data_file(tmp_path: Path, scores: Path, capsys) -> None:
    only_json = tmp_path / "mdcr"
    only_json.mkdir()
    shutil.copy(FIXTURE / "mdcr_test.json", only_json / "mdcr_test.json")
    out, _ = _evaluate(only_json, tmp_path / "home", scores, capsys, encoders=())
    assert "scincl on MDCR test:" in out
