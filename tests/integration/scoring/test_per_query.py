"""Per-query analysis: ``mdcr export --per-query`` and ``EvaluationResult.per_query`` give
one row per (pool or benchmark, query, retriever, measure) whose values equal pytrec_eval's
on the run and qrels and whose facts equal the corpus's and qrels' own; the report shows
where the encoders win and lose against BM25. On pools like the demo's, on an imported
BEIR dataset and on an MDCR-format benchmark."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from mdcr.cli import main
from mdcr.scoring.per_query import PER_QUERY_COLUMNS
from mdcr.scoring.wins_losses import positives_bin
from tests.integration.benchmark.helpers import DEMO_LIKE_POOLS, make_corpus, make_pools, make_run

pytrec_eval = pytest.importorskip("pytrec_eval")

NAMES = {"map@500": "map_cut_500", "ndcg@500": "ndcg_cut_500", "recall@30": "recall_30"}


def _cli(*args: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(list(args)) == 0
    return buf.getvalue()


def _export(folder: Path, out: Path) -> pd.DataFrame:
    """``export --per-query`` of ``folder``: the Parquet file, checked equal to the CSV."""
    _cli("export", "--per-query", "--run", str(folder), "--out", str(out))
    rows = pd.read_parquet(out / "per_query.parquet")
    csv = pd.read_csv(out / "per_query.csv", dtype={"query_id": str, "pool_id": str})
    assert list(rows.columns) == list(PER_QUERY_COLUMNS) == list(csv.columns)
    assert len(csv) == len(rows)
    assert csv["value"].tolist() == pytest.approx(rows["value"].tolist(), abs=0)
    return rows


def _pytrec_eval_pools(run_dir: Path, pools: Path) -> dict[str, dict[str, float]]:
    """pytrec_eval's per-query values of a run on its pools: {pool_id|query_id: measures}."""
    run = pd.read_parquet(run_dir / "runs.parquet").astype({"pool_id": str, "query_id": str})
    qrels = pd.read_parquet(pools / "qrels.parquet").astype({"pool_id": str, "query_id": str})
    q: dict[str, dict[str, int]] = {}
    for r in qrels.itertuples(index=False):
        q.setdefault(f"{r.pool_id}|{r.query_id}", {})[str(r.paper_id)] = int(r.relevance)
    ranked: dict[str, dict[str, float]] = {}
    for r in run.itertuples(index=False):  # strictly decreasing in rank order
        ranked.setdefault(f"{r.pool_id}|{r.query_id}", {})[str(r.paper_id)] = -float(r.rank)
    scored = {t: v for t, v in q.items() if t.split("|")[0] in set(run["pool_id"])}
    evaluator = pytrec_eval.RelevanceEvaluator(scored, {"map_cut.500", "ndcg_cut.500", "recall.30"})
    got = evaluator.evaluate({t: ranked.get(t, {}) for t in scored})
    return {t: got.get(t, dict.fromkeys(NAMES.values(), 0.0)) for t in scored}


@pytest.mark.slow
def test_per_query_rows_on_demo_like_pools_agree_with_pytrec_eval_and_the_corpus(
    tmp_path: Path,
) -> None:
    import mdcr

    home = tmp_path / "home"
    corpus = make_corpus(tmp_path / "corpus")
    pools = make_pools(home, corpus, **DEMO_LIKE_POOLS)
    bm25 = make_run(home, pools, "bm25", k=100, builtin=True)
    from mdcr.core.inputs import resolve_inputs
    from mdcr.core.store import Store
    from mdcr.scoring.score import SPEC as SCORE
    from mdcr.scoring.score import ScoreConfig

    cfg = ScoreConfig(pools=str(pools), runs=(str(bm25),))
    Store(home).execute(SCORE, cfg, resolve_inputs(cfg), quiet=True)
    result = mdcr.evaluate("random", pools=pools, home=home, quiet=True)
    rows = _export(result.report_path.parent, tmp_path / "out")

    # Values: every row equals pytrec_eval on the run and the pools' qrels.
    runs = {"bm25": bm25, "random": dict(result.runs)["random"]}
    assert sorted(rows["retriever"].unique()) == ["bm25", "random"]
    for name, run_dir in runs.items():
        want = _pytrec_eval_pools(Path(run_dir), pools)
        mine = rows[rows["retriever"] == name]
        assert len(mine) == 3 * len(want) > 0
        for r in mine.itertuples(index=False):
            got = want[f"{r.pool_id}|{r.query_id}"][NAMES[str(r.metric)]]
            assert r.value == pytest.approx(got, abs=1e-9)

    # Facts: from the qrels and the corpus, computed here independently.
    qrels = pd.read_parquet(pools / "qrels.parquet").astype({"pool_id": str})
    pos = qrels[qrels["relevance"] >= 1].groupby(["pool_id", "query_id"]).size()
    papers = pd.read_parquet(corpus / "papers.parquet").set_index("paper_id")
    meta = pd.read_parquet(pools / "pool_meta.parquet").astype({"pool_id": str})
    pool_field = dict(zip(meta["pool_id"], meta["field"], strict=True))
    for r in rows.drop_duplicates(["pool_id", "query_id"]).itertuples(index=False):
        p = papers.loc[r.query_id]
        assert r.n_positives == pos[(r.pool_id, r.query_id)]
        assert r.year == p["year"] and r.citations == p["n_in"]
        assert r.text_chars == len(p["title"]) + len(p["abstract"]) and r.title == p["title"]
        want_field = pool_field[r.pool_id] if r.setup == "field" else p["fields"][0]
        assert r.field == want_field

    # The Python API: the same rows, in percent, under the measures' labels.
    frame = result.per_query
    assert len(frame) == len(rows)
    assert frame["value"].tolist() == pytest.approx((rows["value"] * 100).tolist())
    assert set(frame["measure"]) == {"MAP", "nDCG", "R@30"}

    # The report: the section, its plot, and counts that cover every paired test unit.
    text = result.report_path.read_text()
    assert "## Where the encoders win and lose" in text
    assert (result.report_path.parent / "plots" / "wins_losses_test.png").is_file()
    test_map = rows[(rows["split"] == "test") & (rows["metric"] == "map@500")]
    units = test_map.drop_duplicates(["setup", "pool_size", "field", "query_id"])
    line = next(s for s in text.splitlines() if s.startswith("- `random` against `bm25`"))
    assert line.endswith(f"of {len(units)} queries.")
    counts = [int(w) for w in line.replace(",", "").split() if w.isdigit()]
    assert sum(counts[:3]) == counts[3] == len(units)


def test_positives_bins_cover_every_count() -> None:
    assert [positives_bin(n) for n in (0, 4, 5, 19, 20, 49, 50, 900)] == [
        "0–4", "0–4", "5–9", "10–19", "20–49", "20–49", "50+", "50+",
    ]  # fmt: skip
    assert positives_bin(pd.NA) == "?"


def test_export_per_query_refuses_other_folders_and_options_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for extra in ([], ["--qrels", str(tmp_path)], ["--format", "beir"]):
        capsys.readouterr()
        args = ["export", "--per-query", "--run", str(tmp_path), "--out", str(tmp_path / "o")]
        assert main([*args, *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
        want = {
            "": "is no stage output; give a score",
            "--qrels": "export --format per-query: give --run OUTPUT",
            "--format": "export --per-query is --format per-query; give one of them",
        }[extra[0] if extra else ""]
        assert want in err, err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_per_query_rows_of_an_imported_beir_dataset(tmp_path: Path) -> None:
    from tests.integration.ecosystem.test_beir_import import write_beir_folder

    src = tmp_path / "beir"
    write_beir_folder(src)
    home = tmp_path / "home"
    _cli("import", "beir", "--source", str(src), "--home", str(home), "-q")
    pools = next((home / "beir-import").glob("[0-9a-f]*"))
    _cli("evaluate", "--pools", str(pools), "--encoder", "random", "--home", str(home), "-q")
    score = next((home / "score").glob("[0-9a-f]*"))
    rows = _export(score, tmp_path / "out")
    assert len(rows) == 3 * 8

    qrels: dict[str, dict[str, int]] = {}
    for line in (src / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, r = line.split("\t")
        if d != "not-a-doc":
            qrels.setdefault(f"q:{q}", {})[d] = int(r)
    run = pd.read_parquet(next((home / "search").glob("[0-9a-f]*")) / "runs.parquet")
    ranked: dict[str, dict[str, float]] = {}
    for r in run.itertuples(index=False):
        ranked.setdefault(str(r.query_id), {})[str(r.paper_id)] = -float(r.rank)
    want = pytrec_eval.RelevanceEvaluator(qrels, {"map_cut.500", "ndcg_cut.500", "recall.30"})
    got = want.evaluate(ranked)
    texts = {
        f"q:{d['_id']}": d["text"]
        for d in map(json.loads, (src / "queries.jsonl").read_text().splitlines())
    }
    for r in rows.itertuples(index=False):
        assert r.value == pytest.approx(got[r.query_id][NAMES[str(r.metric)]], abs=1e-9)
        assert r.n_positives == sum(v >= 1 for v in qrels[r.query_id].values())
        assert r.text_chars == len(texts[r.query_id]) and r.title == texts[r.query_id]
        assert pd.isna(r.year) and pd.isna(r.citations) and r.field is None
        assert (r.setup, r.split, r.pool_id) == ("dataset", "test", "beir/test")
    assert rows.loc[rows["query_id"] == "q:7", "n_positives"].eq(0).all()


@pytest.mark.slow
def test_per_query_rows_of_an_mdcr_format_benchmark(tmp_path: Path) -> None:
    import mdcr
    from tests.integration.ecosystem.helpers import FIXTURE

    home = tmp_path / "home"
    result = mdcr.evaluate("random", benchmark=FIXTURE, home=home, quiet=True)
    rows = _export(result.report_path.parent, tmp_path / "out")
    scored = pd.read_parquet(result.report_path.parent / "per_query.parquet")
    scored = scored[scored["subset"] == "all"]
    assert len(rows) == len(scored) > 0
    assert set(rows["setup"]) == {"mdcr"}
    bench = json.loads((FIXTURE / "mdcr_test.json").read_text())
    texts = {
        str(d["paper_id"]): d
        for d in map(json.loads, (FIXTURE / "mdcr_test_data.jsonl").read_text().splitlines())
    }
    for r in rows.itertuples(index=False):
        entry = bench[r.field][r.query_id] if r.field in bench else None
        if entry is not None:
            assert r.n_positives == len(entry["true"])
        paper = texts[r.query_id]
        assert r.text_chars == len(paper["title"]) + len(paper["abstract"])
        assert pd.isna(r.year) and pd.isna(r.citations)
    merged = rows.merge(scored, on=["retriever", "split", "field", "query_id", "metric"])
    assert len(merged) == len(rows)
    assert merged["value_x"].tolist() == merged["value_y"].tolist()
