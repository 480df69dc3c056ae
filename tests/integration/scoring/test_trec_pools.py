"""TREC export of real stage outputs, read back by pytrec_eval's own parsers: pools like
the demo's (several dataset- and field-level pools, val and test, qrels written pool by
pool), the search and bm25 runs ``mdcr evaluate`` makes on them, and ids holding spaces."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from mdcr.cli import main
from tests.integration.benchmark.helpers import DEMO_LIKE_POOLS, make_corpus, make_pools

pytrec_eval = pytest.importorskip("pytrec_eval")

NAMES = {"map@500": "map_cut_500", "ndcg@500": "ndcg_cut_500", "recall@30": "recall_30"}


def _cli(*args: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(list(args)) == 0
    return buf.getvalue()


def _export_and_check(run: Path, pools: Path, out: Path, per_query: pd.DataFrame) -> int:
    """Export ``run`` with ``pools``' qrels, parse both files with pytrec_eval and check
    every per-query value of ``per_query`` (one retriever's); return how many."""
    _cli("export", "--format", "trec", "--run", str(run), "--qrels", str(pools), "--out", str(out))
    with (out / "run.trec").open() as f:
        trec_run = pytrec_eval.parse_run(f)
    with (out / "qrels.trec").open() as f:
        qrels = pytrec_eval.parse_qrel(f)
    for path in (out / "run.trec", out / "qrels.trec"):
        widths = {len(line.split()) for line in path.read_text().splitlines()}
        assert widths == ({6} if path.name == "run.trec" else {4})
    ranked = pd.read_parquet(run / "runs.parquet").astype(str)
    pairs = zip(ranked.pool_id, ranked.query_id, strict=True)
    topics = {f"{p}:{q}".replace(" ", "_") for p, q in pairs}
    assert set(trec_run) == topics
    qrels = {q: v for q, v in qrels.items() if q in topics}
    measures = {"map_cut.500", "ndcg_cut.500", "recall.30"}
    got = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(trec_run)
    for r in per_query.itertuples(index=False):
        topic = f"{r.pool_id}:{r.query_id}".replace(" ", "_")
        assert got[topic][NAMES[str(r.metric)]] == pytest.approx(float(r.value), abs=1e-9)
    return len(per_query)


@pytest.mark.slow
def test_search_and_bm25_runs_on_many_pools_read_back_in_pytrec_eval(tmp_path: Path) -> None:
    home = tmp_path / "home"
    corpus = make_corpus(tmp_path / "corpus")
    pools = make_pools(home, corpus, **DEMO_LIKE_POOLS)
    meta = pd.read_parquet(pools / "pool_meta.parquet")
    assert len(meta) >= 8 and meta["pool_id"].astype(str).str.contains(" ").any()
    args = ("--pools", str(pools), "--encoder", "random", "--encoder", "bm25")
    _cli("evaluate", *args, "--home", str(home), "-q")
    per_query = pd.read_parquet(next((home / "score").glob("[0-9a-f]*")) / "per_query.parquet")
    for stage, retriever in (("search", "random"), ("bm25", "bm25")):
        run = next((home / stage).glob("[0-9a-f]*"))
        mine = per_query[per_query["retriever"] == retriever].astype({"pool_id": str})
        ranked = pd.read_parquet(run / "runs.parquet")[["pool_id", "query_id"]]
        assert mine["pool_id"].nunique() == ranked["pool_id"].nunique() >= 3
        n = _export_and_check(run, pools, tmp_path / stage, mine)
        assert n == 3 * len(ranked.drop_duplicates())


def _beir_with_spaces(folder: Path, docs: list[str]) -> None:
    (folder / "qrels").mkdir(parents=True)
    words = ["cell", "gene", "graph", "network", "energy", "drug", "trial", "model"]
    with (folder / "corpus.jsonl").open("w") as f:
        for i, d in enumerate(docs):
            text = " ".join(words[(i + k) % len(words)] for k in range(6))
            f.write(json.dumps({"_id": d, "title": words[i % len(words)], "text": text}) + "\n")
    queries = ["query one", "query two", "q3"]
    with (folder / "queries.jsonl").open("w") as f:
        for i, q in enumerate(queries):
            f.write(json.dumps({"_id": q, "text": f"{words[i]} {words[i + 2]}"}) + "\n")
    rows = ["query-id\tcorpus-id\tscore"]
    rows += [
        f"{q}\t{docs[(3 * i + k) % len(docs)]}\t1" for i, q in enumerate(queries) for k in (0, 1)
    ]
    (folder / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")


@pytest.mark.slow
def test_ids_with_spaces_are_escaped_alike_in_run_and_qrels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, home = tmp_path / "beir", tmp_path / "home"
    docs = [f"doc {i}" if i % 2 else f"d{i}" for i in range(24)]
    _beir_with_spaces(src, docs)
    pools = Path(_cli("import", "beir", "--source", str(src), "--home", str(home), "-q")
                 .strip().splitlines()[-1])  # fmt: skip
    _cli("evaluate", "--pools", str(pools), "--encoder", "random", "--home", str(home), "-q")
    run = next((home / "search").glob("[0-9a-f]*"))
    per_query = pd.read_parquet(next((home / "score").glob("[0-9a-f]*")) / "per_query.parquet")
    assert _export_and_check(run, pools, tmp_path / "out", per_query) == 3 * 3
    written = (tmp_path / "out" / "qrels.trec").read_text()
    assert "beir/test:q:query_one 0 doc_" in written
    # Two paper ids that would be written alike are refused, naming both; nothing is written.
    clash = tmp_path / "clash"
    _beir_with_spaces(clash, [*docs, "doc_1"])
    home2 = tmp_path / "home2"
    pools = Path(_cli("import", "beir", "--source", str(clash), "--home", str(home2), "-q")
                 .strip().splitlines()[-1])  # fmt: skip
    _cli("evaluate", "--pools", str(pools), "--encoder", "random", "--home", str(home2), "-q")
    run = next((home2 / "search").glob("[0-9a-f]*"))
    capsys.readouterr()
    out = tmp_path / "out2"
    assert main(["export", "--run", str(run), "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"mdcr: error: '{run}': paper ids 'doc 1' and 'doc_1' are both written 'doc_1' in a "
        "TREC file (whitespace becomes '_'); rename one so that they differ otherwise\n"
    )
    assert not (out / "run.trec").exists()
