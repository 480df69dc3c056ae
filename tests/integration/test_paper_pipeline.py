"""The paper's pipeline (pipelines/paper.toml) on a synthetic S2ORC, so the file cannot rot.

The dry run uses the paper's own sizes (nothing is built, so it is quick); the real run
scales every size down with ``--set`` overrides and replaces the five neural encoders with
hashed bag-of-words stand-ins (tests/integration/fake_encoders.py, whose fast sum of word
hashes is checked here, bit for bit, against their word-by-word definition), because the
model hub is out of reach in tests. Being
user encoders they are named ``<model>-standin``: a user encoder never stands for a
built-in's paper rows or MDCR negative type, so the benchmark's model types are set to
the stand-ins' names. Everything else is the real pipeline.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from mdcr.cli import main
from mdcr.contracts.paper import FIELD_ABBREVIATIONS
from mdcr.core.manifests import read_manifest

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipelines" / "paper.toml"
FAKE = "py:tests.integration.fake_encoders:"
ENCODERS = {
    "scibert": "SciBERT",
    "specter": "Specter",
    "scincl": "SciNCL",
    "aspire_bm": "AspireBM",
    "aspire_cs": "AspireCS",
}
SCALED = [
    "pools.n_queries_dataset=20",
    # Four dataset-level sizes as in the paper, small: every paper of each pool is encoded,
    # indexed and ranked by six retrievers, and nothing checked here depends on the size
    # (the smallest holds the papers its 20 queries cite, about 540).
    "pools.dataset_sizes=700,800,900,1000",
    "pools.repetitions=2",
    "pools.field_queries=4",
    "pools.field_pool_size=600",
    "pools.on_short_field=warn",
    "pools.fields=Biology,Chemistry,Computer Science,Medicine",
    "bm25_tune.k1=0.9,1.2",
    "bm25_tune.b=0.4,0.75",
    "benchmark.on_short=warn",
    "benchmark.models=bm25,specter-standin,scincl-standin",
    "report.permutations=200",
]
for _step, _cls in ENCODERS.items():
    SCALED += [f"enc_{_step}.encoder={FAKE}{_cls}", f"bench_enc_{_step}.encoder={FAKE}{_cls}"]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from mdcr.core.store import Store
    from mdcr.corpus.synth.stage import SPEC, SynthConfig

    home = tmp_path_factory.mktemp("paper")
    shards = (
        Store(home)
        .execute(SPEC, SynthConfig(n_papers=12000, n_shards=2, seed=3), {}, quiet=True)
        .path
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("S2ORC_DIR", str(shards))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.delenv("MDCR_HOME", raising=False)
        yield {"home": home}


def _run(home: Path, *extra: str) -> tuple[int, str]:
    argv = ["run", str(PIPELINE), "--home", str(home), *extra]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(argv)
    return rc, buf.getvalue()


@pytest.mark.integration
def test_dry_run_prints_the_paper_scale_plan(env: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan of a full S2ORC release, priced from the small folder at hand by the
    stated record count (the folder's own count is tested in tests/unit/test_planning.py)."""
    monkeypatch.setenv("MDCR_PLAN_INPUT_RECORDS", "81100000")
    rc, out = _run(env["home"] / "dry", "--dry-run")
    assert rc == 0
    # 4 sizes x 3 repetitions x 2 splits; 19 fields x 3 repetitions x 2 splits.
    assert "pools: 24 dataset-level + 114 field-level" in out
    assert "15200 queries" in out
    assert out.count("papers to encode:") == 10  # 5 encoders on the pools + on the benchmark
    assert "disk ~" in out
    assert "7600 queries x 66 papers" in out  # MDCR: 19 fields x 200 queries x 2 splits
    plan, _, table = out.partition("\nEstimated wall time on one machine with 16 cores, 1 GPU")
    store, *lines = plan.splitlines()
    assert store == f"store: {env['home'] / 'dry'} (--home)"
    steps = [line.split()[0] for line in lines if line and not line.startswith(" ")]
    assert steps[0] == "prefilter" and steps[-1] == "bench_score" and len(steps) == 30
    # Every step's time, then the total; each step's plan says how it was priced.
    rows = [line.split()[0] for line in table.splitlines()[1:] if line.startswith("  ")]
    assert rows == [*steps, "total"]
    assert plan.count("    time: ~") == 30
    assert plan.count("4,114 BERT-base papers/s per GPU (measured on an NVIDIA H200)") == 10
    assert plan.count("rate 'search' measured on an NVIDIA H200, per GPU") == 3
    assert "no measured rate" not in out


@pytest.mark.integration
@pytest.mark.slow
def test_scaled_paper_pipeline_runs_end_to_end(env: dict) -> None:
    home = env["home"] / "run"
    args = [a for s in SCALED for a in ("--set", s)]
    rc, out = _run(home, "-q", *args)
    assert rc == 0, out
    *_, main_file, folder = out.strip().splitlines()
    assert main_file.endswith("report.md") and Path(folder).parent.parent == home
    bench_dir = next((home / "benchmark").iterdir())
    bench = pd.read_parquet(bench_dir / "benchmark.parquet")
    sizes = bench.groupby(["split", "field", "query_id"]).size()
    assert set(bench["split"]) == {"val", "test"} and (sizes == 65).all()
    types = set(bench["candidate_type"])
    standins = {"specter-standin", "scincl-standin"}
    assert types == {"true", "bm25", *standins, "graph", "most_cited", "random"}
    score_dir = next((home / "benchmark-score").iterdir())
    text = (score_dir / "report.md").read_text()
    names = ["scibert", "specter", "scincl", "aspire-bm", "aspire-cs"]
    for label in ["BM25", *(f"{n}-standin" for n in names)]:
        assert f" {label} MAP | {label} R@5 |" in text
    # A benchmark mdcr built is not the official release: nothing is set beside the paper
    # (tests/integration/evaluation/test_evaluate_origin.py checks who is, on the official one).
    assert "Benchmark: a benchmark built by mdcr, not the official MDCR release" in text
    assert "Comparison with the paper" not in text and "Published MDCR" not in text
    assert "(Table 4 layout)" in text
    assert _aspire_cells_agree(score_dir) == 2 * (2 * 12 + 5 * 2 * 2)  # splits x cells
    assert _field_cs_cells_agree(home) == 3 * 6  # 3 metrics x 6 retrievers
    jac = read_manifest(next((home / "benchmark-jaccard").iterdir()))
    assert jac is not None
    lowest, avg = _lowest_mean_jaccard(home)
    assert jac["info"]["suggested_models"] == lowest
    per_model = pd.read_parquet(next((home / "benchmark-jaccard").iterdir()) / "per_model.parquet")
    assert dict(zip(per_model["model"], per_model["avg_jaccard"], strict=True)) == pytest.approx(
        avg, abs=1e-12
    )
    # Every query of every pool (val and test, dataset- and field-level) was ranked by
    # each of the five dense retrievers and by BM25.
    pools_dir = next((home / "pools").iterdir())
    judged = _topics(pools_dir / "qrels.parquet")
    assert len(judged) == 2 * (2 * 4 * 20 + 2 * 4 * 4)  # splits x (dataset + field) queries
    folders = {step: sorted((home / step).iterdir()) for step in ("search", "bm25")}
    assert [len(folders["search"]), len(folders["bm25"])] == [5, 1]
    for folder in [*folders["search"], *folders["bm25"]]:
        assert _topics(folder / "runs.parquet") == judged, folder
    assert _standins_are_the_fake_encoders(home) == 5 * 400


def _standins_are_the_fake_encoders(home: Path, n: int = 400) -> int:
    """The stand-ins' fast vectors (``fake_encoders._bow``) are their word-by-word
    definition's (``bow_by_word``) bit for bit, under each stand-in's salt, on the run's own
    corpus (its first ``n`` papers, the empty text too); returns the texts compared."""
    import numpy as np

    from tests.integration import fake_encoders

    papers = pd.read_parquet(next((home / "prefilter").iterdir()) / "papers.parquet").head(n)
    pairs = zip(papers["title"], papers["abstract"], strict=True)
    texts = [f"{title or ''} {abstract or ''}" for title, abstract in pairs]
    texts[-1] = " "
    compared = 0
    for cls in ENCODERS.values():
        salt = getattr(fake_encoders, cls).name
        want = np.stack([fake_encoders.bow_by_word(text, salt) for text in texts])
        got = np.stack([fake_encoders._bow(text, salt) for text in texts])
        assert want.dtype == got.dtype == np.float32 and want.shape == got.shape, cls
        assert np.array_equal(want.view(np.int32), got.view(np.int32)), cls
        compared += len(texts)
    return compared


def _csv(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text())))


def _topics(path: Path) -> set[tuple[str, str]]:
    df = pd.read_parquet(path, columns=["pool_id", "query_id"]).astype(str).drop_duplicates()
    return set(zip(df["pool_id"], df["query_id"], strict=True))


def type_label(candidate_type: str) -> str:
    """A Table 4 column's label for a candidate type, as the table writes it."""
    from mdcr.scoring.mdcr_tables import type_label as label

    return label(candidate_type)


def _aspire_cells_agree(score_dir: Path) -> int:
    """Every Aspire cell of the Table 3 and Table 4 layouts (val and test) is the mean of
    the per-query values (per field, then over fields); returns the cells checked."""
    per_query = pd.read_parquet(score_dir / "per_query.parquet")
    keys = ["retriever", "split", "subset", "field", "metric"]
    per_field = per_query.groupby(keys)["value"].mean()
    macro = per_field.groupby(["retriever", "split", "subset", "metric"]).mean()
    field_of = {abbr: name for name, abbr in FIELD_ABBREVIATIONS.items()}
    subsets = {type_label(t): t for t in set(per_query["subset"]) - {"all"}}
    metrics = {"MAP": "map", "R@5": "recall@5"}
    checked = 0
    for split in ("val", "test"):
        header, *rows = _csv(score_dir / "tables" / f"mdcr_{split}_table4.csv")
        aspire = {r[0]: r[1:] for r in rows if r[0].startswith("aspire")}
        assert sorted(aspire) == ["aspire-bm-standin", "aspire-cs-standin"]
        for label, cells in aspire.items():
            for col, cell in zip(header[1:], cells, strict=True):
                kind, _, metric = col.rpartition(" ")
                want = macro[label, split, subsets[kind], metrics[metric]]
                assert float(cell) == pytest.approx(want, abs=1e-12), (split, label, col)
                checked += 1
        header, *rows = _csv(score_dir / "tables" / f"mdcr_{split}_table3.csv")
        assert [r[0] for r in rows] == ["Bio", "Ch", "CS", "Med", "AVG"]
        for r in rows:
            for label in ("aspire-bm-standin", "aspire-cs-standin"):
                for m, metric in metrics.items():
                    key = (label, split, "all")
                    want = (
                        macro[(*key, metric)]
                        if r[0] == "AVG"
                        else per_field[(*key, field_of[r[0]], metric)]
                    )
                    assert float(r[header.index(f"{label} {m}")]) == pytest.approx(want, abs=1e-12)
                    checked += 1
    return checked


def _field_cs_cells_agree(home: Path) -> int:
    """The large report's field-level CS column is the mean over repetitions of the
    per-query means on the Computer Science test pools; returns the cells checked."""
    report = next((home / "report").iterdir())
    per_query = pd.read_parquet(next((home / "score").iterdir()) / "per_query.parquet")
    cs = per_query[per_query["pool_id"].astype(str).str.startswith("field/test/Computer Science/")]
    by_pool = cs.groupby(["retriever", "metric", "pool_id"])["value"].mean()
    want = by_pool.groupby(["retriever", "metric"]).mean()
    checked = 0
    for metric, file in (("map@500", "map"), ("ndcg@500", "ndcg"), ("recall@30", "recall")):
        header, *rows = _csv(report / "tables" / f"field_test_{file}.csv")
        got = {r[0]: float(r[header.index("CS")]) for r in rows if r[0] != "expected chance"}
        assert sorted(got) == sorted(set(want.index.get_level_values(0)))
        for retriever, value in got.items():
            assert value == pytest.approx(want[retriever, metric], abs=1e-12), (retriever, file)
            checked += 1
    text = (report / "report.md").read_text()
    # The three field-level tables, each followed by its 95%-interval companion.
    assert text.count("| Retriever | Bio | Ch | CS | Med | AVG |") == 6
    return checked


def _lowest_mean_jaccard(home: Path, n: int = 3, top_n: int = 200) -> tuple[list[str], dict]:  # type: ignore[type-arg]
    """The n models whose top negatives overlap least (paper section 4.1), computed here
    from the runs: each model's top-N non-positives per validation field-level query of
    repetition 0, Jaccard per pair averaged over queries, then per model over the others."""
    pools = next((home / "pools").iterdir())
    meta = pd.read_parquet(pools / "pool_meta.parquet").astype({"pool_id": str})
    val = (meta["setup"] == "field") & (meta["split"] == "val") & (meta["rep"] == 0)
    chosen = set(meta[val]["pool_id"])
    qrels = pd.read_parquet(pools / "qrels.parquet").astype(str)
    qrels = qrels[qrels["pool_id"].isin(chosen)]
    positives = qrels.groupby(["pool_id", "query_id"])["paper_id"].agg(set).to_dict()
    negatives = {}
    for folder in [*(home / "search").iterdir(), *(home / "bm25").iterdir()]:
        name = json.loads((folder / "manifest.json").read_text())["info"]["retriever"]
        run = pd.read_parquet(folder / "runs.parquet").astype({"pool_id": str, "query_id": str})
        run = run[run["pool_id"].isin(chosen) & (run["rank"] <= top_n)].astype({"paper_id": str})
        top = run.groupby(["pool_id", "query_id"])["paper_id"].agg(set).to_dict()
        negatives[name] = {k: top.get(k, set()) - p for k, p in positives.items()}

    def mean_jaccard(a: str, b: str) -> float:
        sa, sb = negatives[a], negatives[b]
        js = [len(sa[k] & sb[k]) / len(sa[k] | sb[k]) for k in positives if sa[k] | sb[k]]
        return sum(js) / len(js)

    models = sorted(negatives)
    assert len(models) == 6
    avg = {m: sum(mean_jaccard(m, o) for o in models if o != m) / (len(models) - 1) for m in models}
    return sorted(models, key=lambda m: (avg[m], m))[:n], avg
