"""The session's copies answer as the files do: a papers copy gives the rows a scan of the
papers file gives (ids that share a hash included), a run copy gives each query's rows of
the run in rank order (queries cut by row groups, rows out of rank order, a query whose
rows are apart, queries the result does not hold); the qrels' copy is the same kind."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mdcr.explore.copies as copies
from mdcr.explore.copies import NOT_RANKED, SCATTERED, SessionFiles
from mdcr.scoring.per_query import scan_papers

COLUMNS = ["paper_id", "title", "abstract", "year", "fields", "n_in"]


def _papers_file(path: Path, n: int, seed: int) -> list[str]:
    """A papers file of ``n`` rows in small row groups (ids in no order, one twice)."""
    rng = np.random.default_rng(seed)
    ids = [str(i) for i in rng.permutation(10 * n)[:n]]
    ids[n - 1] = ids[3]  # a paper twice: the first row is the one kept
    table = pa.table(
        {
            "paper_id": ids,
            "title": [f"title {i}" for i in range(n)],
            "abstract": [None if i % 7 == 0 else f"abstract {i} " * (i % 5) for i in range(n)],
            "year": pa.array([None if i % 11 == 0 else 1990 + i % 30 for i in range(n)]),
            "fields": [["Biology", "Physics"][: i % 3] for i in range(n)],
            "n_in": list(range(n)),
        }
    )
    pq.write_table(table, path, row_group_size=97)
    return ids


@pytest.mark.parametrize(("weak_hash", "fence"), [(False, 512), (False, 4), (True, 4)])
def test_a_papers_copy_gives_the_rows_of_a_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weak_hash: bool, fence: int
) -> None:
    monkeypatch.setattr(copies, "FENCE", fence)  # blocks of 4: lookups across blocks
    if weak_hash:  # ids that share a hash: every lookup must tell them apart
        monkeypatch.setattr(copies, "ID_HASH", "hash({}::VARCHAR) % 5")
    path = tmp_path / "papers.parquet"
    ids = _papers_file(path, 1000, seed=1)
    files = SessionFiles()
    try:
        copy = files.papers(path)
        assert copy.n_rows == 1000 and files.papers(path) is copy  # made once
        rng = np.random.default_rng(2)
        for size in (1, 5, 60, 400):
            wanted = {ids[int(i)] for i in rng.choice(1000, size, replace=False)} | {"absent"}
            got = files.read_papers(path, wanted, COLUMNS)
            assert got.equals(scan_papers(path, wanted, COLUMNS))
            assert set(got.column("paper_id").to_pylist()) == wanted - {"absent"}
        twice = files.read_papers(path, {ids[3]}, ["paper_id", "n_in"])
        assert twice.column("n_in").to_pylist() == [3, 999]  # both rows, in file order
        assert copy.rows([]).num_rows == 0
    finally:
        files.close()


def _run_file(path: Path) -> tuple[dict[tuple[str, str], list[tuple[str, float, int]]], list]:
    """A run of 3 pools x 9 queries, 23 rows each, in row groups of 50 rows (queries cut
    between them), ranks shuffled within a query; query q4 of pool p1 written in two
    places; every row (pool, query) -> [(paper, score, rank)] in rank order."""
    rng = np.random.default_rng(3)
    rows, want = [], {}
    for pool in ("p0", "p1", "p2"):
        for q in range(9):
            ranked = [
                (f"d{int(d)}", float(23 - r), r + 1) for r, d in enumerate(rng.permutation(99)[:23])
            ]
            want[(pool, f"q{q}")] = ranked
            shuffled = [ranked[int(i)] for i in rng.permutation(23)]
            rows += [(pool, f"q{q}", *row) for row in shuffled]
    apart = [r for r in rows if r[:2] == ("p1", "q4")]
    rows = [r for r in rows if r[:2] != ("p1", "q4")]
    rows = rows[:115] + apart[:10] + rows[115:] + apart[10:]  # 115: between two queries
    table = pa.table(
        {
            "pool_id": [r[0] for r in rows],
            "query_id": [r[1] for r in rows],
            "paper_id": [r[2] for r in rows],
            "score": [r[3] for r in rows],
            "rank": pa.array([r[4] for r in rows], pa.int32()),
        }
    )
    pq.write_table(table, path, row_group_size=50)
    return want, rows


def test_a_run_copy_gives_each_querys_ranking(tmp_path: Path) -> None:
    path = tmp_path / "runs.parquet"
    want, _ = _run_file(path)
    held = [k for k in want if k[0] != "p2"] + [("p9", "q0")]  # the result's units
    unit_of = {k: i for i, k in enumerate(held)}
    files = SessionFiles()
    try:
        copy = files.run(path, lambda p, q: unit_of.get((p, q)), len(held))
        for key, unit in unit_of.items():
            ranking = copy.ranking(unit)
            if key == ("p1", "q4"):
                assert ranking is None and copy.first[unit] == SCATTERED  # read from the run
            elif key == ("p9", "q0"):
                assert ranking == ([], []) and copy.first[unit] == NOT_RANKED
            else:
                assert ranking == ([p for p, _, _ in want[key]], [s for _, s, _ in want[key]])
    finally:
        files.close()
