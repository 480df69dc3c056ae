"""Sizes for ``mdcr run --dry-run``: pool counts, papers to encode, disk, and each stage's work.

A stage's ``plan(cfg, inputs, upstream)`` sees its own config, the folders its inputs will
be (which do not exist yet in a dry run of a fresh pipeline) and the typed
:class:`~mdcr.core.stage.PlanFacts` that the plans of those inputs returned: ``pools`` says how
many pools and papers it will make, ``benchmark`` how many papers its lists hold, and
``encode`` turns those into papers to encode and disk; every plan states its work,
priced in wall time by :mod:`mdcr.planning.timing`. A built input is
measured instead of estimated.

Stated assumptions (override with environment variables); the wall-time estimates and
their assumptions are in :mod:`mdcr.planning.timing`.

- ``MDCR_PLAN_CORPUS_PAPERS`` (default 16,000,000): prefiltered papers when the corpus is
  neither built nor planned from a planned input (the paper's ~16M).
- Records the prefilter reads: a planned synthetic corpus's; else, when the input's
  S2ORC shards are there (``S2ORC_DIR``), those in the files: a file of at most 16 MiB
  is counted whole, of larger ones the first MiB of up to 16 files is read and the records
  per byte on disk price the rest (gzipped or not); else ``MDCR_PLAN_INPUT_RECORDS``
  (default 81,100,000: S2ORC's 81.1M, paper section 3). The prefilter keeps 16M / 81.1M
  of them (the paper's own figures).
- An S2AG release (``prefilter`` with ``format = "s2ag"``, or "auto" on a release folder)
  is priced by the gzipped bytes of its three datasets: their file sizes when the folder
  is there (a plain ``.jsonl`` file counts as its size / 7.9, the synthetic release's
  ratio), else ``MDCR_PLAN_S2AG_GZ_BYTES`` (default: a current release's 220M papers and
  2.5B citation rows at the gzipped bytes per record of ``scripts/bench_prefilter.py
  --format s2ag``: 249.3 per paper with its abstract, 7.84 per citation row; 74.4 GB).
  Its paper records: the papers and abstracts bytes / 249.3, else 220M.
- Aspire stores one vector per abstract sentence: 9 per paper on average (S2ORC's median).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mdcr.contracts.paper import CITED_PER_QUERY
from mdcr.core.stage import PlanFacts

CORPUS_PAPERS = 16_000_000
INPUT_RECORDS = 81_100_000
PREFILTER_KEEPS = CORPUS_PAPERS / INPUT_RECORDS
ASPIRE_SENTENCES = 9
S2AG_PAPERS = 220_000_000
S2AG_CITATION_ROWS = 2_500_000_000
S2AG_GZ_PER_PAPER = 249.3  # papers + abstracts files, per paper record (the benchmark's)
S2AG_GZ_PER_CITATION = 7.84  # citations files, per row
S2AG_PLAIN_PER_GZ = 7.9  # uncompressed / gzipped bytes of the benchmark's release
WHOLE_BYTES = 16 << 20  # a JSONL input file up to this size on disk is counted whole
SAMPLE_BYTES = 1 << 20  # of a larger one, the first MiB is read
SAMPLED_FILES = 16  # input files sampled at most


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def default_corpus_papers() -> int:
    return _env_int("MDCR_PLAN_CORPUS_PAPERS", CORPUS_PAPERS)


def input_records(
    inputs: dict[str, list[Path]],
    upstream: Mapping[Path, PlanFacts],
    files: Sequence[Path] | None = None,
) -> tuple[int, str]:
    """(records the prefilter reads, how known): a planned synthetic corpus's; else the
    count stated in ``MDCR_PLAN_INPUT_RECORDS`` (to price a full release from a sample);
    else those in the input's JSONL ``files`` when they are there (:func:`count_records`);
    else S2ORC's 81.1M."""
    import os

    source = _first(inputs, "input")
    if source is not None and source in upstream and upstream[source].records:
        return upstream[source].records, "the planned corpus's"
    if os.environ.get("MDCR_PLAN_INPUT_RECORDS"):
        return _env_int("MDCR_PLAN_INPUT_RECORDS", INPUT_RECORDS), "MDCR_PLAN_INPUT_RECORDS"
    counted = count_records(files or [])
    if counted is not None:
        return counted
    records = _env_int("MDCR_PLAN_INPUT_RECORDS", INPUT_RECORDS)
    return records, "assumed: full S2ORC; MDCR_PLAN_INPUT_RECORDS"


def _scan(path: Path, limit: int) -> tuple[int, int, bool] | None:
    """(records, bytes on disk read, whole file?) of the first ``limit`` bytes of a JSONL
    file, gzipped or not (records: its newlines, plus a last line without one); None when
    it cannot be read."""
    import zlib

    gz = path.name.endswith(".gz")
    dec = zlib.decompressobj(wbits=47) if gz else None  # a gzip header
    records = done = 0
    last = b"\n"
    try:
        with path.open("rb") as fh:
            while done < limit:
                chunk = fh.read(min(1 << 20, limit - done))
                if not chunk:
                    break
                done += len(chunk)
                data = dec.decompress(chunk) if dec is not None else chunk
                records += data.count(b"\n")
                last = data[-1:] or last
            whole = not fh.read(1)
    except (OSError, zlib.error):
        return None
    return records + (whole and last != b"\n"), done, whole


def count_records(files: Sequence[Path]) -> tuple[int, str] | None:
    """(records in these JSONL files, how known), or None when none can be read.

    A file of at most :data:`WHOLE_BYTES` on disk is counted whole; of a larger one the
    first :data:`SAMPLE_BYTES` are read (at most :data:`SAMPLED_FILES` files, spread over
    the list), and the records per byte on disk of those samples price the rest."""
    sized = []
    for f in files:
        try:
            sized.append((f, f.stat().st_size))
        except OSError:
            continue
    if not sized:
        return None
    small = [(f, n) for f, n in sized if n <= WHOLE_BYTES]
    large = [(f, n) for f, n in sized if n > WHOLE_BYTES]
    exact = 0
    for f, n in small:
        got = _scan(f, n + 1)
        if got is None:
            return None
        exact += got[0]
    if not large:
        return exact, f"counted in {len(small)} file(s)"
    estimate, sampled = exact, 0
    for gz in (False, True):  # records per byte differ between gzipped and plain files
        group = [(f, n) for f, n in large if f.name.endswith(".gz") == gz]
        if not group:
            continue
        step = max(1, len(group) // SAMPLED_FILES)
        samples = [_scan(f, SAMPLE_BYTES) for f, _ in group[::step][:SAMPLED_FILES]]
        seen = [x for x in samples if x is not None and x[1] > 0]
        if not seen:
            return None
        per_byte = sum(x[0] for x in seen) / sum(x[1] for x in seen)
        estimate += round(per_byte * sum(n for _, n in group))
        sampled += len(seen)
    how = f"estimated from {len(sized)} file(s)' sizes and a sample of {sampled}"
    return estimate, how


def s2ag_release_size(
    datasets: tuple[Sequence[Path], Sequence[Path]] | None,
) -> tuple[int, int, str]:
    """(gzipped bytes of an S2AG release's three datasets, its paper records, how known):
    from the files of ``datasets`` (papers and abstracts, citations) when given, else the
    stated full release."""
    if datasets is not None:

        def gz_bytes(files: Sequence[Path]) -> float:
            return sum(
                f.stat().st_size / (1.0 if f.name.endswith(".gz") else S2AG_PLAIN_PER_GZ)
                for f in files
            )

        papers = gz_bytes(datasets[0])
        total = papers + gz_bytes(datasets[1])
        return round(total), round(papers / S2AG_GZ_PER_PAPER), "the release's file sizes"
    default = round(S2AG_PAPERS * S2AG_GZ_PER_PAPER + S2AG_CITATION_ROWS * S2AG_GZ_PER_CITATION)
    total = _env_int("MDCR_PLAN_S2AG_GZ_BYTES", default)
    papers = round(S2AG_PAPERS * total / default)
    return total, papers, "assumed: a full release; MDCR_PLAN_S2AG_GZ_BYTES"


def _first(inputs: dict[str, list[Path]], name: str) -> Path | None:
    paths = inputs.get(name) or []
    return paths[0] if paths else None


def corpus_papers(
    corpus: Path | None, upstream: Mapping[Path, PlanFacts] | None = None
) -> tuple[int, bool]:
    """(papers in the corpus, measured?): counted in a built prefilter output, else its
    plan's estimate, else the stated default."""
    if corpus is not None:
        from mdcr.contracts.artifacts import PAPERS

        file = PAPERS.path(corpus)
        if file.is_file():
            import pyarrow.parquet as pq

            return int(pq.ParquetFile(file).metadata.num_rows), True
        if upstream and corpus in upstream and upstream[corpus].papers:
            return upstream[corpus].papers, False
    return default_corpus_papers(), False


def _union(universe: int, fills: list[int]) -> int:
    """Expected distinct papers of independent uniform samples of ``universe``."""
    if universe <= 0:
        return 0
    miss = 1.0
    for f in fills:
        miss *= max(0.0, 1.0 - min(f, universe) / universe)
    return round(universe * (1.0 - miss))


def pools_estimate(
    cfg: Any, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts] | None = None
) -> tuple[str, PlanFacts]:
    """Pool counts and the papers the pools will hold, as text and as facts for encode."""
    corpus = _first(inputs, "corpus")
    n_corpus, measured = corpus_papers(corpus, upstream)
    planned = corpus is not None and bool(upstream) and corpus in (upstream or {})
    n_splits = len(cfg.splits)
    n_dataset = n_field = 0
    fills: list[int] = []
    total = 0
    queries = 0
    per_split_papers = per_split_pairs = 0
    # No pool, and no query set, is larger than the corpus (a small input folder).
    sizes = [min(s, n_corpus) for s in cfg.dataset_sizes]
    field_size = min(cfg.field_pool_size, n_corpus)
    n_queries, field_queries_each = (
        min(cfg.n_queries_dataset, n_corpus),
        min(cfg.field_queries, n_corpus),
    )
    if "dataset" in cfg.setups:
        n_dataset = n_splits * len(sizes) * cfg.repetitions
        cited = n_queries * CITED_PER_QUERY
        for _ in range(n_splits * cfg.repetitions):
            fills += [max(0, s - cited) for s in sizes]
        total += n_splits * cfg.repetitions * sum(sizes)
        queries += n_splits * n_queries
        per_split_papers += cfg.repetitions * sum(sizes)
        per_split_pairs += cfg.repetitions * sum(sizes) * n_queries
    field_queries = 0
    if "field" in cfg.setups:
        n_field = n_splits * len(cfg.fields) * cfg.repetitions
        fills += [field_size] * n_field
        total += n_field * field_size
        field_queries = n_splits * len(cfg.fields) * field_queries_each
        queries += field_queries
        field_pools = len(cfg.fields) * cfg.repetitions
        per_split_papers += field_pools * field_size
        per_split_pairs += field_pools * field_size * field_queries_each
    papers_max = min(total + queries, n_corpus)
    papers = min(papers_max, _union(n_corpus, fills) + queries)
    facts = PlanFacts(
        papers=papers,
        papers_max=papers_max,
        queries=queries,
        field_queries_per_split=field_queries // max(n_splits, 1),
        pool_papers={split: per_split_papers for split in cfg.splits},
        pool_pairs={split: per_split_pairs for split in cfg.splits},
        pool_count={split: (n_dataset + n_field) // max(n_splits, 1) for split in cfg.splits},
        pool_max_pairs=max(
            [s * n_queries for s in sizes if "dataset" in cfg.setups]
            + [field_size * field_queries_each if "field" in cfg.setups else 0]
        ),
    )
    source = (
        "measured" if measured else "planned" if planned else "assumed; MDCR_PLAN_CORPUS_PAPERS"
    )
    text = (
        f"pools: {n_dataset} dataset-level + {n_field} field-level (at most; a field whose "
        f"field-cited set fits one pool gets one) = {n_dataset + n_field}; {queries} queries; "
        f"distinct papers about {papers:,} (at most {papers_max:,}) of a {n_corpus:,}-paper "
        f"corpus ({source})"
    )
    return text, facts


def benchmark_estimate(
    cfg: Any, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> tuple[str, PlanFacts | None]:
    """Papers of the MDCR benchmark (queries and candidates), as text and facts."""
    from mdcr.contracts.artifacts import QUERIES

    pools = _first(inputs, "pools")
    per = 1 + cfg.n_true + cfg.n_per_type * (len(cfg.models) + 3)
    queries: int | None = None
    if pools is not None and QUERIES.exists(pools):
        q = QUERIES.read_pandas(pools, columns=["setup", "split"])
        queries = int(((q["setup"] == "field") & q["split"].isin(cfg.splits)).sum())
    elif pools is not None and pools in upstream:
        queries = upstream[pools].field_queries_per_split * len(cfg.splits)
    if queries is None:
        return "benchmark size: unknown until pools are planned", None
    corpus = _first(inputs, "corpus")
    n_corpus = corpus_papers(corpus, upstream)[0] if corpus is not None else None
    if n_corpus is not None:  # a small corpus: no more queries or papers than it holds
        queries = min(queries, n_corpus)
    papers = queries * per if n_corpus is None else min(queries * per, n_corpus)
    text = f"{queries} queries x {per} papers = at most {papers:,} benchmark papers"
    return text, PlanFacts(papers=papers, papers_max=papers, queries=queries)


def target_papers(
    targets: list[Path], corpus: Path | None, upstream: Mapping[Path, PlanFacts]
) -> tuple[int, str]:
    """Papers to encode for these targets: counted when built, else from upstream facts."""
    if not targets:
        n, measured = corpus_papers(corpus, upstream)
        return n, "the whole corpus" + ("" if measured else " (assumed size)")
    built = [t for t in targets if t.exists()]
    if len(built) == len(targets):
        import duckdb

        from mdcr.contracts.artifacts import target_sources

        selects = [
            f"SELECT CAST({col} AS VARCHAR) AS p FROM read_parquet('{f}')"
            for t in targets
            for f, col in target_sources(t)
        ]
        con = duckdb.connect()
        try:
            row = con.execute(
                "SELECT count(DISTINCT p) FROM (" + " UNION ALL ".join(selects) + ")"
            ).fetchone()
        finally:
            con.close()
        return int(row[0] if row else 0), "counted"
    est = sum(upstream[t].papers for t in targets if t in upstream)
    if est == 0:
        return 0, "unknown"
    return est, "estimated"


def encode_estimate(
    cfg: Any,
    inputs: dict[str, list[Path]],
    upstream: Mapping[Path, PlanFacts],
    *,
    dim: int,
    multi_vector: bool,
    cost: float,
) -> tuple[str, int]:
    """Papers to encode and the disk of the float16 store, as text, and the papers.

    ``cost``: the encoder's time per paper relative to a BERT-base encoder (0: no model).
    The time is the stage's :class:`~mdcr.core.stage.Work`, priced by mdcr/planning/timing.py.
    """
    corpus = _first(inputs, "corpus")
    papers, how = target_papers(inputs.get("targets") or [], corpus, upstream)
    if papers == 0:
        return "papers to encode: unknown until the targets are planned", 0
    vectors = papers * (ASPIRE_SENTENCES if multi_vector else 1)
    disk = vectors * dim * 2
    text = (
        f"papers to encode: {papers:,} ({how}); disk ~{size_text(disk)} float16 "
        f"({vectors:,} vectors x {dim})"
    )
    return text, papers


def size_text(n: float) -> str:
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    i = min(len(units) - 1, int(math.log(max(n, 1), 1024)))
    return f"{n / 1024**i:.1f} {units[i]}"
