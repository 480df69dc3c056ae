"""A fused retriever on an imported BEIR folder, end to end: ``fuse:bm25+random`` is
scored, its per-query values equal pytrec_eval's on the fused run and the folder's qrels,
and the TREC and MTEB-results exports write it like any other retriever."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.integration.ecosystem.test_beir_import import _cli, _import, write_beir_folder

pytestmark = pytest.mark.slow  # Lucene BM25 (a JVM) and ranx's fusion (numba)


@pytest.fixture(scope="module")
def fused(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from tests.integration.measures.conftest import warm_up_ranx

    warm_up_ranx()
    root = tmp_path_factory.mktemp("beir_fused")
    src, home = root / "beir", root / "home"
    write_beir_folder(src)
    pools = _import(src, home)
    argv = ["evaluate", "--pools", str(pools), "--home", str(home), "-q"]
    out = _cli(*argv, "--encoder", "bm25", "--encoder", "random", "--encoder", "fuse:bm25+random")
    assert "report: " in out
    (run,) = _finished(home, "fuse")
    (score,) = _finished(home, "score")
    per_pool = pd.read_parquet(score / "per_pool.parquet")
    per_query = pd.read_parquet(score / "per_query.parquet")
    return {"src": src, "home": home, "pools": pools, "run": run, "score": score,
            "per_pool": per_pool, "per_query": per_query}  # fmt: skip


def _finished(home: Path, stage: str) -> list[Path]:
    return [p for p in sorted((home / stage).glob("*")) if (p / "manifest.json").exists()]


def _qrels(src: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in (src / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, r = line.split("\t")
        if d != "not-a-doc":
            qrels.setdefault(f"q:{q}", {})[d] = int(r)
    return qrels


def test_the_fused_run_is_scored_as_pytrec_eval(fused: dict[str, Any]) -> None:
    import pytrec_eval

    from mdcr.core.manifests import read_manifest

    made = read_manifest(fused["run"])["info"]  # type: ignore[index]
    assert made["retriever"] == "bm25+random"
    assert [r["retriever"] for r in made["fused"]] == ["bm25", "random"]
    run = pd.read_parquet(fused["run"] / "runs.parquet")
    # the run contract: ranks 1..n per query by (score desc, paper_id asc), 60 documents
    for _, group in run.groupby("query_id"):
        order = group.sort_values(["score", "paper_id"], ascending=[False, True])
        assert order["rank"].tolist() == list(range(1, len(group) + 1)) == group["rank"].tolist()
    assert run.groupby("query_id").size().eq(60).all()

    per_query = fused["per_query"]
    per_query = per_query[per_query["retriever"] == "bm25+random"]
    qrels = _qrels(fused["src"])
    trec_run: dict[str, dict[str, float]] = {}
    for r in run.itertuples(index=False):  # scores strictly decreasing in rank order
        trec_run.setdefault(str(r.query_id), {})[str(r.paper_id)] = -float(r.rank)
    assert set(trec_run) == set(qrels)  # the 8 queries, the one judged 0 only included
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"map_cut.500", "ndcg_cut.500", "recall.30"})
    want = evaluator.evaluate(trec_run)
    names = {"map@500": "map_cut_500", "ndcg@500": "ndcg_cut_500", "recall@30": "recall_30"}
    assert len(per_query) == 3 * 8
    for r in per_query.itertuples(index=False):
        assert r.value == pytest.approx(want[r.query_id][names[r.metric]], abs=1e-9)
    # one score output holds the fused retriever beside its parts
    means = fused["per_pool"].groupby("retriever")["value"].mean()
    assert set(means.index) == {"bm25", "random", "bm25+random"}


def test_trec_export_of_the_fused_run(fused: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "trec"
    _cli("export", "--run", str(fused["run"]), "--pools", str(fused["pools"]), "--out", str(out))
    lines = [ln.split() for ln in (out / "run.trec").read_text().splitlines()]
    run = pd.read_parquet(fused["run"] / "runs.parquet")
    assert len(lines) == len(run) == 8 * 60
    first = run.sort_values(["pool_id", "query_id", "rank"]).iloc[0]
    topic, _q0, doc, rank, _score, tag = lines[0]
    assert (topic, doc, int(rank)) == (f"{first.pool_id}:{first.query_id}", first.paper_id, 1)
    assert tag == f"mdcr-{fused['run'].name}"
    assert (out / "qrels.trec").read_text().count("\n") == len(
        pd.read_parquet(fused["pools"] / "qrels.parquet")
    )


def test_mteb_results_export_of_the_fused_retriever(fused: dict[str, Any], tmp_path: Path) -> None:
    from mteb import ResultCache

    score = fused["score"]
    out = tmp_path / "results"
    _cli("export", "--format", "mteb-results", "--run", str(score), "--retriever",
         "bm25+random", "--out", str(out))  # fmt: skip
    folder = out / "results" / "bm25+random" / fused["run"].name
    assert (folder / "model_meta.json").exists()
    loaded = ResultCache(out).load_results(require_model_meta=True, include_remote=False)
    (model,) = loaded.model_results
    assert model.model_name == "bm25+random"
    (task,) = model.task_results
    stored = task.scores["test"][0]
    per_pool = fused["per_pool"]
    mine = per_pool[per_pool["retriever"] == "bm25+random"].set_index("metric")["value"]
    assert stored["main_score"] == stored["map_at_500"]
    for metric, key in {"map@500": "map_at_500", "ndcg@500": "ndcg_at_500"}.items():
        assert abs(stored[key] - mine[metric]) <= 1e-6  # files keep 6 decimals
    assert json.loads((folder / "model_meta.json").read_text())["name"] == "bm25+random"


def test_the_report_on_beir_has_scipy_intervals_tied_groups_and_the_wins(
    fused: dict[str, Any],
) -> None:
    """On an imported BEIR dataset (one pool, one repetition) each mean's interval is
    scipy's BCa bootstrap of its per-query values, each difference from bm25 scipy's on
    the paired differences; the report marks the tied group and counts wins and losses."""
    import numpy as np
    import scipy.stats as st

    from mdcr.contracts.artifacts import INTERVALS

    (report,) = _finished(fused["home"], "report")
    rows = INTERVALS.read_pandas(report)
    pq = fused["per_query"][fused["per_query"]["metric"] == "map@500"]
    values = {r: g.set_index("query_id")["value"].sort_index() for r, g in pq.groupby("retriever")}

    def scipy_ci(v: np.ndarray) -> tuple[float, float]:
        ci = st.bootstrap(
            (v,), np.mean, n_resamples=2000, method="BCa", rng=np.random.default_rng(42)
        ).confidence_interval
        return float(ci.low), float(ci.high)

    table = rows[(rows["metric"] == "map@500") & (rows["setup"] == "dataset")]
    checked = 0
    for r in table.to_dict("records"):
        v = values[r["retriever"]]
        if r["kind"] == "minus bm25":
            v = v - values["bm25"]
        else:
            assert r["kind"] == "mean"
        low, high = scipy_ci(v.to_numpy())
        assert (r["estimate"], r["ci_low"], r["ci_high"]) == pytest.approx(
            (v.mean(), low, high), rel=1e-12, abs=1e-15
        )
        checked += 1
    assert checked == 3 + 2  # three means, two differences from bm25
    means = table[table["kind"] == "mean"].set_index("retriever")
    assert bool(means.loc[means["estimate"].idxmax(), "tied"])
    text = (report / "report.md").read_text()
    assert "## Where the encoders win and lose" in text
    d = values["bm25+random"] - values["bm25"]
    assert (
        f"- `bm25+random` against `bm25`: better on {(d > 0).sum()}, equal on "
        f"{(d == 0).sum()}, worse on {(d < 0).sum()} of {len(d)} queries."
    ) in text
