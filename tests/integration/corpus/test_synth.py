"""Tests of the synthetic S2ORC generator: schema, determinism, graph rules, text signal."""

from __future__ import annotations

import gzip
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mdcr.core.errors import ConfigError
from mdcr.corpus.synth.stage import SynthConfig, write_shards, write_tables
from mdcr.corpus.synth.text import FIELDS, SHORT_ABSTRACTS

SAMPLE = Path(__file__).parents[2] / "data" / "s2orc_sample" / "metadata_sample.jsonl"
N = 4000
SHARDS = 3
SEED = 7

# The 19 MAG fields of the paper's Appendix A.2, spelled as in S2ORC.
MAG_FIELDS = frozenset(
    (
        "Art", "Biology", "Business", "Chemistry", "Computer Science", "Economics",
        "Engineering", "Environmental Science", "Geography", "Geology", "History",
        "Materials Science", "Mathematics", "Medicine", "Philosophy", "Physics",
        "Political Science", "Psychology", "Sociology",
    )
)  # fmt: skip


def json_type(value: Any) -> str:
    """The JSON type of a value; lists with their element types, e.g. list[str]."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, str):
        return "str"
    if isinstance(value, dict):
        return "dict"
    assert isinstance(value, list)
    return "list[" + ",".join(sorted({json_type(v) for v in value})) + "]"


def read_records(folder: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in sorted(folder.glob("metadata_*.jsonl.gz")):
        with gzip.open(path, "rt") as f:
            out.extend(json.loads(line) for line in f)
    return out


def fetch_one(con: Any, sql: str) -> tuple[Any, ...]:
    row = con.execute(sql).fetchone()
    assert row is not None
    return tuple(row)


def passes_prefilter(r: dict[str, Any]) -> bool:
    """The paper's four rules, written independently of the generator."""
    n_cit = len(set(r["outbound_citations"]) | set(r["inbound_citations"]))
    abstract = r["abstract"]
    return (
        r["year"] is not None
        and bool(r["title"])
        and abstract is not None
        and len(abstract) >= 30
        and n_cit >= 3
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("synth")
    summary = write_shards(out, n_papers=N, n_shards=SHARDS, seed=SEED)
    return out, summary


@pytest.fixture(scope="module")
def records(corpus: tuple[Path, dict[str, Any]]) -> list[dict[str, Any]]:
    return read_records(corpus[0])


@pytest.fixture(scope="module")
def by_id(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["paper_id"]: r for r in records}


# ----------------------------------------------------------------------------- shards


def test_shard_files_and_row_counts(corpus: tuple[Path, dict[str, Any]]) -> None:
    out, summary = corpus
    names = sorted(p.name for p in out.iterdir())
    assert names == [f"metadata_{i}.jsonl.gz" for i in range(SHARDS)]  # temp dirs removed
    rows = {}
    for p in out.iterdir():
        with gzip.open(p) as f:
            rows[p.name] = sum(1 for _ in f)
    assert rows == summary["shards"]
    assert sum(rows.values()) == N
    assert max(rows.values()) - min(rows.values()) <= 1


def test_deterministic_bytes_and_seed_changes_output(
    corpus: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    out, _ = corpus
    again = tmp_path / "again"
    write_shards(again, n_papers=N, n_shards=SHARDS, seed=SEED)
    for i in range(SHARDS):
        name = f"metadata_{i}.jsonl.gz"
        assert (out / name).read_bytes() == (again / name).read_bytes()
    other = tmp_path / "other"
    write_shards(other, n_papers=N, n_shards=SHARDS, seed=SEED + 1)
    assert (out / "metadata_0.jsonl.gz").read_bytes() != (
        other / "metadata_0.jsonl.gz"
    ).read_bytes()


def test_s2ag_layout_is_deterministic_and_carries_the_same_records(
    records: list[dict[str, Any]], tmp_path: Path
) -> None:
    for name in ("a", "b"):
        summary = write_shards(tmp_path / name, n_papers=N, n_shards=2, seed=SEED, format="s2ag")
    assert set(summary["shards"]) == {
        f"{d}/{d}-{i}.jsonl.gz" for d in ("papers", "abstracts", "citations") for i in (0, 1)
    }
    for rel in summary["shards"]:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    papers = [
        json.loads(line)
        for i in (0, 1)
        for line in gzip.decompress(
            (tmp_path / "a" / "papers" / f"papers-{i}.jsonl.gz").read_bytes()
        ).splitlines()
    ]
    assert summary["shards"]["papers/papers-0.jsonl.gz"] + summary["shards"][
        "papers/papers-1.jsonl.gz"
    ] == len(records)
    by_id = {str(p["corpusid"]): p for p in papers}
    assert set(by_id) == {r["paper_id"] for r in records}
    for rec in records[:200]:
        paper = by_id[rec["paper_id"]]
        assert paper["title"] == rec["title"] and paper["year"] == rec["year"]
        external = [
            f["category"] for f in paper["s2fieldsofstudy"] or [] if f["source"] == "external"
        ]
        assert external == (rec["mag_field_of_study"] or [])


def test_shard_count_does_not_change_records(records: list[dict[str, Any]], tmp_path: Path) -> None:
    write_shards(tmp_path, n_papers=N, n_shards=1, seed=SEED)
    one = read_records(tmp_path)
    key = lambda r: r["paper_id"]  # noqa: E731
    assert sorted(one, key=key) == sorted(records, key=key)


def test_schema_matches_real_sample(records: list[dict[str, Any]]) -> None:
    real = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    real_keysets = {tuple(r) for r in real}
    real_types: dict[str, set[str]] = {}
    author_types: dict[str, set[str]] = {}
    for r in real:
        for k, v in r.items():
            real_types.setdefault(k, set()).add(json_type(v))
        for a in r["authors"]:
            for k, v in a.items():
                author_types.setdefault(k, set()).add(json_type(v))
    seen_keysets = set()
    for r in records:
        keys = tuple(r)
        assert keys in real_keysets, keys
        seen_keysets.add(keys)
        for k, v in r.items():
            t = json_type(v)
            # An empty list has no element type; the sample has empty lists as well.
            assert t in real_types[k] or (
                t == "list[]" and any(x.startswith("list[") for x in real_types[k])
            ), (k, t, real_types[k])
        for a in r["authors"]:
            assert tuple(a) == ("first", "middle", "last", "suffix")
            for k, v in a.items():
                assert json_type(v) in author_types[k] | {"list[]"}
        assert r["s2_url"] == f"https://api.semanticscholar.org/CorpusID:{r['paper_id']}"
    assert seen_keysets == real_keysets  # both S2ORC layouts (with and without PDF parse)


def test_paper_ids_numeric_and_unique(records: list[dict[str, Any]]) -> None:
    ids = [r["paper_id"] for r in records]
    assert len(set(ids)) == N
    assert all(re.fullmatch(r"[1-9][0-9]{7,9}", i) for i in ids)


def test_citations_consistent(
    records: list[dict[str, Any]], by_id: dict[str, dict[str, Any]]
) -> None:
    out_edges = {(r["paper_id"], c) for r in records for c in r["outbound_citations"]}
    in_edges = {(c, r["paper_id"]) for r in records for c in r["inbound_citations"]}
    assert out_edges == in_edges
    assert len(out_edges) > 10 * N // 2
    for r in records:
        assert len(set(r["outbound_citations"])) == len(r["outbound_citations"])
        assert len(set(r["inbound_citations"])) == len(r["inbound_citations"])
        assert r["paper_id"] not in r["outbound_citations"]
        assert r["has_outbound_citations"] == bool(r["outbound_citations"])
        assert r["has_inbound_citations"] == bool(r["inbound_citations"])
    assert all(c in by_id for _, c in out_edges)
    # The graph is acyclic in pairs: no paper cites a paper that cites it.
    assert not any((c, p) in out_edges for p, c in out_edges)


def test_cited_paper_is_never_newer(
    records: list[dict[str, Any]], by_id: dict[str, dict[str, Any]]
) -> None:
    checked = 0
    for r in records:
        if r["year"] is None:
            continue
        for c in r["outbound_citations"]:
            cy = by_id[c]["year"]
            if cy is not None:
                assert cy <= r["year"], (r["paper_id"], r["year"], c, cy)
                checked += 1
    assert checked > 10_000


def test_citations_are_local_and_heavy_tailed(
    records: list[dict[str, Any]], by_id: dict[str, dict[str, Any]]
) -> None:
    same = total = 0
    for r in records:
        for c in r["outbound_citations"]:
            a, b = r["mag_field_of_study"], by_id[c]["mag_field_of_study"]
            if a and b:
                total += 1
                same += a[0] == b[0]
    # Mostly within the field, some across (small corpora cross fields more often, as
    # duplicate draws in small niches are redrawn at any level).
    assert same / total > 0.65
    assert same / total < 0.98
    indeg = np.sort([len(r["inbound_citations"]) for r in records])[::-1]
    top = indeg[: N // 100].sum() / indeg.sum()
    assert top > 0.08  # top 1% of papers get well over 1% of citations
    assert indeg[0] > 20 * np.median(indeg[indeg > 0])


def test_fields_and_skew(records: list[dict[str, Any]]) -> None:
    counts: Counter[str] = Counter()
    n_null = n_two = 0
    for r in records:
        fs = r["mag_field_of_study"]
        if fs is None:
            n_null += 1
            continue
        assert 1 <= len(fs) <= 2 and len(set(fs)) == len(fs)
        n_two += len(fs) == 2
        counts.update(fs)
    assert set(counts) == MAG_FIELDS == set(FIELDS)
    ranked = [f for f, _ in counts.most_common()]
    assert ranked[0] == "Medicine"
    assert counts["Medicine"] > counts["Biology"] > counts["Mathematics"] > counts["Art"]
    assert set(ranked[-4:]) >= {"Art", "Philosophy"}
    assert counts["History"] < counts["Sociology"]
    assert 0.02 < n_null / N < 0.08
    assert 0.04 < n_two / N < 0.12


def test_years_grow_towards_2019(records: list[dict[str, Any]]) -> None:
    years = Counter(r["year"] for r in records)
    assert 0.005 < years[None] / N < 0.03
    assert min(y for y in years if y is not None) >= 1970
    assert max(y for y in years if y is not None) == 2020
    assert years[2019] > 3 * years[1990] > 0
    assert years[2019] > 0.04 * N


def test_failure_shares(records: list[dict[str, Any]], corpus: tuple[Path, dict[str, Any]]) -> None:
    summary = corpus[1]
    null_year = sum(r["year"] is None for r in records) / N
    empty_title = sum(r["title"] == "" for r in records) / N
    bad_abstract = sum(r["abstract"] is None or len(r["abstract"]) < 30 for r in records) / N
    short = [
        r["abstract"] for r in records if r["abstract"] is not None and len(r["abstract"]) < 30
    ]
    few_cit = (
        sum(len(set(r["outbound_citations"]) | set(r["inbound_citations"])) < 3 for r in records)
        / N
    )
    assert abs(null_year - 0.015) < 0.008
    assert abs(empty_title - 0.01) < 0.006
    assert abs(bad_abstract - 0.43) < 0.04
    assert 0.08 < few_cit < 0.35
    assert set(short) <= set(SHORT_ABSTRACTS) and len(short) > 0.01 * N
    shares = summary["failure_shares"]
    assert shares["null_year"] == round(null_year, 4)
    assert shares["empty_title"] == round(empty_title, 4)
    assert shares["abstract_under_30"] == round(bad_abstract, 4)
    assert shares["under_3_citations"] == round(few_cit, 4)
    n_pass = sum(passes_prefilter(r) for r in records)
    assert summary["n_prefiltered"] == n_pass
    assert 0.3 * N < n_pass < 0.7 * N


def test_prefiltered_2019_papers_cite_20_to_30_prefiltered(
    records: list[dict[str, Any]],
    by_id: dict[str, dict[str, Any]],
    corpus: tuple[Path, dict[str, Any]],
) -> None:
    ok = {r["paper_id"] for r in records if passes_prefilter(r)}
    queries = [r for r in records if r["paper_id"] in ok and r["year"] == 2019]
    cited = [sum(c in ok for c in r["outbound_citations"]) for r in queries]
    mean = sum(cited) / len(queries)
    assert corpus[1]["prefiltered_2019"] == len(queries)
    assert corpus[1]["mean_prefiltered_refs_per_prefiltered_2019"] == round(mean, 3)
    assert 18 <= mean <= 32


def test_text_lengths_like_real_abstracts(records: list[dict[str, Any]]) -> None:
    full = [r["abstract"] for r in records if r["abstract"] and len(r["abstract"]) >= 30]
    chars = np.array([len(a) for a in full])
    words = np.array([len(a.split()) for a in full])
    assert 800 < np.median(chars) < 1300
    assert 120 < np.median(words) < 220
    assert np.percentile(chars, 95) > 1.6 * np.median(chars)  # a long tail
    title_words = np.array([len(r["title"].split()) for r in records if r["title"]])
    assert np.mean((title_words >= 6) & (title_words <= 15)) > 0.9


_TOKEN = re.compile(r"[a-z][a-z0-9\-]+")
_STOP = frozenset(
    (
        "the", "of", "and", "in", "a", "an", "to", "for", "on", "with", "is", "are", "was",
        "were", "by", "that", "this", "we", "our", "from", "as", "be", "its", "their", "these",
        "has", "have", "between", "which", "while", "using", "based",
    )
)  # fmt: skip


def _tfidf(texts: list[str]) -> list[dict[str, float]]:
    """L2-normalised TF-IDF vectors, computed with collections and math only."""
    docs = [Counter(t for t in _TOKEN.findall(x.lower()) if t not in _STOP) for x in texts]
    df: Counter[str] = Counter()
    for d in docs:
        df.update(d.keys())
    n = len(docs)
    vecs = []
    for d in docs:
        v = {t: (1 + math.log(c)) * math.log(n / df[t]) for t, c in d.items()}
        norm = math.sqrt(sum(x * x for x in v.values())) or 1.0
        vecs.append({t: x / norm for t, x in v.items()})
    return vecs


def _cos(a: dict[str, float], b: dict[str, float]) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(x * b.get(t, 0.0) for t, x in a.items())


def test_cited_abstracts_are_topically_similar(
    records: list[dict[str, Any]], by_id: dict[str, dict[str, Any]]
) -> None:
    ok = [r for r in records if passes_prefilter(r)]
    ids = [r["paper_id"] for r in ok]
    pos = {pid: i for i, pid in enumerate(ids)}
    vecs = _tfidf([r["title"] + " " + r["abstract"] for r in ok])
    cited_sims = [
        _cos(vecs[pos[r["paper_id"]]], vecs[pos[c]])
        for r in ok
        if r["year"] == 2019
        for c in r["outbound_citations"]
        if c in pos
    ]
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, len(ok), size=(len(cited_sims), 2))
    random_sims = [_cos(vecs[i], vecs[j]) for i, j in pairs if i != j]
    assert len(cited_sims) > 1000
    mean_cited, mean_random = float(np.mean(cited_sims)), float(np.mean(random_sims))
    assert mean_cited > 4 * mean_random
    assert mean_cited - mean_random > 0.1
    # Retrieval view: for a query, its cited papers outrank random papers most of the time.
    wins = [c > r for c, r in zip(cited_sims, random_sims, strict=False)]
    assert np.mean(wins) > 0.75


def test_duckdb_reads_shards(corpus: tuple[Path, dict[str, Any]]) -> None:
    import duckdb

    out = corpus[0]
    con = duckdb.connect()
    glob = str(out / "metadata_*.jsonl.gz")
    n, n_year, n_abs, n_out = fetch_one(
        con,
        "SELECT count(*), count(year), count(abstract), sum(len(outbound_citations)) "
        f"FROM read_json('{glob}')",
    )
    assert n == N
    assert n_year == N - corpus[1]["papers_per_year"]["null"]
    assert n_out == corpus[1]["n_edges"]
    assert n_abs > 0.55 * N
    ours = dict(
        row[:2] for row in con.execute(f"DESCRIBE SELECT * FROM read_json('{glob}')").fetchall()
    )
    real = dict(
        row[:2] for row in con.execute(f"DESCRIBE SELECT * FROM read_json('{SAMPLE}')").fetchall()
    )
    assert set(ours) == set(real)
    for col in (
        "paper_id", "title", "authors", "abstract", "year", "mag_field_of_study",
        "outbound_citations", "inbound_citations", "has_outbound_citations", "has_pdf_parse",
        "has_pdf_parsed_abstract", "s2_url", "doi", "journal", "acl_id",
    ):  # fmt: skip
        assert ours[col] == real[col], col


# ----------------------------------------------------------------------------- config


def test_config_validation(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="n_shards"):
        SynthConfig(n_papers=10, n_shards=11).validate()
    with pytest.raises(ConfigError, match="no_abstract_share"):
        SynthConfig(no_abstract_share=1.5).validate()
    with pytest.raises(ConfigError, match="p_niche"):
        SynthConfig(p_niche=0.6, p_topic=0.3, p_field=0.2).validate()
    with pytest.raises(ConfigError, match="unknown knob 'bogus'"):
        write_shards(tmp_path, n_papers=100, n_shards=1, seed=0, bogus=1)
    SynthConfig().validate()


def test_knobs_change_failure_shares(tmp_path: Path) -> None:
    summary = write_shards(
        tmp_path, n_papers=2000, n_shards=1, seed=1, null_year_share=0.2, no_abstract_share=0.1
    )
    recs = read_records(tmp_path)
    assert abs(sum(r["year"] is None for r in recs) / 2000 - 0.2) < 0.03
    assert abs(sum(r["abstract"] is None for r in recs) / 2000 - 0.1) < 0.03
    assert summary["failure_shares"]["null_year"] == round(
        sum(r["year"] is None for r in recs) / 2000, 4
    )


def test_stage_writes_manifest(tmp_path: Path) -> None:
    from mdcr.core.stage import get_stage
    from mdcr.core.store import Store

    spec = get_stage("synth")
    cfg = SynthConfig(n_papers=600, n_shards=2, seed=3)
    art = Store(tmp_path).execute(spec, cfg, {}, quiet=True)
    manifest = json.loads((art.path / "manifest.json").read_text())
    assert set(manifest["outputs"]) == {"metadata_0.jsonl.gz", "metadata_1.jsonl.gz"}
    assert sum(o["rows"] for o in manifest["outputs"].values()) == 600
    assert manifest["info"]["summary"]["n_papers"] == 600
    assert not [p for p in art.path.iterdir() if p.name.startswith(".")]


# ----------------------------------------------------------------------------- tables


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("tables")
    return out, write_tables(out, n_papers=5000, seed=11)


def test_tables_contract_types(tables: tuple[Path, dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out, _ = tables
    papers = pq.read_table(out / "papers.parquet")
    cits = pq.read_table(out / "citations.parquet")
    assert papers.schema.names == [
        "paper_id", "title", "abstract", "year", "fields", "n_out", "n_in",
    ]  # fmt: skip
    assert papers.schema.field("paper_id").type == pa.string()
    assert papers.schema.field("year").type == pa.int64()
    assert papers.schema.field("fields").type == pa.list_(pa.string())
    assert papers.schema.field("n_in").type == pa.int64()
    assert cits.schema.names == ["citing_id", "cited_id"]
    assert all(cits.schema.field(c).type == pa.string() for c in cits.schema.names)
    assert papers.num_rows == 5000
    assert papers.column("paper_id").null_count == 0
    assert len(set(papers.column("paper_id").to_pylist())) == 5000
    assert set(papers.column("abstract").to_pylist()) == {""}  # with_text=False
    fields = {f for fs in papers.column("fields").to_pylist() for f in fs}
    assert fields == set(FIELDS)


def test_tables_counts_match_edges_and_rules(tables: tuple[Path, dict[str, Any]]) -> None:
    import duckdb

    out, summary = tables
    con = duckdb.connect()
    p, c = out / "papers.parquet", out / "citations.parquet"
    n_edges, n_distinct = fetch_one(
        con, f"SELECT count(*), count(DISTINCT (citing_id, cited_id)) FROM '{c}'"
    )
    assert n_edges == n_distinct == summary["n_edges"]
    bad_counts = fetch_one(
        con,
        f"""
        WITH o AS (SELECT citing_id AS id, count(*) AS k FROM '{c}' GROUP BY 1),
             i AS (SELECT cited_id AS id, count(*) AS k FROM '{c}' GROUP BY 1)
        SELECT count(*) FROM '{p}' p LEFT JOIN o ON o.id = p.paper_id
            LEFT JOIN i ON i.id = p.paper_id
        WHERE p.n_out != coalesce(o.k, 0) OR p.n_in != coalesce(i.k, 0)
    """,
    )[0]
    assert bad_counts == 0
    dangling, newer, self_loops, mutual = fetch_one(
        con,
        f"""
        SELECT count(*) FILTER (WHERE a.paper_id IS NULL OR b.paper_id IS NULL),
               count(*) FILTER (WHERE b.year > a.year),
               count(*) FILTER (WHERE c.citing_id = c.cited_id),
               (SELECT count(*) FROM '{c}' x JOIN '{c}' y
                  ON x.citing_id = y.cited_id AND x.cited_id = y.citing_id)
        FROM '{c}' c LEFT JOIN '{p}' a ON a.paper_id = c.citing_id
                     LEFT JOIN '{p}' b ON b.paper_id = c.cited_id
    """,
    )
    assert (dangling, newer, self_loops, mutual) == (0, 0, 0, 0)
    min_cit, year_nulls, mean_out_2019, mean_out_1990 = fetch_one(
        con,
        f"""
        SELECT min(n_in + n_out), count(*) - count(year),
               avg(n_out) FILTER (WHERE year = 2019), avg(n_out) FILTER (WHERE year <= 1990)
        FROM '{p}'
    """,
    )
    assert min_cit >= 3 and year_nulls == 0
    assert 20 <= mean_out_2019 <= 30
    assert mean_out_1990 < 0.7 * mean_out_2019


def test_tables_with_text_and_determinism(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    write_tables(tmp_path / "a", n_papers=1500, seed=2, with_text=True)
    write_tables(tmp_path / "b", n_papers=1500, seed=2, with_text=True)
    for name in ("papers.parquet", "citations.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    papers = pq.read_table(tmp_path / "a" / "papers.parquet").to_pylist()
    assert all(len(r["abstract"]) >= 30 and r["title"] for r in papers)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [
        "citations.parquet", "papers.parquet",
    ]  # fmt: skip
