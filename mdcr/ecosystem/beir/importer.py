"""Stage ``beir-import`` (``mdcr import beir DIR``): a BEIR-layout dataset as pools.

A BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``: SCIDOCS,
SciFact, ... as BEIR's archives unpack) becomes a pools output, so ``mdcr evaluate
--pools`` scores it with the store's caching, the significance tests and the report:

- one pool per split, ``beir/<split>``: every corpus document (BEIR retrieves from the
  whole corpus), setup ``dataset``, no field, repetition 0. BEIR's split names map onto
  mdcr's (:data:`SPLIT_MAP`): ``test`` is test, ``dev`` (or ``val``, ``validation``) is
  val; other qrels files (``train``: training data, not judged for evaluation) are left
  out, recorded (``info.skipped``) and logged, and naming one in ``splits`` is an error;
- queries are not papers in BEIR, but mdcr encodes and searches papers: each query
  becomes a paper ``q:<query id>`` whose title is the query text and whose abstract is
  empty, in the output's own ``papers.parquet`` beside the corpus documents (title and
  text as title and abstract). The prefix keeps a query apart from a document of the same
  id (BEIR's ids are per file), so no query is ever left out of its own ranking as one of
  mdcr's query papers is: BEIR's and MTEB's default;
- qrels keep every row with its integer score (a query whose rows are all 0 is scored 0,
  as pytrec_eval scores it); a query in the qrels without a text, or a document not in
  the corpus, is refused and counted, as is every malformed line (the manifest's
  ``info.refused``; the first of each is logged). A qrels file's first line is its header
  when its score is not an integer. A (query, document) pair judged twice in one file, or
  an id holding a tab or newline, is a one-line error naming the file and line.

The output's fingerprint hashes the folder's files (the store's rule for raw inputs) and
the splits imported.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mdcr.contracts.artifacts import PAPERS, POOL_META, POOLS, QRELS, QUERIES
from mdcr.core.config import input_path, param
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.hints import key
from mdcr.core.stage import STAGES, StageContext, StageSpec

QUERY_PREFIX = "q:"
POOL_PREFIX = "beir/"
# BEIR's qrels file names (splits) -> mdcr's splits; any other file is left out.
SPLIT_MAP = {"test": "test", "dev": "val", "val": "val", "validation": "val"}


@dataclass(frozen=True)
class BeirImportConfig:
    source: str = input_path(
        help="a BEIR folder: corpus.jsonl, queries.jsonl and qrels/<split>.tsv"
    )
    splits: tuple[str, ...] = param(
        (),
        help="qrels files to import by BEIR split name (test; dev, imported as mdcr's val); "
        "empty = every test and dev file",
    )


def _splits(source: Path, cfg: BeirImportConfig) -> tuple[dict[str, str], list[str]]:
    """({BEIR split: mdcr split} to import, BEIR splits left out)."""
    from mdcr.ecosystem.beir.layout import check_beir_folder, qrels_splits

    check_beir_folder(source)
    have = qrels_splits(source)
    mappable = ", ".join(f"{b} (as {m})" for b, m in SPLIT_MAP.items())
    missing = [s for s in cfg.splits if s not in have]
    if missing:
        raise ConfigError(
            f"{key('beir-import', 'splits')}: '{source}' has no qrels/{missing[0]}.tsv; it has: "
            f"{', '.join(have)}"
        )
    unknown = [s for s in cfg.splits if s not in SPLIT_MAP]
    if unknown:
        raise ConfigError(
            f"{key('beir-import', 'splits')}: '{unknown[0]}' is not a split mdcr scores "
            f"(val, test); import one of: {mappable}"
        )
    chosen = sorted(set(cfg.splits)) if cfg.splits else [s for s in have if s in SPLIT_MAP]
    if not chosen:
        raise ConfigError(
            f"'{source}' has qrels for {', '.join(have)} only; mdcr scores val and test: give "
            f"qrels/<split>.tsv for one of: {mappable}"
        )
    mapped = {b: SPLIT_MAP[b] for b in chosen}
    for target in set(mapped.values()):
        both = [b for b, m in mapped.items() if m == target]
        if len(both) > 1:
            raise ConfigError(
                f"'{source}': qrels/{both[0]}.tsv and qrels/{both[1]}.tsv are both mdcr's "
                f"{target} split; pick one with {key('beir-import', 'splits')}"
            )
    return mapped, [s for s in have if s not in mapped]


def run_beir_import(cfg: BeirImportConfig, ctx: StageContext) -> None:
    import pandas as pd

    from mdcr.contracts.artifacts import PAPERS, POOL_META, POOLS, QRELS, QUERIES
    from mdcr.ecosystem.beir.layout import ReadCounts, read_jsonl, read_qrels_tsv

    source = ctx.input("source")
    split_map, skipped = _splits(source, cfg)
    counts = ReadCounts()
    corpus = read_jsonl(source / "corpus.jsonl", ("title", "text"), counts)
    queries = read_jsonl(source / "queries.jsonl", ("text",), counts)
    doc_ids = [d["_id"] for d in corpus]
    dupes = [i for i, n in Counter(doc_ids).items() if n > 1]
    if dupes:
        raise InputDataError(
            f"'{source / 'corpus.jsonl'}' has {len(dupes)} ids on more than one line (e.g. "
            f"'{dupes[0]}'); keep one line per document"
        )
    query_text = {q["_id"]: q["text"] for q in queries}
    known_docs = set(doc_ids)
    qrels_rows = []
    refused: Counter[str] = Counter()
    for beir_split, split in split_map.items():
        for qid, did, score in read_qrels_tsv(source / "qrels" / f"{beir_split}.tsv", counts):
            if qid not in query_text:
                refused["qrels rows of a query not in queries.jsonl"] += 1
            elif did not in known_docs:
                refused["qrels rows of a document not in corpus.jsonl"] += 1
            else:
                qrels_rows.append((POOL_PREFIX + split, QUERY_PREFIX + qid, did, score, split))
    qrels = pd.DataFrame(
        qrels_rows, columns=["pool_id", "query_id", "paper_id", "relevance", "split"]
    )
    if qrels.empty:
        raise InputDataError(
            f"'{source}': no qrels row names a known query and document; check that "
            "qrels/<split>.tsv uses the ids of corpus.jsonl and queries.jsonl"
        )
    used_queries = sorted(set(qrels["query_id"]))
    papers = pd.DataFrame(
        {
            "paper_id": doc_ids + used_queries,
            "title": [d["title"] for d in corpus]
            + [query_text[q.removeprefix(QUERY_PREFIX)] for q in used_queries],
            "abstract": [d["text"] for d in corpus] + [""] * len(used_queries),
        }
    ).sort_values("paper_id", kind="stable")
    if papers["paper_id"].duplicated().any():
        clash = papers.loc[papers["paper_id"].duplicated(), "paper_id"].iloc[0]
        raise InputDataError(
            f"'{source / 'corpus.jsonl'}': document id '{clash}' starts with '{QUERY_PREFIX}', "
            "the prefix mdcr gives query ids; rename it"
        )
    splits = sorted(set(split_map.values()))
    pool_ids = [POOL_PREFIX + s for s in splits if (qrels["split"] == s).any()]
    pools = pd.DataFrame(
        {
            "pool_id": [p for p in pool_ids for _ in doc_ids],
            "paper_id": [d for _ in pool_ids for d in sorted(doc_ids)],
        }
    )
    meta = pd.DataFrame(
        {
            "pool_id": pool_ids,
            "setup": "dataset",
            "split": [p.removeprefix(POOL_PREFIX) for p in pool_ids],
            "field": pd.Series([None] * len(pool_ids), dtype=object),
            "size": len(doc_ids),
            "rep": 0,
        }
    )
    first = qrels.drop_duplicates("query_id")
    query_table = pd.DataFrame(
        {
            "query_id": first["query_id"],
            "split": first["split"],
            "setup": "dataset",
            "field": pd.Series([None] * len(first), dtype=object),
            "year": pd.Series([None] * len(first), dtype="Int64"),
        }
    ).sort_values("query_id")
    PAPERS.write(ctx, papers)
    QUERIES.write(ctx, query_table)
    POOLS.write(ctx, pools)
    POOL_META.write(ctx, meta)
    QRELS.write(ctx, qrels.drop(columns="split").sort_values(["pool_id", "query_id", "paper_id"]))
    bad = {**counts.bad, **refused}
    for name, n in bad.items():
        where = counts.first_bad.get(name, "")
        ctx.log(f"[beir-import] refused {n} {name}" + (f" (first: {where})" if where else ""))
    for name in skipped:
        ctx.log(f"[beir-import] left out qrels/{name}.tsv: mdcr scores val and test only")
    ctx.record("source", str(source))
    ctx.record("splits", splits)
    ctx.record("split_files", {m: f"qrels/{b}.tsv" for b, m in split_map.items()})
    ctx.record("skipped", [f"qrels/{name}.tsv" for name in skipped])
    ctx.record("read", counts.read)
    ctx.record("refused", bad)
    ctx.record("documents", len(doc_ids))
    ctx.record("queries", len(used_queries))


def identify_beir_import(cfg: BeirImportConfig, inputs: Mapping[str, list[Path]]) -> dict[str, Any]:
    """What the import reads beyond the folder's bytes (hashed as the input): nothing."""
    return {"query_prefix": QUERY_PREFIX, "pool_prefix": POOL_PREFIX, "split_map": SPLIT_MAP}


SPEC = STAGES.register(
    StageSpec(
        name="beir-import",
        version="2",
        config=BeirImportConfig,
        run=run_beir_import,
        identity=identify_beir_import,
        help="read a BEIR-layout dataset (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) "
        "into pools that `mdcr evaluate --pools` scores; queries become papers q:<id>",
        main_output="qrels.parquet",
        command="import beir",
        writes=(QUERIES, POOLS, POOL_META, QRELS, PAPERS),
    )
)
