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
from mdcr.core.manifests import read_manifest

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
    per_query = _agrees_with_pytrec_eval(home, src / "qrels" / "test.tsv")
    assert per_query.loc[per_query["query_id"] == "q:7", "value"].eq(0).all()


def _agrees_with_pytrec_eval(home: Path, qrels_file: Path) -> pd.DataFrame:
    """The store's only search run, scored by pytrec_eval on the BEIR qrels file: every
    query of the qrels is ranked, and equals the score output's per-query values (8
    queries x 3 measures). Returns the per-query values."""
    import pytrec_eval

    run = pd.read_parquet(next((home / "search").glob("[0-9a-f]*")) / "runs.parquet")
    per_query = pd.read_parquet(next((home / "score").glob("[0-9a-f]*")) / "per_query.parquet")
    qrels: dict[str, dict[str, int]] = {}
    for line in qrels_file.read_text().splitlines()[1:]:
        q, d, r = line.split("\t")
        if d != "not-a-doc":
            qrels.setdefault(f"q:{q}", {})[d] = int(r)
    trec_run: dict[str, dict[str, float]] = {}
    for r in run.itertuples(index=False):  # scores made strictly decreasing in rank order
        trec_run.setdefault(str(r.query_id), {})[str(r.paper_id)] = -float(r.rank)
    assert set(trec_run) == set(qrels)  # every query, one judged 0 only included
    measures = pytrec_eval.RelevanceEvaluator(qrels, {"map_cut.500", "ndcg_cut.500", "recall.30"})
    want = measures.evaluate(trec_run)
    names = {"map@500": "map_cut_500", "ndcg@500": "ndcg_cut_500", "recall@30": "recall_30"}
    assert len(per_query) == 3 * 8
    for r in per_query.itertuples(index=False):
        assert r.value == pytest.approx(want[r.query_id][names[r.metric]], abs=1e-9)
    return per_query


def _import(src: Path, home: Path) -> Path:
    return Path(_cli("import", "beir", "--source", str(src), "--home", str(home), "-q")
                .strip().splitlines()[-1])  # fmt: skip


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_qrels_without_a_header_keep_their_first_judgment(tmp_path: Path) -> None:
    src = tmp_path / "beir"
    write_beir_folder(src)
    tsv = src / "qrels" / "test.tsv"
    lines = tsv.read_text().splitlines()[1:]  # no header
    tsv.write_text("\n".join(lines) + "\n")
    pools = _import(src, tmp_path / "home")
    info = read_manifest(pools)["info"]  # type: ignore[index]
    assert info["read"]["qrels/test.tsv"] == len(lines)
    qrels = pd.read_parquet(pools / "qrels.parquet")
    assert len(qrels) == len(lines) - 1  # the row naming no document is refused
    first = lines[0].split("\t")
    row = qrels[(qrels["query_id"] == f"q:{first[0]}") & (qrels["paper_id"] == first[1])]
    assert row["relevance"].tolist() == [int(first[2])]


def test_a_pair_judged_twice_is_one_line_naming_file_line_and_pair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "beir"
    write_beir_folder(src)
    tsv = src / "qrels" / "test.tsv"
    lines = tsv.read_text().splitlines()
    q, d, _ = lines[2].split("\t")
    tsv.write_text("\n".join([*lines, f"{q}\t{d}\t0"]) + "\n")
    argv = ["import", "beir", "--source", str(src), "--home", str(tmp_path / "home"), "-q"]
    assert _error(argv, capsys) == (
        f"mdcr: error: '{tsv}' line {len(lines) + 1}: query '{q}' and document '{d}' are "
        "judged again (first on line 3); keep one line per pair\n"
    )


def test_a_tab_inside_an_id_is_refused_at_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "beir"
    write_beir_folder(src)
    with (src / "corpus.jsonl").open("a") as f:
        f.write(json.dumps({"_id": "a\tb", "title": "t", "text": "x"}) + "\n")
    argv = ["import", "beir", "--source", str(src), "--home", str(tmp_path / "home"), "-q"]
    assert _error(argv, capsys) == (
        f"mdcr: error: '{src / 'corpus.jsonl'}' line 62: _id 'a\\tb' holds a tab or newline, "
        "which qrels and TREC files cannot carry; give ids without them\n"
    )
    write_beir_folder(tmp_path / "beir2")
    tsv = tmp_path / "beir2" / "qrels" / "test.tsv"
    tsv.write_text(tsv.read_text() + '"0\t1"\t3\t1\n')
    argv[3] = str(tmp_path / "beir2")
    assert "query-id '0\\t1' holds a tab or newline" in _error(argv, capsys)


@pytest.mark.slow
def test_a_dev_only_dataset_is_scored_as_mdcr_val(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:

    src, home = tmp_path / "beir", tmp_path / "home"
    write_beir_folder(src)
    (src / "qrels" / "test.tsv").rename(src / "qrels" / "dev.tsv")
    (src / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\n0\t1\t1\n")
    pools = _import(src, home)
    info = read_manifest(pools)["info"]  # type: ignore[index]
    assert info["splits"] == ["val"] and info["skipped"] == ["qrels/train.tsv"]
    assert info["split_files"] == {"val": "qrels/dev.tsv"}
    meta = pd.read_parquet(pools / "pool_meta.parquet")
    assert meta[["pool_id", "split"]].values.tolist() == [["beir/val", "val"]]
    out = _cli("evaluate", "--pools", str(pools), "--encoder", "random", "--home", str(home), "-q")
    assert "val split" in out and "report: " in out
    _agrees_with_pytrec_eval(home, src / "qrels" / "dev.tsv")
    # Naming a split mdcr does not score is a one-line error.
    argv = ["import", "beir", "--source", str(src), "--splits", "train", "--home", str(home), "-q"]
    assert _error(argv, capsys) == (
        "mdcr: error: --splits: 'train' is not a split mdcr scores (val, test); "
        "import one of: test (as test), dev (as val), val (as val), validation (as val)\n"
    )


def test_a_byte_order_mark_is_read_past_in_every_beir_file(tmp_path: Path) -> None:
    plain, marked = tmp_path / "plain", tmp_path / "marked"
    write_beir_folder(plain)
    write_beir_folder(marked)
    tsv = marked / "qrels" / "test.tsv"
    tsv.write_text("\n".join(tsv.read_text().splitlines()[1:]) + "\n")  # no header
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        (marked / name).write_bytes(b"\xef\xbb\xbf" + (marked / name).read_bytes())
    outs = [_import(src, tmp_path / f"home_{src.name}") for src in (plain, marked)]
    infos = [read_manifest(out)["info"] for out in outs]  # type: ignore[index]
    assert infos[0]["read"] == infos[1]["read"] and infos[0]["refused"] == infos[1]["refused"]
    for name in ("papers", "qrels", "queries"):
        a, b = (pd.read_parquet(out / f"{name}.parquet") for out in outs)
        pd.testing.assert_frame_equal(a, b)
    assert "0" in set(pd.read_parquet(outs[1] / "papers.parquet")["paper_id"])


@pytest.mark.slow
def test_a_document_sharing_a_query_id_is_ranked_as_beir_scores_without_ignoring_it(
    tmp_path: Path,
) -> None:
    """BEIR's queries 0-7 share their ids with documents 0-7: mdcr ranks and scores those
    documents (the query is ``q:<id>``, never its own candidate), as BEIR's
    ``evaluate(..., ignore_identical_ids=False)`` and MTEB's default do; BEIR's own
    default (True) drops them and gives other numbers."""
    from beir.retrieval.evaluation import EvaluateRetrieval

    src, home = tmp_path / "beir", tmp_path / "home"
    write_beir_folder(src)
    pools = _import(src, home)
    _cli("evaluate", "--pools", str(pools), "--encoder", "random", "--home", str(home), "-q")
    run = pd.read_parquet(next((home / "search").glob("[0-9a-f]*")) / "runs.parquet")
    per_query = pd.read_parquet(next((home / "score").glob("[0-9a-f]*")) / "per_query.parquet")
    qrels: dict[str, dict[str, int]] = {}
    for line in (src / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, r = line.split("\t")
        if d != "not-a-doc":
            qrels.setdefault(q, {})[d] = int(r)

    def results() -> dict[str, dict[str, float]]:  # fresh: BEIR pops identical ids in place
        out: dict[str, dict[str, float]] = {}
        for r in run.itertuples(index=False):
            out.setdefault(str(r.query_id).removeprefix("q:"), {})[str(r.paper_id)] = -r.rank
        return out

    own = [q for q, docs in results().items() if q in docs]
    assert len(own) == 8  # every query's own id is ranked
    ours = per_query[per_query["metric"] == "ndcg@500"]["value"].mean()
    kept = EvaluateRetrieval.evaluate(qrels, results(), [500], ignore_identical_ids=False)
    assert kept[0]["NDCG@500"] == pytest.approx(round(ours, 5), abs=1e-9)
    dropped = EvaluateRetrieval.evaluate(qrels, results(), [500])
    assert dropped[0]["NDCG@500"] != kept[0]["NDCG@500"]
