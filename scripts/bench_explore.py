"""Benchmark ``mdcr explore`` at the paper's scale: how fast its pages answer and how much
memory its server holds.

A store is built once under ``--workdir`` (reused by later runs with the same sizes):

- a corpus of ``1.1 x --pool-size`` papers with titles, abstracts, years, fields and a
  citation graph, written by DuckDB;
- the real pools stage: ``--queries`` dataset-level test queries (the paper: 3,800), one
  pool size (``--pool-size``, the paper's largest: 2M), ``--reps`` repetitions;
- ``--retrievers`` runs of depth ``--depth`` (the paper: 500), written by a stage of this
  script: each keeps a share of the query's cited papers (its skill) at random ranks of
  its top 100 and fills the rest with random papers of the pool;
- the real score and report stages over them.

Then the real command, ``mdcr explore REPORT``, runs in a child process, and the script
times its start (until it prints its URL: the result opened, the session's copy of the
papers made; and until it says the runs' and qrels' copies are made, in the background)
and, over HTTP, the queries page (its first answer, asked at once; after the copies, the
best of five later ones; the first page for another pair of retrievers; that pair sorted
by its rank correlation, which computes it for every query; the page at k = 50) and
``--samples`` query pages, each asked for the first time; it reads the server's resident
and peak memory from /proc. Peers measured in the same run: ``mdcr export --per-query`` of
the same report (what gives per-query values without explore), reading one query's top
500 of every run with pyarrow's filtered ``read_table`` (what a notebook would do), and
looking up one query page's papers (its top 10 of every run) in ``papers.parquet`` with
DuckDB (what a page would cost without the session's copy).

    python scripts/bench_explore.py                            # the paper's scale
    python scripts/bench_explore.py --pool-size 200000         # a smaller pool, same queries
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mdcr.core.config import input_path, param
from mdcr.core.stage import STAGES, StageContext, StageSpec


def write_corpus(out: Path, n: int, seed: int) -> None:
    """papers.parquet (with text) and citations.parquet for ``n`` papers, with DuckDB.

    Paper i's year grows with i (about 4% in 2019, none after 2020); it cites papers of
    smaller index (10-50 citations for the papers of 2019 and later, fewer before), so
    never a later year. Titles and abstracts are words of mdcr's synthetic vocabulary.
    """
    import duckdb

    from mdcr.contracts.paper import MAG_FIELDS

    vocab = json.loads((Path(__file__).parents[1] / "mdcr/data/synth_vocabulary.json").read_text())
    words = sorted({w.lower() for w in vocab["modifiers"] + vocab["signature_names"]})
    for terms in vocab["fields"].values():
        for t in terms if isinstance(terms, list) else [x for v in terms.values() for x in v]:
            words.extend(str(t).lower().split())
    words = sorted({w for w in words if len(w) > 2 and w.isalpha()})
    out.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute("SET preserve_insertion_order = false")
    fields = "[" + ", ".join(f"'{f}'" for f in MAG_FIELDS) + "]"
    vocabulary = "[" + ", ".join("'" + w.replace("'", "''") + "'" for w in words) + "]"
    v = len(words)
    con.execute(
        f"""CREATE TABLE p AS SELECT i,
          ((i * 2654435761 + {seed}) % 4294967296)::VARCHAR AS paper_id,
          (1950 + floor(71 * pow((i + 0.5) / {n}, 1.0 / 3)))::INTEGER AS year,
          CASE WHEN i % 3 = 0
               THEN [{fields}[1 + (i * 7) % 19], {fields}[1 + (i * 11 + 5) % 19]]
               ELSE [{fields}[1 + (i * 7) % 19]] END AS fields
        FROM range({n}) t(i)"""
    )
    con.execute(
        f"""COPY (SELECT paper_id,
              array_to_string(list_transform(range(8), lambda x:
                  {vocabulary}[(1 + hash(i, x, {seed}) % {v})::BIGINT]), ' ') AS title,
              array_to_string(list_transform(range(60), lambda x:
                  {vocabulary}[(1 + hash(i, x, {seed} + 1) % {v})::BIGINT]), ' ') AS abstract,
              year, fields, 0::BIGINT AS n_out, 0::BIGINT AS n_in FROM p)
           TO '{out / "papers.parquet"}' (FORMAT parquet, COMPRESSION zstd)"""
    )
    con.execute(
        f"""COPY (
          WITH e AS (
            SELECT i, m FROM (
              SELECT i, year, unnest(range(CASE WHEN year >= 2019 THEN 10 + (i * 13) % 41
                                               ELSE (i * 13) % 21 END)) AS m
              FROM p WHERE i > 0)
          )
          SELECT a.paper_id AS citing_id, b.paper_id AS cited_id
          FROM (SELECT i, (i - 1 - floor(i * pow((hash(i, m, {seed}) % 1000003) / 1000003.0, 2))
                 )::BIGINT AS j FROM e) x
          JOIN p a ON a.i = x.i JOIN p b ON b.i = x.j
        ) TO '{out / "citations.parquet"}' (FORMAT parquet, COMPRESSION zstd)"""
    )


@dataclass(frozen=True)
class BenchRunConfig:
    pools: str = input_path(help="pools output")
    name: str = param("bm25", help="retriever name")
    skill: float = param(0.5, help="share of the cited papers ranked in the top 100")
    depth: int = param(500, help="papers ranked per query")
    seed: int = param(0, help="seed")


def run_bench_explore_run(cfg: BenchRunConfig, ctx: StageContext) -> None:
    """A run of depth ``cfg.depth`` for every query of every pool (see the module doc)."""
    import pyarrow.parquet as pq

    from mdcr.index.runs import RunWriter, run_table

    pools_dir = ctx.input("pools")
    qrels = pq.read_table(pools_dir / "qrels.parquet").to_pandas()
    qrels["pool_id"] = qrels["pool_id"].astype(str)
    pool_ids = sorted(qrels["pool_id"].unique())
    rng = np.random.default_rng([cfg.seed, sum(map(ord, cfg.name))])
    with RunWriter(ctx.output("runs.parquet")) as w:
        for pool_id in pool_ids:
            members = pq.read_table(
                pools_dir / "pools.parquet",
                columns=["paper_id"],
                filters=[("pool_id", "=", pool_id)],
            )["paper_id"].to_numpy(zero_copy_only=False)
            q = qrels[(qrels["pool_id"] == pool_id) & (qrels["relevance"] >= 1)]
            cited = q.groupby("query_id")["paper_id"].apply(np.asarray).to_dict()
            qids = sorted(qrels.loc[qrels["pool_id"] == pool_id, "query_id"].unique())
            ranked = []
            for qid in qids:
                pos = cited.get(qid, np.array([], dtype=object))
                kept = pos[rng.random(len(pos)) < cfg.skill][: cfg.depth]
                fill = members[rng.integers(0, len(members), cfg.depth + len(pos) + 20)]
                fill = fill[(fill != qid) & ~np.isin(fill, pos)]
                _, first = np.unique(fill, return_index=True)
                fill = fill[np.sort(first)][: cfg.depth - len(kept)]
                ids = np.empty(len(kept) + len(fill), dtype=object)
                slots = np.sort(rng.choice(min(100, len(ids)), len(kept), replace=False))
                rest = np.setdiff1d(np.arange(len(ids)), slots)
                ids[slots], ids[rest] = kept, fill
                ranked.append((ids.astype(str), np.linspace(1.0, 0.0, len(ids))))
            w.write(run_table(pool_id, qids, ranked))
    ctx.outputs["runs.parquet"] = w.rows
    ctx.record("retriever", cfg.name)
    from mdcr.core.fingerprints import artifact_fingerprint

    ctx.record("pools_fingerprint", artifact_fingerprint(pools_dir))
    ctx.record("builtin_entry", None)


SPEC = STAGES.register(
    StageSpec("bench-explore-run", "2", BenchRunConfig, run_bench_explore_run, "bench runs")
)
NAMES = ("bm25", "specter", "scincl", "aspire-cs", "minilm", "scibert")
SKILLS = (0.6, 0.5, 0.55, 0.45, 0.4, 0.3)


def build(workdir: Path, pool_size: int, queries: int, reps: int, retrievers: int,
          depth: int) -> Path:  # fmt: skip
    """The store and its report (each step up to date when already built)."""
    from mdcr.core.config import from_mapping
    from mdcr.core.inputs import resolve_inputs
    from mdcr.core.store import Store
    from mdcr.pools.build import SPEC as POOLS
    from mdcr.pools.build import PoolsConfig
    from mdcr.scoring.report import SPEC as REPORT
    from mdcr.scoring.report import ReportConfig
    from mdcr.scoring.score import SPEC as SCORE
    from mdcr.scoring.score import ScoreConfig

    papers = int(pool_size * 1.1)
    corpus = workdir / f"corpus-{papers}"
    if not (corpus / "citations.parquet").is_file():
        t = time.perf_counter()
        write_corpus(corpus, papers, 0)
        print(f"corpus: {papers:,} papers in {time.perf_counter() - t:.0f} s", flush=True)
    store = Store(workdir / "home")
    cfg = PoolsConfig(
        corpus=str(corpus),
        n_queries_dataset=queries,
        dataset_sizes=(pool_size,),
        repetitions=reps,
        splits=("test",),
        setups=("dataset",),
    )
    cfg.validate()
    pools = store.execute(POOLS, cfg, resolve_inputs(cfg), quiet=True).path
    runs = []
    for name, skill in list(zip(NAMES, SKILLS, strict=True))[:retrievers]:
        run_cfg = BenchRunConfig(pools=str(pools), name=name, skill=skill, depth=depth)
        runs.append(store.execute(SPEC, run_cfg, {"pools": [pools]}, quiet=True).path)
    score_cfg = ScoreConfig(pools=str(pools), runs=tuple(str(r) for r in runs))
    score = store.execute(SCORE, score_cfg, resolve_inputs(score_cfg), quiet=True).path
    # Fewer resamples and permutations than the paper's report: they change the report's
    # intervals, not what explore reads or how fast.
    params = {"scores": ["x"], "resamples": 200, "permutations": 1000, "title": "bench"}
    report_cfg = from_mapping(ReportConfig, params, "report")
    return store.execute(REPORT, report_cfg, {"scores": [score]}, quiet=True).path


def _status(pid: int) -> dict[str, float]:
    """VmRSS and VmHWM of a process, in MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def _get(url: str) -> tuple[float, int]:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as r:
        body = r.read()
    return time.perf_counter() - t, len(body)


def measure(report: Path, home: Path, papers: Path, samples: int, seed: int
            ) -> dict[str, object]:  # fmt: skip
    """Serve the report with the real command and time its pages (``papers``: its
    corpus's papers file, for the DuckDB peer)."""
    env = {**os.environ, "MDCR_HOME": str(home)}
    t0 = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "mdcr.cli", "explore", str(report)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None and child.stderr is not None
    copied = threading.Event()  # the server says when the runs' copies are made
    copied_at: list[float] = []

    def watch(stream: Any) -> None:
        for line in stream:
            if "copied for this session" in line:
                copied_at.append(time.perf_counter() - t0)
                copied.set()

    threading.Thread(target=watch, args=(child.stderr,), daemon=True).start()
    url = ""
    for line in child.stdout:
        found = re.match(r"(http://\S+/)\s", line)
        if found:
            url = found.group(1)
            break
    ready = time.perf_counter() - t0
    figures: dict[str, object] = {"startup_s": ready}
    figures.update({f"{k}_start_mib": v for k, v in _status(child.pid).items()})
    try:
        overview = json.loads(urllib.request.urlopen(url + "api/overview", timeout=600).read())
        setup = overview["setups"][0]
        figures["setup"] = setup["label"]
        figures["units"] = setup["queries"] * setup["pools"]
        queries = url + f"queries/{setup['key']}"
        figures["queries_first_s"], size = _get(queries)  # as soon as it answers
        copied.wait(timeout=600)
        figures["copies_s"] = copied_at[0] if copied_at else float("nan")
        figures["queries_best_s"] = min(_get(queries)[0] for _ in range(5))
        figures["queries_bytes"] = size
        others = [r for r in setup["retrievers"][1:] if r != overview["baseline"]]
        pair = f"?baseline={others[0]}&versus={others[-1]}"
        figures["queries_other_pair_first_s"] = _get(queries + pair)[0]
        figures["queries_other_pair_by_tau_s"] = _get(queries + pair + "&sort=tau&order=asc")[0]
        figures["queries_k50_s"] = _get(queries + "?k=50")[0]
        api = urllib.request.urlopen(url + f"api/queries/{setup['key']}", timeout=600)
        rows = json.loads(api.read())["rows"]
        picked = random.Random(seed).sample(rows, min(samples, len(rows)))
        times = []
        for row in picked:
            q = urllib.parse.urlencode({"pool": row["pool_id"], "q": row["query_id"]})
            times.append(_get(url + f"query?{q}")[0])
        figures["query_median_s"] = statistics.median(times)
        figures["query_p90_s"] = float(np.quantile(times, 0.9))
        figures["query_max_s"] = max(times)
        figures["query_pages"] = len(times)
        q = urllib.parse.urlencode({"pool": picked[0]["pool_id"], "q": picked[0]["query_id"]})
        figures["query_k100_s"] = _get(url + f"query?{q}&k=100")[0]
        page = json.loads(urllib.request.urlopen(url + f"api/query?{q}", timeout=600).read())
        figures.update({f"{k}_end_mib": v for k, v in _status(child.pid).items()})
    finally:
        child.terminate()
        child.wait(timeout=60)

    # Peers: export --per-query of the same report; one query's top 500 by pyarrow.
    import pyarrow.parquet as pq

    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "mdcr.cli", "export", "--per-query", "--run", str(report),
         "--out", str(home.parent / "per_query")],
        check=True, env=env, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    figures["export_per_query_s"] = time.perf_counter() - t
    from mdcr.contracts.outputs import input_paths

    score = input_paths(report, "scores")[0]
    runs = [run / "runs.parquet" for run in input_paths(score, "runs")]  # the report's own
    row = picked[0]
    t = time.perf_counter()
    for run in runs:
        pq.read_table(
            run, filters=[("pool_id", "=", row["pool_id"]), ("query_id", "=", row["query_id"])]
        )
    figures["pyarrow_one_query_s"] = time.perf_counter() - t
    import duckdb

    ids = sorted({i["paper_id"] for c in page["columns"] for i in c["items"]} | {row["query_id"]})
    t = time.perf_counter()
    duckdb.connect().execute(
        "SELECT paper_id, title, abstract, year FROM read_parquet(?) WHERE paper_id IN "
        f"({', '.join('?' * len(ids))})",
        [str(papers), *ids],
    ).fetchall()
    figures["duckdb_page_papers_s"] = time.perf_counter() - t
    figures["page_papers"] = len(ids)
    figures["runs_mib"] = sum(r.stat().st_size for r in runs) / 2**20
    figures["runs_rows"] = sum(pq.ParquetFile(r).metadata.num_rows for r in runs)
    return figures


def lines(best: dict[str, object], args: argparse.Namespace) -> list[str]:
    """What the benchmark prints (times in ms, memory in MiB)."""
    b: dict[str, float] = {k: v for k, v in best.items() if isinstance(v, int | float)}
    ms = {k: v * 1000 for k, v in b.items() if k.endswith("_s")}
    return [
        f"machine: {os.cpu_count()} CPUs; {args.retrievers} retrievers, {args.queries} "
        f"queries, {args.reps} pools of {args.pool_size:,}, top {args.depth}; best of "
        f"{args.runs} run(s) (memory: the largest)",
        f"runs on disk: {b['runs_rows']:,.0f} rows, {b['runs_mib']:.0f} MiB",
        f"server ready after {b['startup_s']:.1f} s (runs' and qrels' copies made "
        f"{b['copies_s']:.1f} s after the start); memory {b['VmRSS_start_mib']:.0f} MiB "
        f"(peak {b['VmHWM_start_mib']:.0f}), after the pages {b['VmRSS_end_mib']:.0f} MiB "
        f"(peak {b['VmHWM_end_mib']:.0f})",
        f"queries page ({b['units']:,.0f} rows, {best['setup']}): first "
        f"{ms['queries_first_s']:.0f} ms, then {ms['queries_best_s']:.0f} ms; another pair "
        f"{ms['queries_other_pair_first_s']:.0f} ms, sorted by its τ_h (every query's) "
        f"{ms['queries_other_pair_by_tau_s']:.0f} ms; k = 50 {ms['queries_k50_s']:.0f} ms"
        "   [goal: < 1000 ms]",
        f"query page ({b['query_pages']:.0f} queries, each asked once): median "
        f"{ms['query_median_s']:.0f} ms, 90th percentile {ms['query_p90_s']:.0f} ms, max "
        f"{ms['query_max_s']:.0f} ms; top 100 {ms['query_k100_s']:.0f} ms   [goal: < 300 ms]",
        f"peers: export --per-query {b['export_per_query_s']:.1f} s; one query's top 500 of "
        f"every run by pyarrow {ms['pyarrow_one_query_s']:.0f} ms; a query page's "
        f"{b['page_papers']:.0f} papers by DuckDB from papers.parquet "
        f"{ms['duckdb_page_papers_s']:.0f} ms",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", type=Path, default=Path("data/bench-explore"))
    ap.add_argument("--pool-size", type=int, default=2_000_000)
    ap.add_argument("--queries", type=int, default=3800)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--retrievers", type=int, default=5, choices=range(1, len(NAMES) + 1))
    ap.add_argument("--depth", type=int, default=500)
    ap.add_argument("--samples", type=int, default=40, help="query pages timed")
    ap.add_argument("--runs", type=int, default=3, help="times the server is measured")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)

    t = time.perf_counter()
    report = build(
        args.workdir, args.pool_size, args.queries, args.reps, args.retrievers, args.depth
    )
    print(f"store ready in {time.perf_counter() - t:.0f} s: {report}", flush=True)
    home = args.workdir / "home"
    papers = args.workdir / f"corpus-{int(args.pool_size * 1.1)}" / "papers.parquet"
    runs = [measure(report, home, papers, args.samples, seed) for seed in range(args.runs)]
    # Times: the best run's (the machine is shared); memory: the largest of the runs.
    best = {
        k: (max if k.endswith("_mib") else min)(r[k] for r in runs) if isinstance(v, float) else v  # type: ignore[type-var]
        for k, v in runs[0].items()
    }
    for line in lines(best, args):
        print(line)
    if args.json:
        args.json.write_text(json.dumps({"best": best, "runs": runs}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
