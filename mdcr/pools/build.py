"""The ``pools`` stage: queries, candidate pools and qrels for both evaluation setups.

Dataset-level (paper section 3.1): ``n_queries_dataset`` queries per split; for each pool
size and repetition, a pool of exactly that size holding every paper the split's queries
cite, plus a seeded random sample of the other prefiltered papers with year <= the query
year. Field-level (section 3.2): ``field_queries`` queries per field and split, all
labelled with the field; each pool holds the papers they cite plus a sample of the
field-cited set (papers cited by any paper labelled with the field, year <= the query
year), up to ``field_pool_size``. A field whose field-cited set is not larger than the
pool size gets one pool with all of it (``all_field_cited``; Art, History and Philosophy
in the paper).

Rules (docs/architecture.md §7; the files' contracts in §3): every candidate's year is <=
the query year; qrels are the query's cited papers in the pool (relevance 1); a query
never cites itself (such edges are dropped), and query papers may be candidates of other
queries in the same pool: retrievers exclude each query from its own ranking. Samples
are ordered by a seeded md5 key of the paper id (:mod:`mdcr.pools.seeds`), and every
written table is sorted, so one config gives byte-identical files whatever the thread
count.

Query rules (year, excluded ids, ``min_cited``, disjoint splits, overlap between setups)
are in :mod:`mdcr.pools.queries`. ``min_cited`` defaults to 5: the paper states no
minimum, but MDCR (paper section 4.1) reuses the field-level queries and samples 5 cited papers
of each as its positives, so every query needs at least 5; a higher floor would bias the
queries towards long reference lists. The mean the paper reports (29 positives per query)
is a property of S2ORC, not something to tune this floor to: on the synthetic 16M corpus
the eligible queries cite 24.4 papers on average with a floor of 5.

Each pool's sample has its own seed, derived from (seed, setup, split, field, size, rep).
With ``shared_ranking`` the split and size are left out of it: within a repetition the
smaller pools are then subsets of the larger ones and val and test share most negatives,
which more than halves the number of distinct papers to encode (used by the demo).

Sizes are exact: a dataset-level pool has ``size`` papers or the stage stops with an
error (too few papers of year <= the query year, or queries citing more than ``size``);
a field-level pool has ``field_pool_size`` papers unless it is an all-field-cited pool.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mdcr.contracts.artifacts import POOL_META, POOL_SUMMARY, POOLS, QRELS, QUERIES
from mdcr.contracts.paper import (
    DATASET_POOL_SIZES,
    DATASET_QUERIES,
    FIELD_POOL_SIZE,
    FIELD_QUERIES,
    MAG_FIELDS,
    MDCR_POSITIVES,
    QUERY_YEAR,
    REPETITIONS,
)
from mdcr.core.config import input_path, param
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.stage import STAGES, PlanFacts, StageContext, StagePlan, StageSpec, Work
from mdcr.pools.db import arrow_table

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq


QUERIES_FILE = QUERIES.file
POOLS_FILE = POOLS.file
POOL_META_FILE = POOL_META.file
QRELS_FILE = QRELS.file
SUMMARY_FILE = POOL_SUMMARY.file
ROW_GROUP = 1 << 20


@dataclass(frozen=True)
class PoolsConfig:
    corpus: str = input_path(
        help="prefiltered corpus: a prefilter output (a folder with papers.parquet and "
        "citations.parquet)"
    )
    query_year: int = param(QUERY_YEAR, help="queries are papers of this year; candidates <= it")
    min_cited: int = param(
        MDCR_POSITIVES,
        help="a query must cite at least this many prefiltered papers (year <= query_year); "
        "5 because MDCR samples 5 cited papers of each field-level query as its positives",
    )
    n_queries_dataset: int = param(DATASET_QUERIES, help="dataset-level queries per split")
    dataset_sizes: tuple[int, ...] = param(DATASET_POOL_SIZES, help="dataset-level pool sizes")
    field_queries: int = param(FIELD_QUERIES, help="field-level queries per field and split")
    field_pool_size: int = param(FIELD_POOL_SIZE, help="field-level pool size")
    repetitions: int = param(REPETITIONS, help="pools sampled per size (each with its own seed)")
    seed: int = param(0, help="master seed; every sample derives its own from it")
    splits: tuple[Literal["val", "test"], ...] = param(
        ("val", "test"), help="splits to build (disjoint query sets, built the same way)"
    )
    exclude_ids: str | None = input_path(
        None, help="text file, one paper id per line: papers that are never queries"
    )
    fields: tuple[str, ...] = param(MAG_FIELDS, help="MAG fields of the field-level setup")
    on_short_field: Literal["error", "warn"] = param(
        "error",
        help="when a field (or the dataset-level setup) has fewer eligible queries than "
        "asked: stop with an error, or warn and use the ones it has",
    )
    setups: tuple[Literal["dataset", "field"], ...] = param(
        ("dataset", "field"), help="evaluation setups to build"
    )
    shared_ranking: bool = param(
        False,
        help="rank candidates once per repetition (and field) for all sizes and both splits: "
        "smaller pools are then subsets of larger ones and far fewer papers need encoding; "
        "off = every (split, size, repetition) samples with its own seed, as in the paper",
    )

    def validate(self) -> None:
        where = "pools"
        positive = {
            "min_cited": self.min_cited,
            "n_queries_dataset": self.n_queries_dataset,
            "field_queries": self.field_queries,
            "field_pool_size": self.field_pool_size,
            "repetitions": self.repetitions,
        }
        for key, value in positive.items():
            if value < 1:
                raise ConfigError(f"{where}.{key}: must be >= 1, got {value}")
        if self.seed < 0:
            raise ConfigError(f"{where}.seed: must be >= 0, got {self.seed}")
        for key, values in (
            ("dataset_sizes", self.dataset_sizes),
            ("splits", self.splits),
            ("fields", self.fields),
            ("setups", self.setups),
        ):
            if not values and not (key == "fields" and "field" not in self.setups):
                raise ConfigError(f"{where}.{key}: must not be empty")
            if len(set(values)) != len(values):
                raise ConfigError(f"{where}.{key}: has duplicates: {list(values)}")
        for size in self.dataset_sizes:
            if size < 1:
                raise ConfigError(f"{where}.dataset_sizes: sizes must be >= 1, got {size}")
        for f in self.fields:
            if not f.strip() or "/" in f:
                raise ConfigError(f"{where}.fields: {f!r} is not a field name (non-empty, no '/')")


@dataclass(frozen=True)
class PoolSpec:
    """One pool to build; its id is the contract's ``<setup>/<split>/<size|field>/r<rep>``."""

    setup: str
    split: str
    field: str | None
    size: int
    rep: int
    seed: int
    all_field_cited: bool

    @property
    def pool_id(self) -> str:
        middle = str(self.size) if self.field is None else self.field
        return f"{self.setup}/{self.split}/{middle}/r{self.rep}"

    @property
    def group(self) -> tuple[str, str, str | None]:
        return (self.setup, self.split, self.field)


def _dict_col(value: str, n: int) -> pa.Array:
    import pyarrow as pa

    return pa.DictionaryArray.from_arrays(
        pa.array(_zeros(n), pa.int32()), pa.array([value], pa.string())
    )


def _zeros(n: int) -> Any:
    import numpy as np

    return np.zeros(n, dtype=np.int32)


def _schemas() -> dict[str, pa.Schema]:
    """The Arrow schemas the pools stage writes, as its contracts declare them."""
    return {
        "queries": QUERIES.schema,
        "pools": POOLS.schema,
        "qrels": QRELS.schema,
        "pool_meta": POOL_META.schema,
        "summary": POOL_SUMMARY.schema,
    }


def _writer(path: Path, schema: pa.Schema, dictionary: list[str]) -> pq.ParquetWriter:
    import pyarrow.parquet as pq

    return pq.ParquetWriter(
        path,
        schema,
        compression="zstd",
        use_dictionary=dictionary,
        write_statistics=True,
    )


def _write_table(path: Path, table: pa.Table, dictionary: list[str]) -> None:
    with _writer(path, table.schema, dictionary) as w:
        w.write_table(table, row_group_size=ROW_GROUP)


def _short_message(s: Any, cfg: PoolsConfig) -> str:
    what = "dataset-level" if s.field is None else f"field '{s.field}'"
    return (
        f"{what} {s.split} queries: {s.taken} of {s.requested} requested "
        f"({s.eligible} eligible: year {cfg.query_year}, >= {cfg.min_cited} cited "
        "prefiltered papers, not excluded)"
    )


def _sample_all_queries(
    con: duckdb.DuckDBPyConnection, cfg: PoolsConfig, ctx: StageContext
) -> list[Any]:
    """Sample every (setup, split, field) query set; apply the short-set policy."""
    from mdcr.pools.queries import create_queries_table, sample_queries

    create_queries_table(con)
    samples = []
    for setup in sorted(cfg.setups):
        groups: list[str | None] = [None] if setup == "dataset" else [*sorted(cfg.fields)]
        n = cfg.n_queries_dataset if setup == "dataset" else cfg.field_queries
        for split in sorted(cfg.splits):
            for field in groups:
                samples.append(
                    sample_queries(
                        con,
                        setup=setup,
                        split=split,
                        field=field,
                        n=n,
                        seed=cfg.seed,
                        query_year=cfg.query_year,
                    )
                )
    short = [s for s in samples if s.short]
    if short and cfg.on_short_field == "error":
        listed = "; ".join(_short_message(s, cfg) for s in short[:3])
        more = f"; and {len(short) - 3} more" if len(short) > 3 else ""
        raise InputDataError(
            f"too few eligible queries in {len(short)} query set(s): {listed}{more}; lower "
            "field_queries / n_queries_dataset or min_cited, or set on_short_field = 'warn'"
        )
    for s in short:
        ctx.log(f"[pools] warning: {_short_message(s, cfg)}; using {s.taken}")
    ctx.record(
        "query_sets",
        [
            {
                "setup": s.setup,
                "split": s.split,
                "field": s.field,
                "requested": s.requested,
                "eligible": s.eligible,
                "taken": s.taken,
            }
            for s in samples
        ],
    )
    ctx.record("short_query_sets", [_short_message(s, cfg) for s in short])
    return samples


def pool_seed(
    cfg: PoolsConfig, setup: str, split: str, field: str | None, size: int, rep: int
) -> int:
    """The seed of one pool's sample: from (seed, setup, split, field, size, rep).

    With ``shared_ranking`` the split and size are left out, so all pools of one
    repetition (and field) rank the candidates the same way.
    """
    from mdcr.pools.seeds import derive_seed

    if cfg.shared_ranking:
        return derive_seed(cfg.seed, "pools", setup, "shared", field or "", rep)
    return derive_seed(cfg.seed, "pools", setup, split, field or "", size, rep)


def pool_specs(cfg: PoolsConfig, samples: list[Any], field_cited: dict[str, int]) -> list[PoolSpec]:
    """Every pool to build, sorted by pool_id (the order they are written in)."""
    specs: list[PoolSpec] = []
    for s in samples:
        if s.taken == 0:
            continue
        if s.setup == "dataset":
            for size in cfg.dataset_sizes:
                for rep in range(cfg.repetitions):
                    seed = pool_seed(cfg, "dataset", s.split, None, size, rep)
                    specs.append(PoolSpec("dataset", s.split, None, size, rep, seed, False))
        else:
            size = cfg.field_pool_size
            all_cited = field_cited.get(s.field, 0) <= size
            for rep in range(1 if all_cited else cfg.repetitions):
                seed = pool_seed(cfg, "field", s.split, s.field, size, rep)
                specs.append(PoolSpec("field", s.split, s.field, size, rep, seed, all_cited))
    return sorted(specs, key=lambda p: p.pool_id)


def _check_group(spec: PoolSpec, n_cited: int, n_universe: int, cfg: PoolsConfig) -> None:
    """Raise a clear error when a pool of exactly ``spec.size`` papers cannot be built."""
    fix = (
        "lower n_queries_dataset or raise dataset_sizes"
        if spec.field is None
        else "lower field_queries or raise field_pool_size"
    )
    if n_cited > spec.size and not spec.all_field_cited:
        raise InputDataError(
            f"pool {spec.pool_id}: its queries cite {n_cited} papers, more than the pool "
            f"size {spec.size}; {fix}"
        )
    if spec.field is None and n_cited + n_universe < spec.size:
        raise InputDataError(
            f"pool {spec.pool_id}: only {n_cited + n_universe} prefiltered papers have year "
            f"<= {cfg.query_year}, fewer than the pool size {spec.size}; lower dataset_sizes"
        )


def build_pools(
    con: duckdb.DuckDBPyConnection,
    cfg: PoolsConfig,
    ctx: StageContext,
    specs: list[PoolSpec],
) -> list[dict[str, Any]]:
    """Build, check and write every pool and its qrels; return one summary row per pool."""
    import pyarrow as pa

    from mdcr.pools.sampling import create_group_tables, create_pool_table, pool_qrels_sql

    schemas = _schemas()
    rows: list[dict[str, Any]] = []
    group: tuple[str, str, str | None] | None = None
    n_queries = n_cited = n_universe = 0
    pools_path, qrels_path = ctx.out / POOLS_FILE, ctx.out / QRELS_FILE
    n_pool_rows = n_qrel_rows = 0
    with (
        _writer(pools_path, schemas["pools"], ["pool_id"]) as pools_w,
        _writer(qrels_path, schemas["qrels"], ["pool_id", "query_id"]) as qrels_w,
    ):
        for spec in ctx.progress(specs, desc="pools", unit="pool"):
            if spec.group != group:
                group = spec.group
                n_queries, n_cited, n_universe = create_group_tables(
                    con,
                    setup=spec.setup,
                    split=spec.split,
                    field=spec.field,
                    query_year=cfg.query_year,
                )
            _check_group(spec, n_cited, n_universe, cfg)
            fill = n_universe if spec.all_field_cited else spec.size - n_cited
            create_pool_table(con, fill=fill, universe_size=n_universe, derived_seed=spec.seed)
            papers = arrow_table(con, "SELECT paper_id FROM p_pool ORDER BY paper_id")
            expected = n_cited + n_universe if spec.all_field_cited else spec.size
            if papers.num_rows != expected:  # a bug, not bad input
                raise RuntimeError(
                    f"pool {spec.pool_id} has {papers.num_rows} papers, expected {expected}"
                )
            pools_w.write_table(
                pa.table(
                    [_dict_col(spec.pool_id, papers.num_rows), papers["paper_id"]],
                    schema=schemas["pools"],
                ),
                row_group_size=ROW_GROUP,
            )
            qrels = arrow_table(con, pool_qrels_sql())
            m = qrels.num_rows
            qrels_w.write_table(
                pa.table(
                    [
                        _dict_col(spec.pool_id, m),
                        qrels["query_id"],
                        qrels["paper_id"],
                        pa.array(_zeros(m) + 1, pa.int32()),
                    ],
                    schema=schemas["qrels"],
                ),
                row_group_size=ROW_GROUP,
            )
            n_pool_rows += papers.num_rows
            n_qrel_rows += m
            rows.append(_summary_row(spec, papers.num_rows, n_queries, qrels))
            con.execute("DROP TABLE p_pool")
    ctx.output(POOLS_FILE, rows=n_pool_rows)
    ctx.output(QRELS_FILE, rows=n_qrel_rows)
    return rows


def _summary_row(spec: PoolSpec, n_papers: int, n_queries: int, qrels: pa.Table) -> dict[str, Any]:
    """Pool size and positives per query, from the qrels (exact integers; mean from them)."""
    import pyarrow.compute as pc

    counts = pc.value_counts(qrels["query_id"]).field("counts") if qrels.num_rows else None
    with_pos = len(counts) if counts is not None else 0
    if with_pos != n_queries:  # every query has >= 1 positive by construction
        raise RuntimeError(f"pool {spec.pool_id}: {n_queries - with_pos} queries have no positive")
    return {
        "pool_id": spec.pool_id,
        "setup": spec.setup,
        "split": spec.split,
        "field": spec.field,
        "size": spec.size,
        "rep": spec.rep,
        "seed": spec.seed,
        "n_papers": n_papers,
        "n_queries": n_queries,
        "n_qrels": qrels.num_rows,
        "pos_mean": qrels.num_rows / n_queries if n_queries else 0.0,
        "pos_min": int(pc.min(counts).as_py()) if counts is not None else 0,
        "pos_max": int(pc.max(counts).as_py()) if counts is not None else 0,
        "all_field_cited": spec.all_field_cited,
    }


def summary_text(rows: list[dict[str, Any]]) -> str:
    """The per-pool summary as an aligned text table."""
    head = ("pool_id", "papers", "queries", "pos mean", "min", "max", "")
    lines = [head]
    for r in rows:
        lines.append(
            (
                r["pool_id"],
                str(r["n_papers"]),
                str(r["n_queries"]),
                f"{r['pos_mean']:.1f}",
                str(r["pos_min"]),
                str(r["pos_max"]),
                "all field-cited" if r["all_field_cited"] else "",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = []
    for line in lines:
        cells = [line[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(line[1:-1], widths[1:-1], strict=True)
        ]
        out.append(("  ".join(cells) + "  " + line[-1]).rstrip())
    return "\n".join(out)


def _write_small_tables(
    con: duckdb.DuckDBPyConnection, cfg: PoolsConfig, ctx: StageContext, rows: list[dict[str, Any]]
) -> None:
    import pyarrow as pa

    schemas = _schemas()
    queries = arrow_table(
        con,
        "SELECT query_id, split, setup, field, year FROM queries "
        "ORDER BY setup, split, field NULLS FIRST, query_id",
    ).cast(schemas["queries"])
    _write_table(ctx.output(QUERIES_FILE, rows=queries.num_rows), queries, ["split", "setup"])
    meta_cols = [f.name for f in schemas["pool_meta"]]
    meta = pa.Table.from_pylist(
        [{**{k: r[k] for k in meta_cols if k in r}, "query_year": cfg.query_year} for r in rows],
        schema=schemas["pool_meta"],
    )
    _write_table(ctx.output(POOL_META_FILE, rows=meta.num_rows), meta, ["setup", "split"])
    summary_cols = [f.name for f in schemas["summary"]]
    summary = pa.Table.from_pylist(
        [{k: r[k] for k in summary_cols} for r in rows], schema=schemas["summary"]
    )
    _write_table(ctx.output(SUMMARY_FILE, rows=summary.num_rows), summary, ["setup", "split"])


def run_pools(cfg: PoolsConfig, ctx: StageContext) -> None:
    """Sample queries, build all pools and qrels, write them with a summary."""
    from mdcr.pools.db import CorpusFiles, check_citations, connect, load_excluded, load_papers
    from mdcr.pools.queries import prepare_query_candidates
    from mdcr.pools.sampling import create_field_cited

    files = CorpusFiles.in_folder(ctx.input("corpus"))
    excl_paths = ctx.inputs.get("exclude_ids") or []
    tmp = ctx.out / ".duckdb_tmp"
    con = connect(tmp)
    try:
        with ctx.timed("load"):
            n_papers = load_papers(con, files, with_fields="field" in cfg.setups)
            check_citations(con, files)
            n_excl = load_excluded(con, excl_paths[0] if excl_paths else None)
        with ctx.timed("queries"):
            funnel = prepare_query_candidates(
                con,
                files.citations,
                query_year=cfg.query_year,
                min_cited=cfg.min_cited,
                seed=cfg.seed,
            )
            ctx.record("papers", n_papers)
            ctx.record("excluded_ids", n_excl)
            ctx.record("query_funnel", funnel.as_dict())
            ctx.log(
                f"[pools] {n_papers} papers; {funnel.year_papers} of year {cfg.query_year}, "
                f"{funnel.excluded} excluded, {funnel.eligible} cite >= {cfg.min_cited} "
                f"(mean {funnel.mean_cited:.1f} cited)"
            )
            samples = _sample_all_queries(con, cfg, ctx)
        field_cited: dict[str, int] = {}
        if "field" in cfg.setups:
            with ctx.timed("field_cited"):
                field_cited = create_field_cited(
                    con, str(files.citations), tuple(sorted(cfg.fields)), cfg.query_year
                )
            ctx.record("field_cited", field_cited)
        specs = pool_specs(cfg, samples, field_cited)
        with ctx.timed("pools"):
            rows = build_pools(con, cfg, ctx, specs)
        with ctx.timed("write"):
            _write_small_tables(con, cfg, ctx, rows)
    finally:
        con.close()
        shutil.rmtree(tmp, ignore_errors=True)
    summary = [{k: v for k, v in r.items() if k != "seed"} for r in rows]
    for r in summary:
        r["pos_mean"] = round(r["pos_mean"], 3)
    ctx.record("summary", summary)
    ctx.log(summary_text(rows))


def plan_pools(
    cfg: PoolsConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    """What the stage would build, for ``mdcr run --dry-run``."""
    parts = []
    if "dataset" in cfg.setups:
        parts.append(
            f"dataset-level: {cfg.n_queries_dataset} queries per split, "
            f"{len(cfg.dataset_sizes)} sizes x {cfg.repetitions} repetitions"
        )
    if "field" in cfg.setups:
        parts.append(
            f"field-level: {cfg.field_queries} queries x {len(cfg.fields)} fields per split, "
            f"pools of {cfg.field_pool_size} x {cfg.repetitions} repetitions"
        )
    from mdcr.planning import corpus_papers, pools_estimate

    text = f"splits {', '.join(cfg.splits)}; query year {cfg.query_year}; " + "; ".join(parts)
    estimate, facts = pools_estimate(cfg, inputs, upstream)
    corpus = inputs.get("corpus") or []
    papers, _ = corpus_papers(corpus[0] if corpus else None, upstream)
    return StagePlan(text + "\n" + estimate, facts, Work("pools", units=float(papers)))


SPEC = STAGES.register(
    StageSpec(
        name="pools",
        version="1",
        config=PoolsConfig,
        run=run_pools,
        help="sample queries and build dataset- and field-level candidate pools with qrels",
        plan=plan_pools,
        main_output=SUMMARY_FILE,
        writes=(QUERIES, POOLS, POOL_META, QRELS),
    )
)
