"""The data contracts between stages: one schema, reader and writer per artifact.

A stage reads another stage's output only through this module: the file names, the
columns each file must have, and the facts a stage records in its manifest for the stages
after it (:class:`RunInfo` and friends). Readers check the file and its columns and give a
one-line error naming the fix; writers check the columns and declare the file as an output.

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

from mdcr.errors import InputDataError, ManifestMismatchError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from mdcr.stage import StageContext
    from mdcr.store import Output, Store

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


# -- facts recorded in manifests for later stages -------------------------------------------


def _output(folder: Path) -> Output | None:
    from mdcr.store import open_output

    return open_output(folder)


# Which built-in registry entry ranked (mdcr.retriever_identity): a run's name never says.
RETRIEVER_IDENTITY = "retriever_identity"


@dataclass(frozen=True)
class RunInfo:
    """What a run-making stage (search, bm25) records: who ranked, on which pools, and
    the retriever's registry identity (None: not a built-in entry)."""

    retriever: str
    pools_fingerprint: str
    identity: dict[str, Any] | None = None

    def record(self, ctx: StageContext) -> None:
        ctx.record("retriever", self.retriever)
        ctx.record("pools_fingerprint", self.pools_fingerprint)
        ctx.record(RETRIEVER_IDENTITY, self.identity)


def run_info(folder: Path) -> RunInfo | None:
    """The run info of a search or bm25 output (None for a folder no stage made)."""
    out = _output(folder)
    if out is None or out.info("retriever") is None:
        return None
    return RunInfo(
        str(out.info("retriever")),
        str(out.info("pools_fingerprint", "")),
        out.info(RETRIEVER_IDENTITY),  # mdcr.retriever_identity.identity_of derives old ones
    )


def check_run_pools(run: Path, pools: Path) -> None:
    """A run searched on other pools would be scored against the wrong qrels: refuse it."""
    from mdcr.store import artifact_fingerprint

    info = run_info(run)
    if info is None or not info.pools_fingerprint or _output(pools) is None:
        return
    actual = artifact_fingerprint(pools)
    if info.pools_fingerprint != actual:
        raise ManifestMismatchError(
            f"run '{run}' ({info.retriever}) was built from pools {info.pools_fingerprint}, not "
            f"the given pools {actual}; pass the pools the run was searched on"
        )


@dataclass(frozen=True)
class RankInfo:
    """What benchmark-rank records: who scored the pairs, how, on which benchmark."""

    retriever: str
    method: str
    benchmark_fingerprint: str
    splits: tuple[str, ...]
    detail: str  # "metric cos", "k1 0.9, b 0.4", "scores file x.json"
    identity: dict[str, Any] | None = None  # registry identity; None: not built in

    def record(self, ctx: StageContext) -> None:
        ctx.record("retriever", self.retriever)
        ctx.record("method", self.method)
        ctx.record("benchmark_fingerprint", self.benchmark_fingerprint)
        ctx.record("splits", list(self.splits))
        ctx.record("detail", self.detail)
        ctx.record(RETRIEVER_IDENTITY, self.identity)


def rank_info(folder: Path) -> RankInfo:
    out = _output(folder)
    if out is None or out.stage != "benchmark-rank":
        raise InputDataError(f"'{folder}' is not a benchmark-rank output; rank the benchmark first")
    return RankInfo(
        str(out.info("retriever")),
        str(out.info("method")),
        str(out.info("benchmark_fingerprint")),
        tuple(out.info("splits", [])),
        str(out.info("detail", "")),
        out.info(RETRIEVER_IDENTITY),  # mdcr.retriever_identity.identity_of derives old ones
    )


@dataclass(frozen=True)
class ScoreInfo:
    """What score records: the pools it scored on, its cut-offs and the runs it scored."""

    pools_fingerprint: str
    depth: int
    recall_k: int
    runs: tuple[dict[str, Any], ...]  # retriever, path, fingerprint, identity, counts

    def record(self, ctx: StageContext) -> None:
        ctx.record("pools_fingerprint", self.pools_fingerprint)
        ctx.record("depth", self.depth)
        ctx.record("recall_k", self.recall_k)
        ctx.record("retriever_runs", list(self.runs))

    @property
    def retrievers(self) -> set[str]:
        return {str(r.get("retriever")) for r in self.runs}


def score_info(folder: Path) -> tuple[str, ScoreInfo] | None:
    """(fingerprint, info) of a score output; None for a folder no stage made."""
    out = _output(folder)
    if out is None:
        return None
    return out.fingerprint, ScoreInfo(
        str(out.info("pools_fingerprint", "")),
        int(out.info("depth", 500)),
        int(out.info("recall_k", 30)),
        tuple(out.info("retriever_runs", [])),
    )


def scores_on_pools(store: Store, pools_fingerprint: str) -> list[tuple[str, Path, ScoreInfo]]:
    """Every finished score output on these pools: (started, folder, info), oldest first."""
    found = []
    for out in store.find("score", pools_fingerprint=pools_fingerprint):
        info = score_info(out.path)
        if info is not None:
            found.append(
                (str(out.manifest.get("timings", {}).get("started", "")), out.path, info[1])
            )
    return sorted(found, key=lambda x: (x[0], str(x[1])))


# What a benchmark's files are. benchmark-import records it as "origin" (decided by
# mdcr.benchmark.release from provenance records, and hashed into the import's identity);
# a benchmark build is built. Only an official benchmark stands beside published numbers.
OFFICIAL, DECLARED, MDCR_FORMAT, BUILT = "official", "declared", "mdcr-format", "built"
_ORIGIN_LABELS = {
    OFFICIAL: "official",
    DECLARED: "official (declared by the user)",
    MDCR_FORMAT: "an MDCR-format benchmark",
    BUILT: "a benchmark built by mdcr",
}


@dataclass(frozen=True)
class BenchmarkOrigin:
    """Where a benchmark's files come from: ``kind`` (official, declared, mdcr-format,
    built) and a one-line ``detail`` (the files' record, or why they are not official)."""

    kind: str
    detail: str = ""

    @property
    def official(self) -> bool:
        """The official release, proven by provenance (downloaded, or declared by the user)."""
        return self.kind in (OFFICIAL, DECLARED)

    @property
    def label(self) -> str:
        """``official``, ``official (declared by the user)``, ``an MDCR-format benchmark``
        or ``a benchmark built by mdcr``."""
        return _ORIGIN_LABELS[self.kind]

    def files(self, split: str) -> str:
        """The benchmark's files as a phrase: ``the official MDCR test files``, ``the
        official (declared by the user) MDCR test files``."""
        if self.official:
            return f"the {self.label} MDCR {split} files"
        return f"{self.label} (its {split} split)"

    def line(self) -> str:
        """One line for printouts and reports: what the benchmark is, and why."""
        if self.kind == OFFICIAL:
            what = "the official MDCR release"
        elif self.kind == DECLARED:
            what = f"the MDCR release, {self.label}"
        else:
            what = f"{self.label}, not the official MDCR release"
        return f"Benchmark: {what}" + (f"; {self.detail}" if self.detail else "") + "."

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "detail": self.detail}


def benchmark_origin(folder: Path) -> BenchmarkOrigin:
    """The origin of a benchmark or benchmark-import output; any other folder, and an import
    recorded before origins were, is an MDCR-format benchmark."""
    out = _output(folder)
    if out is None or out.stage not in ("benchmark", "benchmark-import"):
        return BenchmarkOrigin(MDCR_FORMAT, "not made by the benchmark or import stage")
    if out.stage == "benchmark":
        return BenchmarkOrigin(BUILT, "built from a corpus by the benchmark stage")
    rec = out.info("origin")
    if isinstance(rec, dict) and rec.get("kind") in _ORIGIN_LABELS:
        return BenchmarkOrigin(str(rec["kind"]), str(rec.get("detail", "")))
    return BenchmarkOrigin(MDCR_FORMAT, "imported without a provenance check")


# What the encode stage records of the encoder its vectors come from (see
# mdcr.encoders.stage.encoder_key): outputs of one key hold the same vector for one text.
ENCODER_KEY = "encoder_key"


def encode_outputs(store: Store, encoder_key: str) -> list[Path]:
    """Finished encode outputs whose vectors come from the same encoder (key)."""
    return [out.path for out in store.find("encode", **{ENCODER_KEY: encoder_key})]


def stage_of(folder: Path) -> str | None:
    """The stage that made ``folder`` (None when no stage did)."""
    out = _output(folder)
    return out.stage if out is not None else None


def input_paths(folder: Path, name: str) -> list[Path]:
    """The paths a finished output was made from, for one of its inputs.

    A manifest records each input's path as it was given (often relative to the folder
    the run started in) and its fingerprint. Each is found again as the same stage folder
    in the store holding ``folder`` (``<home>/<stage>/<fingerprint>``), else at the path
    recorded; either must still have the recorded fingerprint. An input found nowhere is
    returned as recorded (the caller says it does not exist); one whose fingerprint
    changed is an error.
    """
    from mdcr.store import artifact_fingerprint

    out = _output(folder)
    if out is None:
        return []
    home = folder.resolve().parent.parent
    found = []
    for entry in out.manifest.get("inputs", {}).get(name, []):
        recorded = Path(entry["path"])
        candidates = [home / recorded.parent.name / recorded.name, recorded]
        existing = [c for c in candidates if c.exists()]
        same = [c for c in existing if artifact_fingerprint(c) == entry["fingerprint"]]
        if existing and not same:
            raise ManifestMismatchError(
                f"'{folder}' was made from {name} '{recorded}' (fingerprint "
                f"{entry['fingerprint']}), which has changed since; re-run that step or "
                f"give the {name} explicitly"
            )
        found.append(same[0] if same else recorded)
    return found
