"""``mdcr export --per-query``: the per-query rows (:mod:`mdcr.eval.per_query`) of a
score, benchmark-score or report output, written as Parquet and CSV."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.errors import ConfigError, InputDataError
from mdcr.eval.per_query import benchmark_rows, ordered, pools_of, pools_rows, score_rows

if TYPE_CHECKING:
    import argparse

    import pandas as pd

FILE_STEM = "per_query"


def per_query_rows(folder: Path) -> pd.DataFrame:
    """The rows (:data:`mdcr.eval.per_query.PER_QUERY_COLUMNS`) of a score,
    benchmark-score or report output (a report: those of its score and benchmark-score
    inputs, each retriever taken from the score output the report takes it from, and
    from the last benchmark-score output holding it)."""
    import pandas as pd

    from mdcr.manifests import read_manifest
    from mdcr.outputs import input_paths, stage_of

    stage = stage_of(folder)
    if stage == "score":
        return score_rows(folder)
    if stage == "benchmark-score":
        return benchmark_rows(folder)
    if stage != "report":
        raise InputDataError(
            f"'{folder}' is {f'a {stage} output' if stage else 'no stage output'}; give a score, "
            "benchmark-score or report output for per-query values"
        )
    from mdcr.eval.report import load_scores

    manifest = read_manifest(folder) or {}
    repeated = str(manifest.get("params", {}).get("repeated_retrievers", "error"))
    score_folders = input_paths(folder, "scores")
    scores = load_scores(score_folders, repeated)
    frames = [pools_rows(scores.per_query, pools_of(score_folders[0]))]
    # A retriever in several benchmark-score outputs (the demo's bm25 and minilm are in
    # both of its) is taken from the last one holding it, once.
    taken: dict[str, pd.DataFrame] = {}
    for bench in input_paths(folder, "benchmark"):
        rows = benchmark_rows(bench)
        for name in rows["retriever"].unique():
            taken[str(name)] = rows[rows["retriever"] == name]
    frames += list(taken.values())
    return ordered(pd.concat(frames, ignore_index=True))


def write_per_query(rows: pd.DataFrame, out: Path) -> list[Path]:
    """``per_query.parquet`` and ``per_query.csv`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    parquet, csv = out / f"{FILE_STEM}.parquet", out / f"{FILE_STEM}.csv"
    rows.to_parquet(parquet, index=False)
    rows.to_csv(csv, index=False)
    return [parquet, csv]


def run_export_per_query(args: argparse.Namespace) -> int:
    """``mdcr export --per-query --run OUTPUT --out DIR``."""
    given: dict[str, Any] = {
        "--qrels": args.qrels,
        "--encoder": args.encoder,
        "--split": args.split,
        "--retriever": args.retriever,
    }
    extra = [name for name, v in given.items() if v]
    if args.format != "trec":
        extra.append("--format")
    if args.run is None or extra:
        raise ConfigError(
            "export --per-query: give --run OUTPUT (a score, benchmark-score or report "
            "output) and --out DIR" + (f", and no {', '.join(extra)}" if extra else "")
        )
    if args.out.exists() and not args.out.is_dir():
        raise ConfigError(f"export --out '{args.out}' is a file; give a folder")
    rows = per_query_rows(args.run)
    for path in write_per_query(rows, args.out):
        print(f"{path}: {len(rows)} rows")
    return 0
