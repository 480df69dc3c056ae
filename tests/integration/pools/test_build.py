"""The pools stage end to end on small corpora: every invariant, on every pool."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.fingerprints import sha256_file
from mdcr.pools.build import PoolsConfig, summary_text
from mdcr.pools.queries import split_of
from mdcr.pools.seeds import sample_key
from tests.integration.pools.helpers import Corpus, rows, run_pools
from tests.support.corpora import random_corpus, write_corpus

FILES = ("queries", "pools", "pool_meta", "qrels", "summary")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Corpus]:
    base = tmp_path_factory.mktemp("pools")
    corpus = random_corpus(base / "corpus", n=3000, seed=1)
    out = run_pools(base / "home", corpus)
    return corpus, out, Corpus.read(corpus)


def pools_by_id(out: Path) -> dict[str, list[str]]:
    by: dict[str, list[str]] = defaultdict(list)
    for r in rows(out, "pools"):
        by[r["pool_id"]].append(r["paper_id"])
    return dict(by)


def qrels_by_pool(out: Path) -> dict[str, dict[str, set[str]]]:
    by: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for r in rows(out, "qrels"):
        assert r["relevance"] == 1
        by[r["pool_id"]][r["query_id"]].add(r["paper_id"])
    return by


def test_counts_and_pool_ids(built: tuple[Path, Path, Corpus]) -> None:
    _, out, _ = built
    meta = rows(out, "pool_meta")
    ids = [m["pool_id"] for m in meta]
    assert ids == sorted(ids)
    # dataset: 2 splits x 2 sizes x 2 reps; field: 2 splits x 5 fields x 2 reps
    assert len([i for i in ids if i.startswith("dataset/")]) == 8
    assert len([i for i in ids if i.startswith("field/")]) == 20
    assert "dataset/test/500/r1" in ids and "field/val/Computer Science/r0" in ids
    queries = rows(out, "queries")
    per_set: dict[tuple[Any, ...], int] = defaultdict(int)
    for q in queries:
        per_set[(q["setup"], q["split"], q["field"])] += 1
        assert q["year"] == 2019
    assert per_set[("dataset", "test", None)] == 30
    assert per_set[("dataset", "val", None)] == 30
    assert per_set[("field", "test", "Art")] == 10
    assert len(per_set) == 2 + 2 * 5


def check_invariants(out: Path, corpus: Corpus) -> None:
    """Every rule of the pools contract, on every pool, against the corpus itself."""
    pools = pools_by_id(out)
    qrels = qrels_by_pool(out)
    queries = rows(out, "queries")
    meta = rows(out, "pool_meta")
    assert set(pools) == {m["pool_id"] for m in meta} == set(qrels)
    for m in meta:
        pid = m["pool_id"]
        papers = pools[pid]
        # sorted, unique, exact size (all of the field-cited set when that is smaller)
        assert papers == sorted(set(papers))
        assert len(papers) == m["n_papers"]
        if m["all_field_cited"]:
            assert set(papers) == corpus.field_cited(m["field"]) and len(papers) <= m["size"]
        else:
            assert m["n_papers"] == m["size"]
        # every candidate is at most as recent as the queries
        assert max(corpus.year[p] for p in papers) <= 2019
        # the pool's queries are those of its (setup, split, field)
        field = m["field"]
        qs = {
            q["query_id"]
            for q in queries
            if (q["setup"], q["split"], q["field"]) == (m["setup"], m["split"], field)
        }
        assert set(qrels[pid]) == qs and m["n_queries"] == len(qs)
        pool = set(papers)
        for q in qs:
            assert corpus.year[q] == 2019
            # qrels = the query's cited papers in the pool = all of its positives
            assert qrels[pid][q] == corpus.positives(q)
            assert qrels[pid][q] <= pool
            assert q not in qrels[pid][q]  # a query is never its own positive
            assert len(qrels[pid][q]) >= 5
        if field is not None:
            assert pool <= corpus.field_cited(field)
            assert all(field in corpus.fields[q] for q in qs)


def test_every_pool_invariant(built: tuple[Path, Path, Corpus]) -> None:
    _, out, corpus = built
    check_invariants(out, corpus)


def test_every_pool_invariant_on_synth_corpus(tmp_path: Path) -> None:
    """The same rules on the project's synthetic corpus (skewed fields, small fields)."""
    from mdcr.corpus.synth.stage import write_tables

    write_tables(tmp_path / "c", n_papers=6000, seed=0, with_text=False)
    out = run_pools(
        tmp_path / "h",
        tmp_path / "c",
        n_queries_dataset=15,
        dataset_sizes=(1500, 3000),
        field_queries=5,
        field_pool_size=800,
        fields=("Art", "Biology", "History", "Medicine"),
        on_short_field="warn",
    )
    check_invariants(out, Corpus.read(tmp_path / "c"))
    meta = rows(out, "pool_meta")
    assert sum(m["setup"] == "dataset" for m in meta) == 8
    assert any(m["setup"] == "field" and not m["all_field_cited"] for m in meta)


def test_repetitions_and_sizes_differ(built: tuple[Path, Path, Corpus]) -> None:
    _, out, _ = built
    pools = {k: set(v) for k, v in pools_by_id(out).items()}
    assert pools["dataset/test/500/r0"] != pools["dataset/test/500/r1"]
    assert pools["dataset/test/1000/r0"] != pools["dataset/test/1000/r1"]
    assert pools["field/test/Medicine/r0"] != pools["field/test/Medicine/r1"]
    seeds = [m["seed"] for m in rows(out, "pool_meta")]
    assert len(set(seeds)) == len(seeds)


def test_fill_matches_independent_hash_sample(built: tuple[Path, Path, Corpus]) -> None:
    """A pool = cited papers + the smallest md5 keys of the rest (recomputed with hashlib)."""
    _, out, corpus = built
    pools = pools_by_id(out)
    qrels = qrels_by_pool(out)
    for m in rows(out, "pool_meta"):
        assert not m["all_field_cited"]
        cited = set().union(*qrels[m["pool_id"]].values())
        if m["field"] is None:
            universe = {p for p, y in corpus.year.items() if y <= 2019} - cited
        else:
            universe = corpus.field_cited(m["field"]) - cited
        fill = sorted(universe, key=lambda p: (sample_key(m["seed"], p), p))
        fill = fill[: m["size"] - len(cited)]
        assert sorted(cited | set(fill)) == pools[m["pool_id"]]


def test_val_and_test_queries_disjoint_across_setups(built: tuple[Path, Path, Corpus]) -> None:
    _, out, _ = built
    by_split: dict[str, set[str]] = defaultdict(set)
    for q in rows(out, "queries"):
        by_split[q["split"]].add(q["query_id"])
        assert split_of(0, q["query_id"]) == q["split"]
    assert by_split["val"] and by_split["test"]
    assert not by_split["val"] & by_split["test"]


def test_summary_agrees_with_qrels(built: tuple[Path, Path, Corpus]) -> None:
    _, out, _ = built
    qrels = qrels_by_pool(out)
    summary = rows(out, "summary")
    for s in summary:
        counts = [len(v) for v in qrels[s["pool_id"]].values()]
        assert s["n_qrels"] == sum(counts)
        assert s["pos_min"] == min(counts) and s["pos_max"] == max(counts)
        assert s["pos_mean"] == pytest.approx(sum(counts) / len(counts))
    manifest = json.loads((out / "manifest.json").read_text())
    assert [r["pool_id"] for r in manifest["info"]["summary"]] == [s["pool_id"] for s in summary]
    text = summary_text([{**s, "pos_mean": s["pos_mean"]} for s in summary])
    assert text.splitlines()[1].startswith("dataset/test/1000/r0")


def test_compact_storage(built: tuple[Path, Path, Corpus]) -> None:
    _, out, _ = built
    schema = pq.read_schema(out / "pools.parquet")
    assert schema.field("pool_id").type == pa.dictionary(pa.int32(), pa.string())
    md = pq.ParquetFile(out / "pools.parquet").metadata
    assert md.row_group(0).column(0).compression == "ZSTD"


def test_byte_identical_across_runs_threads_and_row_order(
    built: tuple[Path, Path, Corpus], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus, out, _ = built
    shuffled = random_corpus(tmp_path / "shuffled", n=3000, seed=1, shuffle=7)
    assert sha256_file(shuffled / "papers.parquet") != sha256_file(corpus / "papers.parquet")
    runs = []
    for threads, src in (("1", corpus), ("2", corpus), ("2", shuffled)):
        monkeypatch.setenv("MDCR_THREADS", threads)
        runs.append(run_pools(tmp_path / f"home{threads}{src.name}", src))
    for f in FILES:
        want = sha256_file(out / f"{f}.parquet")
        assert [sha256_file(r / f"{f}.parquet") for r in runs] == [want] * 3, f


def test_small_field_gets_one_pool_with_all_field_cited(tmp_path: Path) -> None:
    corpus = random_corpus(tmp_path / "c", n=3000, seed=3)
    c = Corpus.read(corpus)
    art = len(c.field_cited("Art"))
    med = len(c.field_cited("Medicine"))
    size = (art + med) // 2
    assert art < size < med
    out = run_pools(tmp_path / "home", corpus, setups=("field",), field_pool_size=size)
    meta = {m["pool_id"]: m for m in rows(out, "pool_meta")}
    art_ids = sorted(i for i in meta if "/Art/" in i)
    assert art_ids == ["field/test/Art/r0", "field/val/Art/r0"]
    for i in art_ids:
        assert meta[i]["all_field_cited"] and meta[i]["n_papers"] == art
        assert meta[i]["size"] == size
    assert set(pools_by_id(out)["field/test/Art/r0"]) == c.field_cited("Art")
    assert not meta["field/test/Medicine/r1"]["all_field_cited"]
    assert meta["field/test/Medicine/r1"]["n_papers"] == size


def test_excluded_ids_are_never_queries(tmp_path: Path) -> None:
    corpus = random_corpus(tmp_path / "c", n=3000, seed=1)
    first = run_pools(tmp_path / "h1", corpus)
    chosen = sorted({q["query_id"] for q in rows(first, "queries")})[::3]
    excl = tmp_path / "exclude.txt"
    excl.write_text("# SPECTER/SciNCL training queries\n" + "\n".join(chosen) + "\n\n")
    second = run_pools(tmp_path / "h1", corpus, exclude_ids=str(excl))
    assert second != first
    again = {q["query_id"] for q in rows(second, "queries")}
    assert not again & set(chosen)
    funnel = json.loads((second / "manifest.json").read_text())["info"]["query_funnel"]
    assert funnel["excluded"] == len(chosen)
    # the list is an input: its content, not its path, is in the fingerprint
    excl.write_text("\n".join(chosen[:-1]) + "\n")
    third = run_pools(tmp_path / "h1", corpus, exclude_ids=str(excl))
    assert third not in (first, second)


def small_graph(folder: Path) -> Path:
    """Query q1..q4 (2019) cite 2..6 papers each; c* are older candidates."""
    papers = [(f"c{i}", 2000 + i % 19, ["Art"]) for i in range(30)]
    papers += [(f"q{i}", 2019, ["Art"]) for i in range(1, 5)]
    cites = [(f"q{i}", f"c{j}") for i in range(1, 5) for j in range(i + 2)]
    return write_corpus(folder, papers, cites)


def test_short_query_set_error_or_warning(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    corpus = small_graph(tmp_path / "c")
    params: dict[str, Any] = {
        "min_cited": 3,
        "n_queries_dataset": 5,
        "dataset_sizes": (20,),
        "repetitions": 1,
        "splits": ("test", "val"),
        "setups": ("dataset",),
    }
    with pytest.raises(InputDataError, match=r"too few eligible queries.*of 5 requested"):
        run_pools(tmp_path / "h", corpus, **params)
    out = run_pools(tmp_path / "h", corpus, on_short_field="warn", **params)
    queries = {q["query_id"] for q in rows(out, "queries")}
    assert queries == {"q1", "q2", "q3", "q4"}  # q1 cites 3, so all are eligible
    info = json.loads((out / "manifest.json").read_text())["info"]
    assert len(info["short_query_sets"]) == 2
    assert sum(s["taken"] for s in info["query_sets"]) == 4


def test_pool_smaller_than_cited_set_is_an_error(tmp_path: Path) -> None:
    corpus = small_graph(tmp_path / "c")
    common: dict[str, Any] = {"min_cited": 1, "repetitions": 1, "setups": ("dataset",)}
    common |= {"n_queries_dataset": 1, "splits": ("test",), "on_short_field": "warn"}
    with pytest.raises(InputDataError, match="more than the pool size 2"):
        run_pools(tmp_path / "h", corpus, dataset_sizes=(2,), **common)
    with pytest.raises(InputDataError, match="fewer than the pool size 100"):
        run_pools(tmp_path / "h", corpus, dataset_sizes=(100,), **common)


def test_bad_inputs_and_config(tmp_path: Path) -> None:
    with pytest.raises(InputDataError, match=r"no papers\.parquet"):
        run_pools(tmp_path / "h", tmp_path)
    with pytest.raises(ConfigError, match="repetitions: must be >= 1"):
        PoolsConfig(corpus="x", repetitions=0).validate()
    with pytest.raises(ConfigError, match="dataset_sizes: has duplicates"):
        PoolsConfig(corpus="x", dataset_sizes=(10, 10)).validate()


def test_shared_ranking_nests_sizes_and_shares_splits(tmp_path: Path) -> None:
    corpus = random_corpus(tmp_path / "c", n=3000, seed=1)
    out = run_pools(tmp_path / "h", corpus, shared_ranking=True, setups=("dataset",))
    pools = {k: set(v) for k, v in pools_by_id(out).items()}
    meta = {m["pool_id"]: m for m in rows(out, "pool_meta")}
    for split in ("val", "test"):
        for rep in (0, 1):
            small, large = (
                pools[f"dataset/{split}/500/r{rep}"],
                pools[f"dataset/{split}/1000/r{rep}"],
            )
            assert small < large and len(small) == 500 and len(large) == 1000
    assert meta["dataset/val/500/r0"]["seed"] == meta["dataset/test/1000/r0"]["seed"]
    assert meta["dataset/val/500/r0"]["seed"] != meta["dataset/val/500/r1"]["seed"]
    assert pools["dataset/test/1000/r0"] != pools["dataset/test/1000/r1"]
    # val and test fills come from one ranking, so they overlap far beyond chance
    qrels = qrels_by_pool(out)
    fill = {
        s: pools[f"dataset/{s}/1000/r0"] - set().union(*qrels[f"dataset/{s}/1000/r0"].values())
        for s in ("val", "test")
    }
    assert len(fill["val"] & fill["test"]) > 0.8 * min(len(fill["val"]), len(fill["test"]))


def test_stage_is_registered_with_plan() -> None:
    from mdcr.core.stage import get_stage

    spec = get_stage("pools")
    assert spec.config is PoolsConfig
    assert spec.plan is not None
    plan = spec.plan(PoolsConfig(corpus="x"), {}, {})
    assert "3800 queries per split" in plan.text and "200 queries x 19 fields" in plan.text
    # Facts for the plans after it: 2 splits x 3,800 + 2 x 19 x 200 queries.
    assert plan.facts is not None and plan.facts.queries == 2 * 3800 + 2 * 19 * 200
    assert plan.facts.field_queries_per_split == 19 * 200
