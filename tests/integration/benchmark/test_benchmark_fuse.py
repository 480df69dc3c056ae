"""``benchmark-fuse`` and ``mdcr evaluate --benchmark ... --encoder fuse:A+B``: the fused
scores are ranx's ``fuse`` of the same rankings of each query's candidates, the ranks of
the TREC export follow the run contract's tie rule, and evaluate prints the fused
retriever beside the others."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mdcr.cli import main
from mdcr.core.config import from_mapping
from mdcr.core.store import Store

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "mdcr_format_fixture"

pytestmark = pytest.mark.slow  # Lucene BM25 (a JVM) and ranx's first fuse (numba)


def _candidates() -> dict[tuple[str, str], set[str]]:
    """Each (field, query)'s distinct candidates in the fixture's JSON."""
    bench = json.loads((FIXTURE / "mdcr_test.json").read_text())
    return {
        (field, q): {c for ids in lists.values() for c in ids}
        for field, queries in bench.items()
        for q, lists in queries.items()
    }


def _outputs(home: Path, stage: str) -> dict[str, Path]:
    """{retriever: folder} of the stage's finished outputs."""
    found = {}
    for m in sorted((home / stage).glob("*/manifest.json")):
        found[json.loads(m.read_text())["info"]["retriever"]] = m.parent
    return found


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from tests.integration.measures.conftest import warm_up_ranx

    warm_up_ranx()
    home = tmp_path_factory.mktemp("bench_fuse") / "home"
    argv = ["evaluate", "--benchmark", str(FIXTURE), "--home", str(home), "-q"]
    for e in ("bm25", "random", "fuse:bm25+random"):
        argv += ["--encoder", e]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return {"home": home, "stdout": buf.getvalue()}


def _ranx_fused(ranks: list[Path], norm: str, method: str, params: dict[str, Any]) -> dict:
    """ranx.fuse of the ranks' scores, keyed split|query, built here from the files."""
    from ranx import Run, fuse

    runs = []
    for folder in ranks:
        frame = pd.read_parquet(folder / "scores.parquet").astype(str)
        nested: dict[str, dict[str, float]] = {}
        for r in frame.itertuples(index=False):
            nested.setdefault(f"{r.split}|{r.query_id}", {})[r.paper_id] = float(r.score)
        runs.append(Run(nested))
    return fuse(runs, norm=norm, method=method, params=params).to_dict()


def _check_fused(fused_dir: Path, ranks: list[Path], norm: str, method: str, params: dict) -> None:
    fused = pd.read_parquet(fused_dir / "scores.parquet")
    fused = fused.astype({"split": str, "field": str, "query_id": str, "paper_id": str})
    # the same rows as each rank: every candidate of every (field, query), once
    for folder in ranks:
        rank = pd.read_parquet(folder / "scores.parquet").astype(str)
        cols = ["split", "field", "query_id", "paper_id"]
        assert sorted(map(tuple, rank[cols].values)) == sorted(map(tuple, fused[cols].values))
    cands = _candidates()
    sizes = fused.groupby(["field", "query_id"]).size()
    assert {k: int(v) for k, v in sizes.items()} == {k: len(c) for k, c in cands.items()}
    want = _ranx_fused(ranks, norm, method, params)
    assert len(want) == 7  # the fixture's 7 queries, one split
    for r in fused.itertuples(index=False):
        assert r.score == want[f"{r.split}|{r.query_id}"][r.paper_id]
    if method == "rrf":  # every candidate is ranked by both: two reciprocal ranks each
        assert fused["score"].min() >= 2 / (60 + max(len(c) for c in cands.values()))


def test_benchmark_fuse_rrf_is_ranx_fuse(evaluated: dict[str, Any]) -> None:
    home = evaluated["home"]
    ranks = _outputs(home, "benchmark-rank")
    assert set(ranks) == {"bm25", "random"}
    (fused,) = _outputs(home, "benchmark-fuse").items()
    assert fused[0] == "bm25+random"
    made = json.loads((fused[1] / "manifest.json").read_text())["info"]
    assert [r["retriever"] for r in made["fused"]] == ["bm25", "random"]
    _check_fused(fused[1], [ranks["bm25"], ranks["random"]], "min-max", "rrf", {"k": 60})


@pytest.mark.parametrize(
    ("method", "norm", "ranx_method", "ranx_norm", "params"),
    [
        ("combsum", "zscore", "sum", "zmuv", {}),
        ("wsum", "min-max", "wsum", "min-max", {"weights": [0.3, 0.7]}),
    ],
)
def test_benchmark_fuse_normalised_is_ranx_fuse(
    evaluated: dict[str, Any],
    method: str,
    norm: str,
    ranx_method: str,
    ranx_norm: str,
    params: dict[str, Any],
) -> None:
    from mdcr.benchmark.fusion import SPEC, BenchFuseConfig

    ranks = _outputs(evaluated["home"], "benchmark-rank")
    inputs = [ranks["bm25"], ranks["random"]]
    given = {"weights": params["weights"]} if "weights" in params else {}
    values = {"ranks": ["x"], "method": method, "norm": norm, **given}
    cfg = from_mapping(BenchFuseConfig, values, "benchmark-fuse")
    out = Store(evaluated["home"]).execute(SPEC, cfg, {"ranks": inputs}, quiet=True).path
    _check_fused(out, inputs, ranx_norm, ranx_method, params)
    if method == "wsum":  # given weights, recorded as given (no val split to tune on)
        info = json.loads((out / "manifest.json").read_text())["info"]
        assert info["weights"] == {"values": [0.3, 0.7], "how": "given"}


def test_trec_export_of_the_fused_ranking_follows_the_tie_rule(
    evaluated: dict[str, Any], tmp_path: Path
) -> None:
    """``--ties paper_id``: ranks 1..n per topic by (fused score desc, paper_id asc), the
    scores written strictly decreasing; one line per candidate."""
    from mdcr.contracts.outputs import input_paths
    from mdcr.scoring.trec import topic_id

    home = evaluated["home"]
    (fused_dir,) = _outputs(home, "benchmark-fuse").values()
    (bench,) = input_paths(_outputs(home, "benchmark-rank")["bm25"], "benchmark")
    argv = ["export", "--run", str(fused_dir), "--benchmark", str(bench)]
    argv += ["--ties", "paper_id", "--out", str(tmp_path / "trec"), "--home", str(home), "-q"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    lines = [ln.split() for ln in (tmp_path / "trec" / "run_test.trec").read_text().splitlines()]
    assert len(lines) == sum(len(c) for c in _candidates().values())
    assert {ln[5] for ln in lines} == {f"mdcr-{fused_dir.name}"}  # the tag: as any ranking
    fused = pd.read_parquet(fused_dir / "scores.parquet").astype({"query_id": str})
    fused = fused.astype({"field": str, "paper_id": str})
    for (field, q), group in fused.groupby(["field", "query_id"]):
        topic = [ln for ln in lines if ln[0] == topic_id(field, q)]
        want = group.sort_values(["score", "paper_id"], ascending=[False, True])["paper_id"]
        assert [ln[2] for ln in topic] == want.tolist()
        assert [int(ln[3]) for ln in topic] == list(range(1, len(topic) + 1))
        written = [float(ln[4]) for ln in topic]
        assert all(a > b for a, b in itertools.pairwise(written))


def test_evaluate_prints_the_fused_retriever_beside_the_others(evaluated: dict[str, Any]) -> None:
    """Each retriever's per-field lines, the fused one's equal to the original scorer's on
    the fused scores file; one benchmark-score output scores the three."""
    from tests.integration.benchmark.reference import MEASURES, original_scorer
    from tests.integration.evaluation.test_evaluate import _printed

    home = evaluated["home"]
    printed = _printed(evaluated["stdout"])
    assert sorted(printed) == ["bm25", "bm25+random", "random"]
    fields = {f for f, _ in _candidates()}
    assert all(set(printed[name]) == {*fields, "AVG"} for name in printed)
    # The fused output evaluate made (rrf): the other tests here add fused outputs of
    # other methods to the same store, under the same retriever name.
    (fused_dir,) = [
        m.parent
        for m in (home / "benchmark-fuse").glob("*/manifest.json")
        if json.loads(m.read_text())["params"]["method"] == "rrf"
    ]
    scores = json.loads((fused_dir / "scores_test.json").read_text())
    benchmark = json.loads((FIXTURE / "mdcr_test.json").read_text())
    ref_fields, ref_avg, _ = original_scorer(benchmark, scores)
    for field, values in {**ref_fields, "AVG": ref_avg}.items():
        for m in MEASURES:
            assert printed["bm25+random"][field][m] == values[m], (field, m)
    assert printed["bm25+random"] != printed["bm25"] and printed["bm25+random"] != printed["random"]
    (scored,) = (home / "benchmark-score").glob("*/manifest.json")
    retrievers = json.loads(scored.read_text())["info"]["retrievers"]
    assert sorted(retrievers) == ["bm25", "bm25+random", "random"]
