"""Query eligibility and sampling, and the seeded sampler, against known answers."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from mdcr.pools.db import CorpusFiles, connect, load_excluded, load_papers
from mdcr.pools.queries import (
    create_queries_table,
    prepare_query_candidates,
    query_seed,
    sample_queries,
    split_of,
)
from mdcr.pools.sampling import rank_sample
from mdcr.pools.seeds import derive_seed, sample_key
from tests.support.corpora import write_corpus


def graph(folder: Path) -> Path:
    """Known answers for query year 2019 and min_cited 3.

    a: cites 3 old papers                -> eligible (3)
    b: cites 2 old + itself              -> not (self-citation dropped: 2)
    c: cites 2 old + one 2020 paper      -> not (the 2020 paper cannot be a candidate: 2)
    d: cites 4 old, but is excluded      -> not
    e: cites 3 old + another 2019 paper  -> eligible (4: same-year papers may be cited)
    f: 2018, cites 5 old                 -> not (wrong year)
    """
    papers = [(f"o{i}", 2000 + i, ["Art"]) for i in range(6)]
    papers += [(x, 2019, ["Art"]) for x in "abcde"]
    papers += [("f", 2018, ["Art"]), ("z", 2020, ["Art"])]
    cites = [("a", "o0"), ("a", "o1"), ("a", "o2")]
    cites += [("b", "o0"), ("b", "o1"), ("b", "b")]
    cites += [("c", "o0"), ("c", "o1"), ("c", "z")]
    cites += [("d", f"o{i}") for i in range(4)]
    cites += [("e", "o3"), ("e", "o4"), ("e", "o5"), ("e", "a")]
    cites += [("f", f"o{i}") for i in range(5)]
    return write_corpus(folder, papers, cites)


def test_eligibility_known_answers(tmp_path: Path) -> None:
    folder = graph(tmp_path / "g")
    (tmp_path / "ex.txt").write_text("d\n")
    con = connect()
    load_papers(con, CorpusFiles.in_folder(folder), with_fields=True)
    assert load_excluded(con, tmp_path / "ex.txt") == 1
    funnel = prepare_query_candidates(
        con, folder / "citations.parquet", query_year=2019, min_cited=3, seed=0
    )
    got = dict(con.execute("SELECT query_id, n_cited FROM query_candidates").fetchall())
    assert got == {"a": 3, "e": 4}
    assert (funnel.year_papers, funnel.excluded, funnel.too_few_cited) == (5, 1, 2)
    assert funnel.eligible == 2 and funnel.mean_cited == pytest.approx(3.5)
    splits = dict(con.execute("SELECT query_id, split FROM query_candidates").fetchall())
    assert splits == {q: split_of(0, q) for q in ("a", "e")}
    positives = con.execute(
        "SELECT paper_id FROM query_cited WHERE query_id = 'e' ORDER BY paper_id"
    ).fetchall()
    assert [p for (p,) in positives] == ["a", "o3", "o4", "o5"]


def test_sampling_matches_hashlib_and_is_split_by_id(tmp_path: Path) -> None:
    """400 eligible queries: the SQL sample equals an independent hashlib computation."""
    papers = [(f"o{i}", 2010, ["Biology"]) for i in range(5)]
    papers += [(f"q{i}", 2019, ["Biology"] if i % 2 else ["Art"]) for i in range(400)]
    cites = [(f"q{i}", f"o{j}") for i in range(400) for j in range(5)]
    folder = write_corpus(tmp_path / "g", papers, cites)
    con = connect()
    load_papers(con, CorpusFiles.in_folder(folder), with_fields=True)
    load_excluded(con, None)
    prepare_query_candidates(
        con, folder / "citations.parquet", query_year=2019, min_cited=5, seed=7
    )
    create_queries_table(con)
    for field in (None, "Biology"):
        for split in ("val", "test"):
            s = sample_queries(
                con,
                setup="dataset" if field is None else "field",
                split=split,
                field=field,
                n=50,
                seed=7,
                query_year=2019,
            )
            pool = [f"q{i}" for i in range(400) if field is None or i % 2]
            pool = [q for q in pool if split_of(7, q) == split]
            assert s.eligible == len(pool) and s.taken == 50
            seed = query_seed(7, s.setup, split, field)
            want = sorted(pool, key=lambda q: (sample_key(seed, q), q))[:50]
            got = con.execute(
                "SELECT query_id FROM queries WHERE split = ? AND field IS NOT DISTINCT FROM ?",
                [split, field],
            ).fetchall()
            assert sorted(q for (q,) in got) == sorted(want)
    # val and test each get about half of the ids, and never the same id
    halves = con.execute("SELECT split, count(*) FROM query_candidates GROUP BY 1").fetchall()
    assert all(150 < n < 250 for _, n in halves)


@pytest.mark.parametrize("n", [1, 37, 1000, 4000, 9000, 10000, 12000])
def test_rank_sample_equals_full_sort(n: int) -> None:
    con = connect()
    ids = [f"id{i * 7919 % 100003}" for i in range(10000)]
    con.register("u_arrow", pa.table({"paper_id": ids}))
    con.execute("CREATE TABLE u AS SELECT * FROM u_arrow")
    seed = derive_seed(3, "test", n)
    rank_sample(con, "u", n, seed, "s")
    got = sorted(p for (p,) in con.execute("SELECT paper_id FROM s").fetchall())
    want = sorted(sorted(ids, key=lambda p: (sample_key(seed, p), p))[:n])
    assert got == want


def test_derived_seeds_differ_by_purpose() -> None:
    a = derive_seed(0, "pools", "dataset", "test", "", 200000, 0)
    assert a != derive_seed(0, "pools", "dataset", "test", "", 200000, 1)
    assert a != derive_seed(1, "pools", "dataset", "test", "", 200000, 0)
    assert a == derive_seed(0, "pools", "dataset", "test", "", 200000, 0)
    assert 0 <= a < 2**60
