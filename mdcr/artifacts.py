"""The data contracts between stages: one schema, reader and writer per artifact.

A stage reads another stage's output files only through this module: the file names,
the columns each file must have, and the Arrow schema its writer uses. Readers check the
file and its columns and give a one-line error naming the fix; writers check the columns
and declare the file as an output. The facts a stage records in its manifest for the
stages after it are typed in :mod:`mdcr.facts` (each contract names its own) and read
through :mod:`mdcr.outputs`.

| contract | file | written by |
|---|---|---|
| papers | papers.parquet | prefilter (all columns); benchmark, benchmark-import (texts) |
| citations | citations.parquet | prefilter |
| queries | queries.parquet | pools, benchmark |
| pools | pools.parquet | pools |
| pool metadata | pool_meta.parquet | pools |
| qrels | qrels.parquet | pools |
| runs | runs.parquet | search, bm25 |
| per-query metrics | per_query.parquet | score (pools), benchmark-score (MDCR) |
| benchmark | benchmark.parquet | benchmark, benchmark-import |
| pair scores | scores.parquet | benchmark-rank |
| embeddings | encoder.json + shards | encode (:mod:`mdcr.encoders.store`) |
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.errors import InputDataError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from mdcr.stage import StageContext

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


@dataclass(frozen=True)
class Contract:
    """One Parquet artifact: its file name, required columns and who makes it."""

    name: str
    file: str
    columns: tuple[tuple[str, str], ...]
    made_by: str  # for messages: "a pools output"

    def path(self, folder: Path) -> Path:
        """The file in ``folder`` (a file path is taken as the file itself)."""
        return folder if folder.suffix == ".parquet" else folder / self.file

    def exists(self, folder: Path) -> bool:
        return self.path(folder).is_file()

    def check_schema(self, schema: pa.Schema, where: str) -> None:
        for col, kind in self.columns:
            if col not in schema.names:
                raise InputDataError(
                    f"'{where}' is not a {self.name} file: it lacks column '{col}'; "
                    f"point to {self.made_by}"
                )
            if not _matches(kind, schema.field(col).type):
                raise InputDataError(
                    f"'{where}': column '{col}' of the {self.name} is "
                    f"{schema.field(col).type}, expected {kind}; point to {self.made_by}"
                )

    def require(self, folder: Path) -> Path:
        """The file's path, checked: it exists and has the contract's columns."""
        import pyarrow.parquet as pq

        path = self.path(folder)
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
    (("paper_id", STR), ("title", STR), ("abstract", STR)),
    "a prefilter output (or a benchmark)",
)
# The prefiltered corpus: papers with every column the pools and the benchmark use.
CORPUS_PAPERS = Contract(
    "corpus papers",
    "papers.parquet",
    (
        ("paper_id", STR),
        ("title", STR),
        ("abstract", STR),
        ("year", INT),
        ("fields", STR_LIST),
        ("n_out", INT),
        ("n_in", INT),
    ),
    "a prefilter output",
)
CITATIONS = Contract(
    "citations", "citations.parquet", (("citing_id", STR), ("cited_id", STR)), "a prefilter output"
)
QUERIES = Contract(
    "queries",
    "queries.parquet",
    (("query_id", STR), ("split", STR), ("setup", STR), ("field", STR), ("year", INT)),
    "a pools output",
)
POOLS = Contract("pools", "pools.parquet", (("pool_id", STR), ("paper_id", STR)), "a pools output")
POOL_META = Contract(
    "pool metadata",
    "pool_meta.parquet",
    (
        ("pool_id", STR),
        ("setup", STR),
        ("split", STR),
        ("field", STR),
        ("size", INT),
        ("rep", INT),
    ),
    "a pools output",
)
QRELS = Contract(
    "qrels",
    "qrels.parquet",
    (("pool_id", STR), ("query_id", STR), ("paper_id", STR), ("relevance", INT)),
    "a pools output",
)
RUNS = Contract(
    "run",
    "runs.parquet",
    (("pool_id", STR), ("query_id", STR), ("paper_id", STR), ("score", FLOAT), ("rank", INT)),
    "a search or bm25 output",
)
POOL_METRICS = Contract(
    "per-query metrics",
    "per_query.parquet",
    (("retriever", STR), ("pool_id", STR), ("query_id", STR), ("metric", STR), ("value", FLOAT)),
    "a score output",
)
POOL_MEANS = Contract(
    "per-pool metrics",
    "per_pool.parquet",
    (("retriever", STR), ("pool_id", STR), ("metric", STR), ("value", FLOAT)),
    "a score output",
)
CHANCE = Contract(
    "expected chance",
    "chance.parquet",
    (("pool_id", STR), ("metric", STR), ("value", FLOAT)),
    "a score output",
)
BENCHMARK = Contract(
    "benchmark",
    "benchmark.parquet",
    (
        ("query_id", STR),
        ("field", STR),
        ("paper_id", STR),
        ("candidate_type", STR),
        ("split", STR),
    ),
    "a benchmark build or import output",
)
PAIR_SCORES = Contract(
    "pair scores",
    "scores.parquet",
    (("split", STR), ("field", STR), ("query_id", STR), ("paper_id", STR), ("score", FLOAT)),
    "a benchmark-rank output",
)
BENCHMARK_METRICS = Contract(
    "benchmark per-query metrics",
    "per_query.parquet",
    (
        ("retriever", STR),
        ("split", STR),
        ("subset", STR),
        ("field", STR),
        ("query_id", STR),
        ("metric", STR),
        ("value", FLOAT),
    ),
    "a benchmark-score output",
)

# Files that name papers to encode in a target folder, with their id columns, in order.
PAPERS_TO_ENCODE = Contract(
    "papers to encode", "papers_to_encode.parquet", (("paper_id", STR),), "a list of paper ids"
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
