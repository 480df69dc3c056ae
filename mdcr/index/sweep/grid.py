"""An exact BM25 sweep: every (k1, b) of a grid from one pass over each query's postings.

Lucene stays the reference; this is a fast path proven equal to it (tests compare every
stored score and ranking). It reproduces Lucene's BM25 (``BM25Similarity``, Lucene >= 9)
bit for bit:

- documents are analysed by the index's own analyzer (Anserini's DefaultEnglishAnalyzer,
  through the JVM), so terms, term frequencies and lengths are Lucene's;
- a document's length is stored as Lucene's one-byte norm (``SmallFloat.intToByte4``) and
  read back through ``SmallFloat.byte4ToInt``, the lossy encoding Lucene scores with;
- per (k1, b), the 256-entry table ``1 / (k1 * ((1 - b) + b * length / avgdl))``, the
  term weight ``count * idf`` and the term score ``weight - weight / (1 + tf * table)``
  are computed in float32 with Lucene's operations in Lucene's order (``avgdl`` and
  ``idf`` are computed in double and rounded to float, as Lucene does);
- a document's score is the sum of its term scores accumulated in double and rounded to
  float, as Lucene's disjunction scorers do. Term scores span far fewer than the 29 bits
  between float and double precision, so the double sum is exact whatever the order.

Ranking: the documents with a positive score (those that match a query term, as Lucene
returns them), by (score desc, document number asc); document numbers are paper_id order.
The query paper is left out after taking k + 1, as :meth:`LuceneIndex.search` does.

Cost: analysing the pool once (the JVM's analyzer, hundreds of documents per call, a
chunk of documents at a time) into an inverted index, then per query one compiled pass
over its terms' postings that scores every grid point at once
(:mod:`mdcr.index.sweep.kernel`); queries run on all cores.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from mdcr.index.sweep.torch_kernel import TorchPostings
    from mdcr.retrievers.device import Device


def _small_float() -> tuple[Callable[[int], int], np.ndarray]:
    """Lucene's ``SmallFloat.intToByte4`` (as an unsigned byte) and the 256 decoded lengths."""
    from mdcr.index.lucene.java import autoclass

    sf = autoclass("org.apache.lucene.util.SmallFloat")
    table = np.array(
        [sf.byte4ToInt(b if b < 128 else b - 256) for b in range(256)], dtype=np.float32
    )
    return (lambda n: int(sf.intToByte4(int(n))) & 0xFF), table


def encode_lengths(lengths: np.ndarray) -> np.ndarray:
    """Lucene's one-byte norms of token counts (``SmallFloat.intToByte4``), as uint8.

    Encoded through the JVM once per distinct length.
    """
    to_byte, _ = _small_float()
    distinct = np.unique(lengths)
    codes = np.array([to_byte(int(n)) for n in distinct], dtype=np.uint8)
    return codes[np.searchsorted(distinct, lengths)]


# Documents analysed at a time while building: the terms of one chunk are all that is held
# beyond the index's own arrays (2M abstracts at once would need tens of GB).
BUILD_CHUNK = 20_000
ANALYZE_PIECE = 1024  # texts per analysis call from one thread


@dataclass(frozen=True)
class PoolTerms:
    """A pool's analysed documents (document numbers in paper_id order) as an inverted
    index: each term's postings, by document number, with their frequencies."""

    vocab: dict[str, int]
    df: np.ndarray  # int64 documents per term
    inv_ptr: np.ndarray  # int64, n_terms + 1: term t's postings are [inv_ptr[t], inv_ptr[t+1])
    inv_docs: np.ndarray  # int32 document numbers, ascending within a term
    inv_tfs: np.ndarray  # float32 term frequencies
    norms: np.ndarray  # uint8 Lucene norm of each document
    n_docs: int
    sum_ttf: int  # total tokens (Lucene's sumTotalTermFreq)
    doc_count: int  # documents with at least one token (Lucene's docCount)

    @property
    def avgdl(self) -> np.float32:
        """Lucene's average length: (float) (sumTotalTermFreq / (double) docCount)."""
        return np.float32(self.sum_ttf / float(self.doc_count)) if self.doc_count else np.float32(1)

    @classmethod
    def build(
        cls,
        texts: Sequence[str],
        analyze_many: Callable[[Sequence[str]], tuple[pa.Array, np.ndarray]],
        *,
        threads: int = 1,
        chunk: int = BUILD_CHUNK,
    ) -> PoolTerms:
        """Analyse ``texts`` (document i = text i) and index their terms, ``chunk``
        documents at a time. ``analyze_many`` gives the terms of some texts as one Arrow
        string array and the count per text
        (:meth:`mdcr.index.lucene.indexes.Analyzer.analyze_many`); it runs on ``threads`` threads,
        :data:`ANALYZE_PIECE` texts per call (the JVM analyses without the GIL: 1.8x on 2
        cores).

        Term ids follow first appearance: Arrow's dictionary encoding of a chunk lists its
        distinct terms in that order, so only those (thousands, not millions of tokens)
        meet the Python vocabulary.
        """
        vocab: dict[str, int] = {}
        n = len(texts)
        lengths = np.zeros(n, dtype=np.int64)
        docs, terms, tfs = [], [], []
        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            for start in range(0, n, max(1, chunk)):
                stop = min(n, start + max(1, chunk))
                pieces = [
                    texts[s : min(stop, s + ANALYZE_PIECE)]
                    for s in range(start, stop, ANALYZE_PIECE)
                ]
                analysed = list(pool.map(analyze_many, pieces))
                flat = pa.concat_arrays([words for words, _ in analysed])
                lens = np.concatenate([counts for _, counts in analysed])
                del analysed
                size = len(lens)
                lengths[start : start + size] = lens
                encoded = flat.dictionary_encode()
                to_vocab = np.fromiter(
                    (vocab.setdefault(t, len(vocab)) for t in encoded.dictionary.to_pylist()),
                    dtype=np.int64,
                    count=len(encoded.dictionary),
                )
                ids = to_vocab[encoded.indices.to_numpy(zero_copy_only=False)]
                del flat, encoded
                keys = (np.repeat(np.arange(size, dtype=np.int64), lens) << 32) | ids
                keys, counts = np.unique(keys, return_counts=True)  # by document, then term
                docs.append((keys >> 32).astype(np.int32) + np.int32(start))
                terms.append((keys & 0xFFFFFFFF).astype(np.int32))
                tfs.append(counts.astype(np.float32))
        doc_of = np.concatenate(docs) if docs else np.zeros(0, np.int32)
        term_of = np.concatenate(terms) if terms else np.zeros(0, np.int32)
        tf_of = np.concatenate(tfs) if tfs else np.zeros(0, np.float32)
        del docs, terms, tfs
        order = np.argsort(term_of, kind="stable")  # by term, documents stay ascending
        df = np.bincount(term_of, minlength=len(vocab)).astype(np.int64)
        inv_ptr = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(df, out=inv_ptr[1:])
        return cls(
            vocab=vocab,
            df=df,
            inv_ptr=inv_ptr,
            inv_docs=doc_of[order],
            inv_tfs=tf_of[order],
            norms=encode_lengths(lengths),
            n_docs=n,
            sum_ttf=int(lengths.sum()),
            doc_count=int((lengths > 0).sum()),
        )

    def on_device(self, device: str) -> TorchPostings:
        """The postings and norms as torch tensors on ``device``, for the GPU scorer."""
        import torch

        from mdcr.index.sweep.torch_kernel import TorchPostings

        return TorchPostings(
            inv_ptr=self.inv_ptr,
            inv_docs=torch.from_numpy(self.inv_docs.astype(np.int64)).to(device),
            inv_tfs=torch.from_numpy(np.ascontiguousarray(self.inv_tfs, np.float32)).to(device),
            norms=torch.from_numpy(self.norms.astype(np.int64)).to(device),
            n_docs=len(self.norms),
        )


def norm_tables(terms: PoolTerms, grid: Sequence[tuple[float, float]]) -> np.ndarray:
    """Lucene's per-(k1, b) ``cache``: float32 (len(grid), 256)."""
    _, lengths = _small_float()
    avgdl = terms.avgdl
    one = np.float32(1)
    out = np.empty((len(grid), 256), dtype=np.float32)
    with np.errstate(divide="ignore"):
        for g, (k1, b) in enumerate(grid):
            k1f, bf = np.float32(k1), np.float32(b)
            out[g] = one / (k1f * ((one - bf) + bf * lengths / avgdl))
    return out


def idf(df: np.ndarray, doc_count: int) -> np.ndarray:
    """Lucene's idf, (float) log(1 + (docCount - docFreq + 0.5) / (docFreq + 0.5))."""
    return np.array(
        [math.log(1 + (doc_count - d + 0.5) / (d + 0.5)) for d in df.tolist()], dtype=np.float64
    ).astype(np.float32)


def sweep_query(
    terms: PoolTerms,
    query_terms: Sequence[str],
    tables: np.ndarray,
    k: int,
    exclude: int = -1,
    postings: TorchPostings | None = None,
    **kernel: Any,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per grid point (a row of ``tables``): (document numbers, float32 scores) of the top
    ``k``, document ``exclude`` left out after taking k + 1, as Lucene's search does.
    ``kernel``: :func:`mdcr.index.sweep.kernel.grid_top`'s bounds and pruning (for tests).

    One pass over the query terms' postings (:mod:`mdcr.index.sweep.kernel`) scores every
    grid point at once; with ``postings`` (the pool on a torch device) the same scores are
    computed by :mod:`mdcr.index.sweep.torch_kernel` there.
    """
    from mdcr.index.sweep.kernel import grid_top

    counts = Counter(query_terms)
    found = [(terms.vocab[t], c) for t, c in counts.items() if t in terms.vocab]
    if not found:
        empty = (np.zeros(0, np.int64), np.zeros(0, np.float32))
        return [empty] * len(tables)
    tids = np.array([t for t, _ in found], dtype=np.int64)
    boosts = np.array([c for _, c in found], dtype=np.float32)
    weights = boosts * idf(terms.df[tids], terms.doc_count)
    if postings is not None:
        from mdcr.index.sweep.torch_kernel import grid_top_torch

        ranked = grid_top_torch(tids, weights, postings, np.ascontiguousarray(tables.T), k + 1)
    else:
        ranked = grid_top(
            tids,
            weights,
            terms.inv_ptr,
            terms.inv_docs,
            terms.inv_tfs,
            terms.norms,
            np.ascontiguousarray(tables.T),
            k + 1,
            **kernel,
        )
    out = []
    for docs, scores in ranked:
        keep = docs != exclude
        out.append((docs[keep][:k], scores[keep][:k]))
    return out


def sweep_pool(
    paper_ids: np.ndarray,
    texts: Sequence[str],
    query_ids: Sequence[str],
    query_texts: Sequence[str],
    grid: Sequence[tuple[float, float]],
    k: int,
    *,
    threads: int = 1,
    device: Device | None = None,
) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """BM25 runs of one pool at every grid point: ``[grid point][query] -> (paper ids,
    float64 scores)``, exactly as :meth:`LuceneIndex.search` returns them.

    ``paper_ids`` are the pool's papers sorted (Lucene's document order) and ``texts``
    their title + newline + abstract in that order. Queries are scored on ``device``: a
    GPU through torch (one query at a time, the pool's postings held there), else on
    ``threads`` CPU threads.
    """
    from mdcr.core.errors import InputDataError
    from mdcr.index.lucene.indexes import MAX_QUERY_TERMS, Analyzer

    analyzer = Analyzer()
    workers = max(1, threads)
    terms = PoolTerms.build(texts, analyzer.analyze_many, threads=workers)
    tables = norm_tables(terms, grid)
    position = {pid: i for i, pid in enumerate(paper_ids.tolist())}
    postings = None
    if device is not None and device.is_cuda:
        postings = terms.on_device(device.torch_device)
        workers = 1  # the GPU takes one query at a time

    def one(i: int) -> list[tuple[np.ndarray, np.ndarray]]:
        words = analyzer.analyze(query_texts[i])
        if len(set(words)) > MAX_QUERY_TERMS:
            raise InputDataError(
                f"query {query_ids[i]!r} has more than {MAX_QUERY_TERMS} distinct terms; "
                f"no query is ever truncated: shorten its text in the corpus"
            )
        ranked = sweep_query(
            terms, words, tables, k, position.get(query_ids[i], -1), postings=postings
        )
        return [(paper_ids[d].astype(str), s.astype(np.float64)) for d, s in ranked]

    with ThreadPoolExecutor(max_workers=workers) as pool:
        per_query = list(pool.map(one, range(len(query_ids))))
    return [[per_query[q][g] for q in range(len(query_ids))] for g in range(len(grid))]
