"""Benchmark BM25 on one large pool: Lucene, mdcr's exact grid sweep, and bm25s.

A synthetic corpus with text (``mdcr.corpus.synth.stage.write_tables``, cached under
``data/bench-bm25/``) is one pool of ``--papers`` papers; ``--queries`` of its 2019 papers
(chosen by a seeded hash of the id) are the queries: title + abstract, a couple of hundred
terms each, the query itself excluded. In the same run the script measures

- Lucene: index build (docs/s, mdcr's multi-threaded IndexWriter feeding), query analysis,
  search at top-k (queries/s) with ``--threads`` threads and with one;
- bm25s (``method="lucene"``, Lucene's 33 stopwords, Porter stemmer via PyStemmer):
  tokenize + index (docs/s), tokenize + retrieve at top-k (queries/s);
- bm25s on Lucene's own analyzer output (optional): isolates the scoring from the tokenizer,

- the exact sweep (``mdcr.index.sweep.grid``): the whole default 7 x 6 (k1, b) grid from one
  pass over each query's postings (pool analysis included), against one Lucene pass and
  against the grid through Lucene (``--lucene-points`` grid points searched, the rest
  extrapolated from their mean); its rankings are compared with Lucene's at those points,

and prints the speed ratios and the overlap of the top-100 (and top-10) with Lucene's.

    python scripts/bench_bm25.py --papers 110000 --queries 1000
    python scripts/bench_bm25.py --papers 100000 --queries 3800 --no-bm25s
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def corpus(n: int, seed: int, cache: Path) -> Path:
    from mdcr.corpus.synth.stage import write_tables

    folder = cache / f"synth-{n}-s{seed}"
    if not (folder / "papers.parquet").is_file():
        t0 = time.perf_counter()
        write_tables(folder, n_papers=n, seed=seed, with_text=True)
        print(f"corpus: generated {n} papers with text in {time.perf_counter() - t0:.1f}s")
    return folder


def overlap(a: list[Any], b: list[Any], depth: int) -> tuple[float, float]:
    """Mean and min share of the top ``depth`` that two rankings have in common."""
    vals = []
    for (x, _), (y, _) in zip(a, b, strict=True):
        want = min(depth, len(x), len(y))
        vals.append(len(set(x[:depth].tolist()) & set(y[:depth].tolist())) / max(want, 1))
    return float(np.mean(vals)), float(np.min(vals))


def lucene_run(
    ids: list[str], texts: list[str], qids: list[str], qtexts: list[str], args: Any, out: Path
) -> dict[str, Any]:
    from mdcr.index.lucene.indexes import Doc, build_index, open_index
    from mdcr.index.lucene.java import start_jvm

    t0 = time.perf_counter()
    info = start_jvm()
    jvm_s = time.perf_counter() - t0
    path = out / "lucene-index"
    shutil.rmtree(path, ignore_errors=True)
    order = sorted(range(len(ids)), key=lambda i: ids[i])
    t0 = time.perf_counter()
    build_index(
        path,
        [ids[i] for i in order],
        (Doc(ids[s : s + 50_000], texts[s : s + 50_000]) for s in range(0, len(ids), 50_000)),
        meta={},
        threads=args.threads,
    )
    index_s = time.perf_counter() - t0
    res: dict[str, Any] = {
        "jvm_start_s": round(jvm_s, 2),
        "java": info.version,
        "anserini": info.anserini_version,
        "index_s": round(index_s, 2),
        "index_docs_per_s": round(len(ids) / index_s),
        "index_mb": round(sum(p.stat().st_size for p in path.iterdir()) / 2**20, 1),
    }
    if not args.no_anserini_indexer:
        # Reference: Anserini's own multi-threaded indexer (JSON documents, Java threads,
        # unsorted, stores ids), as pyserini's LuceneIndexer runs it.
        from mdcr.index.lucene.java import autoclass

        ref = out / "anserini-index"
        shutil.rmtree(ref, ignore_errors=True)
        raw = [json.dumps({"id": i, "contents": t}) for i, t in zip(ids, texts, strict=True)]
        t0 = time.perf_counter()
        indexer = autoclass("io.anserini.index.SimpleIndexer")(
            str(ref), False, args.threads or os.cpu_count() or 1
        )
        for s in range(0, len(raw), 10_000):
            indexer.addRawDocuments(raw[s : s + 10_000])
        indexer.close()
        wall = time.perf_counter() - t0
        res["anserini_simpleindexer_docs_per_s"] = round(len(ids) / wall)
        shutil.rmtree(ref, ignore_errors=True)
    with open_index(path) as index:
        t0 = time.perf_counter()
        queries, stats = index.build_queries(qids, qtexts)
        res["analyze_queries_s"] = round(time.perf_counter() - t0, 2)
        res["query_terms"] = stats.summary()
        index.search(queries[:20], args.k, k1=args.k1, b=args.b, exclude=qids[:20])  # warm JIT
        runs = {}
        for threads in sorted({args.threads or os.cpu_count() or 1, 1}, reverse=True):
            t0, c0 = time.perf_counter(), time.process_time()
            ranked = index.search(
                queries, args.k, k1=args.k1, b=args.b, exclude=qids, threads=threads
            )
            wall = time.perf_counter() - t0
            runs[threads] = ranked
            res[f"search_s_{threads}t"] = round(wall, 2)
            res[f"search_cpu_s_{threads}t"] = round(time.process_time() - c0, 2)
            res[f"queries_per_s_{threads}t"] = round(len(qids) / wall, 1)
        # Hit conversion cost, for the record: the search alone, without reading hits.
        searcher = index.searcher(args.k1, args.b)
        t0 = time.perf_counter()
        for q in queries[:200]:
            searcher.search(q, args.k + 1)
        res["search_only_ms_per_query_1t"] = round((time.perf_counter() - t0) / 200 * 1000, 2)
    first = runs[max(runs)]
    same = all(
        a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()
        for a, b in zip(first, runs[1], strict=True)
    )
    res["identical_across_thread_counts"] = same
    res["ranked"] = first
    return res


def sweep_run(
    ids: list[str], texts: list[str], qids: list[str], qtexts: list[str], args: Any, luc: dict
) -> dict[str, Any]:
    """The whole default grid by the sweep, against Lucene at ``--lucene-points`` points."""
    import itertools

    from mdcr.index.bm25.tune import DEFAULT_B_GRID, DEFAULT_K1_GRID
    from mdcr.index.lucene.indexes import open_index
    from mdcr.index.sweep.grid import sweep_pool

    grid = list(itertools.product(DEFAULT_K1_GRID, DEFAULT_B_GRID))
    threads = args.threads or os.cpu_count() or 1
    order = sorted(range(len(ids)), key=lambda i: ids[i])
    sorted_ids = np.array([ids[i] for i in order], dtype=object)
    sorted_texts = [texts[i] for i in order]
    t0, c0 = time.perf_counter(), time.process_time()
    swept = sweep_pool(sorted_ids, sorted_texts, qids, qtexts, grid, args.k, threads=threads)
    sweep_s = time.perf_counter() - t0
    sweep_cpu_s = time.process_time() - c0
    points = [grid[i] for i in np.linspace(0, len(grid) - 1, args.lucene_points).astype(int)]
    lucene_s, same = [], True
    with open_index(args.out / "lucene-index") as index:
        queries, _ = index.build_queries(qids, qtexts)
        for k1, b in points:
            t0 = time.perf_counter()
            ranked = index.search(queries, args.k, k1=k1, b=b, exclude=qids, threads=threads)
            lucene_s.append(time.perf_counter() - t0)
            mine = swept[grid.index((k1, b))]
            same = same and all(
                a[0].tolist() == m[0].tolist() and np.array_equal(a[1], m[1])
                for a, m in zip(ranked, mine, strict=True)
            )
    one_pass = luc[f"search_s_{threads}t"]
    one_pass_cpu = luc[f"search_cpu_s_{threads}t"]
    grid_lucene = float(np.mean(lucene_s)) * len(grid)
    return {
        "grid_points": len(grid),
        "sweep_s": round(sweep_s, 2),
        "sweep_queries_per_s": round(len(qids) / sweep_s, 1),
        "sweep_docs_per_s": round(len(ids) / sweep_s),
        "lucene_one_pass_s": one_pass,
        "lucene_points_measured": [list(p) for p in points],
        "lucene_grid_s_extrapolated": round(grid_lucene, 1),
        "ratio_sweep_to_one_pass": round(sweep_s / one_pass, 2),
        "sweep_cpu_s": round(sweep_cpu_s, 2),
        "lucene_one_pass_cpu_s": one_pass_cpu,
        "ratio_sweep_to_one_pass_cpu": round(sweep_cpu_s / one_pass_cpu, 2),
        "ratio_lucene_grid_to_one_pass": round(grid_lucene / one_pass, 1),
        "speedup_over_lucene_grid": round(grid_lucene / sweep_s, 1),
        "identical_to_lucene": same,
    }


def bm25s_run(
    ids: list[str],
    texts: list[str] | list[list[str]],
    qids: list[str],
    qtexts: list[str] | list[list[str]],
    args: Any,
    pretokenized: bool,
) -> dict[str, Any]:
    import bm25s
    import Stemmer
    from bm25s.stopwords import STOPWORDS_EN

    stemmer = Stemmer.Stemmer("porter")
    res: dict[str, Any] = {}
    t0 = time.perf_counter()
    if pretokenized:
        corpus_tokens: Any = texts
    else:
        corpus_tokens = bm25s.tokenize(
            texts, stopwords=list(STOPWORDS_EN), stemmer=stemmer.stemWords, show_progress=False
        )
    retriever = bm25s.BM25(method="lucene", k1=args.k1, b=args.b, backend=args.bm25s_backend)
    retriever.index(corpus_tokens, show_progress=False)
    index_s = time.perf_counter() - t0
    res["index_s"] = round(index_s, 2)
    res["index_docs_per_s"] = round(len(ids) / index_s)
    ids_arr = np.asarray(ids, dtype=object)
    n_threads = args.threads or os.cpu_count() or 1

    def search() -> list[tuple[np.ndarray, np.ndarray]]:
        if pretokenized:
            vocab = retriever.vocab_dict
            q_tok: Any = [[t for t in q if t in vocab] or [""] for q in qtexts]
        else:
            q_tok = bm25s.tokenize(
                qtexts,
                stopwords=list(STOPWORDS_EN),
                stemmer=stemmer.stemWords,
                show_progress=False,
                return_ids=False,
            )
            q_tok = [q or [""] for q in q_tok]
        docs, scores = retriever.retrieve(
            q_tok, k=min(args.k + 1, len(ids)), show_progress=False, n_threads=n_threads
        )
        out = []
        for qid, d, s in zip(qids, docs, scores, strict=True):
            pid = ids_arr[d].astype(str)
            keep = (pid != qid) & (s > 0)
            out.append((pid[keep][: args.k], s[keep][: args.k].astype(np.float64)))
        return out

    search()  # warm numba
    t0 = time.perf_counter()
    res["ranked"] = search()
    wall = time.perf_counter() - t0
    res["search_s"] = round(wall, 2)
    res["queries_per_s"] = round(len(qids) / wall, 1)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--papers", type=int, default=110_000, help="pool size (>= 100k)")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--k", type=int, default=500)
    ap.add_argument("--k1", type=float, default=0.9)
    ap.add_argument("--b", type=float, default=0.4)
    ap.add_argument("--threads", type=int, default=0, help="0: all cores")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bm25s-backend", default="numba", choices=["numba", "numpy"])
    ap.add_argument("--no-lucene-tokens", action="store_true", help="skip bm25s on Lucene tokens")
    ap.add_argument(
        "--no-anserini-indexer", action="store_true", help="skip Anserini's SimpleIndexer"
    )
    ap.add_argument("--no-bm25s", action="store_true", help="skip the bm25s comparison")
    ap.add_argument("--no-sweep", action="store_true", help="skip the exact grid sweep")
    ap.add_argument(
        "--lucene-points", type=int, default=3, help="grid points searched through Lucene"
    )
    ap.add_argument("--cache", type=Path, default=REPO / "data" / "bench-bm25")
    ap.add_argument("--out", type=Path, default=REPO / "bench-out" / "bm25")
    args = ap.parse_args()
    os.environ.setdefault("NUMBA_CACHE_DIR", str(REPO / ".numba_cache"))

    import pyarrow.parquet as pq

    folder = corpus(args.papers, args.seed, args.cache)
    table = pq.read_table(
        folder / "papers.parquet", columns=["paper_id", "title", "abstract", "year"]
    )
    ids = table["paper_id"].to_pylist()
    texts = [
        f"{t}\n{a}"
        for t, a in zip(table["title"].to_pylist(), table["abstract"].to_pylist(), strict=True)
    ]
    years = table["year"].to_numpy()
    key = [hashlib.md5(f"{args.seed}:bench-bm25:{p}".encode()).hexdigest() for p in ids]
    cand = sorted((key[i], i) for i in np.flatnonzero(years == 2019))
    q_rows = [i for _, i in cand[: args.queries]]
    qids = [ids[i] for i in q_rows]
    qtexts = [texts[i] for i in q_rows]
    args.out.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count()
    print(
        f"pool {len(ids)} papers, {len(qids)} queries (title + abstract, self excluded), "
        f"k={args.k}, k1={args.k1}, b={args.b}, threads={args.threads or cores} of {cores} cores"
    )

    luc = lucene_run(ids, texts, qids, qtexts, args, args.out)
    print(
        f"lucene: index {luc['index_s']}s ({luc['index_docs_per_s']} docs/s, "
        f"{luc['index_mb']} MB), queries analysed in {luc['analyze_queries_s']}s, "
        f"terms/query {luc['query_terms']}"
    )
    if "anserini_simpleindexer_docs_per_s" in luc:
        print(
            f"lucene: Anserini SimpleIndexer (reference, unsorted): "
            f"{luc['anserini_simpleindexer_docs_per_s']} docs/s"
        )
    for key_ in sorted(k for k in luc if k.startswith("queries_per_s")):
        print(f"lucene: search {key_.removeprefix('queries_per_s_')}: {luc[key_]} queries/s")
    print(f"lucene: search alone {luc['search_only_ms_per_query_1t']} ms/query (1 thread)")
    print(
        f"lucene: identical rankings with 1 and N threads: {luc['identical_across_thread_counts']}"
    )

    results: dict[str, Any] = {
        "papers": len(ids),
        "queries": len(qids),
        "k": args.k,
        "threads": args.threads or cores,
        "cores": cores,
        "lucene": {k: v for k, v in luc.items() if k != "ranked"},
    }
    if not args.no_sweep:
        sw = sweep_run(ids, texts, qids, qtexts, args, luc)
        results["sweep"] = sw
        print(
            f"sweep: whole {sw['grid_points']}-point grid in {sw['sweep_s']}s "
            f"({sw['sweep_queries_per_s']} queries/s, {sw['sweep_docs_per_s']} docs/s), "
            f"{sw['ratio_sweep_to_one_pass']}x one Lucene pass ({sw['lucene_one_pass_s']}s); "
            f"the grid through Lucene {sw['lucene_grid_s_extrapolated']}s "
            f"({sw['ratio_lucene_grid_to_one_pass']}x one pass, extrapolated from "
            f"{len(sw['lucene_points_measured'])} points): {sw['speedup_over_lucene_grid']}x "
            f"faster; identical to Lucene: {sw['identical_to_lucene']}"
        )
        print(
            f"sweep: CPU {sw['sweep_cpu_s']}s against {sw['lucene_one_pass_cpu_s']}s for one "
            f"Lucene pass: {sw['ratio_sweep_to_one_pass_cpu']}x (all threads, the JVM's included)"
        )
    if args.no_bm25s:
        write_results(results, args.out)
        return
    bs = bm25s_run(ids, texts, qids, qtexts, args, pretokenized=False)
    print(
        f"bm25s ({args.bm25s_backend}): tokenize+index {bs['index_s']}s "
        f"({bs['index_docs_per_s']} docs/s), search {bs['queries_per_s']} queries/s"
    )
    results["bm25s"] = {k: v for k, v in bs.items() if k != "ranked"}
    lt = luc[f"queries_per_s_{args.threads or cores}t"]
    for depth in (100, 10):
        mean, low = overlap(luc["ranked"], bs["ranked"], depth)
        results[f"overlap_top{depth}"] = {"mean": round(mean, 4), "min": round(low, 4)}
    top1 = [
        (b[1][0] / a[1][0])
        for a, b in zip(luc["ranked"], bs["ranked"], strict=True)
        if len(a[1]) and len(b[1])
    ]
    results["bm25s_over_lucene_top1_score"] = round(float(np.median(top1)), 4)
    results["ratio_index_bm25s_over_lucene"] = round(
        bs["index_docs_per_s"] / luc["index_docs_per_s"], 2
    )
    results["ratio_search_bm25s_over_lucene"] = round(bs["queries_per_s"] / lt, 2)

    if not args.no_lucene_tokens:
        from mdcr.index.lucene.indexes import analyze

        t0 = time.perf_counter()
        doc_tokens = [analyze(t) for t in texts]
        q_tokens = [doc_tokens[i] for i in q_rows]
        tok_s = time.perf_counter() - t0
        bl = bm25s_run(ids, doc_tokens, qids, q_tokens, args, pretokenized=True)
        mean, low = overlap(luc["ranked"], bl["ranked"], 100)
        results["bm25s_on_lucene_tokens"] = {
            "analyze_s": round(tok_s, 1),
            "overlap_top100": {"mean": round(mean, 4), "min": round(low, 4)},
            "overlap_top10": dict(
                zip(
                    ("mean", "min"),
                    (round(x, 4) for x in overlap(luc["ranked"], bl["ranked"], 10)),
                    strict=True,
                )
            ),
            "search_queries_per_s": bl["queries_per_s"],
        }

    print(
        f"ratio bm25s/lucene: index {results['ratio_index_bm25s_over_lucene']}x, "
        f"search {results['ratio_search_bm25s_over_lucene']}x "
        f"(lucene {lt} q/s with {args.threads or cores} threads)"
    )
    print(
        f"top-100 overlap: mean {results['overlap_top100']['mean']}, min "
        f"{results['overlap_top100']['min']}; top-10: mean {results['overlap_top10']['mean']}, "
        f"min {results['overlap_top10']['min']}; bm25s/lucene top-1 score (median) "
        f"{results['bm25s_over_lucene_top1_score']}"
    )
    if "bm25s_on_lucene_tokens" in results:
        r = results["bm25s_on_lucene_tokens"]
        print(
            f"bm25s on Lucene's tokens: top-100 overlap mean {r['overlap_top100']['mean']} "
            f"(min {r['overlap_top100']['min']}), top-10 mean {r['overlap_top10']['mean']}"
        )
    write_results(results, args.out)


def write_results(results: dict[str, Any], out: Path) -> None:
    """results.json, with the peak resident memory of this process (corpus, Lucene, sweep)."""
    results["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(f"peak RSS of this process: {results['peak_rss_mib']:,} MiB")
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"results: {out / 'results.json'}")


if __name__ == "__main__":
    main()
