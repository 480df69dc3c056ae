"""Small corpora for the pool tests, written with pyarrow in the papers/citations contract."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

FIELDS = ("Art", "Biology", "Computer Science", "Medicine", "Physics")


def write_corpus(
    folder: Path,
    papers: Sequence[tuple[str, int, Sequence[str]]],
    citations: Sequence[tuple[str, str]],
) -> Path:
    """Write papers (id, year, fields) and citation edges; n_out/n_in are computed."""
    folder.mkdir(parents=True, exist_ok=True)
    n_out: dict[str, int] = {}
    n_in: dict[str, int] = {}
    for a, b in citations:
        n_out[a] = n_out.get(a, 0) + 1
        n_in[b] = n_in.get(b, 0) + 1
    ids = [p[0] for p in papers]
    table = pa.table(
        {
            "paper_id": pa.array(ids, pa.string()),
            "title": pa.array([f"title {i}" for i in ids], pa.string()),
            "abstract": pa.array([f"abstract of {i}" for i in ids], pa.string()),
            "year": pa.array([p[1] for p in papers], pa.int32()),
            "fields": pa.array([list(p[2]) for p in papers], pa.list_(pa.string())),
            "n_out": pa.array([n_out.get(i, 0) for i in ids], pa.int32()),
            "n_in": pa.array([n_in.get(i, 0) for i in ids], pa.int32()),
        }
    )
    pq.write_table(table, folder / "papers.parquet")
    cit = pa.table(
        {
            "citing_id": pa.array([a for a, _ in citations], pa.string()),
            "cited_id": pa.array([b for _, b in citations], pa.string()),
        }
    )
    pq.write_table(cit, folder / "citations.parquet")
    return folder


def random_corpus(
    folder: Path,
    *,
    n: int = 3000,
    seed: int = 1,
    query_year: int = 2019,
    fields: Sequence[str] = FIELDS,
    shuffle: int | None = None,
) -> Path:
    """A seeded random citation graph: papers 1990..2020, each citing earlier-or-same-year
    papers (a few cite later ones, and some cite themselves, to exercise the rules).

    ``shuffle`` permutes the row order of both tables with that seed (same content).
    """
    rng = np.random.default_rng(seed)
    years = rng.integers(1990, query_year + 2, size=n)
    years[: n // 5] = query_year  # plenty of query-year papers
    ids = [f"p{int(x)}" for x in rng.choice(10 * n, size=n, replace=False)]
    weights = np.array([6.0, 2.0, 3.0, 8.0, 3.0][: len(fields)] + [1.0] * (len(fields) - 5))
    weights = weights[: len(fields)] / weights[: len(fields)].sum()
    papers = []
    for i in range(n):
        k = 1 + int(rng.random() < 0.3)
        fs = sorted({fields[j] for j in rng.choice(len(fields), size=k, p=weights)})
        papers.append((ids[i], int(years[i]), fs))
    order = np.argsort(years, kind="stable")
    edges: set[tuple[str, str]] = set()
    for i in range(n):
        m = int(rng.integers(0, 25))
        older = order[: int(np.searchsorted(years[order], years[i], side="right"))]
        if len(older) == 0:
            continue
        for j in rng.choice(older, size=min(m, len(older)), replace=False):
            if j != i:
                edges.add((ids[i], ids[j]))
        if rng.random() < 0.05:
            edges.add((ids[i], ids[i]))  # a self-citation: never a positive
        if rng.random() < 0.05:
            edges.add((ids[i], ids[int(rng.integers(0, n))]))  # maybe a later paper
    cits = sorted(edges)
    if shuffle is not None:
        r2 = np.random.default_rng(shuffle)
        papers = [papers[i] for i in r2.permutation(len(papers))]
        cits = [cits[i] for i in r2.permutation(len(cits))]
    return write_corpus(folder, papers, cits)
