"""MDCR construction: invariants on a synthetic corpus, checked against independent code."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from mdcr.benchmark.build import SPEC, BenchmarkConfig, type_seed
from mdcr.benchmark.formats import (
    load_hf,
    read_papers_jsonl,
    read_release_json,
    sort_benchmark,
)
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.inputs import resolve_inputs
from mdcr.core.store import Store
from mdcr.pools.seeds import sample_key
from tests.unit.benchmark.helpers import make_corpus, make_pools, make_run

MODELS = ("bm25", "specter", "scincl")
TOP_N = 40


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("bench")
    home = root / "home"
    corpus = make_corpus(root / "corpus")
    pools = make_pools(home, corpus)
    runs = {m: make_run(home, pools, m, k=60, builtin=True) for m in MODELS}
    cfg = BenchmarkConfig(
        corpus=str(corpus),
        pools=str(pools),
        runs=tuple(str(runs[m]) for m in MODELS),
        top_n=TOP_N,
        on_short="warn",
    )
    out = Store(home).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True).path
    return {
        "root": root,
        "home": home,
        "corpus": corpus,
        "pools": pools,
        "runs": runs,
        "cfg": cfg,
        "out": out,
    }


def _graph(corpus: Path) -> tuple[dict, dict, dict, dict]:
    papers = pq.read_table(corpus / "papers.parquet").to_pandas()
    cit = pq.read_table(corpus / "citations.parquet").to_pandas()
    year = dict(zip(papers["paper_id"], papers["year"], strict=True))
    out: dict[str, set[str]] = defaultdict(set)
    inc: dict[str, set[str]] = defaultdict(set)
    for a, b in zip(cit["citing_id"], cit["cited_id"], strict=True):
        if a != b:
            out[a].add(b)
            inc[b].add(a)
    fields = dict(zip(papers["paper_id"], papers["fields"], strict=True))
    return (
        year,
        out,
        inc,
        {"n_in": dict(zip(papers["paper_id"], papers["n_in"], strict=True)), "f": fields},
    )


def test_every_query_has_5_plus_6x10(world: dict) -> None:
    bench = pd.read_parquet(world["out"] / "benchmark.parquet")
    queries = pd.read_parquet(world["pools"] / "queries.parquet")
    fq = queries[queries["setup"] == "field"]
    assert len(bench.groupby(["split", "field", "query_id"])) == len(fq) == 36
    counts = bench.groupby(["split", "field", "query_id", "candidate_type"]).size()
    per_type = counts.unstack()
    assert set(per_type.columns) == {"true", *MODELS, "graph", "most_cited", "random"}
    assert (per_type["true"] == 5).all()
    assert (per_type.drop(columns="true") == 10).all().all()
    assert (bench.groupby(["split", "field", "query_id"]).size() == 65).all()
    assert not bench.duplicated(["split", "field", "query_id", "paper_id"]).any()
    assert len(pd.read_parquet(world["out"] / "short_queries.parquet")) == 0


def test_rules_against_the_corpus(world: dict) -> None:
    year, out, _inc, extra = _graph(world["corpus"])
    bench = pd.read_parquet(world["out"] / "benchmark.parquet")
    for r in bench.itertuples(index=False):
        q, p = r.query_id, r.paper_id
        assert p != q
        assert year[p] <= year[q]  # the year rule
        if r.candidate_type == "true":
            assert p in out[q]
        else:
            assert p not in out[q]  # negatives are never cited by the query
    # most_cited: among the field's 200 most-cited papers (year <= query year)
    mc = bench[bench["candidate_type"] == "most_cited"]
    for (fld, q), g in mc.groupby(["field", "query_id"]):
        eligible = [p for p in year if fld in extra["f"][p] and year[p] <= year[q]]
        top = sorted(eligible, key=lambda p: (-extra["n_in"][p], p))[:200]
        assert set(g["paper_id"]) <= set(top)


def test_model_negatives_come_from_the_models_top_n(world: dict) -> None:
    bench = pd.read_parquet(world["out"] / "benchmark.parquet")
    for m, folder in world["runs"].items():
        run = pd.read_parquet(folder / "runs.parquet")
        run = run[run["rank"] <= TOP_N]
        tops = run.groupby(["pool_id", "query_id"])["paper_id"].apply(set)
        sub = bench[bench["candidate_type"] == m]
        for (split, fld, q), g in sub.groupby(["split", "field", "query_id"]):
            assert set(g["paper_id"]) <= tops[(f"field/{split}/{fld}/r0", q)]


def reference_graph(
    q: str, qyear: int, before: set[str], n: int, seed_of, year, out, inc
) -> list[str]:
    """The graph procedure, written out in Python from the paper's description."""
    cq = out[q] - {q}
    sims = []
    for c in cq:
        nc = (out[c] | inc[c]) - {c}
        s = len(cq & nc) / min(len(cq), len(nc))
        sims.append((-s, sample_key(seed_of("graph-visit"), c), c, nc))
    picked: list[str] = []
    for _s, _k, _c, nc in sorted(sims):
        ok = [x for x in nc if x not in cq and x != q and year[x] <= qyear and x not in before]
        for x in sorted(ok, key=lambda x: sample_key(seed_of("graph"), x)):
            if len(picked) < n and x not in picked:
                picked.append(x)
        if len(picked) >= n:
            break
    return picked


def test_graph_type_equals_reference(world: dict) -> None:
    year, out, inc, _ = _graph(world["corpus"])
    bench = pd.read_parquet(world["out"] / "benchmark.parquet")
    from mdcr.benchmark.build import QueryList

    checked = 0
    for (split, fld, q), g in bench.groupby(["split", "field", "query_id"]):
        before = set(g.loc[g["candidate_type"].isin(("true", *MODELS)), "paper_id"])
        ql = QueryList(split, fld, q, int(year[q]))

        def seed_of(t: str, ql: QueryList = ql) -> int:
            return type_seed(0, ql, t)

        ref = reference_graph(q, int(year[q]), before, 10, seed_of, year, out, inc)
        assert set(g.loc[g["candidate_type"] == "graph", "paper_id"]) == set(ref)
        checked += 1
    assert checked == 36


def test_deterministic_and_seeded(world: dict, tmp_path: Path) -> None:
    cfg = world["cfg"]
    again = Store(tmp_path / "h2").execute(SPEC, cfg, resolve_inputs(cfg), quiet=True).path
    for name in ("benchmark.parquet", "mdcr_test.json", "mdcr_val_data.jsonl"):
        a = hashlib.sha256((world["out"] / name).read_bytes()).hexdigest()
        b = hashlib.sha256((again / name).read_bytes()).hexdigest()
        assert a == b, name
    from dataclasses import replace

    other = replace(cfg, seed=7)
    out7 = Store(tmp_path / "h3").execute(SPEC, other, resolve_inputs(other), quiet=True).path
    b0 = pd.read_parquet(world["out"] / "benchmark.parquet")
    b7 = pd.read_parquet(out7 / "benchmark.parquet")
    assert len(b0) == len(b7)
    assert set(map(tuple, b0.values)) != set(map(tuple, b7.values))


def test_release_json_and_hf_round_trips(world: dict) -> None:
    out = world["out"]
    bench = pd.read_parquet(out / "benchmark.parquet")
    papers = pd.read_parquet(out / "papers.parquet")
    for split in ("val", "test"):
        ours = sort_benchmark(bench[bench["split"] == split])
        back = sort_benchmark(read_release_json(out / f"mdcr_{split}.json"))
        pd.testing.assert_frame_equal(ours, back)
        data = read_papers_jsonl(out / f"mdcr_{split}_data.jsonl")
        assert set(data["paper_id"]) == set(ours["paper_id"]) | set(ours["query_id"])
        merged = data.merge(papers, on="paper_id", suffixes=("", "_p"))
        assert (merged["title"] == merged["title_p"]).all()
        assert (merged["abstract"] == merged["abstract_p"]).all()
    hf_bench, hf_papers = load_hf(out / "hf")
    pd.testing.assert_frame_equal(sort_benchmark(bench), hf_bench)
    assert set(hf_papers["paper_id"]) == set(papers["paper_id"])


def test_missing_model_run_is_a_config_error(world: dict, tmp_path: Path) -> None:
    cfg = BenchmarkConfig(
        corpus=str(world["corpus"]),
        pools=str(world["pools"]),
        runs=(str(world["runs"]["bm25"]),),
        on_short="warn",
    )
    with pytest.raises(ConfigError, match="no run of 'specter'"):
        Store(tmp_path).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)


@pytest.mark.parametrize("impostor", ["specter", "bm25"])
def test_a_run_only_named_like_a_builtin_is_never_its_negative_type(
    world: dict, tmp_path: Path, impostor: str
) -> None:
    """A run named ``specter`` (or ``bm25``) that is not that built-in entry (a py: or hf:
    encoder, a model object) cannot give the ``specter`` negative type: a one-line error
    names the entry to use. The same run under its own name is an ordinary model type."""
    runs = dict(world["runs"])
    runs[impostor] = make_run(world["home"], world["pools"], impostor, k=60, builtin=False)
    cfg = BenchmarkConfig(
        corpus=str(world["corpus"]),
        pools=str(world["pools"]),
        runs=tuple(str(runs[m]) for m in MODELS),
        top_n=TOP_N,
        on_short="warn",
    )
    with pytest.raises(ConfigError) as info:
        Store(tmp_path).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
    message = str(info.value)
    assert f"the run named '{impostor}'" in message and "\n" not in message
    assert f"is not the built-in entry '{impostor}'" in message
    assert not (tmp_path / "benchmark").exists() or not any((tmp_path / "benchmark").iterdir())
    # Recorded: the built-in entry of each model type's run.
    info_ = json.loads((world["out"] / "manifest.json").read_text())["info"]
    assert {m: i["builtin"] for m, i in info_["model_entries"].items()} == {m: m for m in MODELS}


def test_short_queries_error_or_reported(world: dict, tmp_path: Path) -> None:
    from dataclasses import replace

    strict = replace(world["cfg"], n_true=12, on_short="error")
    with pytest.raises(InputDataError, match="lack positives or a full candidate type"):
        Store(tmp_path).execute(SPEC, strict, resolve_inputs(strict), quiet=True)
    lenient = replace(strict, on_short="warn", hf_export=False)
    out = Store(tmp_path).execute(SPEC, lenient, resolve_inputs(lenient), quiet=True).path
    short = pd.read_parquet(out / "short_queries.parquet")
    bench = pd.read_parquet(out / "benchmark.parquet")
    pos = bench[bench["candidate_type"] == "true"].groupby("query_id").size()
    lacking = set(pos[pos < 12].index)
    assert lacking and lacking == set(short.loc[short["candidate_type"] == "true", "query_id"])
    assert (short["got"] < short["needed"]).all()
    # Short queries are kept, not dropped.
    assert (
        bench["query_id"].nunique()
        == pd.read_parquet(world["out"] / "benchmark.parquet")["query_id"].nunique()
    )


def test_a_built_benchmark_is_not_official(world: dict, tmp_path: Path, capsys) -> None:
    """A benchmark mdcr built (the demo's, say) is labelled so, and neither the paper's
    numbers nor published MDCR rows stand beside it, even for a paper model (BM25)."""
    from mdcr.benchmark.formats import write_scores
    from mdcr.cli import main

    bench = pd.read_parquet(world["out"] / "benchmark.parquet")
    pairs = bench[["query_id", "paper_id"]].drop_duplicates()
    digits = [hashlib.md5(p.encode()).hexdigest()[:6] for p in pairs["paper_id"]]
    pairs = pairs.assign(score=[int(d, 16) for d in digits])
    write_scores(pairs, tmp_path / "scores.json")
    argv = ["evaluate", "--scores", str(tmp_path / "scores.json"), "--name", "bm25"]
    argv += ["--benchmark", str(world["out"]), "--home", str(world["home"]), "-q"]
    assert main([*argv, "--split", "test"]) == 0
    out = capsys.readouterr().out
    line = "Benchmark: a benchmark built by mdcr, not the official MDCR release"
    assert out.startswith(line) and "published AVG" not in out
    report = Path(out.strip().splitlines()[-1].removeprefix("report: ")).read_text()
    assert line in report and "No paper or published numbers beside these" in report
    assert "Comparison with the paper" not in report and "Published MDCR" not in report
