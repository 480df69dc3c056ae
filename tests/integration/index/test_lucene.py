"""mdcr's Lucene indexes: real-text search, the run contract's tie rule, determinism, limits."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mdcr.core.errors import InputDataError


def _build(path: Path, ids: list[str], texts: list[str], threads: int = 2) -> dict:  # type: ignore[type-arg]
    from mdcr.index.lucene.indexes import Doc, build_index

    order = sorted(range(len(ids)), key=lambda i: ids[i])
    return build_index(
        path,
        [ids[i] for i in order],
        [Doc(ids, texts)],
        meta={},
        threads=threads,
    )


def test_search_real_text_excludes_the_query_and_ranks_it_first_otherwise(
    sample_index: Path, s2orc_papers: list
) -> None:  # type: ignore[type-arg]
    from mdcr.index.lucene.indexes import open_index

    queries = s2orc_papers[:40]
    with open_index(sample_index) as index:
        assert index.meta["n_docs"] == 488
        built, _ = index.build_queries([q.paper_id for q in queries], [q.text for q in queries])
        excluded = index.search(built, 25, k1=0.9, b=0.4, exclude=[q.paper_id for q in queries])
        kept = index.search(built, 25, k1=0.9, b=0.4)
    for q, (ids, scores), (ids_all, _) in zip(queries, excluded, kept, strict=True):
        assert len(ids) == 25 and q.paper_id not in ids
        assert ids_all[0] == q.paper_id  # a paper is its own best match
        others = [i for i in ids_all.tolist() if i != q.paper_id]
        assert ids.tolist()[:24] == others[:24]
        assert np.all(np.diff(scores) <= 0)
        assert scores.dtype == np.float64


def test_ties_break_by_paper_id_also_at_the_cut(lucene_jvm: object, tmp_path: Path) -> None:
    """Identical texts score the same; the k kept are the smallest paper ids, in order."""
    from mdcr.index.lucene.indexes import open_index
    from mdcr.index.runs import rank_candidates

    dup = "Graphene oxide membranes\nWater permeation through graphene oxide membranes."
    ids = ["p9", "p3", "p7", "p1", "p5", "p2", "p8"]  # inserted out of order
    texts = [dup] * 6 + ["Protein folding kinetics in membranes."]
    path = tmp_path / "ties"
    _build(path, ids, texts)
    with open_index(path) as index:
        built, _ = index.build_queries(["q"], ["graphene oxide membranes"])
        ((got, scores),) = index.search(built, 4, k1=0.9, b=0.4, exclude=["p2"])
        ((all_ids, all_scores),) = index.search(built, 10, k1=0.9, b=0.4)
    assert len(set(scores.tolist())) == 1  # a six-way tie
    assert got.tolist() == ["p1", "p3", "p5", "p7"]  # p2 excluded, p8/p9 past the cut
    assert all_ids.tolist() == ["p1", "p2", "p3", "p5", "p7", "p9", "p8"]
    # Identical to the ordering every retriever uses.
    re_ids, re_scores = rank_candidates(all_ids[::-1], all_scores[::-1], k=4, exclude="p2")
    assert re_ids.tolist() == got.tolist() and re_scores.tolist() == scores.tolist()


def test_index_and_search_are_the_same_whatever_the_thread_count(
    lucene_jvm: object, s2orc_papers: list, tmp_path: Path
) -> None:  # type: ignore[type-arg]
    from mdcr.index.lucene.indexes import open_index

    papers = s2orc_papers[:200]
    ids, texts = [p.paper_id for p in papers], [p.text for p in papers]
    results = []
    for threads in (1, 2, 4):
        order = ids[::-1] if threads == 1 else ids  # insertion order must not matter either
        _build(tmp_path / f"t{threads}", order, [texts[ids.index(i)] for i in order], threads)
        with open_index(tmp_path / f"t{threads}") as index:
            built, _ = index.build_queries(ids[:40], texts[:40])
            results.append(
                index.search(built, 50, k1=1.2, b=0.75, exclude=ids[:40], threads=threads)
            )
    for other in results[1:]:
        for (a_ids, a_sc), (b_ids, b_sc) in zip(results[0], other, strict=True):
            assert a_ids.tolist() == b_ids.tolist()
            assert a_sc.tolist() == b_sc.tolist()  # bit-identical


def test_bm25_parameters_apply_at_search_time(sample_index: Path, s2orc_papers: list) -> None:  # type: ignore[type-arg]
    from mdcr.index.lucene.indexes import open_index

    q = s2orc_papers[5]
    with open_index(sample_index) as index:
        built, _ = index.build_queries([q.paper_id], [q.text])
        ((_, s1),) = index.search(built, 5, k1=0.9, b=0.4)
        ((_, s2),) = index.search(built, 5, k1=1.5, b=1.0)
        ((_, s3),) = index.search(built, 5, k1=0.9, b=0.4)
    assert s1.tolist() == s3.tolist()
    assert s1.tolist() != s2.tolist()


def test_index_metadata_and_atomic_reuse(lucene_jvm: object, tmp_path: Path) -> None:
    from mdcr.index.lucene.indexes import (
        IDS_FILE,
        META_FILE,
        index_fingerprint,
        open_index,
        read_index_meta,
    )

    ids, texts = ["b", "a", "c"], ["beta text", "alpha text", "gamma text"]
    fp = index_fingerprint(sorted(ids), "raw:corpus")
    assert fp == index_fingerprint(["a", "b", "c"], "raw:corpus")
    assert fp != index_fingerprint(["a", "b"], "raw:corpus")
    assert fp != index_fingerprint(["a", "b", "c"], "raw:other")
    path = tmp_path / fp
    meta = _build(path, ids, texts)
    assert meta["n_docs"] == 3 and (path / IDS_FILE).is_file()
    assert read_index_meta(path) == json.loads((path / META_FILE).read_text())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left
    # A second build of the same index (another process finished first) keeps the first:
    # the same metadata, the same files byte for byte, and the first texts searched (the
    # second call's texts, all "zeta", are never read).
    files = {p.name: p.read_bytes() for p in path.iterdir()}
    again = _build(path, ids, ["zeta"] * 3)
    assert again == meta and read_index_meta(path) == meta
    assert {p.name: p.read_bytes() for p in path.iterdir()} == files
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    with open_index(path) as index:
        built, _ = index.build_queries(["q"], ["alpha"])
        ((hits, _),) = index.search(built, 3, k1=0.9, b=0.4)
    assert [str(h) for h in hits] == ["a"]


def test_the_progress_callback_counts_every_document(lucene_jvm: object, tmp_path: Path) -> None:
    """The indexing bar ends at its total: the first document (added alone, before the
    threads start) is reported too."""
    from mdcr.index.lucene.indexes import Doc, build_index

    ids = [f"p{i:03d}" for i in range(600)]
    moved: list[int] = []
    texts = [f"paper {i} about topic {i % 7}" for i in range(600)]
    docs = [Doc(ids[:250], texts[:250]), Doc(ids[250:], texts[250:])]
    build_index(tmp_path / "x", ids, docs, meta={}, threads=2, progress=moved.append)
    assert sum(moved) == 600


def test_missing_text_and_unknown_ids_are_errors(lucene_jvm: object, tmp_path: Path) -> None:
    from mdcr.index.lucene.indexes import Doc, build_index

    with pytest.raises(InputDataError, match="got 1 documents for 2 paper ids"):
        build_index(tmp_path / "x", ["a", "b"], [Doc(["a"], ["alpha"])], meta={})
    with pytest.raises(InputDataError, match="'z' is not among"):
        build_index(tmp_path / "y", ["a"], [Doc(["z"], ["zeta"])], meta={})
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_query_beyond_the_term_limit_fails_loudly(sample_index: Path) -> None:
    from mdcr.index.lucene import indexes as lucene

    text = " ".join(f"w{i}x" for i in range(lucene.MAX_QUERY_TERMS + 1))
    with (
        lucene.open_index(sample_index) as index,
        pytest.raises(
            InputDataError, match=r"more than 65536 distinct terms; no query is ever truncated"
        ),
    ):
        index.build_queries(["huge"], [text])
