"""Scoring encoders on an MDCR benchmark, and the one-command ``mdcr evaluate``.

Three stages, each cached in the store like every other:

- ``benchmark-import`` (``mdcr benchmark import``): the official release files
  (``mdcr_{val,test}.json`` + ``mdcr_{val,test}_data.jsonl``) into the internal form:
  ``benchmark.parquet`` and ``papers.parquet`` (paper_id, title, abstract).
- ``benchmark-rank`` (``mdcr benchmark rank``): one retriever's score for every (query,
  candidate) pair of a benchmark: from an ``encode`` output (the encoder's similarity:
  inner product, cosine, or minus the squared L2 distance; multi-vector encoders score a
  pair by its best sentence pair), from Lucene BM25, or from an existing scores file.
  Writes ``scores.parquet`` and ``scores_<split>.json`` for the original scorer.
- ``benchmark-score`` (``mdcr benchmark score``): MAP, nDCG and R@5 with the original
  scorer's semantics (:mod:`mdcr.eval.mdcr_scoring`), per field and macro-averaged, the
  candidate-type analysis, and the Table 3 / Table 4 layouts in ``report.md``.

BM25 on a benchmark. The paper does not say how MDCR's BM25 row was computed. The release
gives one data file per split, so here each split is one Lucene collection: every query and
candidate of the split (document frequencies and lengths are the collection's). Each query
is searched with a filter that admits only its own candidates, so each candidate gets its
exact BM25 score; one sharing no term with the query scores 0. A per-field collection
would give a pair two scores when its query belongs to two fields, which the scores file
cannot hold. k1 and b default to Anserini's (0.9, 0.4) or come from a ``bm25-tune`` output.

``mdcr evaluate --encoder SPEC --benchmark PATH`` runs these stages (and ``encode``) for
one or more encoders, or for a scores file (``--scores``), and prints the per-field table
and the macro average. With ``--pools`` it instead runs encode, search (or bm25) and score
on pools that ``mdcr pools`` built, and writes a report with the retrievers already scored
on those pools.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from mdcr.config import input_path, param, setting
from mdcr.errors import ConfigError, InputDataError, ManifestMismatchError
from mdcr.stage import StageContext, StageSpec, register

if TYPE_CHECKING:
    import pandas as pd

    from mdcr.store import Artifact, Store

BENCHMARK_FILE = "benchmark.parquet"
PAPERS_FILE = "papers.parquet"
SCORES_FILE = "scores.parquet"
DEFAULT_K1 = 0.9
DEFAULT_B = 0.4
BM25 = "bm25"


# ============================================================================ inputs


def read_benchmark(folder: Path, where: str) -> pd.DataFrame:
    """The internal benchmark rows of a ``benchmark`` or ``benchmark-import`` output."""
    import pandas as pd

    from mdcr.pools.formats import check_benchmark

    path = folder / BENCHMARK_FILE
    if not path.is_file():
        raise InputDataError(
            f"{where}: no {BENCHMARK_FILE} in '{folder}'; give a benchmark build or import output"
        )
    return check_benchmark(pd.read_parquet(path), str(path))


def read_papers(folder: Path, where: str) -> pd.DataFrame:
    import pandas as pd

    path = folder / PAPERS_FILE
    if not path.is_file():
        raise InputDataError(
            f"{where}: no {PAPERS_FILE} (titles and abstracts) in '{folder}'; import the "
            "benchmark with its mdcr_<split>_data.jsonl files"
        )
    return pd.read_parquet(path, columns=["paper_id", "title", "abstract"]).astype(str)


def _splits(bench: pd.DataFrame, wanted: tuple[str, ...], where: str) -> list[str]:
    have = [s for s in ("val", "test") if s in set(bench["split"])]
    if not wanted:
        return have
    missing = [s for s in wanted if s not in have]
    if missing:
        raise ConfigError(
            f"{where}.splits: the benchmark has no '{missing[0]}' split; it has: "
            f"{', '.join(have) or 'none'}"
        )
    return [s for s in have if s in wanted]


# ============================================================================ import


@dataclass(frozen=True)
class ImportConfig:
    source: str = input_path(
        help="official release: a folder with mdcr_<split>.json (+ mdcr_<split>_data.jsonl), "
        "one such JSON file, or an HF export folder (queries/ and papers/)"
    )
    splits: tuple[Literal["val", "test"], ...] = param((), help="splits to import; empty = all")


def run_import(cfg: ImportConfig, ctx: StageContext) -> None:
    import pandas as pd

    from mdcr.pools.formats import (
        check_benchmark,
        find_official,
        load_hf,
        read_official,
        read_papers_jsonl,
        sort_benchmark,
    )

    source = ctx.input("source")
    papers: pd.DataFrame | None
    if source.is_dir() and (source / "queries").is_dir() and (source / "papers").is_dir():
        bench, papers = load_hf(source)
        kind = "hf"
    else:
        found = find_official(source)
        if not found:
            raise InputDataError(
                f"'{source}' holds no mdcr_val.json or mdcr_test.json; give the official files"
            )
        frames, texts = [], []
        for _split, (js, data) in sorted(found.items()):
            frames.append(read_official(js))
            if data is not None:
                texts.append(read_papers_jsonl(data))
        bench = pd.concat(frames, ignore_index=True)
        papers = pd.concat(texts, ignore_index=True).drop_duplicates("paper_id") if texts else None
        if papers is not None and len(texts) < len(found):
            missing = [s for s, (_, d) in found.items() if d is None]
            raise InputDataError(
                f"'{source}': mdcr_{missing[0]}_data.jsonl is missing while another split has "
                "its data file; give both or neither"
            )
        kind = "official"
    splits = _splits(bench, cfg.splits, "benchmark-import")
    bench = sort_benchmark(check_benchmark(bench[bench["split"].isin(splits)], str(source)))
    bench.to_parquet(ctx.output(BENCHMARK_FILE, rows=len(bench)), index=False)
    if papers is not None:
        ids = set(bench["paper_id"]) | set(bench["query_id"])
        missing_ids = sorted(ids - set(papers["paper_id"]))
        if missing_ids:
            raise InputDataError(
                f"'{source}': {len(missing_ids)} benchmark papers have no title/abstract in the "
                f"data file (e.g. '{missing_ids[0]}')"
            )
        papers = papers[papers["paper_id"].isin(ids)].sort_values("paper_id")
        papers.to_parquet(ctx.output(PAPERS_FILE, rows=len(papers)), index=False)
    ctx.record("format", kind)
    ctx.record("splits", splits)
    ctx.record("queries", int(bench.groupby(["split", "field", "query_id"]).ngroups))
    ctx.record("texts", papers is not None)


# ============================================================================ rank


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


def _normalize16(x: np.ndarray) -> np.ndarray:
    """Unit vectors in float16, as the search stage stores them for cosine."""
    x32 = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x32, axis=1, keepdims=True)
    return (x32 / np.maximum(norms, 1e-12)).astype(np.float16)


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


def dense_scores(store: Any, pairs: pd.DataFrame, metric: str) -> np.ndarray:
    """Scores of (query_id, paper_id) pairs from an embedding store, in float64.

    Single vector: inner product (cosine: on unit vectors, as the search stage stores them)
    or minus the squared L2 distance. Multi-vector (Aspire): the best pair of a query
    sentence and a candidate sentence, as the search stage scores it.
    """
    ids = sorted(set(pairs["query_id"]) | set(pairs["paper_id"]))
    rows = store.require_rows(ids, "benchmark papers")
    pos = {p: i for i, p in enumerate(ids)}
    qi = np.array([pos[q] for q in pairs["query_id"]], dtype=np.int64)
    ci = np.array([pos[p] for p in pairs["paper_id"]], dtype=np.int64)
    sim = "ip" if metric in ("ip", "cos") else "l2"
    out = np.empty(len(pairs), dtype=np.float64)
    if not store.multi_vector:
        vec = store.vectors(rows)
        if metric == "cos":
            vec = _normalize16(vec)
        v = np.asarray(vec, dtype=np.float64)
        step = 65_536
        for s in range(0, len(pairs), step):
            out[s : s + step] = _pair_scores(v[qi[s : s + step]], v[ci[s : s + step]], sim)
        return out
    vec, off = store.doc_vectors(rows)
    if metric == "cos":
        vec = _normalize16(vec)
    v = np.asarray(vec, dtype=np.float64)
    order = np.argsort(qi, kind="stable")
    for grp in np.split(order, np.flatnonzero(np.diff(qi[order])) + 1):
        if not len(grp):
            continue
        q = v[off[qi[grp[0]]] : off[qi[grp[0]] + 1]]
        lens = np.array([off[c + 1] - off[c] for c in ci[grp]], dtype=np.int64)
        cand = np.concatenate([v[off[c] : off[c + 1]] for c in ci[grp]])
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

    from mdcr.index.java import autoclass
    from mdcr.index.lucene import (
        Doc,
        build_index,
        index_fingerprint,
        index_root,
        open_index,
        read_index_meta,
    )

    text = dict(
        zip(
            papers["paper_id"],
            (papers["title"].fillna("") + "\n" + papers["abstract"].fillna("")),
            strict=True,
        )
    )
    frames = []
    for split, g in bench.groupby("split", sort=True):
        ids = sorted(set(g["paper_id"]) | set(g["query_id"]))
        fp = index_fingerprint(ids, text_source)
        path = index_root() / fp
        if read_index_meta(path) is None:
            build_index(
                path,
                ids,
                [Doc(ids, [text[i] for i in ids])],
                meta={"fingerprint": fp, "benchmark": text_source, "collection": str(split)},
                threads=threads,
            )
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
            for q, query in ctx.progress(
                zip(qids, queries, strict=True), total=len(qids), desc=f"bm25 {split}"
            ):
                cand = cands[q]
                only = ndv.newSlowSetQuery("ord", *[ord_of[c] for c in cand])
                filtered = builder().add(query, occur.MUST).add(only, occur.FILTER).build()
                for hit in searcher.search(filtered, len(cand)).scoreDocs:
                    found[(q, str(index.paper_ids[hit.doc]))] = float(hit.score)
        pairs = g[["split", "field", "query_id", "paper_id"]]
        scores = [
            found.get((q, p), 0.0)
            for q, p in zip(pairs["query_id"], pairs["paper_id"], strict=True)
        ]
        frames.append(pairs.assign(score=scores))
    return pd.concat(frames, ignore_index=True)


def _bm25_params(folder: Path) -> tuple[float, float]:
    file = folder / "chosen.json" if folder.is_dir() else folder
    try:
        chosen = json.loads(file.read_text())
        return float(chosen["k1"]), float(chosen["b"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputDataError(
            f"'{file}' is not a bm25-tune choice ({exc}); point bm25_params to a bm25-tune output"
        ) from None


def run_rank(cfg: RankConfig, ctx: StageContext) -> None:
    import pandas as pd

    from mdcr.pools.formats import read_scores, scores_for, write_scores
    from mdcr.store import artifact_fingerprint

    folder = ctx.input("benchmark")
    bench = read_benchmark(folder, "benchmark-rank")
    splits = _splits(bench, cfg.splits, "benchmark-rank")
    bench = bench[bench["split"].isin(splits)]
    pairs = bench[["split", "field", "query_id", "paper_id"]]
    if cfg.method == "embeddings":
        from mdcr.encoders.store import EmbeddingStore

        store = EmbeddingStore(ctx.input("embeddings"))
        name = cfg.retriever or store.name
        with ctx.timed("score"):
            parts = []
            for _, g in pairs.groupby(["split", "field"], sort=True):
                parts.append(g.assign(score=dense_scores(store, g, store.metric)))
            scored = pd.concat(parts, ignore_index=True)
        ctx.record("metric", store.metric)
        ctx.record("multi_vector", store.multi_vector)
        ctx.record("encoder", store.identity)
        ctx.record("embeddings_fingerprint", artifact_fingerprint(ctx.input("embeddings")))
    elif cfg.method == "bm25":
        k1, b = cfg.k1, cfg.b
        if ctx.inputs.get("bm25_params"):
            k1, b = _bm25_params(ctx.input("bm25_params"))
        name = cfg.retriever or BM25
        with ctx.timed("bm25"):
            scored = bm25_scores(
                bench,
                read_papers(folder, "benchmark-rank"),
                k1,
                b,
                artifact_fingerprint(folder),
                cfg.threads,
                ctx,
            )
        ctx.record("k1", k1)
        ctx.record("b", b)
        ctx.record("collection", "one Lucene index per split: all its queries and candidates")
    else:
        path = ctx.input("scores_file")
        name = cfg.retriever or path.stem
        scored = scores_for(bench, read_scores(path), str(path))
    scored = scored.sort_values(["split", "field", "query_id", "paper_id"]).reset_index(drop=True)
    scored.to_parquet(ctx.output(SCORES_FILE, rows=len(scored)), index=False)
    for split in splits:
        part = scored[scored["split"] == split]
        n = write_scores(part, ctx.output(f"scores_{split}.json"))
        ctx.outputs[f"scores_{split}.json"] = n
    ctx.record("retriever", name)
    ctx.record("method", cfg.method)
    ctx.record("splits", splits)
    ctx.record("benchmark_fingerprint", artifact_fingerprint(folder))


def plan_rank(cfg: RankConfig, inputs: dict[str, list[Path]]) -> str:
    what = {
        "embeddings": "the encoder's similarity from its embeddings",
        "bm25": "Lucene BM25 ("
        + ("k1, b from bm25-tune" if inputs.get("bm25_params") else f"k1 {cfg.k1}, b {cfg.b}")
        + ") over one collection per split",
        "scores": "the given scores file",
    }[cfg.method]
    return f"score every (query, candidate) pair of the benchmark with {what}"


# ============================================================================ score


@dataclass(frozen=True)
class BenchScoreConfig:
    benchmark: str = input_path(help="benchmark build or import output")
    ranks: tuple[str, ...] = input_path(help="benchmark-rank outputs", multiple=True)
    splits: tuple[Literal["val", "test"], ...] = param(
        (), help="splits to score; empty = every split the ranks cover"
    )
    ties: Literal["paper_id", "trec_eval"] = param(
        "paper_id",
        help="tied scores: paper_id ascending (the project's rule) or paper_id descending "
        "(trec_eval's, i.e. the original scorer's)",
    )
    by_type: bool = param(True, help="also score each candidate type alone (Table 4)")
    title: str = param("MDCR benchmark results", help="the report's title")


def _load_ranks(folders: list[Path], bench_fp: str) -> list[tuple[str, pd.DataFrame, Path]]:
    import pandas as pd

    from mdcr.store import read_manifest

    out = []
    names: set[str] = set()
    for folder in folders:
        info = (read_manifest(folder) or {}).get("info", {})
        if not (folder / SCORES_FILE).is_file():
            raise InputDataError(f"no {SCORES_FILE} in '{folder}'; give benchmark-rank outputs")
        name = str(info.get("retriever") or folder.name)
        if name in names:
            raise ConfigError(f"benchmark-score.ranks: retriever '{name}' is given twice")
        names.add(name)
        recorded = info.get("benchmark_fingerprint")
        if recorded is not None and recorded != bench_fp:
            raise ManifestMismatchError(
                f"'{folder}' ({name}) ranks another benchmark ({recorded}); rank this one"
            )
        out.append((name, pd.read_parquet(folder / SCORES_FILE), folder))
    return out


def run_bench_score(cfg: BenchScoreConfig, ctx: StageContext) -> None:
    import pandas as pd

    from mdcr.eval.mdcr_scoring import (
        field_means,
        macro_means,
        official_round,
        per_query_metrics,
        summary_lines,
        table3,
        table4,
        table_ndcg,
    )
    from mdcr.store import artifact_fingerprint

    folder = ctx.input("benchmark")
    bench = read_benchmark(folder, "benchmark-score")
    ranks = _load_ranks(ctx.inputs.get("ranks") or [], artifact_fingerprint(folder))
    if not ranks:
        raise ConfigError("benchmark-score.ranks: give at least one benchmark-rank output")
    covered = sorted(set.intersection(*(set(r["split"]) for _, r, _ in ranks)))
    splits = [s for s in ("val", "test") if s in covered and (not cfg.splits or s in cfg.splits)]
    if not splits:
        raise ConfigError(
            f"benchmark-score.splits: the ranks cover {', '.join(covered) or 'no split'} together"
        )
    frames = []
    for name, scored, _ in ranks:
        for split in splits:
            b = bench[bench["split"] == split]
            s = scored[scored["split"] == split]
            with ctx.timed(f"metrics_{name}_{split}"):
                pq_ = per_query_metrics(b, s, ties=cfg.ties, by_type=cfg.by_type)
            frames.append(pq_.assign(retriever=name))
    per_query = pd.concat(frames, ignore_index=True)
    cols = ["retriever", "split", "subset", "field", "query_id", "metric", "value"]
    per_query = per_query[cols].sort_values(cols[:-1], kind="stable").reset_index(drop=True)
    per_field = field_means(per_query)
    macro = macro_means(per_field)
    per_query.to_parquet(ctx.output("per_query.parquet", rows=len(per_query)), index=False)
    per_field.to_parquet(ctx.output("per_field.parquet", rows=len(per_field)), index=False)
    macro.to_parquet(ctx.output("macro.parquet", rows=len(macro)), index=False)

    official: dict[str, Any] = {}
    for name, _, _ in ranks:
        for split in splits:
            sub = per_field[
                (per_field["retriever"] == name)
                & (per_field["split"] == split)
                & (per_field["subset"] == "all")
            ]
            fields, avg = official_round(sub)
            entry = {
                f: {
                    m.replace("@", "_"): float(v)
                    for m, v in zip(g["metric"], g["value"], strict=True)
                }
                for f, g in fields.groupby("field", sort=True)
            }
            entry["AVG"] = {
                m.replace("@", "_"): float(v)
                for m, v in zip(avg["metric"], avg["value"], strict=True)
            }
            official.setdefault(name, {})[split] = entry
    (ctx.out / "official.json").write_text(json.dumps(official, indent=2, sort_keys=True) + "\n")
    ctx.output("official.json")

    tables = []
    for split in splits:
        tables.append(table3(per_field, macro, split))
        tables.append(table_ndcg(per_field, macro, split))
        if cfg.by_type:
            tables.append(table4(macro, split))
    for t in tables:
        for path in t.write(ctx.out / "tables"):  # type: ignore[attr-defined]
            ctx.output(path.relative_to(ctx.out).as_posix())
    lines = [f"# {cfg.title}", ""]
    lines += _method_lines(cfg, bench, ranks, splits)
    for split in splits:
        lines += [f"## {split}", ""]
        for t in tables:
            if t.name.startswith(f"mdcr_{split}_"):  # type: ignore[attr-defined]
                lines += [f"**{t.title}** (`tables/{t.name}.csv`, `.tex`)", ""]  # type: ignore[attr-defined]
                lines += [t.to_markdown(), ""]  # type: ignore[attr-defined]
        if split == "test":
            lines += _paper_lines(macro)
        lines += ["Original scorer's printout (x100, rounded as `evaluate.py` rounds):", ""]
        for name, _, _ in ranks:
            lines += [f"`{name}`:", "", "```", *summary_lines(per_field, split, name)]
            lines += ["```", ""]
    (ctx.out / "report.md").write_text("\n".join(lines).rstrip() + "\n")
    ctx.output("report.md")
    ctx.record("retrievers", [n for n, _, _ in ranks])
    ctx.record("splits", splits)
    ctx.record("ties", cfg.ties)
    ctx.record("benchmark_fingerprint", artifact_fingerprint(folder))
    ctx.record(
        "macro",
        {
            f"{r.retriever}|{r.split}|{r.subset}|{r.metric}": round(float(r.value), 6)  # type: ignore[arg-type]
            for r in macro.itertuples(index=False)
        },
    )


def _method_lines(
    cfg: BenchScoreConfig, bench: pd.DataFrame, ranks: list[Any], splits: list[str]
) -> list[str]:
    sizes = bench.groupby(["split", "field", "query_id"]).size()
    lines = [
        "Metrics as the original MDCR scorer computes them: binary relevance (a candidate is "
        "relevant iff it is in the query's `true` list), MAP and nDCG over each query's whole "
        "candidate list (no cut-off), recall at 5; the mean over a field's queries, then the "
        "plain mean over fields (AVG). Values are x100.",
        "Ties: "
        + (
            "paper_id ascending."
            if cfg.ties == "paper_id"
            else "trec_eval's (paper_id descending)."
        ),
        f"Queries: {sizes.groupby(level=0).size().to_dict()}; candidates per query: "
        f"{int(sizes.min())}-{int(sizes.max())}.",
        "Candidate-type table: each query scored on its positives plus only that type's "
        "negatives, aggregated the same way; the AVG row is the mean over the retrievers.",
        "",
        "Retrievers:",
        "",
    ]
    from mdcr.store import read_manifest

    for name, _, folder in ranks:
        info = (read_manifest(folder) or {}).get("info", {})
        extra = ""
        if info.get("method") == "bm25":
            extra = f" (k1 {info.get('k1')}, b {info.get('b')})"
        elif info.get("method") == "embeddings":
            extra = f" (metric {info.get('metric')})"
        lines.append(f"- `{name}`: {info.get('method', '?')}{extra}, `{folder}`")
    return [*lines, ""]


def _paper_lines(macro: pd.DataFrame) -> list[str]:
    """Our AVG next to the paper's (Tables 3 and 4) for the paper's models."""
    from mdcr.eval.mdcr_scoring import TYPE_LABELS
    from mdcr.eval.paper import model_ids, paper_values

    ids = {v: k for k, v in model_ids().items()}
    mine = macro[(macro["split"] == "test") & macro["retriever"].isin(list(ids))]
    if mine.empty:
        return []
    paper = paper_values()
    label = {"map": "MAP", "recall@5": "R@5"}
    rows = []
    for r in mine.itertuples(index=False):
        if r.metric not in label:
            continue
        model = ids[str(r.retriever)]
        if r.subset == "all":
            sel = (paper["table"] == "table3") & (paper["column"] == "AVG")
        else:
            sel = (paper["table"] == "table4") & (
                paper["column"] == TYPE_LABELS.get(str(r.subset), "")
            )
        sel &= (paper["model"] == model) & (paper["metric"] == label[str(r.metric)])
        if sel.any():
            pv = float(paper.loc[sel, "value"].iloc[0])
            what = "all" if r.subset == "all" else str(r.subset)
            ours = 100 * float(r.value)  # type: ignore[arg-type]
            rows.append(f"| {model} | {what} | {label[str(r.metric)]} | {ours:.1f} | {pv:.1f} |")
    if not rows:
        return []
    return [
        "Comparison with the paper (test, AVG over fields; the paper's benchmark is built on "
        "full S2ORC, so only the same construction and models give comparable numbers):",
        "",
        "| model | candidates | metric | ours | paper |",
        "|---|---|---|---:|---:|",
        *rows,
        "",
    ]


# ============================================================================ specs


IMPORT_SPEC = register(
    StageSpec(
        name="benchmark-import",
        version="1",
        config=ImportConfig,
        run=run_import,
        help="read the official MDCR files (or an HF export) into a benchmark folder",
        main_output=BENCHMARK_FILE,
        command="benchmark import",
    )
)
RANK_SPEC = register(
    StageSpec(
        name="benchmark-rank",
        version="1",
        config=RankConfig,
        run=run_rank,
        help="score every (query, candidate) pair of a benchmark with one retriever",
        plan=plan_rank,
        main_output=SCORES_FILE,
        command="benchmark rank",
    )
)
SCORE_SPEC = register(
    StageSpec(
        name="benchmark-score",
        version="1",
        config=BenchScoreConfig,
        run=run_bench_score,
        help="MAP, nDCG, R@5 on a benchmark (original scorer's semantics), Tables 3 and 4",
        main_output="report.md",
        command="benchmark score",
    )
)


# ============================================================================ command


def add_evaluate_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``mdcr evaluate`` subcommand."""
    p = sub.add_parser(
        "evaluate",
        help="score encoders on an MDCR benchmark (or on pools) with one command",
        description=(
            "Encode the benchmark's papers, rank each query's fixed candidate list and print "
            "MAP, nDCG and R@5 per field and their macro average, with the original MDCR "
            "scorer's semantics. Every step is a cached stage under the store."
        ),
    )
    p.add_argument(
        "--encoder",
        action="append",
        default=[],
        metavar="SPEC",
        help="encoder: a registry name (scibert, specter, scincl, aspire-bm, aspire-cs, "
        "minilm, random), hf:<model>, py:<module>:<attr>, or bm25; repeatable",
    )
    p.add_argument(
        "--benchmark",
        type=Path,
        help="a benchmark build/import output, or the official files (a folder with "
        "mdcr_<split>.json and mdcr_<split>_data.jsonl, or one mdcr_<split>.json)",
    )
    p.add_argument(
        "--pools", type=Path, help="a pools output: evaluate on its pools instead of a benchmark"
    )
    p.add_argument(
        "--corpus", type=Path, help="with --pools: the prefilter output (default: the pools' own)"
    )
    p.add_argument("--scores", type=Path, help="score this {qid_cid: score} file (no encoding)")
    p.add_argument("--name", default="", help="retriever name for --scores (default: file name)")
    p.add_argument(
        "--scores-out",
        type=Path,
        help="write the scores file for the original scorer; with several encoders or "
        "splits use {encoder} and {split} in the path",
    )
    p.add_argument(
        "--split",
        action="append",
        default=[],
        choices=("val", "test"),
        help="splits to score (default: all the benchmark has; --pools: test)",
    )
    p.add_argument(
        "--ties",
        choices=("paper_id", "trec_eval"),
        default="paper_id",
        help="tie rule: paper_id ascending (project rule) or trec_eval's (original scorer's)",
    )
    p.add_argument("--no-types", action="store_true", help="skip the candidate-type analysis")
    p.add_argument("--k1", type=float, default=DEFAULT_K1, help="BM25 k1")
    p.add_argument("--b", type=float, default=DEFAULT_B, help="BM25 b")
    p.add_argument("--bm25-params", type=Path, help="a bm25-tune output (its chosen k1, b)")
    p.add_argument(
        "--encode-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an encode stage option, e.g. device=cpu, batch_tokens=8192, max_length=256",
    )
    p.add_argument("--device", help="encode/search device (auto, cpu, cuda, cuda:0, ...)")
    p.add_argument("--home", type=Path, default=argparse.SUPPRESS, help="artifact store folder")
    p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS)
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS)
    return p  # type: ignore[no-any-return]


def _store(args: argparse.Namespace) -> Store:
    from mdcr.store import Store, default_home

    home = getattr(args, "home", None)
    return Store(home if home is not None else default_home())


def _execute(store: Store, spec: StageSpec, cfg: Any, quiet: bool) -> Artifact:
    """Validate a config built in code, resolve its inputs and run it through the store."""
    from mdcr.store import resolve_inputs

    validate = getattr(cfg, "validate", None)
    if callable(validate):
        validate()
    return store.execute(spec, cfg, resolve_inputs(cfg, where=spec.name), quiet=quiet)


def resolve_benchmark(store: Store, path: Path, quiet: bool) -> Path:
    """A benchmark folder for ``path``: itself if a stage made it, else an import of it."""
    from mdcr.store import read_manifest

    if not path.exists():
        raise ConfigError(f"--benchmark: '{path}' does not exist")
    manifest = read_manifest(path) if path.is_dir() else None
    if manifest is not None and manifest.get("stage") in ("benchmark", "benchmark-import"):
        return path
    if path.is_dir() and (path / BENCHMARK_FILE).is_file() and manifest is None:
        raise ConfigError(
            f"--benchmark: '{path}' has a benchmark.parquet but no manifest; give the official "
            "files or a benchmark stage output"
        )
    return _execute(store, IMPORT_SPEC, ImportConfig(source=str(path)), quiet).path


def _encode_cfg(
    spec: str, corpus: Path, targets: tuple[Path, ...], args: argparse.Namespace
) -> Any:
    from mdcr.config import from_mapping
    from mdcr.encoders.stage import EncodeConfig
    from mdcr.pipeline import parse_overrides

    options: dict[str, Any] = {}
    for key, value in (
        parse_overrides([f"encode.{s}" for s in args.encode_set]).get("encode", {}).items()
    ):
        options[key] = value
    if args.device:
        options["device"] = args.device
    values: dict[str, Any] = {
        "corpus": str(corpus),
        "encoder": spec,
        "targets": [str(t) for t in targets],
        **options,
    }
    return from_mapping(EncodeConfig, values, "evaluate", from_text=True)


def encode(
    store: Store, spec: str, corpus: Path, targets: tuple[Path, ...], args: argparse.Namespace
) -> Path:
    """Run (or reuse) the encode stage; papers earlier outputs of the encoder hold are copied."""
    from mdcr.encoders.stage import SPEC as ENCODE

    cfg = _encode_cfg(spec, corpus, targets, args)
    return _execute(store, ENCODE, cfg, args.quiet).path


def _scores_out(template: Path, encoder: str, split: str, n_enc: int, n_split: int) -> Path:
    text = str(template)
    if n_enc > 1 and "{encoder}" not in text:
        raise ConfigError("--scores-out: several encoders; put {encoder} in the path")
    if n_split > 1 and "{split}" not in text:
        raise ConfigError("--scores-out: several splits; put {split} in the path, or give --split")
    safe = encoder.replace("/", "_").replace(":", "_")
    return Path(text.replace("{encoder}", safe).replace("{split}", split))


def _check_specs(specs: list[str]) -> None:
    """An unknown encoder name fails before anything runs."""
    from mdcr.encoders.registry import lookup

    for spec in specs:
        if spec != BM25:
            lookup(spec)


def run_evaluate(args: argparse.Namespace) -> int:
    """``mdcr evaluate``: see the module docstring."""
    quiet = bool(getattr(args, "quiet", False))
    args.quiet = quiet
    if args.pools is not None:
        if args.benchmark is not None or args.scores is not None:
            raise ConfigError("evaluate: --pools cannot be combined with --benchmark or --scores")
        return _evaluate_pools(args)
    if args.benchmark is None:
        raise ConfigError("evaluate: give --benchmark PATH (or --pools PATH)")
    if not args.encoder and args.scores is None:
        raise ConfigError("evaluate: give --encoder SPEC (repeatable) or --scores FILE")
    _check_specs(args.encoder)
    store = _store(args)
    bench = resolve_benchmark(store, args.benchmark, quiet)
    splits = tuple(args.split)
    ranks: list[tuple[str, Path]] = []
    for spec in args.encoder:
        if spec == BM25:
            rank_cfg = RankConfig(
                benchmark=str(bench),
                method="bm25",
                bm25_params=str(args.bm25_params) if args.bm25_params else None,
                k1=args.k1,
                b=args.b,
                splits=splits,  # type: ignore[arg-type]
            )
        else:
            emb = encode(store, spec, bench, (bench,), args)
            rank_cfg = RankConfig(
                benchmark=str(bench),
                method="embeddings",
                embeddings=str(emb),
                splits=splits,  # type: ignore[arg-type]
            )
        ranks.append((spec, _execute(store, RANK_SPEC, rank_cfg, quiet).path))
    if args.scores is not None:
        rank_cfg = RankConfig(
            benchmark=str(bench),
            method="scores",
            scores_file=str(args.scores),
            retriever=args.name,
            splits=splits,  # type: ignore[arg-type]
        )
        ranks.append(
            (args.name or args.scores.stem, _execute(store, RANK_SPEC, rank_cfg, quiet).path)
        )
    score_cfg = BenchScoreConfig(
        benchmark=str(bench),
        ranks=tuple(str(p) for _, p in ranks),
        splits=splits,  # type: ignore[arg-type]
        ties=args.ties,
        by_type=not args.no_types,
    )
    result = _execute(store, SCORE_SPEC, score_cfg, quiet).path
    if args.scores_out is not None:
        _write_scores_out(args, ranks)
    _print_results(result)
    return 0


def _write_scores_out(args: argparse.Namespace, ranks: list[tuple[str, Path]]) -> None:
    import shutil

    from mdcr.store import atomic_path, read_manifest

    for spec, folder in ranks:
        splits = (read_manifest(folder) or {}).get("info", {}).get("splits", [])
        for split in splits:
            target = _scores_out(args.scores_out, spec, split, len(ranks), len(splits))
            target.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(target) as tmp:
                shutil.copyfile(folder / f"scores_{split}.json", tmp)
            print(f"scores for the original scorer ({spec}, {split}): {target}", file=sys.stderr)


def _print_results(folder: Path) -> None:
    """The original scorer's printout per retriever and split, then the report's path."""
    from mdcr.eval.mdcr_scoring import order_retrievers

    official = json.loads((folder / "official.json").read_text())
    for name in order_retrievers(list(official)):
        by_split = official[name]
        for split, fields in by_split.items():
            print(f"{name} on MDCR {split}:")
            for field, m in fields.items():
                if field == "AVG":
                    continue
                print("\t".join([field] + [f"{k}: {v:g}" for k, v in m.items()]))
            print("\t".join(["AVG"] + [f"{k}: {v:g}" for k, v in fields["AVG"].items()]))
            print()
    print(f"report: {folder / 'report.md'}")


# ---------------------------------------------------------------------------- --pools


def _evaluate_pools(args: argparse.Namespace) -> int:
    """Encode + search (or bm25) + score on a pools output; report with existing scores."""
    from mdcr.store import artifact_fingerprint, read_manifest

    if not args.encoder:
        raise ConfigError("evaluate --pools: give --encoder SPEC (repeatable)")
    store = _store(args)
    pools = args.pools
    manifest = read_manifest(pools) if pools.is_dir() else None
    if manifest is None or manifest.get("stage") != "pools":
        raise ConfigError(f"--pools: '{pools}' is not a pools stage output")
    corpus = args.corpus
    if corpus is None:
        try:
            corpus = Path(manifest["inputs"]["corpus"][0]["path"])
        except (KeyError, IndexError, TypeError):
            raise ConfigError(
                "--pools: the pools' manifest names no corpus; give --corpus"
            ) from None
    if not corpus.exists():
        raise ConfigError(f"--corpus: '{corpus}' does not exist; give the prefilter output")
    splits = tuple(args.split) or ("test",)
    _check_specs(args.encoder)
    runs = []
    for spec in args.encoder:
        runs.append(_pool_run(store, spec, pools, corpus, splits, args))
    pools_fp = artifact_fingerprint(pools)
    existing, depth, recall_k = _existing_scores(store, pools_fp, set(_run_names(runs)))
    from mdcr.eval.score import SPEC as SCORE
    from mdcr.eval.score import ScoreConfig

    score_cfg = ScoreConfig(
        pools=str(pools), runs=tuple(str(r) for r in runs), depth=depth, recall_k=recall_k
    )
    new_scores = _execute(store, SCORE, score_cfg, args.quiet).path
    from mdcr.eval.report import SPEC as REPORT
    from mdcr.eval.report import ReportConfig

    report_cfg = ReportConfig(
        scores=tuple(str(p) for p in [*existing, new_scores]),
        splits=splits,
        paper_comparison=True,
    )
    report = _execute(store, REPORT, report_cfg, args.quiet).path
    names = sorted(_run_names(runs))
    print(f"scored {', '.join(names)} on {pools}; with {len(existing)} earlier score output(s)")
    print(f"report: {report / 'report.md'}")
    return 0


def _run_names(runs: list[Path]) -> list[str]:
    from mdcr.store import read_manifest

    return [str((read_manifest(r) or {}).get("info", {}).get("retriever", r.name)) for r in runs]


def _pool_run(
    store: Store,
    spec: str,
    pools: Path,
    corpus: Path,
    splits: tuple[str, ...],
    args: argparse.Namespace,
) -> Path:
    if spec == BM25:
        from mdcr.index.bm25 import SPEC as BM25_SPEC
        from mdcr.index.bm25 import BM25Config

        cfg = BM25Config(
            corpus=str(corpus),
            pools=str(pools),
            params=str(args.bm25_params) if args.bm25_params else None,
            k1=args.k1 if not args.bm25_params else DEFAULT_K1,
            b=args.b if not args.bm25_params else DEFAULT_B,
            splits=splits,  # type: ignore[arg-type]
        )
        return _execute(store, BM25_SPEC, cfg, args.quiet).path
    from mdcr.encoders.registry import lookup
    from mdcr.index.dense import SPEC as SEARCH
    from mdcr.index.dense import SearchConfig

    lookup(spec)
    emb = encode(store, spec, corpus, (pools,), args)
    search = SearchConfig(pools=str(pools), embeddings=str(emb), device=args.device or "auto")
    return _execute(store, SEARCH, search, args.quiet).path


def _existing_scores(store: Store, pools_fp: str, adding: set[str]) -> tuple[list[Path], int, int]:
    """Score outputs already made on these pools, without the retrievers being added now,
    without overlaps (the newest wins), and the depth / R@k they used."""
    from mdcr.store import read_manifest

    root = store.home / "score"
    found: list[tuple[str, Path, set[str], int, int]] = []
    if root.is_dir():
        for folder in sorted(root.iterdir()):
            m = read_manifest(folder) if folder.is_dir() else None
            if m is None or m.get("info", {}).get("pools_fingerprint") != pools_fp:
                continue
            info = m["info"]
            names = {str(r.get("retriever")) for r in info.get("retriever_runs", [])}
            found.append(
                (
                    str(m.get("timings", {}).get("started", "")),
                    folder,
                    names,
                    int(info.get("depth", 500)),
                    int(info.get("recall_k", 30)),
                )
            )
    chosen: list[Path] = []
    taken = set(adding)
    depth, recall_k = 500, 30
    for _, folder, names, d, r in sorted(found, key=lambda x: x[0], reverse=True):
        if names & taken:
            continue
        chosen.append(folder)
        taken |= names
        depth, recall_k = d, r
    return sorted(chosen), depth, recall_k
