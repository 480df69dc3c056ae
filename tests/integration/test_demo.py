"""The demo pipeline end to end, scaled down with overrides so it stays quick in CI.

It runs the real stages (synth, prefilter, pools, MiniLM and random encoders with Faiss,
Lucene BM25 with tuning, the MDCR-style benchmark, ranx scoring and the report) and checks
what a user sees: the last lines name report.md and its folder, every retriever has rows,
nothing is written outside the store, a re-run is up to date, and the invariants hold on
the artifacts it wrote.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from mdcr.cli import main

REPO = Path(__file__).resolve().parents[2]
# The demo scaled down to what its checks need: MiniLM encoding the pools' papers is most of
# the run's time, hence pools of a few hundred papers and 32 tokens a paper.
SMALL = [
    "corpus.n_papers=2500",
    "pools.n_queries_dataset=8",
    "pools.dataset_sizes=250,400",
    "pools.fields=Medicine,Biology",
    "pools.field_queries=4",
    "pools.field_pool_size=200",
    "encode_minilm.max_length=32",
    "bench_enc_minilm.max_length=32",
]

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _run(home: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    args = ["run", str(REPO / "pipelines" / "demo.toml"), "--home", str(home), "-q"]
    for s in SMALL:
        args += ["--set", s]
    assert main(args) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_demo_pipeline_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    out, _ = _run(home, capsys)
    *_, main_file, last = out.strip().splitlines()
    assert main_file.startswith("report.md: ")
    report = Path(main_file.removeprefix("report.md: "))
    assert report.is_file() and report.parent == Path(last) and Path(last).parent.parent == home
    # Nothing outside the store: no Lucene indexes (or anything else) in the working folder.
    assert list((tmp_path / "cwd").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "home"]
    assert any((home / "lucene-index").iterdir())
    text = report.read_text()
    for retriever in ("bm25", "minilm", "random"):
        assert re.search(rf"^\| {retriever} \|", text, re.M), retriever
    assert "expected chance" in text
    assert "## MDCR benchmark" in text and "Table 3 layout" in text and "Table 4 layout" in text
    # One section per benchmark: its two benchmark-score outputs, the fused one included.
    assert text.count("## MDCR benchmark") == 1
    assert "- `bm25+minilm`: fuse (rrf of bm25, minilm)" in text
    assert "| `bm25+minilm` | `fuse:bm25+minilm` | method rrf, min-max normalisation" in text
    # The demo's synthetic benchmark is not the official one: no MDCR number of the paper or
    # of a model card stands beside it (BM25 has both).
    assert "Benchmark: a benchmark built by mdcr, not the official MDCR release" in text
    assert "Published MDCR" not in text and "ours on the official" not in text
    assert (report.parent / "plots" / "pool_size_test.png").is_file()
    assert (report.parent / "tables" / "dataset_test.csv").is_file()

    # Invariants on the artifacts the demo wrote.
    pools_dir = next((home / "pools").iterdir())
    papers = pd.read_parquet(next((home / "prefilter").iterdir()) / "papers.parquet")
    year = dict(zip(papers["paper_id"], papers["year"], strict=True))
    pools = pd.read_parquet(pools_dir / "pools.parquet")
    qrels = pd.read_parquet(pools_dir / "qrels.parquet")
    assert max(year[p] for p in pools["paper_id"]) <= 2019
    members = set(zip(pools["pool_id"].astype(str), pools["paper_id"], strict=True))
    pairs = zip(qrels["pool_id"].astype(str), qrels["paper_id"], strict=True)
    assert all(pair in members for pair in pairs)
    for run_dir in [*(home / "search").iterdir(), *(home / "bm25").iterdir()]:
        run = pd.read_parquet(run_dir / "runs.parquet")
        assert not (run["query_id"] == run["paper_id"]).any()
        assert run.groupby(["pool_id", "query_id"], observed=True)["rank"].min().eq(1).all()
    # Every query has 5 positives and 10 of each of the demo's 5 types, except where the
    # benchmark lists it as short (on_short = "warn"), which has exactly what it got.
    bench_dir = next((home / "benchmark").iterdir())
    bench = pd.read_parquet(bench_dir / "benchmark.parquet")
    types = ["true", "bm25", "minilm", "graph", "most_cited", "random"]
    assert sorted(bench["candidate_type"].unique()) == sorted(types)
    keys = ["split", "field", "query_id"]
    queries = bench[keys].drop_duplicates().itertuples(index=False)
    expected = {(*q, t): 5 if t == "true" else 10 for q in queries for t in types}
    short = pd.read_parquet(bench_dir / "short_queries.parquet")
    for r in short.itertuples(index=False):
        assert expected[(r.split, r.field, r.query_id, r.candidate_type)] == r.needed > r.got
        expected[(r.split, r.field, r.query_id, r.candidate_type)] = r.got
    got = bench.groupby([*keys, "candidate_type"])["paper_id"].nunique().to_dict()
    assert got == {k: n for k, n in expected.items() if n}
    assert len(bench) == sum(expected.values())  # no paper twice in a query's list

    # A second run builds nothing.
    out2, _ = _run(home, capsys)
    assert out2.strip().splitlines()[-1] == last
    summary = [ln for ln in out2.splitlines() if re.match(r"^  \S+ +(built|up to date) ", ln)]
    assert len(summary) == 22 and all(" up to date " in ln for ln in summary)
    # ... and names the pools and the benchmark that `mdcr evaluate` scores an encoder on
    hints = [ln.split() for ln in out2.splitlines() if ln.startswith("  mdcr evaluate ")]
    folders = {h[-2]: Path(h[-1]) for h in hints}
    assert set(folders) == {"--pools", "--benchmark"}
    assert folders["--pools"].parent.name == "pools" and folders["--pools"].is_dir()
    assert folders["--benchmark"].parent.name == "benchmark" and folders["--benchmark"].is_dir()
    manifest = json.loads((report.parent / "manifest.json").read_text())
    assert manifest["complete"] is True and manifest["stage"] == "report"

    # The dry run plans the fingerprints the run made (tests/unit/test_demo_fingerprints.py
    # holds the demo's by the dry run alone): it finds every step up to date.
    args = ["run", str(REPO / "pipelines" / "demo.toml"), "--home", str(home), "--dry-run"]
    for s in SMALL:
        args += ["--set", s]
    assert main(args) == 0
    step_line = re.compile(r"^\S+\s+\S+\s+[0-9a-f]{16}\s")
    steps = [ln for ln in capsys.readouterr().out.splitlines() if step_line.match(ln)]
    assert len(steps) == 22 and all(ln.endswith("  up to date") for ln in steps), steps
