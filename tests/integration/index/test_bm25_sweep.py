"""The exact BM25 sweep equals Lucene: every grid point's rankings, scores and stage outputs.

Lucene is the reference: each comparison runs the same queries through Lucene's search
(one per grid point) and through the sweep (the whole grid at once).
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow.parquet as pq
import pytest

from mdcr.index.bm25 import search as bm25_search
from mdcr.index.bm25 import tune as bm25_tune
from mdcr.index.bm25.tune import DEFAULT_B_GRID, DEFAULT_K1_GRID
from tests.integration.encoders.fixtures import write_pools
from tests.integration.index.test_bm25_stages import _execute, write_corpus

GRID = list(itertools.product(DEFAULT_K1_GRID, DEFAULT_B_GRID))  # the default 7 x 6


def assert_same_as_lucene(
    index_path: Path, ids: list[str], texts: list[str], queries: list[int], grid: list, k: int
) -> int:
    """Compare Lucene and the sweep at every grid point; return the rankings compared."""
    from mdcr.index.lucene.indexes import open_index
    from mdcr.index.sweep.grid import sweep_pool

    qids = [ids[i] for i in queries]
    qtexts = [texts[i] for i in queries]
    swept = sweep_pool(np.array(ids, dtype=object), texts, qids, qtexts, grid, k, threads=2)
    compared = 0
    with open_index(index_path) as index:
        built, _ = index.build_queries(qids, qtexts)
        for g, (k1, b) in enumerate(grid):
            lucene = index.search(built, k, k1=k1, b=b, exclude=qids, threads=2)
            for q, ((l_ids, l_sc), (s_ids, s_sc)) in enumerate(zip(lucene, swept[g], strict=True)):
                where = f"k1={k1} b={b} query {qids[q]}"
                assert l_ids.tolist() == s_ids.tolist(), where
                assert np.array_equal(l_sc, s_sc), where  # the same float32 values, bit for bit
                compared += 1
    return compared


def test_real_text_every_grid_point(sample_index: Path, s2orc_papers: list) -> None:  # type: ignore[type-arg]
    ids = [p.paper_id for p in s2orc_papers]
    texts = [p.text for p in s2orc_papers]
    # 61 real title + abstract queries: at each of the 42 grid points every one is a full
    # ranking of up to 487 papers, so 2,562 whole lists and their float32 scores are
    # compared bit for bit (each Lucene search costs time per hit fetched: more queries
    # would add time, not kinds of text).
    queries = list(range(0, len(ids), 8))
    # Top 500 > 488 papers: every matching paper is ranked, the whole list compared.
    assert assert_same_as_lucene(sample_index, ids, texts, queries, GRID, 500) == 42 * 61


def test_synthetic_pool_with_long_queries(lucene_jvm: object, tmp_path: Path) -> None:
    from mdcr.corpus.synth.text import TOPICS, TextGenerator
    from mdcr.index.lucene.indexes import Doc, build_index

    rnd = random.Random(7)
    gen = TextGenerator()
    n = 1500
    ids = [f"{i:06d}" for i in range(n)]
    texts = []
    for _ in range(n):
        topic = rnd.randrange(len(TOPICS))
        title, abstract = gen.render(rnd, topic, None, rnd.randrange(50), rnd.randint(4, 14))
        texts.append(f"{title}\n{abstract}")
    # Long queries: a paper's text plus those of three others (about 4x an abstract).
    q_texts = [" ".join(texts[i + j] for j in range(4)) for i in range(0, 240, 4)]
    build_index(tmp_path / "idx", ids, [Doc(ids, texts)], meta={}, threads=2)
    # Query ids are pool papers: the sweep and Lucene leave the same paper out.
    from mdcr.index.lucene.indexes import open_index
    from mdcr.index.sweep.grid import sweep_pool

    qids = [ids[i] for i in range(0, 240, 4)]
    grid = GRID[::5]
    swept = sweep_pool(np.array(ids, dtype=object), texts, qids, q_texts, grid, 500, threads=2)
    with open_index(tmp_path / "idx") as index:
        built, stats = index.build_queries(qids, q_texts)
        assert stats.n_terms.mean() > 100  # long queries
        for g, (k1, b) in enumerate(grid):
            lucene = index.search(built, 500, k1=k1, b=b, exclude=qids, threads=2)
            for (l_ids, l_sc), (s_ids, s_sc) in zip(lucene, swept[g], strict=True):
                assert l_ids.tolist() == s_ids.tolist()
                assert np.array_equal(l_sc, s_sc)


def test_pool_statistics_equal_the_lucene_index(sample_index: Path, s2orc_papers: list) -> None:  # type: ignore[type-arg]
    from mdcr.index.lucene.indexes import FIELD, Analyzer, open_index
    from mdcr.index.lucene.java import autoclass
    from mdcr.index.sweep.grid import PoolTerms

    terms = PoolTerms.build([p.text for p in s2orc_papers], Analyzer().analyze_many)
    term_cls = autoclass("org.apache.lucene.index.Term")
    with open_index(sample_index) as index:
        stats = index.searcher(0.9, 0.4).collectionStatistics(FIELD)
        assert (terms.doc_count, terms.sum_ttf) == (stats.docCount(), stats.sumTotalTermFreq())
        assert terms.n_docs == len(index.paper_ids) == 488
        for word in ("cell", "patient", "model", "studi", "temperatur", "the"):
            got = int(terms.df[terms.vocab[word]]) if word in terms.vocab else 0
            assert got == index.reader.docFreq(term_cls(FIELD, word))
        norms = index.reader.leaves().get(0).reader().getNormValues(FIELD)
        for doc in range(0, 488, 11):
            assert norms.advanceExact(doc)
            assert int(norms.longValue()) & 0xFF == int(terms.norms[doc])


def test_lengths_encode_as_lucene_does(lucene_jvm: object) -> None:
    from mdcr.index.lucene.java import autoclass
    from mdcr.index.sweep.grid import encode_lengths

    sf = autoclass("org.apache.lucene.util.SmallFloat")
    lengths = np.array([0, 1, 5, 23, 24, 25, 40, 41, 100, 1000, 5000, 70000, 2**20], np.int64)
    want = [int(sf.intToByte4(int(n))) & 0xFF for n in lengths]
    assert encode_lengths(lengths).tolist() == want


@pytest.fixture()
def stage_inputs(tmp_path: Path, s2orc_papers: list) -> dict[str, Any]:  # type: ignore[type-arg]
    papers = [(p.paper_id, p.title, p.abstract) for p in s2orc_papers]
    ids = [p[0] for p in papers]
    pools = {
        "dataset/val/300/r0": ids[:300],
        "field/val/Medicine/r0": ids[150:],
        "dataset/test/300/r0": ids[100:400],
    }
    # 16 and 15 validation queries: tuning searches each of them at all 42 grid points
    # (1,302 rankings per backend), enough for MAP and nDCG to differ at every point (the
    # test checks that the grid is not flat); each Lucene search costs time per hit fetched.
    qrels = {
        "dataset/val/300/r0": {ids[i]: ids[i + 1 : i + 4] for i in range(0, 280, 18)},
        "field/val/Medicine/r0": {ids[i]: ids[i + 2 : i + 5] for i in range(160, 480, 22)},
        "dataset/test/300/r0": {ids[i]: ids[i + 1 : i + 3] for i in range(100, 390, 13)},
    }
    return {
        "corpus": write_corpus(tmp_path / "corpus", papers),
        "pools": write_pools(tmp_path / "pools", pools, qrels),
        "home": tmp_path / "home",
    }


def test_stages_give_the_same_outputs_with_either_backend(stage_inputs: dict[str, Any]) -> None:
    corpus, pools, home = (str(stage_inputs[k]) for k in ("corpus", "pools", "home"))
    outs = {}
    backends: tuple[Literal["lucene", "sweep"], ...] = ("lucene", "sweep")
    for backend in backends:
        tune = bm25_tune.TuneConfig(corpus=corpus, pools=pools, backend=backend, threads=2)
        outs[backend] = _execute(Path(home) / backend, bm25_tune.TUNE_SPEC, tune)
    grids = {e: pq.read_table(Path(o.path) / bm25_tune.GRID_FILE) for e, o in outs.items()}
    assert grids["lucene"].num_rows == 2 * 42 * 3  # pools x grid points x metrics
    assert grids["lucene"].equals(grids["sweep"])
    # Not a flat grid: in each pool, every measure moves with k1 and b (MAP and nDCG take
    # a value of their own at each of the 42 points).
    moved = grids["lucene"].to_pandas().groupby(["pool_id", "metric"])["value"].nunique()
    assert len(moved) == 2 * 3 and (moved > 1).all(), moved
    chosen = {e: (Path(o.path) / bm25_tune.CHOSEN_FILE).read_text() for e, o in outs.items()}
    assert chosen["lucene"] == chosen["sweep"]
    # The backend is a setting: the same fingerprint.
    assert outs["lucene"].fingerprint == outs["sweep"].fingerprint
    runs = {}
    for backend in backends:
        cfg = bm25_search.BM25Config(corpus=corpus, pools=pools, k1=1.2, b=0.75, backend=backend)
        out = _execute(Path(home) / backend, bm25_search.SPEC, cfg)
        runs[backend] = pq.read_table(Path(out.path) / "runs.parquet")
    assert runs["lucene"].num_rows > 1000
    assert runs["lucene"].equals(runs["sweep"])


def test_index_built_in_chunks_equals_one_build(
    lucene_jvm: object,
    s2orc_papers: list,  # type: ignore[type-arg]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mdcr.index.lucene.indexes import Analyzer
    from mdcr.index.sweep import grid as sweep
    from mdcr.index.sweep.grid import PoolTerms

    texts = [p.text for p in s2orc_papers]
    whole = PoolTerms.build(texts, Analyzer().analyze_many, chunk=len(texts))
    monkeypatch.setattr(sweep, "ANALYZE_PIECE", 10)  # chunks of 37 in pieces of 10, 2 threads
    chunked = PoolTerms.build(texts, Analyzer().analyze_many, threads=2, chunk=37)
    assert whole.vocab == chunked.vocab
    for name in ("df", "inv_ptr", "inv_docs", "inv_tfs", "norms"):
        assert np.array_equal(getattr(whole, name), getattr(chunked, name)), name
    assert (whole.sum_ttf, whole.doc_count) == (chunked.sum_ttf, chunked.doc_count)
    # Postings run by document within each term.
    for t in range(0, len(whole.vocab), 97):
        docs = whole.inv_docs[whole.inv_ptr[t] : whole.inv_ptr[t + 1]]
        assert (np.diff(docs) > 0).all() and len(docs) == whole.df[t]


def test_many_texts_analyse_as_each_text_alone(
    lucene_jvm: object,
    s2orc_papers: list,  # type: ignore[type-arg]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Texts joined around the separator word give each text's own terms, whatever sits at
    a text's edges; a text holding the word itself sends its batch text by text."""
    from mdcr.index.lucene import indexes as lucene
    from mdcr.index.lucene.indexes import SEPARATOR_WORD, Analyzer

    edges = [
        "",
        "ends in a hyphen-",
        "-starts with one",
        "a joiner\u200d",
        "\u200dand a format mark\u00ad",
        "carriage\r",
        "\ndouble\n\nnewlines\n",
        "x" * 300,  # longer than a token may be: split by the tokenizer
        "possessive's",
        "",
        "digits 123,456.7 and e-mail a@b.org http://x.y/z",
        "the of and",  # stopwords only: no terms
    ]
    texts = edges + [p.text for p in s2orc_papers]
    analyzer = Analyzer()
    alone = [analyzer.analyze(t) for t in texts]
    for batch in (1, 5, 512):
        monkeypatch.setattr(lucene, "ANALYZE_BATCH", batch)
        flat, lengths = analyzer.analyze_many(texts)
        with_word, with_lengths = analyzer.analyze_many([*texts[:3], f"x {SEPARATOR_WORD} y"])
        assert lengths.tolist() == [len(t) for t in alone]
        assert flat.to_pylist() == [term for t in alone for term in t]
        assert with_lengths.tolist() == [*(len(t) for t in alone[:3]), 3]
        assert with_word.to_pylist()[-3:] == ["x", SEPARATOR_WORD, "y"]
    assert sum(len(t) for t in alone[:12]) > 10 and alone[0] == [] and alone[11] == []


def test_term_score_cache_bounds_do_not_change_results(
    lucene_jvm: object, s2orc_papers: list
) -> None:  # type: ignore[type-arg]
    from mdcr.index.lucene.indexes import Analyzer
    from mdcr.index.sweep.grid import PoolTerms, norm_tables, sweep_query

    analyzer = Analyzer()
    terms = PoolTerms.build([p.text for p in s2orc_papers], analyzer.analyze_many)
    tables = norm_tables(terms, GRID[::7])
    for paper in s2orc_papers[::40]:
        words = analyzer.analyze(paper.text)
        full = sweep_query(terms, words, tables, 20)  # small k: the bound prunes
        # No cache (every term score computed directly), a cache that overflows at once,
        # one document per block of bounds or per chunk of accumulators, blocks and chunks
        # that split the postings unevenly, one document scored first (the rest after),
        # and no pruning by the bound.
        for bounds in (
            {"tf_cap": 0, "cache_rows": 1},
            {"tf_cap": 2, "cache_rows": 3},
            {"block": 1, "chunk": 1},
            {"block": 7, "chunk": 5, "tf_cap": 2, "cache_rows": 3},
            {"first": 1, "chunk": 3},
            {"prune": False},  # every matched document scored at every grid point
            {"prune": False, "block": 5, "chunk": 2, "tf_cap": 0, "cache_rows": 1},
        ):
            other = sweep_query(terms, words, tables, 20, **bounds)
            for (d1, s1), (d2, s2) in zip(full, other, strict=True):
                assert d1.tolist() == d2.tolist() and np.array_equal(s1, s2)


def test_pruned_kernel_equals_lucene_and_skips_documents(
    sample_index: Path,
    s2orc_papers: list,  # type: ignore[type-arg]
) -> None:
    """With a small k the bound leaves most matched documents unscored (those scored first
    by largest bound, and with one scored first, the others after it), and every grid
    point's ranking and float32 scores still equal Lucene's and the unpruned pass's."""
    from mdcr.index.lucene.indexes import Analyzer, open_index
    from mdcr.index.sweep.grid import PoolTerms, norm_tables, sweep_query

    analyzer = Analyzer()
    ids = [p.paper_id for p in s2orc_papers]  # Lucene's document order
    texts = [p.text for p in s2orc_papers]
    terms = PoolTerms.build(texts, analyzer.analyze_many)
    tables = norm_tables(terms, GRID)
    # 31 real title + abstract queries (the paper itself left out), and one-word queries
    # whose equal scores run across the k-th place (ties go by document number).
    rows = list(range(3, len(ids), 16))
    q_texts = [texts[i] for i in rows] + ["cell", "patient", "model"]
    qids = [ids[i] for i in rows] + ["none"] * 3
    exclude = [*rows, -1, -1, -1]
    counts = {first: np.zeros(3, np.int64) for first in (None, 1)}
    compared = 0
    with open_index(sample_index) as index:
        built, _ = index.build_queries(qids, q_texts)
        for k in (3, 20):
            lucene = [index.search(built, k, k1=k1, b=b, exclude=qids, threads=2) for k1, b in GRID]
            for q, text in enumerate(q_texts):
                words = analyzer.analyze(text)
                full = sweep_query(terms, words, tables, k, exclude[q], prune=False)
                for first, c in counts.items():
                    got = sweep_query(terms, words, tables, k, exclude[q], first=first, counts=c)
                    for g in range(len(GRID)):
                        docs, scores = got[g]
                        assert [ids[d] for d in docs] == lucene[g][q][0].tolist()
                        assert np.array_equal(scores, lucene[g][q][1])
                        assert np.array_equal(docs, full[g][0])
                        assert np.array_equal(scores.view(np.int32), full[g][1].view(np.int32))
                        compared += 1
    assert compared == 2 * 2 * 42 * len(q_texts)
    for first, (matched, scored_first, scored_after) in counts.items():
        assert scored_first + scored_after < matched / 2, first  # most left unscored
    assert counts[1][2] > 0  # with one scored first, documents were scored after


def _torch_equals_kernel(terms: Any, queries: list[list[str]], device: str) -> int:
    """The torch scorer on ``device`` against the numba kernel: every grid point, bit for
    bit; returns the rankings compared."""
    from mdcr.index.sweep.grid import norm_tables, sweep_query

    tables = norm_tables(terms, GRID)
    postings = terms.on_device(device)
    compared = 0
    for i, words in enumerate(queries):
        for k in (500, 7):  # every match, and a cut inside long runs of equal scores
            want = sweep_query(terms, words, tables, k, exclude=i)
            got = sweep_query(terms, words, tables, k, exclude=i, postings=postings)
            for (w_docs, w_sc), (g_docs, g_sc) in zip(want, got, strict=True):
                assert np.array_equal(w_docs, g_docs)
                assert np.array_equal(w_sc.view(np.int32), g_sc.view(np.int32))
                compared += 1
    return compared


def test_torch_scorer_equals_the_kernel(lucene_jvm: object, s2orc_papers: list) -> None:  # type: ignore[type-arg]
    """The GPU path's arithmetic, run by torch on the CPU, gives the kernel's (and so
    Lucene's) rankings and float32 scores at all 42 grid points."""
    from mdcr.index.lucene.indexes import Analyzer
    from mdcr.index.sweep.grid import PoolTerms

    analyzer = Analyzer()
    texts = [p.text for p in s2orc_papers]
    terms = PoolTerms.build(texts, analyzer.analyze_many)
    queries = [analyzer.analyze(t) for t in texts[::8]]
    queries.append(analyzer.analyze(" ".join(texts[:4])))  # a long query
    queries.append(["nosuchterm"])  # no match at all
    assert _torch_equals_kernel(terms, queries, "cpu") == 2 * 42 * len(queries)


@pytest.mark.gpu
def test_torch_scorer_on_a_gpu_equals_the_kernel(lucene_jvm: object, s2orc_papers: list) -> None:  # type: ignore[type-arg]
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from mdcr.index.lucene.indexes import Analyzer
    from mdcr.index.sweep.grid import PoolTerms

    analyzer = Analyzer()
    texts = [p.text for p in s2orc_papers]
    terms = PoolTerms.build(texts, analyzer.analyze_many)
    queries = [analyzer.analyze(t) for t in texts[::8]]
    assert _torch_equals_kernel(terms, queries, "cuda") == 2 * 42 * len(queries)
