"""Lucene's BM25 scores agree with an independent BM25 computed in this test.

The independent side takes only the analyzer's output (the terms of each text) and Lucene's
length encoding; document frequencies, document lengths, the average length and term
frequencies are counted here in Python, then Lucene's BM25 (Lucene >= 9, without the
(k1 + 1) factor) is evaluated in float64:

    score(q, d) = sum over distinct t in q of  qtf(t) * idf(t) * tf / (tf + k1 * norm(d))
    norm(d) = 1 - b + b * L(d) / avgdl
    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)),   avgdl = (sum of exact lengths) / N

where L(d) is d's length after Lucene's lossy one-byte encoding (SmallFloat.intToByte4),
which the test also checks against the norms stored in the index. Lucene computes in float32,
so scores agree to about 1e-6 relative, not exactly.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

K1, B = 0.9, 0.4


@dataclass
class Reference:
    """Independent BM25 over a list of texts (ids sorted)."""

    ids: np.ndarray
    tfs: list[Counter[str]]
    df: Counter[str]
    lengths: np.ndarray  # exact token counts
    encoded: np.ndarray  # lengths as Lucene's norms decode them

    @property
    def avgdl(self) -> float:
        return float(self.lengths.sum()) / len(self.lengths)

    def scores(self, query_terms: list[str], k1: float = K1, b: float = B) -> np.ndarray:
        n = len(self.ids)
        out = np.zeros(n)
        norm = k1 * (1 - b + b * self.encoded / self.avgdl)
        for term, qtf in Counter(query_terms).items():
            df = self.df.get(term, 0)
            if df == 0:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            tf = np.array([c.get(term, 0) for c in self.tfs], dtype=np.float64)
            out += qtf * idf * tf / (tf + norm)
        return out

    def top(self, query_terms: list[str], k: int, exclude: str) -> tuple[np.ndarray, np.ndarray]:
        from mdcr.index.runs import rank_candidates

        s = self.scores(query_terms)
        keep = s > 0  # Lucene returns only documents that match a term
        return rank_candidates(self.ids[keep], s[keep], k, exclude=exclude)


def _reference(papers: list, lucene_jvm: object) -> Reference:  # type: ignore[type-arg]
    from mdcr.index.lucene.indexes import analyze
    from mdcr.index.lucene.java import autoclass

    small_float = autoclass("org.apache.lucene.util.SmallFloat")
    terms = [analyze(p.text) for p in papers]
    lengths = np.array([len(t) for t in terms], dtype=np.int64)
    encoded = np.array(
        [small_float.byte4ToInt(small_float.intToByte4(int(n))) for n in lengths], dtype=np.float64
    )
    tfs = [Counter(t) for t in terms]
    df: Counter[str] = Counter()
    for c in tfs:
        df.update(c.keys())
    return Reference(np.array([p.paper_id for p in papers]), tfs, df, lengths, encoded)


@pytest.fixture(scope="module")
def reference(s2orc_papers: list, lucene_jvm: object) -> Reference:  # type: ignore[type-arg]
    return _reference(s2orc_papers, lucene_jvm)


def test_index_statistics_match_the_analyzer(
    sample_index: Path,
    reference: Reference,
) -> None:
    from mdcr.index.lucene.indexes import FIELD, open_index
    from mdcr.index.lucene.java import autoclass

    term_cls = autoclass("org.apache.lucene.index.Term")
    with open_index(sample_index) as index:
        reader = index.reader
        assert reader.maxDoc() == len(reference.ids) == 488
        assert index.paper_ids.tolist() == reference.ids.tolist()
        ords = reader.leaves().get(0).reader().getNumericDocValues("ord")
        got = [ords.longValue() if ords.advanceExact(i) else -1 for i in range(488)]
        assert got == list(range(488))  # document number i holds paper_ids[i], for every i
        stats = index.searcher(K1, B).collectionStatistics(FIELD)
        assert stats.docCount() == 488
        assert stats.sumTotalTermFreq() == int(reference.lengths.sum())
        for term in ("cell", "patient", "model", "studi", "temperatur"):
            assert reader.docFreq(term_cls(FIELD, term)) == reference.df[term] > 0
        leaf = reader.leaves().get(0).reader()
        norms = leaf.getNormValues(FIELD)
        small_float = autoclass("org.apache.lucene.util.SmallFloat")
        for doc in range(0, 488, 7):
            assert norms.advanceExact(doc)
            decoded = small_float.byte4ToInt(norms.longValue())
            assert decoded == reference.encoded[doc]


def test_lucene_scores_agree_with_independent_bm25(
    sample_index: Path, reference: Reference, s2orc_papers: list
) -> None:  # type: ignore[type-arg]
    from mdcr.index.lucene.indexes import analyze, open_index

    queries = s2orc_papers[::16]  # 31 real title + abstract queries
    with open_index(sample_index) as index:
        built, stats = index.build_queries([q.paper_id for q in queries], [q.text for q in queries])
        ranked = index.search(built, 10, k1=K1, b=B, exclude=[q.paper_id for q in queries])
    overlaps, max_rel, max_abs = [], 0.0, 0.0
    for q, (ids, scores), n_terms in zip(queries, ranked, stats.n_terms, strict=True):
        terms = analyze(q.text)
        assert n_terms == len(set(terms))
        ref_ids, ref_scores = reference.top(terms, 10, exclude=q.paper_id)
        assert q.paper_id not in ids
        # Lucene's score of each returned paper equals the formula's score of that paper.
        all_scores = reference.scores(terms)
        pos = np.searchsorted(reference.ids, ids)
        rel = np.abs(scores - all_scores[pos]) / np.maximum(all_scores[pos], 1e-9)
        max_rel = max(max_rel, float(rel.max()))
        max_abs = max(max_abs, float(np.abs(scores - all_scores[pos]).max()))
        overlaps.append(len(set(ids) & set(ref_ids)) / len(ref_ids))
        # Where the top-10 differ at all, it is a near tie at the cut (float32 vs float64).
        if set(ids) != set(ref_ids):
            assert abs(ref_scores[-1] - scores[-1]) <= 1e-5 * ref_scores[-1]
    print(
        f"\nBM25 agreement: mean top-10 overlap {np.mean(overlaps):.4f}, "
        f"min {min(overlaps):.2f}, max score difference {max_abs:.2e} ({max_rel:.2e} relative)"
    )
    assert max_rel < 1e-5
    assert np.mean(overlaps) >= 0.99


def test_every_term_of_a_very_long_query_counts(
    sample_index: Path, reference: Reference, s2orc_papers: list
) -> None:  # type: ignore[type-arg]
    """A query with more distinct terms than Lucene's default clause limit (1024)."""
    from mdcr.index.lucene.indexes import MAX_QUERY_TERMS, analyze, open_index
    from mdcr.index.lucene.java import autoclass

    text, terms = "", []
    for p in s2orc_papers[::3]:
        text += p.text + "\n"
        terms = analyze(text)
        if len(set(terms)) > 1100:
            break
    assert len(set(terms)) > 1100
    assert (
        autoclass("org.apache.lucene.search.IndexSearcher").getMaxClauseCount() >= MAX_QUERY_TERMS
    )
    with open_index(sample_index) as index:
        built, stats = index.build_queries(["long"], [text])
        ((ids, scores),) = index.search(built, 20, k1=K1, b=B, exclude=["long"])
    assert stats.n_terms[0] == len(set(terms)) > 1024
    expected = reference.scores(terms)
    pos = np.searchsorted(reference.ids, ids)
    np.testing.assert_allclose(scores, expected[pos], rtol=1e-5)
    # Dropping any one term would change the score of a paper that contains it.
    ref_ids, _ = reference.top(terms, 20, exclude="long")
    assert ids.tolist() == ref_ids.tolist()
