"""Stage ``benchmark-rank`` (``mdcr benchmark rank``): score every (query, candidate) pair.

One retriever's score for every (query, candidate) pair of a benchmark: from an ``encode``
output (the encoder's similarity: inner product, cosine, or minus the squared L2 distance;
multi-vector encoders score a pair by its best sentence pair, as the search stage does),
from Lucene BM25, or from an existing scores file. Writes ``scores.parquet`` and
``scores_<split>.json`` for the original scorer.

BM25 on a benchmark. The paper does not say how MDCR's BM25 row was computed. The release
gives one data file per split, so here each split is one Lucene collection: every query and
candidate of the split (document frequencies and lengths are the collection's). Each query
is searched with a filter that admits only its own candidates, so each candidate gets its
exact BM25 score; one sharing no term with the query scores 0. A per-field collection
would give a pair two scores when its query belongs to two fields, which the scores file
cannot hold. k1 and b default to Anserini's (0.9, 0.4) or come from a ``bm25-tune`` output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from mdcr.contracts.artifacts import PAIR_SCORES
from mdcr.core.config import input_path, param, setting
from mdcr.core.errors import ConfigError
from mdcr.core.stage import STAGES, StageContext, StagePlan, StageSpec, Work
from mdcr.index.bm25.shared import DEFAULT_B, DEFAULT_K1

if TYPE_CHECKING:
    import pandas as pd

    from mdcr.core.stage import PlanFacts

BM25 = "bm25"


@dataclass(frozen=True)
class RankConfig:
    benchmark: str = input_path(help="benchmark build or import output (benchmark.parquet)")
    method: Literal["embeddings", "bm25", "scores"] = param(
        "embeddings",
        help="embeddings: an encode output's similarity; bm25: Lucene BM25, one collection "
        "per split; scores: an existing {qid_cid: score} file",
    )
    embeddings: str | None = input_path(None, help="encode output (method embeddings)")
    scores_file: str | None = input_path(None, help="scores JSON (method scores)")
    bm25_params: str | None = input_path(
        None, help="bm25-tune output whose chosen k1 and b to use (method bm25)"
    )
    retriever: str = param(
        "", help="name of the retriever (default: the encoder's name, bm25, or the file name)"
    )
    k1: float = param(DEFAULT_K1, help="BM25 k1 (when no bm25_params)")
    b: float = param(DEFAULT_B, help="BM25 b (when no bm25_params)")
    splits: tuple[Literal["val", "test"], ...] = param((), help="splits to rank; empty = all")
    threads: int = setting(0, help="BM25 threads (0: all cores)")

    def validate(self) -> None:
        given = {
            "embeddings": self.embeddings,
            "scores": self.scores_file,
        }
        if self.method in given and not given[self.method]:
            key = "embeddings" if self.method == "embeddings" else "scores_file"
            raise ConfigError(f"benchmark-rank: method '{self.method}' needs the {key} input")
        if self.method != "bm25" and self.bm25_params:
            raise ConfigError("benchmark-rank.bm25_params: only for method 'bm25'")
        if not (0 <= self.b <= 1) or self.k1 < 0:
            raise ConfigError(f"benchmark-rank: k1 {self.k1} must be >= 0, b {self.b} in [0, 1]")


def _pair_scores(a: np.ndarray, b: np.ndarray, metric: str) -> np.ndarray:
    """Row-wise scores of two equally long float64 matrices."""
    if metric == "l2":
        d = a - b
        return -(d * d).sum(axis=1)  # type: ignore[no-any-return]
    return (a * b).sum(axis=1)  # type: ignore[no-any-return]


def _all_pairs(q: np.ndarray, c: np.ndarray, metric: str) -> np.ndarray:
    """Scores of every (query sentence, candidate sentence) pair, shape (len(q), len(c))."""
    if metric == "l2":
        d = q[:, None, :] - c[None, :, :]
        return -(d * d).sum(axis=2)  # type: ignore[no-any-return]
    return (q[:, None, :] * c[None, :, :]).sum(axis=2)  # type: ignore[no-any-return]


def _table(store: Any, ids: list[str], multi: bool) -> tuple[Any, Any]:
    """float64 vectors (and offsets) of ``ids`` from a store, as stored (a cosine
    encoder's are stored unit length: :func:`mdcr.encoders.store.cosine_form`), so the
    benchmark scores a pair as the search stage does."""
    rows = store.require_rows(ids, "benchmark papers")
    vec, off = store.doc_vectors(rows) if multi else (store.vectors(rows), None)
    return np.asarray(vec, dtype=np.float64), off


def dense_scores(
    store: Any, pairs: pd.DataFrame, metric: str, query_store: Any = None
) -> np.ndarray:
    """Scores of (query_id, paper_id) pairs from an embedding store, in float64.

    Single vector: inner product (cosine: of the unit vectors the encode stage stores)
    or minus the squared L2 distance. Multi-vector (Aspire): the best pair of a query
    sentence and a candidate sentence, as the search stage scores it. ``query_store``: the
    store in the query role (an asymmetric encoder's query vectors).
    """
    queries = query_store if query_store is not None else store
    q_ids = sorted(set(pairs["query_id"]))
    c_ids = sorted(set(pairs["paper_id"]))
    qpos = {p: i for i, p in enumerate(q_ids)}
    cpos = {p: i for i, p in enumerate(c_ids)}
    qi = np.array([qpos[q] for q in pairs["query_id"]], dtype=np.int64)
    ci = np.array([cpos[p] for p in pairs["paper_id"]], dtype=np.int64)
    sim = "ip" if metric in ("ip", "cos") else "l2"
    out = np.empty(len(pairs), dtype=np.float64)
    multi = bool(store.multi_vector)
    qv, q_off = _table(queries, q_ids, multi)
    cv, c_off = _table(store, c_ids, multi)
    if not multi:
        step = 65_536
        for s in range(0, len(pairs), step):
            out[s : s + step] = _pair_scores(qv[qi[s : s + step]], cv[ci[s : s + step]], sim)
        return out
    order = np.argsort(qi, kind="stable")
    for grp in np.split(order, np.flatnonzero(np.diff(qi[order])) + 1):
        if not len(grp):
            continue
        q = qv[q_off[qi[grp[0]]] : q_off[qi[grp[0]] + 1]]
        lens = np.array([c_off[c + 1] - c_off[c] for c in ci[grp]], dtype=np.int64)
        cand = np.concatenate([cv[c_off[c] : c_off[c + 1]] for c in ci[grp]])
        best_per_sentence = _all_pairs(q, cand, sim).max(axis=0)
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
        out[grp] = np.maximum.reduceat(best_per_sentence, starts)
    return out


def bm25_scores(
    bench: pd.DataFrame,
    papers: pd.DataFrame,
    k1: float,
    b: float,
    text_source: str,
    threads: int,
    ctx: StageContext,
) -> pd.DataFrame:
    """Lucene BM25 score of every (query, candidate) pair; one collection per split.

    The collection is every paper of the split's benchmark (its data file). Each query is
    searched with a filter that admits only its own candidates, so every candidate that
    shares a term with the query gets its exact BM25 score against the whole collection;
    the others score 0. One collection per split gives a pair one score even when its
    query belongs to two fields (the scores file has one key per pair).
    """
    import pandas as pd

    text = dict(
        zip(
            papers["paper_id"],
            (papers["title"].fillna("") + "\n" + papers["abstract"].fillna("")),
            strict=True,
        )
    )
    frames = []
    indexes: dict[str, str] = {}  # split -> its index (recorded: mdcr gc keeps it)
    for split, g in bench.groupby("split", sort=True):
        ids = sorted(set(g["paper_id"]) | set(g["query_id"]))
        indexes[str(split)], path = _split_index(ids, text, text_source, str(split), threads, ctx)
        found = _search_candidates(path, g, text, k1, b, f"bm25 {split}", ctx)
        pairs = g[["split", "field", "query_id", "paper_id"]]
        scores = [
            found.get((q, p), 0.0)
            for q, p in zip(pairs["query_id"], pairs["paper_id"], strict=True)
        ]
        frames.append(pairs.assign(score=scores))
    ctx.record("indexes", indexes)
    return pd.concat(frames, ignore_index=True)


def _split_index(
    ids: list[str],
    text: dict[str, str],
    text_source: str,
    split: str,
    threads: int,
    ctx: StageContext,
) -> tuple[str, Path]:
    """The Lucene index of one split's papers in the store (built when missing): its
    fingerprint and folder."""
    from mdcr.index.lucene.indexes import (
        Doc,
        build_index,
        index_fingerprint,
        index_root,
        read_index_meta,
    )

    fp = index_fingerprint(ids, text_source)
    path = index_root(ctx.store.home if ctx.store is not None else None) / fp
    if read_index_meta(path) is None:
        build_index(
            path,
            ids,
            [Doc(ids, [text[i] for i in ids])],
            meta={"fingerprint": fp, "benchmark": text_source, "collection": split},
            threads=threads,
        )
    return fp, path


def _search_candidates(
    path: Path,
    g: pd.DataFrame,
    text: dict[str, str],
    k1: float,
    b: float,
    desc: str,
    ctx: StageContext,
) -> dict[tuple[str, str], float]:
    """(query, candidate) -> BM25 score, each query searched with a filter that admits
    only its own candidates; a candidate without a shared term is not found."""
    from mdcr.index.lucene.indexes import open_index
    from mdcr.index.lucene.java import autoclass

    cands = g.groupby("query_id", sort=True)["paper_id"].apply(lambda s: sorted(set(s)))
    qids = list(cands.index)
    found: dict[tuple[str, str], float] = {}
    with open_index(path) as index:
        ndv = autoclass("org.apache.lucene.document.NumericDocValuesField")
        builder = autoclass("org.apache.lucene.search.BooleanQuery$Builder")
        occur = autoclass("org.apache.lucene.search.BooleanClause$Occur")
        ord_of = {pid: i for i, pid in enumerate(index.paper_ids)}
        queries, _ = index.build_queries(qids, [text[q] for q in qids])
        searcher = index.searcher(k1, b)
        for q, query in ctx.progress(zip(qids, queries, strict=True), total=len(qids), desc=desc):
            cand = cands[q]
            only = ndv.newSlowSetQuery("ord", *[ord_of[c] for c in cand])
            filtered = builder().add(query, occur.MUST).add(only, occur.FILTER).build()
            for hit in searcher.search(filtered, len(cand)).scoreDocs:
                found[(q, str(index.paper_ids[hit.doc]))] = float(hit.score)
    return found


def run_benchmark_rank(cfg: RankConfig, ctx: StageContext) -> None:
    import pandas as pd

    from mdcr.benchmark.formats import (
        benchmark_splits,
        check_score_keys,
        read_benchmark,
        read_scores,
        read_texts,
        scores_for,
        write_scores,
    )
    from mdcr.contracts.artifacts import PAIR_SCORES
    from mdcr.contracts.facts import RankInfo
    from mdcr.core.fingerprints import artifact_fingerprint
    from mdcr.retrievers.builtin_entry import BM25_ENTRY, entry_of

    folder = ctx.input("benchmark")
    bench = read_benchmark(folder)
    every_split = bench
    splits = benchmark_splits(bench, cfg.splits, "benchmark-rank")
    bench = bench[bench["split"].isin(splits)]
    pairs = bench[["split", "field", "query_id", "paper_id"]]
    entry: dict[str, Any] | None = None  # a scores file is never a built-in entry
    if cfg.method == "embeddings":
        from mdcr.encoders.store import EmbeddingStore

        store = EmbeddingStore(ctx.input("embeddings"))
        query_store = EmbeddingStore(ctx.input("embeddings"), role="query")
        name = cfg.retriever or store.name
        with ctx.timed("score"):
            parts = []
            for _, g in pairs.groupby(["split", "field"], sort=True):
                parts.append(g.assign(score=dense_scores(store, g, store.metric, query_store)))
            scored = pd.concat(parts, ignore_index=True)
        detail = f"metric {store.metric}" + (", multi-vector" if store.multi_vector else "")
        ctx.record("encoder", store.identity)
        ctx.record("embeddings_fingerprint", artifact_fingerprint(ctx.input("embeddings")))
        entry = entry_of(ctx.input("embeddings"))
    elif cfg.method == "bm25":
        k1, b = cfg.k1, cfg.b
        if ctx.inputs.get("bm25_params"):
            from mdcr.index.bm25.tune import read_chosen

            k1, b, _ = read_chosen(ctx.input("bm25_params"))
        name = cfg.retriever or BM25
        with ctx.timed("bm25"):
            scored = bm25_scores(
                bench,
                read_texts(folder),
                k1,
                b,
                artifact_fingerprint(folder),
                cfg.threads,
                ctx,
            )
        detail = f"k1 {k1}, b {b}"
        entry = dict(BM25_ENTRY)
        ctx.record("collection", "one Lucene index per split: all its queries and candidates")
    else:
        path = ctx.input("scores_file")
        name = cfg.retriever or path.stem
        given = read_scores(path)
        check_score_keys(every_split, given, str(path))
        scored = scores_for(bench, given, str(path))
        detail = f"scores file {path.name}"
    scored = scored.sort_values(["split", "field", "query_id", "paper_id"]).reset_index(drop=True)
    scored.to_parquet(PAIR_SCORES.output(ctx, rows=len(scored)), index=False)
    for split in splits:
        part = scored[scored["split"] == split]
        n = write_scores(part, ctx.output(f"scores_{split}.json"))
        ctx.outputs[f"scores_{split}.json"] = n
    RankInfo(name, cfg.method, artifact_fingerprint(folder), tuple(splits), detail, entry).record(
        ctx
    )


def plan_benchmark_rank(
    cfg: RankConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    what = {
        "embeddings": "the encoder's similarity from its embeddings",
        "bm25": "Lucene BM25 ("
        + ("k1, b from bm25-tune" if inputs.get("bm25_params") else f"k1 {cfg.k1}, b {cfg.b}")
        + ") over one collection per split",
        "scores": "the given scores file",
    }[cfg.method]
    from mdcr.planning.work import facts_of

    bench = facts_of(inputs, "benchmark", upstream)
    rate = "benchmark-rank-bm25" if cfg.method == "bm25" else "benchmark-rank-dense"
    return StagePlan(
        f"score every (query, candidate) pair of the benchmark with {what}",
        work=Work(rate, units=float(bench[0].papers)) if bench else None,
    )


SPEC = STAGES.register(
    StageSpec(
        name="benchmark-rank",
        version="3",
        config=RankConfig,
        run=run_benchmark_rank,
        help="score every (query, candidate) pair of a benchmark with one retriever",
        plan=plan_benchmark_rank,
        main_output="scores.parquet",
        command="benchmark rank",
        writes=(PAIR_SCORES,),
    )
)
