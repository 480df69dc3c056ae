"""``mdcr export`` of MDCR rankings and qrels: pytrec_eval reads the TREC files back and
gives, per query, exactly benchmark-score's numbers; mismatched pairs are refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from mdcr.cli import main
from mdcr.scoring.trec import topic_id

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "mdcr_format_fixture"
NAMES = {"map": "map", "ndcg": "ndcg", "recall@5": "recall_5"}


def _only(home: Path, stage: str, retriever: str | None = None) -> Path:
    found = []
    for m in sorted((home / stage).glob("*/manifest.json")):
        if retriever is None or json.loads(m.read_text())["info"].get("retriever") == retriever:
            found.append(m.parent)
    assert len(found) == 1, (stage, found)
    return found[0]


def _bench_of(rank: Path) -> Path:
    """The benchmark a benchmark-rank output ranked."""
    from mdcr.contracts.outputs import input_paths

    (bench,) = input_paths(rank, "benchmark")
    return bench


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture scored by a random encoder and by a scores file where every score ties."""
    root = tmp_path_factory.mktemp("mdcr_trec")
    home = root / "home"
    argv = ["evaluate", "--benchmark", str(FIXTURE), "--home", str(home), "-q"]
    assert main([*argv, "--encoder", "random"]) == 0
    bench = json.loads((FIXTURE / "mdcr_test.json").read_text())
    pairs = {
        f"{q}_{c}" for f in bench.values() for q, ls in f.items() for cs in ls.values() for c in cs
    }
    (root / "tied.json").write_text(json.dumps(dict.fromkeys(sorted(pairs), 0.5)))
    assert main([*argv, "--scores", str(root / "tied.json"), "--name", "tied"]) == 0
    graded = {p: (int(p.split("_")[1]) * 37 % 11) / 11 for p in sorted(pairs)}
    (root / "graded.json").write_text(json.dumps(graded))
    assert main([*argv, "--scores", str(root / "graded.json"), "--name", "graded"]) == 0
    return home


def _read_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        q, _q0, doc, _rank, score, _tag = line.split()
        run.setdefault(q, {})[doc] = float(score)
    return run


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        q, _zero, doc, rel = line.split()
        qrels.setdefault(q, {})[doc] = int(rel)
    return qrels


def _check(score: Path, retriever: str, run_file: Path, qrels_file: Path) -> None:
    import pytrec_eval

    run, qrels = _read_run(run_file), _read_qrels(qrels_file)
    got = pytrec_eval.RelevanceEvaluator(qrels, {"map", "ndcg", "recall.5"}).evaluate(run)
    ours = pd.read_parquet(score / "per_query.parquet")
    ours = ours[(ours["retriever"] == retriever) & (ours["subset"] == "all")]
    assert len(got) == ours["query_id"].nunique() == 7
    assert len(ours) == 3 * len(got)
    for r in ours.itertuples(index=False):
        q = topic_id(str(r.field), str(r.query_id))
        assert got[q][NAMES[str(r.metric)]] == pytest.approx(float(r.value), abs=1e-9), (q, r)


@pytest.mark.parametrize("retriever", ["random", "tied"])
def test_exported_files_give_benchmark_scores_per_query_numbers(
    home: Path, retriever: str, tmp_path: Path, capsys
) -> None:
    rank = _only(home, "benchmark-rank", retriever)
    bench = _bench_of(rank)
    argv = ["export", "--format", "trec", "--run", str(rank), "--qrels", str(bench)]
    assert main([*argv, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path / 'run_test.trec'}: 102 lines" in out
    assert f"{tmp_path / 'qrels_test.trec'}: 102 lines" in out
    qrels = _read_qrels(tmp_path / "qrels_test.trec")
    # Every candidate is judged: the 20 positives 1, the other 82 candidates 0.
    assert sum(v for q in qrels.values() for v in q.values()) == 20
    assert sum(len(q) for q in qrels.values()) == 102
    for score in (home / "benchmark-score").iterdir():
        per_query = pd.read_parquet(score / "per_query.parquet")
        if retriever in set(per_query["retriever"]):
            _check(score, retriever, tmp_path / "run_test.trec", tmp_path / "qrels_test.trec")


def test_paper_id_ties_are_written_as_strictly_decreasing_scores(
    home: Path, tmp_path: Path
) -> None:
    """benchmark-score with ties=paper_id and the export with --ties paper_id agree."""
    from mdcr.benchmark.score import SPEC, BenchScoreConfig
    from mdcr.core.inputs import resolve_inputs
    from mdcr.core.store import Store

    rank = _only(home, "benchmark-rank", "tied")
    bench = _bench_of(rank)
    cfg = BenchScoreConfig(benchmark=str(bench), ranks=(str(rank),), ties="paper_id")
    score = Store(home).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True).path
    argv = ["export", "--run", str(rank), "--qrels", str(bench), "--ties", "paper_id", "-q"]
    assert main([*argv, "--split", "test", "--out", str(tmp_path)]) == 0
    run = _read_run(tmp_path / "run_test.trec")
    for docs in run.values():
        ordered = sorted(docs, key=lambda d: -docs[d])
        assert ordered == sorted(docs)  # paper_id ascending, strictly decreasing scores
        assert len(set(docs.values())) == len(docs)
    _check(score, "tied", tmp_path / "run_test.trec", tmp_path / "qrels_test.trec")
    # The trec_eval order gives other numbers on these ties: the test can tell them apart.
    trec = pd.read_parquet(_only_with(home, "tied", "trec_eval") / "per_query.parquet")
    mine = pd.read_parquet(score / "per_query.parquet")
    assert not trec["value"].equals(mine["value"])


def _only_with(home: Path, retriever: str, ties: str) -> Path:
    for m in sorted((home / "benchmark-score").glob("*/manifest.json")):
        info = json.loads(m.read_text())["info"]
        if info.get("ties") == ties and retriever in info.get("retrievers", []):
            return m.parent
    raise AssertionError((retriever, ties))


def test_a_ranking_of_another_benchmark_is_refused(home: Path, tmp_path: Path, capsys) -> None:
    other = tmp_path / "other"
    shutil.copytree(FIXTURE, other)
    b = json.loads((other / "mdcr_test.json").read_text())
    b["Art"]["1002"]["true"] = b["Art"]["1002"]["true"][:1]
    (other / "mdcr_test.json").write_text(json.dumps(b))
    assert main(["benchmark", "import", "--source", str(other), "--home", str(home), "-q"]) == 0
    rank = _only(home, "benchmark-rank", "random")
    imports = sorted((home / "benchmark-import").iterdir())
    wrong = [p for p in imports if p != _bench_of(rank)][-1]
    argv = ["export", "--run", str(rank), "--qrels", str(wrong), "--out", str(tmp_path / "x")]
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pass the benchmark it ranked" in err
    assert not (tmp_path / "x").exists()
    # A benchmark ranking paired with pools-style qrels (a search output's kind) is refused.
    argv = ["export", "--run", str(rank), "--qrels", str(FIXTURE), "--out", str(tmp_path / "y")]
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pair a benchmark-rank output" in err
    # A split the ranking lacks.
    argv = ["export", "--run", str(rank), "--split", "val", "--out", str(tmp_path / "z")]
    assert main(argv) != 0
    assert "has no 'val' split; it has: test" in capsys.readouterr().err


def test_the_mdcr_report_tests_every_pair_of_retrievers(home: Path) -> None:
    """benchmark-score on two rankings: a paired test per metric between them, Holm-corrected
    over the split, in report.md and significance.parquet, with the pools report's tests."""
    from scipy.stats import ttest_rel

    from mdcr.benchmark.score import SPEC, BenchScoreConfig
    from mdcr.core.inputs import resolve_inputs
    from mdcr.core.store import Store

    ranks = (
        str(_only(home, "benchmark-rank", "graded")),
        str(_only(home, "benchmark-rank", "tied")),
    )
    benches = {str(_bench_of(Path(r))) for r in ranks}
    assert len(benches) == 1
    cfg = BenchScoreConfig(benchmark=benches.pop(), ranks=ranks)
    out = Store(home).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True).path
    sig = pd.read_parquet(out / "significance.parquet")
    assert len(sig) == 3 * 2  # three metrics, two tests, one pair
    assert set(sig["correction"]) == {"holm"} and set(sig["n_queries"]) == {7}
    pq = pd.read_parquet(out / "per_query.parquet")
    pq = pq[(pq["subset"] == "all") & (pq["metric"] == "map")]
    a = pq[pq["retriever"] == "graded"].sort_values(["field", "query_id"])["value"].to_numpy()
    b = pq[pq["retriever"] == "tied"].sort_values(["field", "query_id"])["value"].to_numpy()
    t = sig[(sig["metric"] == "map") & (sig["test"] == "student")].iloc[0]
    assert t["p_value"] == pytest.approx(ttest_rel(a, b).pvalue, rel=1e-9)
    assert t["p_value"] <= t["p_adjusted"] <= min(1.0, 3 * t["p_value"])
    report = (out / "report.md").read_text()
    assert "Significance (holm-corrected over this table, α = 0.05" in report
    assert "| MAP | graded | tied | 7 |" in report
