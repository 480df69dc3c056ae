"""``mdcr import beir DIR`` makes pools of a BEIR folder that ``mdcr evaluate --pools``
scores; its per-query MAP@500, nDCG@500 and R@30 equal pytrec_eval's on the same run and
the folder's own qrels. Malformed lines and dangling qrels rows are counted, not kept."""

from __future__ import annotations

import contextlib
import io
import json
import random
from pathlib import Path

import pandas as pd
import pytest

from mdcr.cli import main
from mdcr.manifests import read_manifest

WORDS = [
    "cell",
    "gene",
    "protein",
    "graph",
    "network",
    "citation",
    "model",
    "learning",
    "energy",
    "drug",
    "trial",
]


def write_beir_folder(folder: Path, seed: int = 0) -> None:
    """60 documents, 8 queries (ids that are also document-like), graded qrels, one
    malformed corpus line, one qrels row naming no document, one query judged 0 only."""
    rng = random.Random(seed)
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("w") as f:
        for i in range(60):
            doc = {"_id": str(i), "title": " ".join(rng.choices(WORDS, k=3)),
                   "text": " ".join(rng.choices(WORDS, k=15))}  # fmt: skip
            f.write(json.dumps(doc) + "\n")
        f.write("{not json\n")
    with (folder / "queries.jsonl").open("w") as f:
        for i in range(8):
            f.write(json.dumps({"_id": str(i), "text": " ".join(rng.choices(WORDS, k=5))}) + "\n")
    lines = ["query-id\tcorpus-id\tscore"]
    for q in range(7):
        lines += [f"{q}\t{d}\t{rng.choice([1, 2])}" for d in rng.sample(range(60), 3)]
    lines += ["7\t5\t0", "0\tnot-a-doc\t1"]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")


def _cli(*args: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(list(args)) == 0
    return buf.getvalue()


@pytest.mark.slow
def test_imported_beir_pools_score_as_pytrec_eval(tmp_path: Path) -> None:
    import pytrec_eval

    src = tmp_path / "beir"
    write_beir_folder(src)
    home = tmp_path / "home"
    pools = Path(_cli("import", "beir", "--source", str(src), "--home", str(home), "-q")
                 .strip().splitlines()[-1])  # fmt: skip
    info = read_manifest(pools)["info"]  # type: ignore[index]
    assert info["documents"] == 60 and info["queries"] == 8
    assert info["refused"] == {
        "corpus.jsonl": 1,
        "qrels rows of a document not in corpus.jsonl": 1,
    }
    out = _cli("evaluate", "--pools", str(pools), "--encoder", "random", "--home", str(home), "-q")
    assert "report: " in out
    run = pd.read_parquet(next((home / "search").glob("[0-9a-f]*")) / "runs.parquet")
    per_query = pd.read_parquet(next((home / "score").glob("[0-9a-f]*")) / "per_query.parquet")
    qrels: dict[str, dict[str, int]] = {}
    for line in (src / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, r = line.split("\t")
        if d != "not-a-doc":
            qrels.setdefault(f"q:{q}", {})[d] = int(r)
    trec_run: dict[str, dict[str, float]] = {}
    for r in run.itertuples(index=False):  # scores made strictly decreasing in rank order
        trec_run.setdefault(str(r.query_id), {})[str(r.paper_id)] = -float(r.rank)
    assert set(trec_run) == set(qrels)  # every query, the one judged 0 only included
    measures = pytrec_eval.RelevanceEvaluator(qrels, {"map_cut.500", "ndcg_cut.500", "recall.30"})
    want = measures.evaluate(trec_run)
    names = {"map@500": "map_cut_500", "ndcg@500": "ndcg_cut_500", "recall@30": "recall_30"}
    assert len(per_query) == 3 * 8
    for r in per_query.itertuples(index=False):
        assert r.value == pytest.approx(want[r.query_id][names[r.metric]], abs=1e-9)
    assert per_query.loc[per_query["query_id"] == "q:7", "value"].eq(0).all()
