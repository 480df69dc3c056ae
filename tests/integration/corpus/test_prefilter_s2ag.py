"""Prefilter on an S2AG release: same outputs as from S2ORC, and the S2AG-specific rules.

Expected counts are written out by hand from the records each test builds.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from mdcr.core.errors import InputDataError
from mdcr.corpus.formats.s2ag_write import rewrite_s2orc
from mdcr.corpus.prefilter import output as prefilter_output
from mdcr.corpus.prefilter.stage import PrefilterConfig, prefilter_corpus
from mdcr.corpus.synth.stage import write_shards

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "s2orc_sample" / "metadata_sample.jsonl"
ABSTRACT = "An abstract that is long enough to pass the thirty character rule."


def run(folder: Path, out: Path, **cfg: Any) -> Any:
    return prefilter_corpus(folder, out, PrefilterConfig(input=str(folder), **cfg))


def write_lines(path: Path, records: list[Any]) -> Path:
    raw = b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in records)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(raw) if path.name.endswith(".gz") else raw)
    return path


def release(folder: Path, papers: list[Any], abstracts: list[Any], citations: list[Any]) -> Path:
    write_lines(folder / "papers" / "papers-0.jsonl.gz", papers)
    write_lines(folder / "abstracts" / "abstracts-0.jsonl.gz", abstracts)
    write_lines(folder / "citations" / "citations-0.jsonl.gz", citations)
    return folder


def paper(cid: Any, *, fos: Any = "Medicine", **kw: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "corpusid": cid,
        "title": f"Title of {cid}",
        "year": 2010,
        "s2fieldsofstudy": (
            [{"category": fos, "source": "external"}] if isinstance(fos, str) else fos
        ),
    }
    rec.update(kw)
    return rec


def abstract(cid: Any, text: str = ABSTRACT) -> dict[str, Any]:
    return {"corpusid": cid, "abstract": text}


def edge(a: Any, b: Any) -> dict[str, Any]:
    return {"citingcorpusid": a, "citedcorpusid": b, "isinfluential": False}


def tables(out: Path) -> tuple[Any, Any]:
    return pq.read_table(out / "papers.parquet"), pq.read_table(out / "citations.parquet")


# --------------------------------------------------------------------------- both layouts


def test_synthetic_corpus_gives_identical_outputs_from_both_layouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small row groups and edge batches, so that the S2AG path streams its sorted edges
    # over many batches, each cut across row groups.
    monkeypatch.setattr(prefilter_output, "ROW_GROUP", 1000)
    monkeypatch.setattr(prefilter_output, "EDGE_BATCH", 777)
    write_shards(tmp_path / "s2orc", n_papers=3000, n_shards=3, seed=4)
    summary = write_shards(tmp_path / "s2ag", n_papers=3000, n_shards=3, seed=4, format="s2ag")
    assert sorted(summary["shards"])[0] == "abstracts/abstracts-0.jsonl.gz"
    a = run(tmp_path / "s2orc", tmp_path / "out-a")
    b = run(tmp_path / "s2ag", tmp_path / "out-b")
    assert a.funnel["format"] == "s2orc" and b.funnel["format"] == "s2ag"
    papers_a, edges_a = tables(tmp_path / "out-a")
    papers_b, edges_b = tables(tmp_path / "out-b")
    assert papers_a.num_rows > 1000 and edges_a.num_rows > 5000
    assert papers_a.equals(papers_b)
    assert edges_a.equals(edges_b)
    for out in ("out-a", "out-b"):
        meta = pq.ParquetFile(tmp_path / out / "citations.parquet").metadata
        sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
        assert set(sizes[:-1]) == {1000} and 0 < sizes[-1] <= 1000
    for key in ("records_read", "unique_papers", "removed_by_rule", "survivors"):
        assert a.funnel[key] == b.funnel[key]
    cites = b.funnel["s2ag"]["citations"]
    # The synthetic release has unresolved references (a null id), counted exactly as the
    # files hold them, and ids written as strings.
    edges = [
        json.loads(line)
        for path in sorted((tmp_path / "s2ag" / "citations").glob("*.jsonl.gz"))
        for line in gzip.decompress(path.read_bytes()).decode().splitlines()
    ]
    nulls = sum(1 for e in edges if e["citingcorpusid"] is None or e["citedcorpusid"] is None)
    assert cites["records_read"] == len(edges) and cites["unresolved_null_id"] == nulls > 0
    assert cites["resolved"] + cites["unresolved_null_id"] == cites["records_read"]


def test_synthetic_s2_model_fields_add_categories(tmp_path: Path) -> None:
    write_shards(tmp_path / "s2ag", n_papers=2000, n_shards=1, seed=2, format="s2ag")
    run(tmp_path / "s2ag", tmp_path / "ext")
    run(tmp_path / "s2ag", tmp_path / "both", field_sources=("external", "s2-fos-model"))
    ext = pq.read_table(tmp_path / "ext" / "papers.parquet").to_pylist()
    both = pq.read_table(tmp_path / "both" / "papers.parquet").to_pylist()
    assert [p["paper_id"] for p in ext] == [p["paper_id"] for p in both]
    # The S2 model's labels extend, never reorder, the MAG ones; some are S2-only.
    pairs = list(zip(ext, both, strict=True))
    assert all(b["fields"][: len(e["fields"])] == e["fields"] for e, b in pairs)
    assert any(len(b["fields"]) > len(e["fields"]) for e, b in pairs)
    assert any("Education" in b["fields"] or "Law" in b["fields"] for b in both)


def sample_edges() -> tuple[set[tuple[str, str]], set[str]]:
    """The sample's distinct (citing, cited) pairs from both lists, and its paper ids
    (parsed with ``json``, independently of the SQL under test)."""
    with SAMPLE.open() as f:
        recs = [json.loads(line) for line in f]
    pairs = {(r["paper_id"], q) for r in recs for q in r["outbound_citations"] or []}
    pairs |= {(q, r["paper_id"]) for r in recs for q in r["inbound_citations"] or []}
    return pairs, {r["paper_id"] for r in recs}


@pytest.mark.parametrize(("shards", "stubs"), [(1, False), (2, False), (1, True)])
def test_real_sample_gives_the_same_papers_and_edges_from_both_layouts(
    tmp_path: Path, shards: int, stubs: bool
) -> None:
    """The 1,000 real records as an S2AG release, with every edge of their lists: the ids
    outside the sample have no papers record (as in a release downloaded in part) or, with
    ``stubs``, a bare one (as in a complete release). Citations count the same either way."""
    src = tmp_path / "s2orc"
    src.mkdir()
    shutil.copy(SAMPLE, src / "metadata_sample.jsonl")
    rewrite_s2orc([src / "metadata_sample.jsonl"], tmp_path / "s2ag", n_shards=shards, stubs=stubs)
    a = run(src, tmp_path / "out-a")
    b = run(tmp_path / "s2ag", tmp_path / "out-b")
    papers_a, edges_a = tables(tmp_path / "out-a")
    papers_b, edges_b = tables(tmp_path / "out-b")
    assert papers_a.num_rows == 183  # the sample's count (test_prefilter)
    if shards == 1:  # the same file order: the same bytes
        for name in ("papers.parquet", "citations.parquet"):
            assert (tmp_path / "out-a" / name).read_bytes() == (
                tmp_path / "out-b" / name
            ).read_bytes()
    else:  # records spread over two files: the same rows in another order
        key = "paper_id"
        assert papers_a.sort_by(key).equals(papers_b.sort_by(key))
        assert sorted(edges_a.to_pylist(), key=str) == sorted(edges_b.to_pylist(), key=str)
    pairs, ids = sample_edges()
    n_stubs = len({x for p in pairs for x in p} - ids) if stubs else 0  # bare: no year
    removed = dict(b.funnel["removed_by_rule"], year=b.funnel["removed_by_rule"]["year"] - n_stubs)
    assert a.funnel["removed_by_rule"] == removed
    assert a.funnel["removed_by_rule"]["citations"] == 305
    assert b.funnel["survivors"] == a.funnel["survivors"] == 183
    inside = {(c, d) for c, d in pairs if c in ids and d in ids}
    cites = b.funnel["s2ag"]["citations"]
    assert len(inside) == 4 and all(c == d for c, d in inside)  # self-citations only
    assert edges_a.num_rows == 0  # no edge between two survivors
    if stubs:  # every id has a papers record
        assert cites["resolved"] == len(pairs) == 6062 and cites["one_id_outside"] == 0
    else:
        assert cites["resolved"] == 4
        assert cites["one_id_outside"] == len(pairs) - len(inside) == 6058
    assert cites["neither_id_a_paper"] == 0
    assert b.funnel["records_read"] == 1000 + n_stubs
    assert b.funnel["s2ag"]["abstracts"]["without_paper"] == 0


def test_a_release_in_part_keeps_what_the_same_records_keep_as_s2orc(tmp_path: Path) -> None:
    """Two thirds of a synthetic corpus, in both layouts: the S2AG edges to the missing
    third have no papers record and still count, as the S2ORC lists do."""
    write_shards(tmp_path / "full", n_papers=3000, n_shards=1, seed=5)
    with gzip.open(tmp_path / "full" / "metadata_0.jsonl.gz", "rt") as f:
        kept = [line for i, line in enumerate(f) if i % 3]
    (tmp_path / "s2orc").mkdir()
    (tmp_path / "s2orc" / "metadata_0.jsonl").write_text("".join(kept))
    rewrite_s2orc([tmp_path / "s2orc" / "metadata_0.jsonl"], tmp_path / "s2ag")
    a = run(tmp_path / "s2orc", tmp_path / "out-a")
    b = run(tmp_path / "s2ag", tmp_path / "out-b")
    for name in ("papers.parquet", "citations.parquet"):
        assert (tmp_path / "out-a" / name).read_bytes() == (tmp_path / "out-b" / name).read_bytes()
    assert a.funnel["removed_by_rule"] == b.funnel["removed_by_rule"]
    cites = b.funnel["s2ag"]["citations"]
    assert cites["one_id_outside"] > 1000 and a.n_citations > 1000
    assert a.n_papers == b.n_papers > 500


# --------------------------------------------------------------------------- S2AG rules


def test_edges_ids_abstracts_and_duplicates(tmp_path: Path) -> None:
    papers = [paper(i) for i in range(1, 7)] + [paper(3, title="3 again")]
    abstracts = [abstract(i) for i in (1, 2, 3, 4, 5)] + [abstract(1, "short"), abstract(99)]
    citations = [
        edge(1, 2),
        edge(1, "3"),  # a string id is the same paper as the number
        edge("1", 4),
        edge(1, 2),  # a repeat counts once
        edge(2, 1),
        edge(5, None),  # unresolved
        edge(None, 5),
        edge(5, 12345),  # an id without a papers record: counts for paper 5
        edge(5, "12345"),  # a repeat counts once
        edge(12345, 4),  # counts for paper 4 (cited by 12345)
        edge(777, 888),  # neither id a paper: counts for no paper
        edge(5, 2),
        edge(5, 3),
        edge(6, 1),
        edge(6, 2),
        edge(6, 3),
    ]
    f = run(release(tmp_path / "rel", papers, abstracts, citations), tmp_path / "out").funnel
    s2 = f["s2ag"]
    assert s2["citations"] == {
        "records_read": 16,
        "malformed_skipped": 0,
        "unresolved_null_id": 2,
        "neither_id_a_paper": 1,
        "duplicates_dropped": 2,
        "resolved": 9,
        "one_id_outside": 2,
        "outside_examples": ["5 -> 12345", "5 -> 12345", "12345 -> 4"],
    }
    assert s2["abstracts"]["without_paper"] == 1
    assert s2["abstracts"]["without_paper_examples"] == ["99"]
    assert s2["abstracts"]["duplicates_dropped"] == 1  # the first abstract of 1 is kept
    assert s2["papers_without_abstract"] == 1  # paper 6
    assert f["duplicates_dropped"] == 1 and f["duplicate_examples"] == ["3"]
    # Distinct citations (out + in) over every non-null id: 1: 3 + 2, 2: 1 + 3, 3: 0 + 3
    # and 5: {2, 3, 12345} + 0 pass; 4: 0 + {1, 12345} fails; 6 has no abstract.
    assert f["removed_by_rule"]["abstract"] == 1 and f["removed_by_rule"]["citations"] == 1
    papers_out, edges_out = tables(tmp_path / "out")
    got = {r["paper_id"]: (r["n_out"], r["n_in"]) for r in papers_out.to_pylist()}
    # n_out / n_in count the edges between survivors, as citations.parquet holds them
    assert got == {"1": (2, 1), "2": (1, 2), "3": (0, 2), "5": (2, 0)}
    assert papers_out.schema.field("paper_id").type == "string"
    pairs = [("1", "2"), ("1", "3"), ("2", "1"), ("5", "2"), ("5", "3")]
    assert edges_out.to_pylist() == [{"citing_id": c, "cited_id": d} for c, d in pairs]


def test_field_sources(tmp_path: Path) -> None:
    fos = [
        {"category": "Medicine", "source": "external"},
        {"category": "Medicine", "source": "s2-fos-model"},
        {"category": "Education", "source": "s2-fos-model"},
        {"category": "Biology", "source": "external"},
    ]
    papers = [paper(1, fos=fos), paper(2, fos=None), paper(3, fos=[])]
    abstracts = [abstract(i) for i in (1, 2, 3)]
    citations = [edge(i, j) for i in (1, 2, 3) for j in (1, 2, 3) if i != j]
    rel = release(tmp_path / "rel", papers, abstracts, citations)

    def fields(**cfg: Any) -> list[list[str]]:
        out = tmp_path / f"out-{len(list(tmp_path.iterdir()))}"
        run(rel, out, **cfg)
        return [r["fields"] for r in pq.read_table(out / "papers.parquet").to_pylist()]

    assert fields() == [["Medicine", "Biology"], [], []]
    assert fields(field_sources=("s2-fos-model",)) == [["Medicine", "Education"], [], []]
    both = fields(field_sources=("external", "s2-fos-model"))
    assert both == [["Medicine", "Education", "Biology"], [], []]


def test_malformed_s2ag_records_are_counted_by_reason(tmp_path: Path) -> None:
    papers = [
        paper(1),
        paper(""),
        paper("007"),
        paper("abc"),
        paper(-4),
        paper(2, year=-1),
        paper(3, s2fieldsofstudy=["Medicine"]),
        paper(4, s2fieldsofstudy=[{"category": 5, "source": "external"}]),
        paper(99999999999999999999),
        {"title": "no id"},
    ]
    citations = [
        edge(1, 1),
        edge("x", 1),
        edge(1, 2.5),
        {"cites": 1},
        b'{"citingcorpusid": -0, "citedcorpusid": 1}',  # read as 0
        b'{"citingcorpusid": 1E2, "citedcorpusid": 1}',
        b'{"citingcorpusid": 1, "citedcorpusid": 1.0}',
        edge("0", 0),  # valid ids, paper 0 unknown
    ]
    rel = release(
        tmp_path / "rel", papers, [abstract(1), {"corpusid": 1, "abstract": 7}], citations
    )
    f = run(rel, tmp_path / "out", max_reported_errors=50).funnel
    want_papers = {
        "papers: corpusid is empty": 1,
        "papers: corpusid is not an integer id (a number or a string of digits)": 3,
        "papers: year is negative": 1,
        "papers: s2fieldsofstudy is not a list of {category, source} objects or null": 2,
        "papers: corpusid is out of the 64-bit integer range": 1,
        "papers: corpusid is missing": 1,
    }
    reasons = f["malformed_by_reason"]
    assert {k: v for k, v in reasons.items() if k.startswith("papers:")} == want_papers
    assert reasons["abstracts: abstract is not a string or null"] == 1
    # The scan's fast path for plain integers and the full checks agree: "x", 1E2 (read as
    # 100.0), 2.5 and 1.0 are not integer ids; DuckDB reads -0 as 0, a valid id.
    not_id = "is not an integer id (a number or a string of digits)"
    assert reasons[f"citations: citingcorpusid {not_id}"] == 2
    assert reasons[f"citations: citedcorpusid {not_id}"] == 2
    assert f["malformed_skipped"] == 9  # the papers dataset's: the funnel's step
    # The totals take every dataset: 10 papers, 2 abstracts and 8 citation lines.
    assert f["lines_read"] == 10 + 2 + 8
    assert f["malformed_lines"] == 9 + 1 + 5 == sum(reasons.values())
    assert f["s2ag"]["citations"]["malformed_skipped"] == 5
    cites = f["s2ag"]["citations"]  # paper 0 has no record: 0 -> 1 counts for 1, 0 -> 0 not
    assert cites["one_id_outside"] == 1 and cites["neither_id_a_paper"] == 1
    assert len(f["malformed_examples"]) == 9 + 1 + 5
    assert f["malformed_examples"][0].endswith("papers-0.jsonl.gz:2: corpusid is empty")


@pytest.mark.parametrize("missing", ["papers", "abstracts", "citations"])
def test_a_missing_dataset_folder_is_a_one_line_error(tmp_path: Path, missing: str) -> None:
    rel = release(tmp_path / "rel", [paper(1)], [abstract(1)], [edge(1, 1)])
    shutil.rmtree(rel / missing)
    with pytest.raises(InputDataError) as err:
        run(rel, tmp_path / "out")
    msg = str(err.value)
    assert f"has no {missing}/ folder" in msg and str(rel) in msg
    assert "\n" not in msg


def test_format_s2ag_on_an_s2orc_folder_names_the_missing_folder(tmp_path: Path) -> None:
    write_lines(tmp_path / "in" / "metadata_0.jsonl", [{"paper_id": "1"}])
    with pytest.raises(InputDataError, match="has no papers/ folder"):
        run(tmp_path / "in", tmp_path / "out", format="s2ag")
