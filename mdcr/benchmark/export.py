"""MDCR rankings and qrels as TREC files (``mdcr export --run RANK --qrels BENCHMARK``).

One split per file pair (MDCR has val and test). A query is one TREC topic
``<field>:<query_id>`` (the original scorer evaluates each field on its own, so a query id
need not be unique across fields; the field makes it so). Topic and paper ids have each
whitespace character made ``_``, as :mod:`mdcr.scoring.trec` writes them.

- Qrels judge every candidate of a query: 1 for its ``true`` list, 0 for every other
  candidate, as the original scorer (``evaluate.py``) builds them; so pytrec_eval and
  trec_eval evaluate a query whose ``true`` list is empty, as 0.
- The run holds every scored candidate. With ``ties="trec_eval"`` (benchmark-score's
  default) the raw scores are written and the tool breaks ties itself (trec_eval: paper id
  descending), which is the order mdcr scores with. With ``ties="paper_id"`` the scores
  are made strictly decreasing per query by the fewest float32 steps
  (:func:`mdcr.scoring.trec.strictly_decreasing`), so every tool sees paper id ascending.

Either way, trec_eval's or pytrec_eval's ``map``, ``ndcg`` and ``recall_5`` per topic equal
benchmark-score's ``per_query.parquet`` (subset ``all``) for the same ties.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mdcr.core.errors import ConfigError, ManifestMismatchError
from mdcr.exports.registry import EXPORTS, Export, ExportRequest

if TYPE_CHECKING:
    import pandas as pd


def check_rank_benchmark(rank: Path, benchmark: Path) -> None:
    """A ranking of another benchmark would be paired with the wrong qrels: refuse it."""
    from mdcr.contracts.outputs import rank_info
    from mdcr.core.fingerprints import artifact_fingerprint

    info = rank_info(rank)
    actual = artifact_fingerprint(benchmark)
    if info.benchmark_fingerprint != actual:
        raise ManifestMismatchError(
            f"'{rank}' ({info.retriever}) ranks benchmark {info.benchmark_fingerprint}, not "
            f"the given '{benchmark}' ({actual}); pass the benchmark it ranked"
        )


def choose_split(have: list[str], wanted: str | None, where: str) -> str:
    """The split to export: the one asked for (which ``have`` must hold), else the only one."""
    if wanted:
        if wanted not in have:
            raise ConfigError(
                f"export --split: {where} has no '{wanted}' split; it has: "
                f"{', '.join(have) or 'none'}"
            )
        return wanted
    if len(have) != 1:
        raise ConfigError(f"export: {where} has splits {', '.join(have)}; pick one with --split")
    return have[0]


def _splits(df: pd.DataFrame) -> list[str]:
    from mdcr.benchmark.formats import SPLITS

    present = set(df["split"])
    return [s for s in SPLITS if s in present] + sorted(present - set(SPLITS))


def rank_splits(rank: Path) -> list[str]:
    from mdcr.contracts.artifacts import PAIR_SCORES

    return _splits(PAIR_SCORES.read_pandas(rank, columns=["split"]))


def benchmark_splits_of(benchmark: Path) -> list[str]:
    from mdcr.contracts.artifacts import BENCHMARK

    return _splits(BENCHMARK.read_pandas(benchmark, columns=["split"]))


def write_mdcr_run(
    rank: Path, path: Path, split: str, ties: str = "trec_eval", tag: str = "mdcr"
) -> int:
    """Write one split of a benchmark-rank output as a TREC run; return the number of lines."""
    from mdcr.benchmark.scoring import rank_scores
    from mdcr.contracts.artifacts import PAIR_SCORES
    from mdcr.contracts.outputs import rank_info
    from mdcr.core.atomic import atomic_path
    from mdcr.scoring.trec import strictly_decreasing, written_ids

    rank_info(rank)  # a benchmark-rank output, or a one-line error
    df = PAIR_SCORES.read_pandas(rank, filters=[("split", "==", split)])
    df = df.astype({"field": str, "query_id": str, "paper_id": str})
    ranked = rank_scores(df, ties)  # type: ignore[arg-type]
    if ties == "paper_id":
        scores = strictly_decreasing(ranked.assign(pool_id=ranked["field"]))
    else:
        scores = ranked["score"].to_numpy(dtype="float64")
    topics, docs = written_ids(ranked, rank, group="field")
    with atomic_path(path) as tmp, tmp.open("w") as f:
        for q, doc, r, s in zip(topics, docs, ranked["rank"], scores, strict=True):
            f.write(f"{q} Q0 {doc} {int(r)} {float(s)!r} {tag}\n")
    return len(ranked)


def write_mdcr_qrels(benchmark: Path, path: Path, split: str) -> int:
    """Write one split of a benchmark as TREC qrels, every candidate judged (1: in the
    ``true`` list, else 0); return the number of lines."""
    from mdcr.benchmark.formats import POSITIVE, read_benchmark
    from mdcr.core.atomic import atomic_path
    from mdcr.scoring.trec import written_ids

    bench = read_benchmark(benchmark)
    b = bench[bench["split"] == split].astype({"field": str, "query_id": str, "paper_id": str})
    b = b.sort_values(["field", "query_id", "paper_id"], kind="stable")
    rel = (b["candidate_type"] == POSITIVE).astype(int)
    topics, docs = written_ids(b, benchmark, group="field")
    with atomic_path(path) as tmp, tmp.open("w") as f:
        for q, doc, r in zip(topics, docs, rel, strict=True):
            f.write(f"{q} 0 {doc} {int(r)}\n")
    return len(b)


def export_trec_benchmark(request: ExportRequest) -> list[str]:
    """``mdcr export --format trec`` of MDCR: one split's ranking (a benchmark-rank output)
    as ``run_<split>.trec`` and its qrels (a benchmark) as ``qrels_<split>.trec``."""
    rank, benchmark = request.run, request.qrels
    if rank is not None and benchmark is not None:
        check_rank_benchmark(rank, benchmark)
    if rank is not None:
        split = choose_split(rank_splits(rank), request.split, f"'{rank}'")
    else:
        assert benchmark is not None
        split = choose_split(benchmark_splits_of(benchmark), request.split, f"'{benchmark}'")
    lines = []
    if benchmark is not None and rank is not None:
        choose_split(benchmark_splits_of(benchmark), split, f"'{benchmark}'")
    if rank is not None:
        path = request.out / f"run_{split}.trec"
        ties = request.ties or "trec_eval"
        n = write_mdcr_run(rank, path, split, ties=ties, tag=f"mdcr-{rank.name}")
        lines.append(f"{path}: {n} lines")
    if benchmark is not None:
        path = request.out / f"qrels_{split}.trec"
        lines.append(f"{path}: {write_mdcr_qrels(benchmark, path, split)} lines")
    return lines


EXPORTS.register(
    Export(
        format="trec",
        kind="benchmark",
        write=export_trec_benchmark,
        help="a benchmark-rank output's ranking and a benchmark's qrels, one split, as "
        "run_<split>.trec, qrels_<split>.trec",
        usage="--run RANK (a benchmark-rank output) and/or --benchmark BENCHMARK (a "
        "benchmark or benchmark-import output)",
        writes="the TREC files",
        options=frozenset({"split", "ties"}),
    )
)
