"""A demo-like store built once per session, and the explorer over its report.

The store holds what the demo's report is made of, small and quick: a synthetic corpus,
dataset- and field-level pools with two repetitions (``DEMO_LIKE_POOLS``), three
retrievers whose runs rank the cited papers higher the more skilled they are (the
``test-eval-search`` stage of the scoring tests), the real score stage, an MDCR-format
benchmark scored by the real Lucene BM25 and the random encoder (``mdcr evaluate
--benchmark``), and the real report over both.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mdcr.explore.copies import SessionFiles
from mdcr.explore.pages import Explorer
from mdcr.explore.reads import Reader
from mdcr.explore.result import open_result

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "mdcr_format_fixture"


@dataclass
class DemoLike:
    """The session's store: its folders, and the explorer over its report."""

    home: Path
    corpus: Path
    pools: Path
    runs: dict[str, Path]
    score: Path
    bench_score: Path
    benchmark: Path
    ranks: dict[str, Path]
    report: Path
    explorer: Explorer


def _cli(*args: str) -> str:
    from mdcr.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(list(args)) == 0
    return buf.getvalue()


@pytest.fixture(scope="session")
def demo_like(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoLike]:
    from mdcr.contracts.outputs import input_paths, rank_info
    from mdcr.core.config import from_mapping
    from mdcr.core.store import Store
    from mdcr.scoring.report import SPEC, ReportConfig
    from tests.integration.benchmark.helpers import DEMO_LIKE_POOLS, make_corpus, make_pools
    from tests.integration.measures.conftest import warm_up_ranx
    from tests.integration.scoring.conftest import make_runs, run_score

    warm_up_ranx()
    root = tmp_path_factory.mktemp("explore")
    home = root / "home"
    corpus = make_corpus(root / "corpus")
    pools = make_pools(home, corpus, **DEMO_LIKE_POOLS)
    store = Store(home)
    runs = make_runs(
        store,
        pools,
        {
            "bm25": {"skill": 2.5, "k": 100, "builtin": True},
            "minilm": {"skill": 1.5, "k": 100, "builtin": True},
            "random": {"skill": 0.0, "k": 100, "builtin": True},
        },
    )
    score = run_score(store, pools, list(runs.values()))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        argv = ["evaluate", "--benchmark", str(FIXTURE), "--home", str(home), "-q"]
        _cli(*argv, "--encoder", "bm25", "--encoder", "random")
    bench_score = next(p.parent for p in (home / "benchmark-score").glob("*/manifest.json"))
    benchmark = input_paths(bench_score, "benchmark")[0]
    ranks = {rank_info(p).retriever: p for p in input_paths(bench_score, "ranks")}
    cfg = from_mapping(ReportConfig, {"scores": ["x"], "benchmark": ["x"]}, "report")
    inputs = {"scores": [score], "benchmark": [bench_score]}
    report = store.execute(SPEC, cfg, inputs, quiet=True).path
    files = SessionFiles()  # the session's copies, as `mdcr explore` makes them
    result = open_result(report, files.read_papers)
    reader = Reader(result, files)
    reader.wait_for_copies()  # the pages read the copies (test_server checks the files too)
    yield DemoLike(
        home=home,
        corpus=corpus,
        pools=pools,
        runs=runs,
        score=score,
        bench_score=bench_score,
        benchmark=benchmark,
        ranks=ranks,
        report=report,
        explorer=Explorer(result, reader),
    )
    reader.close()
    files.close()
