"""A leading UTF-8 byte-order mark is read past by every reader of a user's file, as
``utf-8-sig`` reads it: each reader gives the same result with and without one. (Prefilter
shards: tests/integration/corpus/test_prefilter_input.py; BEIR files:
tests/integration/ecosystem/test_beir_import.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from mdcr.benchmark.formats import read_papers_jsonl, read_release_json, read_scores
from mdcr.cli import main
from mdcr.core.home import read_marker
from mdcr.core.pipeline import load_pipeline

BOM = b"\xef\xbb\xbf"
FIXTURE = Path(__file__).resolve().parents[1] / "data" / "mdcr_format_fixture"
PIPELINE = Path(__file__).resolve().parents[2] / "pipelines" / "demo.toml"


def _with_bom(src: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(BOM + src.read_bytes())
    return dest


def test_benchmark_json_and_its_papers_jsonl(tmp_path: Path) -> None:
    readers = {"mdcr_test.json": read_release_json, "mdcr_test_data.jsonl": read_papers_jsonl}
    for name, read in readers.items():
        plain = read(FIXTURE / name)
        marked = read(_with_bom(FIXTURE / name, tmp_path / name))
        assert len(plain) > 10
        pd.testing.assert_frame_equal(marked, plain)


def test_scores_json(tmp_path: Path) -> None:
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"q1_c1": 0.5, "q1_c2": 0.25}))
    assert read_scores(_with_bom(plain, tmp_path / "bom.json")) == {"q1_c1": 0.5, "q1_c2": 0.25}


def test_pipeline_toml_marker_and_config_file(tmp_path: Path) -> None:
    marked = load_pipeline(_with_bom(PIPELINE, tmp_path / "demo.toml"))
    assert marked.steps == load_pipeline(PIPELINE).steps and len(marked.steps) > 10
    marker = tmp_path / "mdcr.toml"
    marker.write_bytes(BOM + b'[store]\nhome = "here"\n')
    assert read_marker(marker) == tmp_path / "here"
    config = tmp_path / "synth.toml"
    config.write_bytes(BOM + b"n_papers = 50\nn_shards = 1\n")
    home = tmp_path / "home"
    assert main(["--home", str(home), "-q", "synth", "--config", str(config)]) == 0
    (manifest,) = (home / "synth").glob("*/manifest.json")
    assert json.loads(manifest.read_text())["params"]["n_papers"] == 50


def test_exclude_ids_file(tmp_path: Path) -> None:
    import duckdb

    from mdcr.pools.db import load_excluded

    path = tmp_path / "exclude.txt"
    path.write_bytes(BOM + b"p1\n# a comment\np2\n")
    con = duckdb.connect()
    assert load_excluded(con, path) == 2
    got = sorted(r[0] for r in con.execute("SELECT paper_id FROM excluded").fetchall())
    assert got == ["p1", "p2"]
