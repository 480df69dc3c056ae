"""``mdcr evaluate --encoder fuse:A+B``: a fused retriever resolved from the request's
retrievers and those scored earlier on the same pools, scored and reported as any other."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pandas as pd
import pytest

from mdcr.core.errors import ConfigError
from mdcr.core.inputs import resolve_inputs
from mdcr.core.manifests import read_manifest
from mdcr.core.store import Store
from mdcr.encoders.naming import default_name
from mdcr.evaluation.fused import default_fused_name, fused_parts
from mdcr.scoring.score import SPEC as SCORE
from mdcr.scoring.score import ScoreConfig
from tests.integration.benchmark.helpers import make_corpus, make_pools, make_run


def test_a_fuse_spec_names_its_method_and_retrievers() -> None:
    assert fused_parts("fuse:bm25+minilm") == ("rrf", ["bm25", "minilm"])
    assert fused_parts("fuse:wsum:bm25+specter+minilm") == ("wsum", ["bm25", "specter", "minilm"])
    # A py: encoder is named module:attr; its ':' is not a method's.
    assert fused_parts("fuse:bm25+my_enc:CharGrams") == ("rrf", ["bm25", "my_enc:CharGrams"])
    assert fused_parts("fuse:rrf:my_enc:CharGrams+bm25") == ("rrf", ["my_enc:CharGrams", "bm25"])
    assert default_fused_name("fuse:combsum:bm25+minilm") == "bm25+minilm"
    for spec in ("fuse:bm25+my_enc:CharGrams", "fuse:rrf:my_enc:CharGrams+bm25"):
        assert default_name(spec) == default_fused_name(spec)  # the name the request gives
    assert default_name("fuse:bm25+my_enc:CharGrams") == "bm25+my_enc:CharGrams"
    with pytest.raises(ConfigError, match="unknown fusion method 'best'"):
        fused_parts("fuse:best:bm25+minilm")
    with pytest.raises(ConfigError, match="two or more different retrievers"):
        fused_parts("fuse:bm25")


@pytest.mark.slow
def test_fused_retriever_on_pools_fuses_earlier_and_new_runs(tmp_path: Path) -> None:
    from mdcr.cli import main

    home = tmp_path / "home"
    corpus = make_corpus(tmp_path / "corpus")
    pools = make_pools(home, corpus, field_pool_size=400)
    earlier = make_run(home, pools, "bm25", k=100)
    cfg = ScoreConfig(pools=str(pools), runs=(str(earlier),))
    Store(home).execute(SCORE, cfg, resolve_inputs(cfg), quiet=True)

    buf = io.StringIO()
    args = ["evaluate", "--pools", str(pools), "--home", str(home), "-q"]
    with contextlib.redirect_stdout(buf):
        rc = main([*args, "--encoder", "random", "--encoder", "fuse:bm25+random"])
    assert rc == 0
    report = Path(buf.getvalue().strip().splitlines()[-1].split("report: ")[1])
    info = read_manifest(report.parent)["info"]  # type: ignore[index]
    assert {"bm25", "random", "bm25+random"} <= set(info["retrievers"])
    text = report.read_text()
    # the Retrievers table: the fuse spec evaluate takes, its method and normalisation
    row = next(line for line in text.splitlines() if line.startswith("| `bm25+random` |"))
    assert row.startswith("| `bm25+random` | `fuse:bm25+random` | method rrf, min-max ")
    assert fused_parts(row.split("`")[3]) == ("rrf", ["bm25", "random"])
    fused = [p for p in (home / "fuse").iterdir() if (p / "manifest.json").exists()]
    assert len(fused) == 1
    made = read_manifest(fused[0])["info"]  # type: ignore[index]
    assert [r["retriever"] for r in made["fused"]] == ["bm25", "random"]
    assert made["fused"][0]["path"] == str(earlier)  # the earlier bm25 run, found again
    run = pd.read_parquet(fused[0] / "runs.parquet")
    assert len(run) and run.groupby(["pool_id", "query_id"])["rank"].min().eq(1).all()


def test_an_unknown_retriever_in_a_fuse_spec_is_one_line(tmp_path: Path) -> None:
    from mdcr.evaluation.request import EvaluateRequest
    from mdcr.evaluation.run import run_request

    home = tmp_path / "home"
    corpus = make_corpus(tmp_path / "corpus")
    pools = make_pools(home, corpus, field_pool_size=400)
    req = EvaluateRequest(encoders=("fuse:bm25+nothing",), pools=pools)
    with pytest.raises(ConfigError, match="no retriever 'bm25' in this evaluation"):
        run_request(req, Store(home), quiet=True)


def test_fused_retriever_on_a_benchmark_fuses_earlier_ranks(tmp_path: Path) -> None:
    """The retrievers of a fuse spec ranked by an earlier command on the same benchmark
    are found again (their newest rank outputs) and fused, nothing ranked anew."""
    from mdcr.cli import main
    from tests.integration.ecosystem.helpers import FIXTURE

    home = tmp_path / "home"
    args = ["evaluate", "--benchmark", str(FIXTURE), "--home", str(home), "-q"]
    with contextlib.redirect_stdout(io.StringIO()):
        first = ["--encoder", "random", "--encoder", "rnd1=random", "--encode-set", "rnd1.seed=1"]
        assert main([*args, *first]) == 0
    ranks = {p.name for p in (home / "benchmark-rank").iterdir()}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main([*args, "--encoder", "fuse:random+rnd1"]) == 0
    assert {p.name for p in (home / "benchmark-rank").iterdir()} == ranks  # none ranked anew
    (fused,) = [p for p in (home / "benchmark-fuse").iterdir() if (p / "manifest.json").exists()]
    info = read_manifest(fused)["info"]  # type: ignore[index]
    assert info["retriever"] == "random+rnd1"
    assert {Path(r["path"]).name for r in info["fused"]} <= ranks
    header = next(x for x in buf.getvalue().splitlines() if x.startswith("MAP × 100, test"))
    assert header.split()[-3:] == ["random+rnd1", "rnd1", "random"]  # its parts beside it
    score = read_manifest(home / "benchmark-score" / _last(buf.getvalue()))
    assert score["info"]["retrievers"] == ["random+rnd1", "random", "rnd1"]  # type: ignore[index]


def _last(printed: str) -> str:
    """The benchmark-score fingerprint of the report path printed last."""
    return Path(printed.strip().splitlines()[-1].removeprefix("report: ")).parent.name
