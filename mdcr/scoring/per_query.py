"""Per-query values with the query's facts: one row per (pool or benchmark split and
field, query, retriever, measure), for ``mdcr export --per-query``
(:mod:`mdcr.scoring.per_query_export`), :attr:`mdcr.evaluate`'s
``EvaluationResult.per_query`` and the report's "where the encoders win and lose"
section (:mod:`mdcr.scoring.wins_losses`).

The values are the stored ones, never recomputed: a score output's ``per_query.parquet``
(pools) or a benchmark-score output's (MDCR, its ``all`` subset: every candidate). The
facts come from the outputs they were made from, found again through the manifests:

- ``field``: on field-level pools the pool's field, on a benchmark the query's field, on
  dataset-level pools the query paper's first field of study in the corpus (empty where
  the corpus gives none);
- ``year``: the query's year (the pools' ``queries.parquet``, else the corpus);
- ``n_positives``: the query's judged relevant papers in that pool (qrels with relevance
  >= 1), on a benchmark its ``true`` candidates;
- ``citations``: the citations the query paper receives within the prefiltered corpus
  (``n_in`` of the prefilter output's papers);
- ``text_chars``: the query's text length in characters, title plus abstract (a BEIR
  query: its text, imported as the title);
- ``title``: the query's title.

A fact the inputs do not hold (year and citations of an imported BEIR dataset or MDCR
release) is empty (NA), never guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mdcr.core.errors import InputDataError

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

# A reader of a papers file's rows by id: (path, ids, columns) -> the rows of those ids in
# file order, those columns. The default scans the file (:func:`scan_papers`); ``mdcr
# explore`` answers from its session's copy of the file, made in the same one pass.
ReadPapers = Callable[[Path, set[str], list[str]], "pa.Table"]

PER_QUERY_COLUMNS = (
    "setup",
    "split",
    "pool_id",
    "pool_size",
    "rep",
    "query_id",
    "retriever",
    "metric",
    "value",
    "field",
    "year",
    "n_positives",
    "citations",
    "text_chars",
    "title",
)
MDCR_SETUP = "mdcr"


def pools_of(score: Path) -> Path:
    from mdcr.contracts.outputs import input_paths

    found = input_paths(score, "pools")
    if not found or not found[0].is_dir():
        raise InputDataError(
            f"score output '{score}': its pools output is not found; per-query facts need it "
            "(build the pools again or keep the store whole)"
        )
    return found[0]


def score_rows(folder: Path, read_papers: ReadPapers | None = None) -> pd.DataFrame:
    """The rows of one score output, with the facts of its pools and corpus."""
    from mdcr.contracts.artifacts import POOL_METRICS

    pools = pools_of(folder)
    return ordered(pools_rows(POOL_METRICS.read_pandas(folder), pools, read_papers))


def scan_papers(path: Path, ids: set[str], columns: list[str]) -> pa.Table:
    """The rows of the papers file ``path`` whose paper_id is in ``ids``, in file order,
    ``columns`` of them: one scan, in batches, keeping only the rows asked for (memory
    follows the ids, not the corpus: the whole text of a corpus at the paper's scale is
    gigabytes)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    wanted = pa.array(sorted(ids), pa.string())
    kept = [
        batch.filter(pc.is_in(batch.column("paper_id").cast(pa.string()), value_set=wanted))
        for batch in pq.ParquetFile(path).iter_batches(batch_size=262_144, columns=columns)
    ]
    schema = pq.read_schema(path)
    table = pa.Table.from_batches(kept, schema=pa.schema([schema.field(c) for c in columns]))
    pa.default_memory_pool().release_unused()  # the batches' buffers, back to the system
    return table


def _papers(folder: Path | None, ids: set[str], read: ReadPapers | None = None) -> pd.DataFrame:
    """paper_id, title, text_chars, and year, first field, citations where held, of the
    papers ``ids`` in ``folder``'s papers.parquet (no rows without a folder), read by
    ``read`` (default: :func:`scan_papers`)."""
    import pandas as pd
    import pyarrow.parquet as pq

    from mdcr.contracts.artifacts import PAPERS

    if folder is None:
        columns = ["paper_id", "title", "text_chars", "paper_year", "paper_field", "citations"]
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in columns})
    path = PAPERS.path(folder)
    have = set(pq.read_schema(path).names)
    cols = ["paper_id", "title", "abstract", *[c for c in ("year", "fields", "n_in") if c in have]]
    papers = (read or scan_papers)(path, ids, cols).to_pandas()
    out = pd.DataFrame({"paper_id": papers["paper_id"].astype(str)})
    out["title"] = papers["title"].fillna("").astype(str)
    out["text_chars"] = (
        papers["title"].fillna("").str.len() + papers["abstract"].fillna("").str.len()
    ).astype("Int64")
    out["paper_year"] = papers["year"].astype("Int64") if "year" in papers else pd.NA
    out["paper_field"] = (
        papers["fields"].map(lambda f: str(f[0]) if f is not None and len(f) else None)
        if "fields" in papers
        else None
    )
    out["citations"] = papers["n_in"].astype("Int64") if "n_in" in papers else pd.NA
    return out.drop_duplicates("paper_id")


def corpus_or_own(folder: Path) -> Path | None:
    """Where the papers' facts are: the prefilter output ``folder`` was made from, else
    ``folder``'s own papers.parquet (an imported BEIR dataset or MDCR release); None
    where neither is (the facts are then empty)."""
    from mdcr.contracts.artifacts import PAPERS
    from mdcr.contracts.outputs import input_paths

    corpus = [p for p in input_paths(folder, "corpus") if p.is_dir() and PAPERS.exists(p)]
    if corpus:
        return corpus[0]
    return folder if PAPERS.exists(folder) else None


def pools_rows(per_query: pd.DataFrame, pools: Path, read_papers: ReadPapers | None = None
               ) -> pd.DataFrame:  # fmt: skip
    """Per-query values on pools (``retriever, pool_id, query_id, metric, value``) with
    the facts of ``pools`` and its corpus (its papers read by ``read_papers``)."""

    from mdcr.contracts.artifacts import POOL_META, QRELS, QUERIES

    values = per_query.astype({"pool_id": str, "query_id": str})
    meta = POOL_META.read_pandas(pools).astype({"pool_id": str})
    meta = meta[["pool_id", "setup", "split", "field", "size", "rep"]].drop_duplicates("pool_id")
    meta = meta.rename(columns={"size": "pool_size", "field": "pool_field"})
    qrels = QRELS.read_pandas(pools).astype({"pool_id": str, "query_id": str})
    positives = (
        qrels.assign(pos=qrels["relevance"] >= 1)
        .groupby(["pool_id", "query_id"], sort=False)["pos"]
        .sum()
        .rename("n_positives")
        .reset_index()
    )
    rows = values.merge(meta, on="pool_id", how="left", validate="many_to_one")
    rows = rows.merge(positives, on=["pool_id", "query_id"], how="left")
    if QUERIES.exists(pools):
        queries = QUERIES.read_pandas(pools).astype({"query_id": str})
        queries = queries.rename(columns={"field": "query_field", "year": "query_year"})
        keys = ["setup", "split", "query_id"]
        queries = queries[[*keys, "query_field", "query_year"]].drop_duplicates(keys)
        rows = rows.merge(queries, on=keys, how="left")
    else:
        rows = rows.assign(query_field=None, query_year=None)
    papers = _papers(corpus_or_own(pools), set(rows["query_id"]), read_papers)
    rows = rows.merge(papers.rename(columns={"paper_id": "query_id"}), on="query_id", how="left")
    rows["field"] = rows["pool_field"].where(rows["pool_field"].notna(), rows["query_field"])
    rows["field"] = rows["field"].where(rows["field"].notna(), rows["paper_field"])
    rows["year"] = rows["query_year"].astype("Int64").fillna(rows["paper_year"].astype("Int64"))
    return _typed(rows)


def benchmark_rows(folder: Path, read_papers: ReadPapers | None = None) -> pd.DataFrame:
    """The rows of a benchmark-score output (every candidate: subset ``all``), with the
    facts of its benchmark and, for one mdcr built, its corpus."""
    from mdcr.contracts.artifacts import BENCHMARK_METRICS
    from mdcr.contracts.outputs import input_paths

    found = input_paths(folder, "benchmark")
    if not found or not found[0].is_dir():
        raise InputDataError(
            f"benchmark-score output '{folder}': its benchmark is not found; per-query facts "
            "need it (build or import the benchmark again)"
        )
    return benchmark_values_rows(BENCHMARK_METRICS.read_pandas(folder), found[0], read_papers)


def benchmark_values_rows(per_query: pd.DataFrame, benchmark: Path,
                          read_papers: ReadPapers | None = None) -> pd.DataFrame:  # fmt: skip
    """Per-query values on a benchmark (benchmark-score's ``per_query.parquet``; only the
    ``all`` subset is kept) with the facts of ``benchmark`` and, for one mdcr built, its
    corpus."""
    from mdcr.contracts.artifacts import BENCHMARK, PAPERS
    from mdcr.contracts.paper import MDCR_POSITIVE

    values = per_query[per_query["subset"] == "all"].astype({"query_id": str})
    bench = BENCHMARK.read_pandas(benchmark).astype({"query_id": str})
    positives = (
        bench.assign(pos=bench["candidate_type"] == MDCR_POSITIVE)
        .groupby(["split", "field", "query_id"], sort=False)["pos"]
        .sum()
        .rename("n_positives")
        .reset_index()
    )
    rows = values.merge(positives, on=["split", "field", "query_id"], how="left")
    held = benchmark if PAPERS.exists(benchmark) else None  # an import may hold no texts
    queries = set(rows["query_id"])
    own = _papers(held, queries, read_papers)[["paper_id", "title", "text_chars"]]
    facts = _papers(corpus_or_own(benchmark), queries, read_papers)
    facts = facts.drop(columns=["title", "text_chars"]).merge(own, on="paper_id", how="outer")
    rows = rows.merge(facts.rename(columns={"paper_id": "query_id"}), on="query_id", how="left")
    rows = rows.assign(
        setup=MDCR_SETUP,
        pool_id=MDCR_SETUP + "/" + rows["split"] + "/" + rows["field"],
        pool_size=None,
        rep=None,
        year=rows["paper_year"],
    )
    return _typed(rows)


def _typed(rows: pd.DataFrame) -> pd.DataFrame:
    out = rows.reindex(columns=list(PER_QUERY_COLUMNS))
    for col in ("pool_size", "rep", "year", "n_positives", "citations", "text_chars"):
        out[col] = out[col].astype("Int64")
    out["value"] = out["value"].astype(float)
    for col in ("setup", "split", "pool_id", "query_id", "retriever", "metric", "field", "title"):
        out[col] = out[col].astype(object).where(out[col].notna(), None)
    return out


def ordered(rows: pd.DataFrame) -> pd.DataFrame:
    keys = ["setup", "split", "pool_id", "retriever", "metric", "query_id"]
    return rows.sort_values(keys, kind="stable", na_position="first").reset_index(drop=True)
