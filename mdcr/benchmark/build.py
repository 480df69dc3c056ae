"""Stage ``benchmark`` (``mdcr benchmark build``): the MDCR benchmark, paper section 4.1.

The queries are the field-level queries of each split (``pools`` output, setup ``field``).
Each (split, field, query) gets ``n_true`` positives and ``n_per_type`` negatives of each
type, drawn in this priority order (the order also settles duplicates, see below):

1. ``true``: a seeded sample of the papers the query cites (prefiltered, year <= the query
   year, not the query itself).
2. one type per model in ``models`` (default ``bm25``, ``specter``, ``scincl``): a seeded
   sample of the model's ``top_n`` highest-ranked candidates for the query on its
   field-level pool (``field/<split>/<field>/r<pool_rep>``), excluding every paper the
   query cites. The model's name is the run folder's ``info.retriever``; a built-in
   name (bm25, specter, scincl, ...) needs the run of that built-in entry.
3. ``graph``: the citation-overlap procedure (below).
4. ``most_cited``: a seeded sample of the ``most_cited_n`` most-cited papers of the
   query's field (papers whose MAG fields include it, year <= the query year, ordered by
   ``n_in`` descending, ties by paper_id), excluding every paper the query cites.
5. ``random``: a seeded sample of the prefiltered papers with year <= the query year,
   excluding the query and every paper it cites.

Rules: every candidate has year <= the query year; the query is never its own candidate;
no negative is a paper the query cites; no paper appears twice in a query's list. A paper
that an earlier type already took is skipped by a later type, which takes the next paper
in its own order instead (so every type still gets ``n_per_type`` when it can); the
skipped papers are counted per type in the manifest (``duplicates_skipped``). A query that
cannot get ``n_true`` positives or a full type is listed in ``short_queries.parquet``
with the reason; ``on_short="error"`` stops the stage, ``"warn"`` keeps the query with the
candidates it could get.

Determinism: every sample orders its candidates by ``md5("<derived seed>:" + paper_id)``
(:mod:`mdcr.pools.seeds`), the seed derived from (seed, "benchmark", split, field,
query_id, type). The random type draws from the sorted eligible ids with a PCG64 stream of
that derived seed (hashing all 16M prefiltered ids per query would cost minutes), skipping
excluded and taken papers. Nothing depends on thread count or row order.

The graph procedure (paper section 4.1, "Graph neighbors-based selection"), and how each
detail the paper leaves open is resolved:

- ``C_q`` are the query's outgoing citations, ``C_c`` and ``I_c`` a cited paper's outgoing
  and incoming citations, all within the prefiltered corpus (the citation graph we have).
  ``C_q`` is all of them (any year, self-citations dropped); the query itself is in
  ``I_c`` as the paper defines it.
- Similarity: the paper calls it the "overlap similarity" between ``C_q`` and
  ``N_c = C_c ∪ I_c``; its formula did not survive in our copy of the text. We use the
  overlap coefficient ``|C_q ∩ N_c| / min(|C_q|, |N_c|)`` (Szymkiewicz–Simpson, the
  measure of that name); ``graph_similarity="intersection"`` uses the plain count
  ``|C_q ∩ N_c|`` instead.
- The cited papers are visited by similarity, descending; ties (frequent: equal small
  fractions) are broken by the seeded hash of the cited paper's id.
- From each visited ``c`` every neighbour in ``N_c`` is added that the query does not cite,
  is not the query, has year <= the query year and is not already in the query's list.
  "Until there are 10": the neighbours of the ``c`` that completes the ten are taken in
  seeded-hash order, so the last ``c`` contributes a seeded sample of its neighbours.
- A query whose cited papers' neighbourhoods hold fewer than ten such papers is short.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from mdcr.benchmark.coverage import require_splits
from mdcr.benchmark.lists import QueryList, hash_order, take, type_seed
from mdcr.contracts.artifacts import BENCHMARK, PAPERS, QUERIES
from mdcr.contracts.paper import (
    MDCR_FIXED_TYPES,
    MDCR_MOST_CITED_N,
    MDCR_PER_TYPE,
    MDCR_POSITIVE,
    MDCR_POSITIVES,
    MDCR_TOP_N,
)
from mdcr.core.config import input_path, param
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.hints import option
from mdcr.core.stage import STAGES, StageContext, StagePlan, StageSpec, Work
from mdcr.pools.db import arrow_table
from mdcr.retrievers.builtin import MDCR_MODELS

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from mdcr.core.stage import PlanFacts
    from mdcr.pools.db import CorpusFiles

SHORT_FILE = "short_queries.parquet"
SUMMARY_FILE = "summary.md"
HF_DIR = "hf"
# The PCG64 draws per step of the random type (a constant: the stream must not depend
# on anything but the seed).
_RANDOM_BATCH = 64

FIXED_TYPES, POSITIVE = MDCR_FIXED_TYPES, MDCR_POSITIVE


@dataclass(frozen=True)
class BenchmarkConfig:
    corpus: str = input_path(
        help="prefiltered corpus (prefilter output: papers.parquet with n_in, citations.parquet)"
    )
    pools: str = input_path(help="pools output; the MDCR queries are its field-level queries")
    runs: tuple[str, ...] = input_path(
        (),
        multiple=True,
        help="search/bm25 outputs on the field-level pools, one per model in `models` "
        "(matched by their manifest's info.retriever)",
    )
    models: tuple[str, ...] = param(
        MDCR_MODELS, help="models whose top candidates give the model-based negative types"
    )
    n_true: int = param(MDCR_POSITIVES, help="positives per query (sampled from its cited papers)")
    n_per_type: int = param(MDCR_PER_TYPE, help="negatives per candidate type")
    top_n: int = param(MDCR_TOP_N, help="model-based types sample from each model's top N ranks")
    most_cited_n: int = param(
        MDCR_MOST_CITED_N, help="most_cited samples from the field's N most-cited papers"
    )
    pool_rep: int = param(0, help="repetition of the field-level pools whose runs are used")
    seed: int = param(0, help="master seed of every sample")
    splits: tuple[Literal["val", "test"], ...] = param(("val", "test"), help="splits to build")
    fields: tuple[str, ...] = param((), help="fields to build; empty = every field with queries")
    graph_similarity: Literal["overlap", "intersection"] = param(
        "overlap",
        help="graph type: overlap = |C_q ∩ N_c| / min(|C_q|, |N_c|); intersection = |C_q ∩ N_c|",
    )
    on_short: Literal["error", "warn"] = param(
        "error",
        help="a query lacking positives or a full type: stop, or keep it as it is and warn "
        "(listed in short_queries.parquet either way)",
    )
    hf_export: bool = param(True, help="also save the benchmark as HF datasets (needs datasets)")

    def validate(self) -> None:
        for key in ("n_true", "n_per_type", "top_n", "most_cited_n"):
            if getattr(self, key) < 1:
                raise ConfigError(f"benchmark.{key}: must be >= 1, got {getattr(self, key)}")
        if self.pool_rep < 0 or self.seed < 0:
            raise ConfigError("benchmark.pool_rep and benchmark.seed must be >= 0")
        if len(set(self.models)) != len(self.models):
            raise ConfigError(f"benchmark.models: lists a model twice: {list(self.models)}")
        reserved = [m for m in self.models if m in (*FIXED_TYPES, POSITIVE) or not m]
        if reserved:
            raise ConfigError(
                f"benchmark.models: '{reserved[0]}' is a reserved type name; name models "
                "by their retriever names (bm25, specter, scincl, ...)"
            )
        if self.top_n < self.n_per_type or self.most_cited_n < self.n_per_type:
            raise ConfigError(
                f"benchmark.top_n and most_cited_n must be >= n_per_type ({self.n_per_type})"
            )
        if not self.splits or len(set(self.splits)) != len(self.splits):
            raise ConfigError(f"benchmark.splits: must be val and/or test, got {self.splits}")


# ----------------------------------------------------------------------------- loading


def load_queries(pools_dir: Path, cfg: BenchmarkConfig) -> pd.DataFrame:
    """The MDCR queries: field-level queries of the chosen splits and fields."""
    from mdcr.contracts.artifacts import QUERIES

    q = QUERIES.read_pandas(pools_dir)
    q = q[(q["setup"] == "field") & q["split"].isin(cfg.splits)]
    if cfg.fields:
        unknown = sorted(set(cfg.fields) - set(q["field"]))
        if unknown:
            have = ", ".join(sorted(q["field"].unique())) or "none"
            raise ConfigError(
                f"benchmark.fields: '{unknown[0]}' has no field-level queries; fields: {have}"
            )
        q = q[q["field"].isin(cfg.fields)]
    if q.empty:
        raise InputDataError(
            f"'{pools_dir}' has no field-level queries in splits {', '.join(cfg.splits)}; "
            "build pools with setups including 'field'"
        )
    q = q.astype({"query_id": str, "field": str, "split": str})
    return q.sort_values(["split", "field", "query_id"]).reset_index(drop=True)


def find_runs(runs: list[Path], models: tuple[str, ...], pools_dir: Path) -> dict[str, Path]:
    """The run folder of each model, by the retriever name its stage recorded."""
    from mdcr.contracts.outputs import check_run_pools, run_info

    by_name: dict[str, Path] = {}
    for folder in runs:
        info = run_info(folder)
        if info is None:
            raise ConfigError(
                f"benchmark.runs: '{folder}' records no retriever name; give search/bm25 outputs"
            )
        name = info.retriever
        if name in by_name:
            raise ConfigError(f"benchmark.runs: two runs are named '{name}'; give one per model")
        check_run_pools(folder, pools_dir)
        by_name[name] = folder
    missing = [m for m in models if m not in by_name]
    if missing:
        have = ", ".join(sorted(by_name)) or "none"
        raise ConfigError(
            f"benchmark.models: no run of '{missing[0]}' among benchmark.runs (runs of: {have}); "
            "add its search/bm25 output or drop it from models"
        )
    return {m: by_name[m] for m in models}


def pool_of(pool_meta: pd.DataFrame, split: str, field_name: str, rep: int) -> str:
    """The field-level pool whose runs give the model-based negatives."""
    rows = pool_meta[
        (pool_meta["setup"] == "field")
        & (pool_meta["split"] == split)
        & (pool_meta["field"] == field_name)
    ]
    want = f"field/{split}/{field_name}/r{rep}"
    ids = set(rows["pool_id"].astype(str))
    if want in ids:
        return want
    if len(ids) == 1 and bool(rows["all_field_cited"].iloc[0]):
        return next(iter(ids))  # a field with one pool (all of its field-cited set)
    raise InputDataError(
        f"no field-level pool '{want}'; pools of {field_name} ({split}): "
        f"{', '.join(sorted(ids)) or 'none'}; lower benchmark.pool_rep"
    )


# ----------------------------------------------------------------------------- stage


@dataclass
class Builder:
    cfg: BenchmarkConfig
    ctx: StageContext
    con: duckdb.DuckDBPyConnection
    lists: list[QueryList]
    cited: dict[str, list[tuple[str, int]]]
    skipped: Counter[str] = dataclasses.field(default_factory=Counter)
    short: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def cited_set(self, q: QueryList) -> set[str]:
        return {c for c, _ in self.cited.get(q.query_id, [])}

    def note_short(self, q: QueryList, ctype: str, need: int, reason: str) -> None:
        got = len(q.chosen.get(ctype, []))
        if got < need:
            self.short.append(
                {
                    "split": q.split,
                    "field": q.field,
                    "query_id": q.query_id,
                    "candidate_type": ctype,
                    "needed": need,
                    "got": got,
                    "reason": reason,
                }
            )

    def positives(self) -> None:
        n = self.cfg.n_true
        for q in self.lists:
            ok = [c for c, y in self.cited.get(q.query_id, []) if y <= q.year]
            order = hash_order(ok, type_seed(self.cfg.seed, q, POSITIVE))
            take(q, POSITIVE, order, n, set(), self.skipped)
            self.note_short(
                q, POSITIVE, n, f"cites {len(ok)} prefiltered papers of year <= {q.year}"
            )

    def model_type(self, model: str, run: Path, pools: dict[tuple[str, str], str]) -> None:
        import pyarrow.compute as pc

        from mdcr.contracts.artifacts import RUNS

        wanted = sorted(set(pools.values()))
        table = RUNS.read(
            run,
            columns=["pool_id", "query_id", "paper_id", "rank"],
            filters=[("pool_id", "in", wanted), ("rank", "<=", self.cfg.top_n)],
        )
        pool_col = pc.cast(table["pool_id"], "string").to_pylist()
        require_splits(model, run, pools, set(pool_col))
        tops: dict[tuple[str, str], list[tuple[int, str]]] = {}
        for p, qid, pid, rank in zip(
            pool_col,
            table["query_id"].to_pylist(),
            table["paper_id"].to_pylist(),
            table["rank"].to_pylist(),
            strict=True,
        ):
            tops.setdefault((p, qid), []).append((int(rank), str(pid)))
        years = self.years_of({pid for v in tops.values() for _, pid in v})
        n = self.cfg.n_per_type
        for q in self.lists:
            pool_id = pools[(q.split, q.field)]
            ranked = [pid for _, pid in sorted(tops.get((pool_id, q.query_id), []))]
            cited = self.cited_set(q)
            ok = [p for p in ranked if p not in cited and p != q.query_id and years[p] <= q.year]
            order = hash_order(ok, type_seed(self.cfg.seed, q, model))
            take(q, model, order, n, cited, self.skipped)
            reason = (
                f"{model} ranks {len(ranked)} papers in its top {self.cfg.top_n} on {pool_id}, "
                f"{len(ok)} not cited by the query"
            )
            self.note_short(q, model, n, reason)

    def years_of(self, ids: set[str]) -> dict[str, int]:
        import pyarrow as pa

        if not ids:
            return {}
        self.con.register("ids_arrow", pa.table({"paper_id": pa.array(sorted(ids), pa.string())}))
        try:
            res = arrow_table(
                self.con,
                "SELECT p.paper_id, p.year FROM pyear p SEMI JOIN ids_arrow USING (paper_id)",
            )
        finally:
            self.con.unregister("ids_arrow")
        out = dict(zip(res["paper_id"].to_pylist(), res["year"].to_pylist(), strict=True))
        missing = sorted(ids - set(out))
        if missing:
            raise InputDataError(
                f"run paper '{missing[0]}' is not in the corpus; give the runs made on pools "
                "of this corpus"
            )
        return out

    def graph(self) -> None:
        from mdcr.benchmark.graph import graph_negatives

        n = self.cfg.n_per_type
        rounds, visited = graph_negatives(self.con, self.lists, self.cfg.seed, n, self.skipped)
        for q, n_cited in zip(self.lists, visited, strict=True):
            reason = (
                f"the neighbourhoods of its {n_cited} cited papers hold "
                f"{len(q.chosen['graph'])} eligible papers"
            )
            self.note_short(q, "graph", n, reason)
        self.ctx.record("graph_rounds", rounds)

    def most_cited(self, fields: list[str]) -> None:
        n, top = self.cfg.n_per_type, self.cfg.most_cited_n
        cache: dict[tuple[str, int], list[str]] = {}
        for q in self.lists:
            key = (q.field, q.year)
            if key not in cache:
                res = arrow_table(
                    self.con,
                    "SELECT p.paper_id FROM pyear p JOIN pfields f USING (paper_id) "
                    "WHERE f.field = ? AND p.year <= ? ORDER BY p.n_in DESC, p.paper_id "
                    f"LIMIT {int(top)}",
                    [q.field, q.year],
                )
                cache[key] = [str(x) for x in res["paper_id"].to_pylist()]
            cited = self.cited_set(q)
            ok = [p for p in cache[key] if p not in cited and p != q.query_id]
            order = hash_order(ok, type_seed(self.cfg.seed, q, "most_cited"))
            take(q, "most_cited", order, n, cited, self.skipped)
            reason = (
                f"{len(cache[key])} most-cited {q.field} papers of year <= {q.year}, "
                f"{len(ok)} not cited by the query"
            )
            self.note_short(q, "most_cited", n, reason)
        self.ctx.record("most_cited_lists", {f"{f}|{y}": len(v) for (f, y), v in cache.items()})

    def random(self) -> None:
        n = self.cfg.n_per_type
        pools: dict[int, Any] = {}
        for q in self.lists:
            if q.year not in pools:
                res = arrow_table(
                    self.con,
                    "SELECT paper_id FROM pyear WHERE year <= ? ORDER BY paper_id",
                    [q.year],
                )
                pools[q.year] = res["paper_id"].combine_chunks()
            ids = pools[q.year]
            cited = self.cited_set(q)
            rng = np.random.Generator(np.random.PCG64(type_seed(self.cfg.seed, q, "random")))
            got = q.chosen.setdefault("random", [])
            total = len(ids)
            if total <= 4 * (n + len(q.taken) + len(cited) + 1):
                order = [str(ids[int(i)]) for i in rng.permutation(total)]
                take(q, "random", order, n, cited, self.skipped)
            else:
                seen: set[int] = set()
                while len(got) < n and len(seen) < total:
                    batch = []
                    for i in rng.integers(0, total, size=_RANDOM_BATCH).tolist():
                        if i not in seen:
                            seen.add(i)
                            batch.append(str(ids[i]))
                    take(q, "random", batch, n, cited, self.skipped)
            self.note_short(q, "random", n, f"{total} prefiltered papers of year <= {q.year}")


def _setup_db(con: duckdb.DuckDBPyConnection, papers: str, qids: list[str]) -> None:
    import pyarrow as pa

    from mdcr.pools.db import require_columns

    require_columns(
        con,
        Path(papers),
        {
            "paper_id": ("VARCHAR",),
            "year": ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UINTEGER", "UBIGINT"),
            "n_in": ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UINTEGER", "UBIGINT"),
            "fields": ("VARCHAR[]",),
        },
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE pyear AS SELECT paper_id, CAST(year AS INTEGER) AS year, "
        "coalesce(CAST(n_in AS BIGINT), 0) AS n_in "
        "FROM read_parquet(?) WHERE year IS NOT NULL AND paper_id IS NOT NULL",
        [papers],
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE pfields AS SELECT DISTINCT paper_id, field FROM ("
        "SELECT paper_id, unnest(fields) AS field FROM read_parquet(?)) WHERE field IS NOT NULL",
        [papers],
    )
    con.register("qids_arrow", pa.table({"q": pa.array(sorted(set(qids)), pa.string())}))
    con.execute("CREATE OR REPLACE TEMP TABLE qids AS SELECT q FROM qids_arrow")
    con.unregister("qids_arrow")


def _cited(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, int]]]:
    """Every query's cited papers (all years) with their years, from table ``cq``."""
    res = arrow_table(
        con,
        "SELECT cq.q, cq.c, p.year FROM cq JOIN pyear p ON p.paper_id = cq.c ORDER BY cq.q, cq.c",
    )
    out: dict[str, list[tuple[str, int]]] = {}
    for q, c, y in zip(
        res["q"].to_pylist(), res["c"].to_pylist(), res["year"].to_pylist(), strict=True
    ):
        out.setdefault(str(q), []).append((str(c), int(y)))
    return out


def _rows(lists: list[QueryList]) -> pd.DataFrame:
    import pandas as pd

    from mdcr.benchmark.formats import BENCHMARK_COLUMNS, sort_benchmark

    rows = [
        (q.query_id, q.field, pid, ctype, q.split)
        for q in lists
        for ctype, ids in q.chosen.items()
        for pid in ids
    ]
    return sort_benchmark(pd.DataFrame(rows, columns=BENCHMARK_COLUMNS))


def _papers(con: duckdb.DuckDBPyConnection, papers: str, bench: pd.DataFrame) -> pd.DataFrame:
    """Title, abstract and year of every benchmark paper (queries and candidates)."""
    import pyarrow as pa

    ids = sorted(set(bench["paper_id"]) | set(bench["query_id"]))
    con.register("bids", pa.table({"paper_id": pa.array(ids, pa.string())}))
    try:
        df = arrow_table(
            con,
            "SELECT p.paper_id, coalesce(p.title, '') AS title, "
            "coalesce(p.abstract, '') AS abstract, CAST(p.year AS INTEGER) AS year "
            "FROM read_parquet(?) p SEMI JOIN bids USING (paper_id) ORDER BY p.paper_id",
            [papers],
        ).to_pandas()
    finally:
        con.unregister("bids")
    if len(df) != len(ids):
        missing = sorted(set(ids) - set(df["paper_id"]))
        raise InputDataError(f"benchmark paper '{missing[0]}' has no row in '{papers}'")
    return df


def summary_markdown(
    bench: pd.DataFrame, short: pd.DataFrame, skipped: Counter[str], cfg: BenchmarkConfig
) -> str:
    """A readable account of the benchmark: counts per split, field and type."""
    import pandas as pd

    from mdcr.scoring.mdcr_tables import type_order

    present = set(bench["candidate_type"].unique())
    types = [t for t in type_order([*cfg.models, *FIXED_TYPES, POSITIVE]) if t in present]
    priority = [t for t in (POSITIVE, *cfg.models, *FIXED_TYPES) if t in present]
    lines = [
        "# MDCR benchmark",
        "",
        f"Positives per query: {cfg.n_true}; negatives per type: {cfg.n_per_type}; "
        f"model types: {', '.join(cfg.models) or 'none'} (top {cfg.top_n} of the runs on the "
        f"field-level pools, repetition {cfg.pool_rep}); most cited: top {cfg.most_cited_n} "
        f"per field; graph similarity: {cfg.graph_similarity}; seed {cfg.seed}.",
        "",
        "| split | field | queries | " + " | ".join(types) + " | full lists |",
        "|---|---|---:|" + "---:|" * (len(types) + 1),
    ]
    want = {t: (cfg.n_true if t == POSITIVE else cfg.n_per_type) for t in types}
    for (split, fld), g in bench.groupby(["split", "field"], sort=True):
        counts = g.groupby(["query_id", "candidate_type"]).size().unstack(fill_value=0)
        counts = counts.reindex(columns=types, fill_value=0)
        nq = len(counts)
        full = int((counts >= pd.Series(want)).all(axis=1).sum())
        cells = [str(int(counts[t].sum())) for t in types]
        lines.append(f"| {split} | {fld} | {nq} | " + " | ".join(cells) + f" | {full} |")
    lines += [
        "",
        "Duplicates across types: a paper that an earlier type took is skipped by a later one "
        "(order: " + ", ".join(priority) + "), which takes its next paper instead. "
        "Skipped per type: "
        + (", ".join(f"{t} {skipped[t]}" for t in types if skipped[t]) or "none")
        + ".",
        "",
    ]
    if short.empty:
        lines.append("Every query has all its positives and a full list of every type.")
    else:
        lines.append(
            f"{short['query_id'].nunique()} queries lack positives or a full type "
            f"({len(short)} shortfalls; all in {SHORT_FILE}):"
        )
        lines.append("")
        lines.append("| split | field | query | type | got | needed | reason |")
        lines.append("|---|---|---|---|---:|---:|---|")
        for r in short.head(50).itertuples(index=False):
            lines.append(
                f"| {r.split} | {r.field} | {r.query_id} | {r.candidate_type} | {r.got} | "
                f"{r.needed} | {r.reason} |"
            )
        if len(short) > 50:
            lines.append(f"| ... | {len(short) - 50} more | | | | | |")
    return "\n".join(lines) + "\n"


def run_benchmark(cfg: BenchmarkConfig, ctx: StageContext) -> None:
    from mdcr.contracts.artifacts import POOL_META
    from mdcr.pools.db import CorpusFiles
    from mdcr.retrievers.builtin_entry import require_builtin

    corpus = CorpusFiles.in_folder(ctx.input("corpus"))
    pools_dir = ctx.input("pools")
    queries = load_queries(pools_dir, cfg)
    run_dirs = find_runs(ctx.inputs.get("runs") or [], cfg.models, pools_dir)
    for model, folder in run_dirs.items():  # a built-in name needs that built-in entry
        require_builtin(folder, model, "benchmark.runs")
    pool_meta = POOL_META.read_pandas(pools_dir).astype({"pool_id": str})
    groups = sorted({(s, f) for s, f in zip(queries["split"], queries["field"], strict=True)})
    pools = {(s, f): pool_of(pool_meta, s, f, cfg.pool_rep) for s, f in groups}
    lists = [
        QueryList(str(s), str(f), str(q), int(y))
        for s, f, q, y in zip(
            queries["split"], queries["field"], queries["query_id"], queries["year"], strict=True
        )
    ]
    bench, papers, b = _build_lists(cfg, ctx, corpus, lists, run_dirs, pools)
    short = _short_queries(cfg, ctx, b, len(lists))
    _write_benchmark(cfg, ctx, bench, papers, short, lists, b.skipped)
    _record_benchmark(cfg, ctx, queries, bench, short, b.skipped, run_dirs, pools)
    ctx.log(
        f"[benchmark] {len(lists)} queries, {len(bench)} candidates "
        f"({json.dumps(dict(sorted(b.skipped.items())))} duplicates skipped), "
        f"{0 if short.empty else short['query_id'].nunique()} short queries"
    )


def _build_lists(
    cfg: BenchmarkConfig,
    ctx: StageContext,
    corpus: CorpusFiles,
    lists: list[QueryList],
    run_dirs: dict[str, Path],
    pools: dict[tuple[str, str], str],
) -> tuple[pd.DataFrame, pd.DataFrame, Builder]:
    """Fill every query's list, type by type in priority order (DuckDB over the corpus);
    return the benchmark rows, the texts of its papers and the builder (its shortfalls
    and skipped duplicates)."""
    from mdcr.benchmark.formats import check_benchmark
    from mdcr.benchmark.graph import create_graph_tables
    from mdcr.pools.db import connect

    tmp = ctx.out / ".duckdb_tmp"
    con = connect(tmp)
    try:
        with ctx.timed("load"):
            _setup_db(con, str(corpus.papers), [q.query_id for q in lists])
            create_graph_tables(con, str(corpus.citations), cfg.graph_similarity)
            cited = _cited(con)
        b = Builder(cfg, ctx, con, lists, cited)
        with ctx.timed("true"):
            b.positives()
        for model, folder in run_dirs.items():
            with ctx.timed(model):
                b.model_type(model, folder, pools)
        with ctx.timed("graph"):
            b.graph()
        with ctx.timed("most_cited"):
            b.most_cited(sorted({q.field for q in lists}))
        with ctx.timed("random"):
            b.random()
        bench = check_benchmark(_rows(lists), "benchmark")
        with ctx.timed("texts"):
            papers = _papers(con, str(corpus.papers), bench)
    finally:
        con.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return bench, papers, b


def _short_queries(
    cfg: BenchmarkConfig, ctx: StageContext, b: Builder, n_queries: int
) -> pd.DataFrame:
    """The shortfalls as a table; with ``on_short="error"`` any is a one-line error."""
    import pandas as pd

    short = pd.DataFrame(
        b.short,
        columns=["split", "field", "query_id", "candidate_type", "needed", "got", "reason"],
    )
    if not short.empty:
        first = short.iloc[0]
        msg = (
            f"{short['query_id'].nunique()} of {n_queries} queries lack positives or a full "
            f"candidate type (e.g. {first['split']}/{first['field']} query {first['query_id']}: "
            f"{first['candidate_type']} {first['got']} of {first['needed']}; {first['reason']})"
        )
        if cfg.on_short == "error":
            raise InputDataError(
                msg + f"; set {option('benchmark', 'on_short', 'warn')} to keep them (reported)"
            )
        ctx.log(f"[benchmark] warning: {msg}; kept as they are, listed in {SHORT_FILE}")
    return short


def _write_benchmark(
    cfg: BenchmarkConfig,
    ctx: StageContext,
    bench: pd.DataFrame,
    papers: pd.DataFrame,
    short: pd.DataFrame,
    lists: list[QueryList],
    skipped: Counter[str],
) -> None:
    """benchmark, queries and papers Parquet, the shortfalls, the release's JSON files per
    split, the HF datasets and summary.md."""
    import pandas as pd

    from mdcr.benchmark.formats import (
        data_name,
        export_hf,
        release_json_name,
        write_papers_jsonl,
        write_release_json,
    )
    from mdcr.contracts.artifacts import BENCHMARK, PAPERS, QUERIES

    bench.to_parquet(BENCHMARK.output(ctx, rows=len(bench)), index=False)
    qtab = pd.DataFrame(
        {
            "query_id": [q.query_id for q in lists],
            "split": [q.split for q in lists],
            "setup": "mdcr",
            "field": [q.field for q in lists],
            "year": [q.year for q in lists],
        }
    )
    qtab.to_parquet(QUERIES.output(ctx, rows=len(qtab)), index=False)
    papers.to_parquet(PAPERS.output(ctx, rows=len(papers)), index=False)
    short.to_parquet(ctx.output(SHORT_FILE, rows=len(short)), index=False)
    for split in [s for s in ("val", "test") if s in set(bench["split"])]:
        part = bench[bench["split"] == split]
        write_release_json(part, ctx.output(release_json_name(split)))
        ids = set(part["paper_id"]) | set(part["query_id"])
        n = write_papers_jsonl(papers[papers["paper_id"].isin(ids)], ctx.output(data_name(split)))
        ctx.outputs[data_name(split)] = n
    if cfg.hf_export:
        with ctx.timed("hf_export"):
            for path in export_hf(bench, papers, ctx.out / HF_DIR):
                ctx.output(path.relative_to(ctx.out).as_posix())
    (ctx.out / SUMMARY_FILE).write_text(summary_markdown(bench, short, skipped, cfg))
    ctx.output(SUMMARY_FILE)


def _record_benchmark(
    cfg: BenchmarkConfig,
    ctx: StageContext,
    queries: pd.DataFrame,
    bench: pd.DataFrame,
    short: pd.DataFrame,
    skipped: Counter[str],
    run_dirs: dict[str, Path],
    pools: dict[tuple[str, str], str],
) -> None:
    """The manifest facts: counts, the model runs and pools used, the rules applied."""
    from mdcr.core.fingerprints import artifact_fingerprint
    from mdcr.retrievers.builtin_entry import entry_of

    counts: dict[tuple[str, str], int] = (
        bench.groupby(["split", "candidate_type"]).size().to_dict()  # type: ignore[assignment]
    )
    ctx.record("queries", {s: int((queries["split"] == s).sum()) for s in cfg.splits})
    ctx.record("candidates", {f"{s}|{t}": int(v) for (s, t), v in sorted(counts.items())})
    ctx.record("duplicates_skipped", dict(sorted(skipped.items())))
    ctx.record("short_queries", int(short["query_id"].nunique()) if not short.empty else 0)
    ctx.record("model_runs", {m: artifact_fingerprint(p) for m, p in run_dirs.items()})
    ctx.record("model_entries", {m: entry_of(p) for m, p in run_dirs.items()})
    ctx.record("model_pools", {f"{s}|{f}": p for (s, f), p in pools.items()})
    ctx.record("pools_fingerprint", artifact_fingerprint(ctx.input("pools")))
    ctx.record(
        "rules",
        {
            "duplicates": "first type in priority order keeps a paper; later types take "
            "their next paper",
            "priority": [POSITIVE, *cfg.models, *FIXED_TYPES],
            "graph_similarity": cfg.graph_similarity,
            "random": "PCG64 draws over the sorted eligible ids, seeded per query",
        },
    )


def plan_benchmark(
    cfg: BenchmarkConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    """What the stage would build, for ``mdcr run --dry-run``."""
    from mdcr.planning import benchmark_estimate

    per = cfg.n_true + cfg.n_per_type * (len(cfg.models) + len(FIXED_TYPES))
    fields = f"{len(cfg.fields)} fields" if cfg.fields else "every field with field-level queries"
    size, facts = benchmark_estimate(cfg, inputs, upstream)
    text = (
        f"MDCR benchmark for {', '.join(cfg.splits)} over {fields}: per query {cfg.n_true} "
        f"positives + {cfg.n_per_type} x ({', '.join([*cfg.models, *FIXED_TYPES])}) = {per} "
        f"candidates; model types from the top {cfg.top_n} of {len(inputs.get('runs', []))} "
        "run(s) on the field-level pools; writes benchmark.parquet, mdcr_<split>.json, "
        "mdcr_<split>_data.jsonl" + (", hf/" if cfg.hf_export else "") + f"\n{size}"
    )
    work = Work("benchmark", units=float(facts.queries)) if facts is not None else None
    return StagePlan(text, facts, work)


SPEC = STAGES.register(
    StageSpec(
        name="benchmark",
        version="2",
        config=BenchmarkConfig,
        run=run_benchmark,
        help="build the MDCR benchmark (5 positives + 6 x 10 negatives per field-level query)",
        plan=plan_benchmark,
        main_output=SUMMARY_FILE,
        command="benchmark build",
        writes=(BENCHMARK, QUERIES, PAPERS),
    )
)
