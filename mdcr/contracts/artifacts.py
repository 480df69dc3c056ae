"""The data contracts between stages: one schema, reader and writer per artifact.

A stage reads another stage's output files only through this module: the file names,
the columns each file must have, and the Arrow schema its writer uses. Readers check the
file and its columns and give a one-line error naming the fix; writers check the columns
and declare the file as an output. The facts a stage records in its manifest for the
stages after it are typed in :mod:`mdcr.contracts.facts` (each contract names its own) and read
through :mod:`mdcr.contracts.outputs`.

| contract | file | written by | facts |
|---|---|---|---|
| papers | papers.parquet | prefilter (all columns); benchmark, benchmark-import (texts) | |
| citations | citations.parquet | prefilter | |
| queries | queries.parquet | pools, benchmark | |
| pools | pools.parquet | pools | |
| pool metadata, pool summary | pool_meta.parquet, summary.parquet | pools | |
| qrels | qrels.parquet | pools | |
| runs | runs.parquet | search, bm25 | RunInfo |
| per-query metrics | per_query.parquet | score (pools), benchmark-score (MDCR) | ScoreInfo |
| benchmark | benchmark.parquet | benchmark, benchmark-import | |
| pair scores | scores.parquet | benchmark-rank | RankInfo |
| embeddings | encoder.json + shards | encode (:mod:`mdcr.encoders.store`) | EncodeInfo |
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.contracts.facts import RankInfo, RunInfo, ScoreInfo
from mdcr.core.errors import InputDataError
from mdcr.core.integrity import check_file

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from mdcr.contracts.facts import Facts
    from mdcr.core.stage import StageContext

# Logical column types; a reader accepts any physical form of them (string, large_string
# or dictionary-encoded strings; any integer width).
STR, INT, FLOAT, BOOL, STR_LIST = "str", "int", "float", "bool", "list<str>"


def _matches(kind: str, t: pa.DataType) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    if kind == STR:
        return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t))
    if kind == INT:
        return bool(pa.types.is_integer(t) or pa.types.is_null(t))
    if kind == FLOAT:
        return bool(pa.types.is_floating(t) or pa.types.is_integer(t))
    if kind == BOOL:
        return bool(pa.types.is_boolean(t) or pa.types.is_null(t))
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_null(t))


# Physical Arrow types a writer declares (built when first asked for: pyarrow loads late).
_ARROW = {
    "string": lambda pa: pa.string(),
    "int32": lambda pa: pa.int32(),
    "int64": lambda pa: pa.int64(),
    "float64": lambda pa: pa.float64(),
    "bool": lambda pa: pa.bool_(),
    "dict<string>": lambda pa: pa.dictionary(pa.int32(), pa.string()),
    "list<string>": lambda pa: pa.list_(pa.string()),
}


@dataclass(frozen=True)
class Column:
    """One column: its name, the logical type readers accept (any physical form of it),
    the physical Arrow type the writer uses ("" where writers differ), and whether readers
    require it (an extra column is written, never checked)."""

    name: str
    kind: str
    arrow: str = ""
    required: bool = True


def col(name: str, kind: str, arrow: str = "", *, required: bool = True) -> Column:
    if arrow and arrow not in _ARROW:
        raise ValueError(f"unknown Arrow type '{arrow}'; valid: {', '.join(_ARROW)}")
    return Column(name, kind, arrow, required)


@dataclass(frozen=True)
class Contract:
    """One Parquet artifact: its file name, its columns (logical and physical types), who
    makes it, and the facts its stage records in the manifest (:mod:`mdcr.contracts.facts`)."""

    name: str
    file: str
    columns: tuple[Column, ...]
    made_by: str  # for messages: "a pools output"
    facts: type[Facts] | None = None

    def path(self, folder: Path) -> Path:
        """The file in ``folder`` (a file path is taken as the file itself)."""
        return folder if folder.suffix == ".parquet" else folder / self.file

    def exists(self, folder: Path) -> bool:
        return self.path(folder).is_file()

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema the writer uses, every column in order (declared once here)."""
        import pyarrow as pa

        missing = [c.name for c in self.columns if not c.arrow]
        if missing:
            raise ValueError(f"the {self.name} contract declares no Arrow type for {missing[0]}")
        return pa.schema([(c.name, _ARROW[c.arrow](pa)) for c in self.columns])

    def check_schema(self, schema: pa.Schema, where: str) -> None:
        for column in self.columns:
            if not column.required:
                continue
            name, kind = column.name, column.kind
            if name not in schema.names:
                raise InputDataError(
                    f"'{where}' is not a {self.name} file: it lacks column '{name}'; "
                    f"point to {self.made_by}"
                )
            if not _matches(kind, schema.field(name).type):
                raise InputDataError(
                    f"'{where}': column '{name}' of the {self.name} is "
                    f"{schema.field(name).type}, expected {kind}; point to {self.made_by}"
                )

    def require(self, folder: Path) -> Path:
        """The file's path, checked: it exists, has the size its output's manifest records
        (:mod:`mdcr.core.integrity`) and has the contract's columns."""
        import pyarrow.parquet as pq

        path = self.path(folder)
        check_file(path)  # a finished output's file: the size its manifest records
        if not path.is_file():
            raise InputDataError(f"no {self.file} in '{folder}'; point to {self.made_by}")
        self.check_schema(pq.read_schema(path), str(path))
        return path

    def read(
        self,
        folder: Path,
        columns: Sequence[str] | None = None,
        filters: Any = None,
    ) -> pa.Table:
        import pyarrow.parquet as pq

        return pq.read_table(
            self.require(folder), columns=list(columns) if columns else None, filters=filters
        )

    def read_pandas(
        self, folder: Path, columns: Sequence[str] | None = None, filters: Any = None
    ) -> pd.DataFrame:
        return self.read(folder, columns, filters).to_pandas()

    def output(self, ctx: StageContext, rows: int | None = None) -> Path:
        """Declare the file as an output of the running stage; the caller writes it."""
        return ctx.output(self.file, rows=rows)

    def write(self, ctx: StageContext, data: pa.Table | pd.DataFrame, **kwargs: Any) -> Path:
        """Check the columns and write ``data`` as the running stage's output."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = (
            data if isinstance(data, pa.Table) else pa.Table.from_pandas(data, preserve_index=False)
        )
        self.check_schema(table.schema, f"{self.name} being written")
        path = self.output(ctx, rows=table.num_rows)
        pq.write_table(table, path, **kwargs)
        return path


PAPERS = Contract(
    "papers",
    "papers.parquet",
    (col("paper_id", STR), col("title", STR), col("abstract", STR)),
    "a prefilter output (or a benchmark)",
)
# The prefiltered corpus: papers with every column the pools and the benchmark use.
CORPUS_PAPERS = Contract(
    "corpus papers",
    "papers.parquet",
    (
        col("paper_id", STR, "string"),
        col("title", STR, "string"),
        col("abstract", STR, "string"),
        col("year", INT, "int64"),
        col("fields", STR_LIST, "list<string>"),
        col("n_out", INT, "int64"),
        col("n_in", INT, "int64"),
    ),
    "a prefilter output",
)
CITATIONS = Contract(
    "citations",
    "citations.parquet",
    (col("citing_id", STR, "string"), col("cited_id", STR, "string")),
    "a prefilter output",
)
QUERIES = Contract(
    "queries",
    "queries.parquet",
    (
        col("query_id", STR, "string"),
        col("split", STR, "string"),
        col("setup", STR, "string"),
        col("field", STR, "string"),
        col("year", INT, "int32"),
    ),
    "a pools output",
)
POOLS = Contract(
    "pools",
    "pools.parquet",
    (col("pool_id", STR, "dict<string>"), col("paper_id", STR, "string")),
    "a pools output",
)
POOL_META = Contract(
    "pool metadata",
    "pool_meta.parquet",
    (
        col("pool_id", STR, "string"),
        col("setup", STR, "string"),
        col("split", STR, "string"),
        col("field", STR, "string"),
        col("size", INT, "int64"),
        col("rep", INT, "int32"),
        col("seed", INT, "int64", required=False),
        col("n_papers", INT, "int64", required=False),
        col("n_queries", INT, "int32", required=False),
        col("query_year", INT, "int32", required=False),
        col("all_field_cited", BOOL, "bool", required=False),
    ),
    "a pools output",
)
# One row per pool: what the pools stage prints (no later stage reads it).
POOL_SUMMARY = Contract(
    "pool summary",
    "summary.parquet",
    (
        col("pool_id", STR, "string"),
        col("setup", STR, "string"),
        col("split", STR, "string"),
        col("field", STR, "string"),
        col("size", INT, "int64"),
        col("rep", INT, "int32"),
        col("n_papers", INT, "int64"),
        col("n_queries", INT, "int32"),
        col("n_qrels", INT, "int64"),
        col("pos_mean", FLOAT, "float64"),
        col("pos_min", INT, "int32"),
        col("pos_max", INT, "int32"),
        col("all_field_cited", BOOL, "bool"),
    ),
    "a pools output",
)
QRELS = Contract(
    "qrels",
    "qrels.parquet",
    (
        col("pool_id", STR, "dict<string>"),
        col("query_id", STR, "string"),
        col("paper_id", STR, "string"),
        col("relevance", INT, "int32"),
    ),
    "a pools output",
)
RUNS = Contract(
    "run",
    "runs.parquet",
    (
        col("pool_id", STR, "string"),
        col("query_id", STR, "string"),
        col("paper_id", STR, "string"),
        col("score", FLOAT, "float64"),
        col("rank", INT, "int32"),
    ),
    "a search or bm25 output",
    RunInfo,
)
POOL_METRICS = Contract(
    "per-query metrics",
    "per_query.parquet",
    (
        col("retriever", STR),
        col("pool_id", STR),
        col("query_id", STR),
        col("metric", STR),
        col("value", FLOAT),
    ),
    "a score output",
    ScoreInfo,
)
POOL_MEANS = Contract(
    "per-pool metrics",
    "per_pool.parquet",
    (col("retriever", STR), col("pool_id", STR), col("metric", STR), col("value", FLOAT)),
    "a score output",
    ScoreInfo,
)
CHANCE = Contract(
    "expected chance",
    "chance.parquet",
    (col("pool_id", STR), col("metric", STR), col("value", FLOAT)),
    "a score output",
    ScoreInfo,
)
BENCHMARK = Contract(
    "benchmark",
    "benchmark.parquet",
    (
        col("query_id", STR),
        col("field", STR),
        col("paper_id", STR),
        col("candidate_type", STR),
        col("split", STR),
    ),
    "a benchmark build or import output",
)
PAIR_SCORES = Contract(
    "pair scores",
    "scores.parquet",
    (
        col("split", STR),
        col("field", STR),
        col("query_id", STR),
        col("paper_id", STR),
        col("score", FLOAT),
    ),
    "a benchmark-rank output",
    RankInfo,
)
BENCHMARK_METRICS = Contract(
    "benchmark per-query metrics",
    "per_query.parquet",
    (
        col("retriever", STR),
        col("split", STR),
        col("subset", STR),
        col("field", STR),
        col("query_id", STR),
        col("metric", STR),
        col("value", FLOAT),
    ),
    "a benchmark-score output",
)

INTERVALS = Contract(
    "intervals",
    "intervals.parquet",
    (
        col("table", STR),
        col("kind", STR),  # "mean", or "minus <baseline>" for a paired difference
        col("retriever", STR),
        col("metric", STR),
        col("estimate", FLOAT),
        col("ci_low", FLOAT),
        col("ci_high", FLOAT),
        col("tied", BOOL, required=False),  # NA where unresolved
        # best, tied, separated or unresolved (mdcr.scoring.intervals.tie_groups)
        col("tie_group", STR, required=False),
    ),
    "a report or benchmark-score output",
)

# Files that name papers to encode in a target folder, with their id columns, in order.
PAPERS_TO_ENCODE = Contract(
    "papers to encode", "papers_to_encode.parquet", (col("paper_id", STR),), "a list of paper ids"
)
ENCODE_TARGETS: tuple[tuple[Contract, tuple[str, ...]], ...] = (
    (PAPERS_TO_ENCODE, ("paper_id",)),
    (POOLS, ("paper_id",)),
    (QUERIES, ("query_id",)),
    (BENCHMARK, ("paper_id", "query_id")),
)


def target_sources(folder: Path) -> list[tuple[Path, str]]:
    """The (parquet file, id column) pairs that name the papers to encode for a target."""
    import pyarrow.parquet as pq

    if folder.is_file() and folder.suffix == ".parquet":
        return [(folder, "paper_id")] if "paper_id" in pq.read_schema(folder).names else []
    out: list[tuple[Path, str]] = []
    for contract, cols in ENCODE_TARGETS:
        path = contract.path(folder)
        if path.is_file():
            names = set(pq.read_schema(path).names)
            out.extend((path, c) for c in cols if c in names)
    if not out:
        expected = ", ".join(f"{c.file} ({'/'.join(cols)})" for c, cols in ENCODE_TARGETS)
        raise InputDataError(f"target '{folder}' names no papers; expected one of: {expected}")
    return out
