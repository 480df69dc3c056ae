"""Lucene BM25 indexes, one per pool, and batch search over them (through pyjnius).

Index layout. Each document is one paper: field ``contents`` = title + newline + abstract,
analysed by Anserini's ``DefaultEnglishAnalyzer`` (Lucene's StandardTokenizer, English
possessives, lower case, Lucene's 33 English stopwords, Porter stemmer), the analyzer
pyserini uses by default; it is indexed with term frequencies and length norms, as
Anserini's ``IndexCollection`` does without ``-storePositions``. Index building uses
Lucene's ``IndexWriter`` directly, fed by several Python threads (pyjnius releases the GIL
while Java runs, so analysis and inversion run in parallel), with two choices that make the
index deterministic whatever the thread count:

- Papers are numbered in ``paper_id`` order (``ord``), the index is sorted on ``ord`` and
  merged into one segment, so Lucene's document number *is* the rank of the paper id. The
  paper ids are stored next to the index (``paper_ids.parquet``) and hits map back with one
  array lookup, without reading stored fields.
- Lucene breaks score ties by document number, which is therefore ``paper_id`` ascending:
  exactly the run contract (docs/architecture.md §3, ties §7), also at the top-k boundary.

Long queries. A query is the bag of words of the query paper's title + abstract: one
``TermQuery`` clause per distinct analysed term, boosted by its count (Anserini's
``BagOfWordsQueryGenerator``). Lucene refuses Boolean queries with more than
``IndexSearcher.maxClauseCount`` clauses (1024 by default), which a long abstract can exceed.
The limit is raised to :data:`MAX_QUERY_TERMS` before any query is built, so every term
counts; a query with more distinct terms than that raises an error naming it (no text is
truncated, ever). Search time grows with the number of distinct terms.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mdcr.core.errors import InputDataError, ManifestMismatchError
from mdcr.core.fingerprints import FINGERPRINT_LEN, digest
from mdcr.index.lucene.java import autoclass, java_error_message, start_jvm

INDEX_FORMAT = 1
# The store's folder of indexes (<home>/lucene-index/<fp>/); META_FILE is an index's
# manifest, written last: a folder without it is not an index.
INDEX_STAGE = "lucene-index"
META_FILE = "mdcr-index.json"
IDS_FILE = "paper_ids.parquet"
FIELD = "contents"
# Texts analysed per JVM call by Analyzer.analyze_many, joined around a word the analyzer
# keeps as it is (lower case, no stopword, no suffix Porter removes).
ANALYZE_BATCH = 512
SEPARATOR_WORD = "mdcrdocsep"
_SEPARATOR = f"\n{SEPARATOR_WORD}\n"
# Distinct analysed terms a query may have: far above any title + abstract (Lucene's default
# limit, 1024, is not). Queries past it fail loudly; they are never cut.
MAX_QUERY_TERMS = 65_536
ANALYZER = {
    "analyzer": "io.anserini.analysis.DefaultEnglishAnalyzer",
    "stemmer": "porter",
    "stopwords": "lucene-english",
    "field": FIELD,
    "text": "title + '\\n' + abstract",
    "index_options": "DOCS_AND_FREQS",
}
_FIELD_SIGNATURE = (
    "(Ljava/lang/String;Ljava/lang/CharSequence;Lorg/apache/lucene/index/IndexableFieldType;)V"
)
_BOOLEAN_QUERY = "org.apache.lucene.search.BooleanQuery"
# Documents handed to the Java side per call; small enough to keep threads balanced.
_CHUNK = 256


def default_threads() -> int:
    return max(1, os.cpu_count() or 1)


def index_root(home: Path | None = None) -> Path:
    """Where the indexes live: ``<home>/lucene-index/`` of the store (``home``, default the
    store :func:`mdcr.core.store.default_home` finds), one folder per index fingerprint beside
    its lock, like a stage's outputs; never the working folder.

    Not a stage parameter: where the indexes are changes no result, so it must not change
    any stage fingerprint.
    """
    if home is None:
        from mdcr.core.store import default_home

        home = default_home()
    return home / INDEX_STAGE


def ids_digest(paper_ids: Sequence[str]) -> str:
    """sha256 of the sorted paper ids (newline-joined): what a pool's index contains."""
    h = hashlib.sha256()
    for start in range(0, len(paper_ids), 100_000):
        h.update(("\n".join(paper_ids[start : start + 100_000]) + "\n").encode())
    return h.hexdigest()


def index_fingerprint(paper_ids: Sequence[str], text_source: str) -> str:
    """An index's identity: its papers, where their text came from, and the analysis.

    Pools with the same papers (a re-run, or a val and test pool that coincide) share it.
    Hashed by the store's one recipe (:func:`mdcr.core.fingerprints.digest`).
    """
    body = {
        "format": INDEX_FORMAT,
        "ids": ids_digest(paper_ids),
        "n": len(paper_ids),
        "text": text_source,
        "analyzer": ANALYZER,
    }
    return digest(body)[:FINGERPRINT_LEN]


@dataclass(frozen=True)
class Doc:
    """A batch of papers to index: ids and texts, in any order."""

    ids: Sequence[str]
    texts: Sequence[str]


class _Java:
    """The Java classes used here, loaded once."""

    _instance: _Java | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        start_jvm()
        c = autoclass
        self.File = c("java.io.File")
        self.Arrays = c("java.util.Arrays")
        self.FSDirectory = c("org.apache.lucene.store.FSDirectory")
        self.DirectoryReader = c("org.apache.lucene.index.DirectoryReader")
        self.IndexWriter = c("org.apache.lucene.index.IndexWriter")
        self.IndexWriterConfig = c("org.apache.lucene.index.IndexWriterConfig")
        self.OpenMode = c("org.apache.lucene.index.IndexWriterConfig$OpenMode")
        self.IndexOptions = c("org.apache.lucene.index.IndexOptions")
        self.Sort = c("org.apache.lucene.search.Sort")
        self.SortField = c("org.apache.lucene.search.SortField")
        self.SortFieldType = c("org.apache.lucene.search.SortField$Type")
        self.Field = c("org.apache.lucene.document.Field")
        self.FieldType = c("org.apache.lucene.document.FieldType")
        self.NumericDocValuesField = c("org.apache.lucene.document.NumericDocValuesField")
        self.IndexSearcher = c("org.apache.lucene.search.IndexSearcher")
        self.BM25Similarity = c("org.apache.lucene.search.similarities.BM25Similarity")
        self.Analyzer = c("io.anserini.analysis.DefaultEnglishAnalyzer")
        self.AnalyzerUtils = c("io.anserini.analysis.AnalyzerUtils")
        self.BagOfWords = c("io.anserini.search.query.BagOfWordsQueryGenerator")
        self.lucene_version = str(c("org.apache.lucene.util.Version").LATEST.toString())
        if self.IndexSearcher.getMaxClauseCount() < MAX_QUERY_TERMS:
            self.IndexSearcher.setMaxClauseCount(MAX_QUERY_TERMS)

    @classmethod
    def get(cls) -> _Java:
        with cls._lock:
            if cls._instance is None:
                cls._instance = _Java()
            return cls._instance

    def analyzer(self) -> Any:
        return self.Analyzer.newDefaultInstance()

    def path(self, p: Path) -> Any:
        return self.File(str(p)).toPath()


def analyze(text: str) -> list[str]:
    """The analysed terms of ``text``, in order, exactly as the index and the queries see them."""
    j = _Java.get()
    return [str(t) for t in j.AnalyzerUtils.analyze(j.analyzer(), text).toArray()]


@functools.cache
def _join_class() -> Any:
    """``java.lang.String`` with ``join(CharSequence, Iterable)`` bound by its signature
    (pyjnius cannot pick that overload from a Python str and a List)."""
    from jnius import JavaClass, JavaStaticMethod, MetaJavaClass

    class JString(JavaClass, metaclass=MetaJavaClass):  # type: ignore[misc]
        __javaclass__ = "java/lang/String"
        join = JavaStaticMethod("(Ljava/lang/CharSequence;Ljava/lang/Iterable;)Ljava/lang/String;")

    return JString


class Analyzer:
    """The index's analyzer for many texts from many threads.

    Only static methods are called (``AnalyzerUtils.analyze``, ``String.join``), never a
    method on a Java object, which pyjnius cannot do safely from several threads (see
    :func:`_add_documents`). Analysed terms never hold a space, so joining them with
    spaces and splitting in Python gives them back.
    """

    def __init__(self) -> None:
        self.j = _Java.get()
        self.analyzer = self.j.analyzer()
        self.analyze(".")  # pyjnius creates its class proxies lazily: once, in this thread

    def analyze(self, text: str) -> list[str]:
        joined = _join_class().join(" ", self.j.AnalyzerUtils.analyze(self.analyzer, text))
        return str(joined).split(" ") if joined else []

    def analyze_many(self, texts: Sequence[str]) -> tuple[pa.Array, np.ndarray]:
        """The terms of many texts: (every term, text after text, as one Arrow string
        array; the number of terms of each text), exactly as :meth:`analyze` gives them.

        :data:`ANALYZE_BATCH` texts go to the JVM in one call, joined by a newline, the
        word :data:`SEPARATOR_WORD` and a newline. A newline always ends a word (Unicode
        word breaks, rules WB3a and WB3b, which Lucene's StandardTokenizer follows) and the
        filters after it see one term at a time, so each text is analysed as if alone. The
        separator words are counted: a batch with a text that holds the word itself is
        analysed text by text instead. One call per text took twice as long (20,000
        benchmark abstracts: 1.16 against 0.59 s on one thread; pyjnius pays per call and
        per returned string).
        """
        import pyarrow.compute as pc

        lengths = np.zeros(len(texts), dtype=np.int64)
        parts: list[pa.Array] = []
        for start in range(0, len(texts), ANALYZE_BATCH):
            batch = texts[start : start + ANALYZE_BATCH]
            analysed = self.j.AnalyzerUtils.analyze(self.analyzer, _SEPARATOR.join(batch))
            joined = str(_join_class().join(" ", analysed))
            terms = pc.split_pattern(pa.array([joined] if joined else [], pa.string()), " ")
            flat = terms.flatten()
            is_separator = pc.equal(flat, SEPARATOR_WORD)
            ends = np.flatnonzero(is_separator.to_numpy(zero_copy_only=False))
            if len(ends) == len(batch) - 1:
                bounds = np.concatenate([[-1], ends, [len(flat)]])
                lengths[start : start + len(batch)] = np.diff(bounds) - 1
                parts.append(flat.filter(pc.invert(is_separator)))
            else:  # a text holds the separator word: one call per text
                alone = [self.analyze(text) for text in batch]
                lengths[start : start + len(batch)] = [len(t) for t in alone]
                parts.append(pa.array([term for t in alone for term in t], pa.string()))
        flat_all = pa.concat_arrays(parts) if parts else pa.array([], pa.string())
        return flat_all, lengths


# ---------------------------------------------------------------------------------------
# Building


def _add_documents(
    j: _Java, writer: Any, content_type: Any, chunk: tuple[list[int], list[str]]
) -> int:
    """Add documents using only constructors, static methods and calls on ``writer``.

    pyjnius binds an instance method to its receiver on a descriptor shared by all threads
    (``JavaMethod.__get__``), so two threads calling the same method on *different* objects
    can swap receivers. Threads here therefore never call methods on per-thread objects.
    A document is its ``ord`` (sort key; document number after the final merge) and its
    text; paper ids live in ``paper_ids.parquet``.
    """
    as_list = j.Arrays.asList
    docs = [
        as_list(
            j.NumericDocValuesField("ord", o),
            j.Field(FIELD, text, content_type, signature=_FIELD_SIGNATURE),
        )
        for o, text in zip(*chunk, strict=True)
    ]
    writer.addDocuments(as_list(*docs))
    return len(docs)


def build_index(
    target: Path,
    paper_ids: Sequence[str],
    batches: Iterable[Doc],
    *,
    meta: dict[str, Any],
    threads: int = 0,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Build a Lucene index of ``paper_ids`` (sorted, unique) at ``target``, atomically.

    ``batches`` yields the papers' texts (each id exactly once). The index is built in a
    temporary folder beside ``target`` and renamed into place only when complete, so a crash
    loses at most this index. One process at a time builds an index (a lock file beside
    it); one that waited finds it built and uses it. Returns the index's metadata (also
    written to ``mdcr-index.json``).
    """
    from mdcr.core.locks import exclusive

    target.parent.mkdir(parents=True, exist_ok=True)
    lock = target.with_name(f".{target.name}.lock")
    with exclusive(lock, what=f"Lucene index {target}", quiet=progress is None):
        built = read_index_meta(target)
        if built is not None:
            return built
        return _build_index(target, paper_ids, batches, meta, threads, progress)


def _build_index(
    target: Path,
    paper_ids: Sequence[str],
    batches: Iterable[Doc],
    meta: dict[str, Any],
    threads: int,
    progress: Callable[[int], None] | None,
) -> dict[str, Any]:
    """Build the index in a work folder beside ``target``, then rename it into place."""
    j = _Java.get()
    threads = threads or default_threads()
    if any(paper_ids[i] >= paper_ids[i + 1] for i in range(len(paper_ids) - 1)):
        raise InputDataError("paper ids of an index must be sorted and unique")
    target.parent.mkdir(parents=True, exist_ok=True)
    _clean_stale(target)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    t0 = time.perf_counter()
    try:
        directory = j.FSDirectory.open(j.path(tmp))
        writer = j.IndexWriter(directory, _writer_config(j))
        ord_of = {pid: i for i, pid in enumerate(paper_ids)}
        seen = _add_batches(j, writer, batches, ord_of, threads, progress)
        writer.forceMerge(1)
        writer.commit()
        writer.close()
        directory.close()
        if seen != len(paper_ids):
            raise InputDataError(
                f"index got {seen} documents for {len(paper_ids)} paper ids; every paper of "
                f"the pool needs a title/abstract in the corpus"
            )
        pq.write_table(
            pa.table({"paper_id": pa.array(list(paper_ids), pa.string())}), tmp / IDS_FILE
        )
        info = {
            **meta,
            "format": INDEX_FORMAT,
            "n_docs": len(paper_ids),
            "ids_sha256": ids_digest(paper_ids),
            "analyzer": ANALYZER,
            "lucene": j.lucene_version,
            "build_s": round(time.perf_counter() - t0, 3),
            "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "threads": threads,
        }
        (tmp / META_FILE).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
        _move_into_place(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return read_index_meta(target) or info


def _writer_config(j: _Java) -> Any:
    """One segment sorted by paper number, BM25's length norms, no compound files."""
    config = j.IndexWriterConfig(j.analyzer())
    config.setOpenMode(j.OpenMode.CREATE)
    config.setIndexSort(j.Sort(j.SortField("ord", j.SortFieldType.LONG)))
    config.setRAMBufferSizeMB(512.0)
    config.setUseCompoundFile(False)
    config.setSimilarity(j.BM25Similarity())  # length norms as BM25 reads them
    return config


def _add_batches(
    j: _Java,
    writer: Any,
    batches: Iterable[Doc],
    ord_of: dict[str, int],
    threads: int,
    progress: Callable[[int], None] | None,
) -> int:
    """Add every document, in chunks of ``_CHUNK`` on ``threads`` threads; return how many."""
    content_type = j.FieldType()
    content_type.setTokenized(True)
    content_type.setStored(False)
    content_type.setIndexOptions(j.IndexOptions.DOCS_AND_FREQS)
    content_type.freeze()

    def work(chunk: tuple[list[int], list[str]]) -> int:
        return _add_documents(j, writer, content_type, chunk)

    seen = 0
    # The first document goes in from this thread: pyjnius creates its class proxies
    # (e.g. the List that Arrays.asList returns) lazily, and that is not thread-safe.
    warm = True
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mdcr-index") as pool:
        for batch in batches:
            ids = [str(x) for x in batch.ids]
            try:
                ords = [ord_of[pid] for pid in ids]
            except KeyError as exc:
                raise InputDataError(
                    f"paper {exc.args[0]!r} is not among the index's paper ids"
                ) from None
            texts = [str(t) for t in batch.texts]
            if warm and ids:
                n = work(([ords[0]], [texts[0]]))
                seen += n
                if progress is not None:
                    progress(n)
                ords, texts = ords[1:], texts[1:]
                warm = False
            chunks = [
                (ords[s : s + _CHUNK], texts[s : s + _CHUNK]) for s in range(0, len(ords), _CHUNK)
            ]
            for n in pool.map(work, chunks):
                seen += n
                if progress is not None:
                    progress(n)
    return seen


def _move_into_place(tmp: Path, target: Path) -> None:
    """Rename the finished work folder to ``target``; a complete index another process
    put there first is kept, a stale incomplete folder replaced."""
    try:
        os.replace(tmp, target)
    except OSError:
        if read_index_meta(target) is None:  # a stale, incomplete folder: replace it
            shutil.rmtree(target, ignore_errors=True)
            os.replace(tmp, target)
        # else: another process finished the same index first; keep its copy


def _clean_stale(target: Path) -> None:
    """Remove temporary folders of this index left by processes that no longer run."""
    for old in target.parent.glob(f".{target.name}.tmp-*"):
        pid = old.name.rsplit("-", 1)[-1]
        alive = False
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                os.kill(int(pid), 0)
                alive = True
            except OSError:
                alive = False
        if not alive:
            shutil.rmtree(old, ignore_errors=True)


def read_index_meta(path: Path) -> dict[str, Any] | None:
    """The metadata of a complete index folder, or None."""
    meta = path / META_FILE
    if not meta.is_file() or not (path / IDS_FILE).is_file():
        return None
    try:
        data = json.loads(meta.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
        return None
    return data


# ---------------------------------------------------------------------------------------
# Searching


@dataclass(frozen=True)
class QueryStats:
    """Distinct analysed terms per query (the number of Boolean clauses)."""

    n_terms: np.ndarray

    def summary(self) -> dict[str, float]:
        if len(self.n_terms) == 0:
            return {"queries": 0}
        return {
            "queries": len(self.n_terms),
            "mean_terms": round(float(self.n_terms.mean()), 1),
            "max_terms": int(self.n_terms.max()),
            "over_1024": int((self.n_terms > 1024).sum()),
            "empty": int((self.n_terms == 0).sum()),
        }


class LuceneIndex:
    """An open per-pool index: BM25 search with any (k1, b), many queries in parallel."""

    def __init__(self, path: Path) -> None:
        self.j = _Java.get()
        self.path = path
        meta = read_index_meta(path)
        if meta is None:
            raise ManifestMismatchError(
                f"'{path}' is not a complete mdcr index; delete it and re-run the stage"
            )
        self.meta = meta
        self.paper_ids = np.asarray(
            pq.read_table(path / IDS_FILE)["paper_id"].to_numpy(zero_copy_only=False),
            dtype=object,
        )
        try:
            self.directory = self.j.FSDirectory.open(self.j.path(path))
            self.reader = self.j.DirectoryReader.open(self.directory)
        except Exception as exc:
            raise ManifestMismatchError(
                f"cannot open the Lucene index at '{path}' ({java_error_message(exc)}); "
                f"delete it and re-run the stage"
            ) from exc
        n = len(self.paper_ids)
        if (
            self.reader.maxDoc() != n
            or self.reader.numDocs() != n
            or self.reader.leaves().size() > 1
        ):
            raise ManifestMismatchError(
                f"the Lucene index at '{path}' does not match its paper ids; delete it and re-run"
            )
        self._check_order()
        self.analyzer = self.j.analyzer()
        self.generator = self.j.BagOfWords()

    def _check_order(self) -> None:
        """Check that document number i has ``ord`` i, i.e. is paper_ids[i] (ties rely on it)."""
        n = len(self.paper_ids)
        if n == 0:
            return
        ords = self.reader.leaves().get(0).reader().getNumericDocValues("ord")
        for i in sorted({0, n // 3, n // 2, n - 1}):
            if not ords.advanceExact(i) or ords.longValue() != i:
                raise ManifestMismatchError(
                    f"the Lucene index at '{self.path}' is not in paper_id order; delete it "
                    f"and re-run the stage"
                )

    def close(self) -> None:
        self.reader.close()
        self.directory.close()

    def __enter__(self) -> LuceneIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def searcher(self, k1: float, b: float) -> Any:
        searcher = self.j.IndexSearcher(
            self.reader, signature="(Lorg/apache/lucene/index/IndexReader;)V"
        )
        searcher.setSimilarity(self.j.BM25Similarity(float(k1), float(b)))
        return searcher

    def build_queries(
        self, query_ids: Sequence[str], texts: Sequence[str]
    ) -> tuple[list[Any], QueryStats]:
        """Lucene queries for the texts (analysed once; reusable with any k1, b).

        Built in the calling thread: counting a query's clauses calls methods on each
        query object, which pyjnius cannot do safely from several threads.
        """
        from jnius import cast

        queries, n_terms = [], np.zeros(len(texts), dtype=np.int64)
        for i, text in enumerate(texts):
            try:
                q = self.generator.buildQuery(FIELD, self.analyzer, text)
            except Exception as exc:  # Lucene's TooManyClauses, through pyjnius
                if "TooManyClauses" not in f"{getattr(exc, 'classname', '')} {exc}":
                    raise
                raise InputDataError(
                    f"query {query_ids[i]!r} has more than {MAX_QUERY_TERMS} distinct terms; "
                    f"no query is ever truncated: shorten its text in the corpus"
                ) from None
            n = int(cast(_BOOLEAN_QUERY, q).clauses().size())
            queries.append(q)
            n_terms[i] = n
        return queries, QueryStats(n_terms)

    def search(
        self,
        queries: Sequence[Any],
        k: int,
        *,
        k1: float,
        b: float,
        exclude: Sequence[str | None] | None = None,
        threads: int = 0,
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Top ``k`` (paper ids, float64 scores) per query, ties by paper_id, query excluded.

        One more hit than ``k`` is fetched so that dropping the query paper still leaves k.
        Queries run in parallel threads that share one searcher (the only object they call
        methods on; see :func:`_add_documents` for why).
        """
        searcher = self.searcher(k1, b)
        n = min(k + 1, max(1, len(self.paper_ids)))
        ids_of = self.paper_ids

        def one(i: int) -> tuple[np.ndarray, np.ndarray]:
            hits = searcher.search(queries[i], n).scoreDocs
            docs = np.fromiter((h.doc for h in hits), dtype=np.int64, count=len(hits))
            scores = np.fromiter((h.score for h in hits), dtype=np.float32, count=len(hits))
            ids = ids_of[docs].astype(str) if len(docs) else np.array([], dtype=str)
            sc = scores.astype(np.float64)
            ex = exclude[i] if exclude is not None else None
            if ex is not None:
                keep = ids != ex
                ids, sc = ids[keep], sc[keep]
            return ids[:k], sc[:k]

        if not queries:
            return []
        first = one(0)  # in this thread: pyjnius creates the hit classes' proxies lazily
        workers = min(threads or default_threads(), len(queries))
        if workers <= 1:
            return [first] + [one(i) for i in range(1, len(queries))]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mdcr-search") as pool:
            return [first, *pool.map(one, range(1, len(queries)))]


@contextlib.contextmanager
def open_index(path: Path) -> Iterator[LuceneIndex]:
    index = LuceneIndex(path)
    try:
        yield index
    finally:
        index.close()
