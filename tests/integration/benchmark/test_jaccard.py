"""``benchmark-jaccard``: the Jaccard index of models' top negatives and the suggestion."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mdcr.benchmark.jaccard import SPEC, JaccardConfig
from mdcr.core.inputs import resolve_inputs
from mdcr.core.manifests import read_manifest
from mdcr.core.store import Store
from tests.integration.benchmark.helpers import make_corpus, make_pools, make_run

TOP = 30


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("jac")
    home = root / "home"
    corpus = make_corpus(root / "corpus")
    pools = make_pools(home, corpus)
    runs = {m: make_run(home, pools, m) for m in ("bm25", "specter", "scincl")}
    runs["bm25-twin"] = make_run(home, pools, "bm25-twin", same_as="bm25")
    cfg = JaccardConfig(
        pools=str(pools), runs=tuple(str(p) for p in runs.values()), top_n=TOP, n_select=2
    )
    out = Store(home).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True).path
    return {"out": out, "pools": pools, "runs": runs}


def test_matrix_matches_an_independent_computation(result: dict) -> None:
    m = pd.read_parquet(result["out"] / "jaccard.parquet")
    allq = m[m["field"] == "ALL"].set_index(["model_a", "model_b"])["jaccard"]
    qrels = pd.read_parquet(result["pools"] / "qrels.parquet").astype({"pool_id": str})
    qrels = qrels[qrels["pool_id"].str.startswith("field/val/")]
    pos = qrels.groupby(["pool_id", "query_id"])["paper_id"].apply(set)

    def negs(name: str) -> pd.Series:
        run = pd.read_parquet(result["runs"][name] / "runs.parquet").astype({"pool_id": str})
        run = run[run["pool_id"].str.startswith("field/val/") & (run["rank"] <= TOP)]
        return run.groupby(["pool_id", "query_id"])["paper_id"].apply(set)

    a, b = negs("bm25"), negs("specter")
    vals = []
    for key in pos.index:
        sa, sb = a.get(key, set()) - pos[key], b.get(key, set()) - pos[key]
        if sa | sb:
            vals.append(len(sa & sb) / len(sa | sb))
    assert allq[("bm25", "specter")] == pytest.approx(sum(vals) / len(vals), abs=1e-12)
    assert allq[("bm25", "specter")] == allq[("specter", "bm25")]
    assert allq[("bm25", "bm25-twin")] == 1.0 and allq[("scincl", "scincl")] == 1.0
    assert int(m[(m["field"] == "ALL")]["n_queries"].max()) == len(pos)


def test_suggestion_avoids_the_twin(result: dict) -> None:
    info = read_manifest(result["out"])["info"]  # type: ignore[index]
    # bm25 and its twin overlap completely: their averages are the highest.
    assert sorted(info["suggested_models"]) == ["scincl", "specter"]
    assert not {"bm25", "bm25-twin"} <= set(info["lowest_mean_subset"])
    text = (result["out"] / "jaccard.md").read_text()
    names = ", ".join(info["suggested_models"])
    assert f"Suggested models (the 2 lowest averages, as the paper chose): **{names}**" in text


def test_needs_two_runs(result: dict, tmp_path: Path) -> None:
    from mdcr.core.errors import ConfigError

    cfg = JaccardConfig(pools=str(result["pools"]), runs=(str(result["runs"]["bm25"]),))
    with pytest.raises(ConfigError, match="at least two models"):
        Store(tmp_path).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
