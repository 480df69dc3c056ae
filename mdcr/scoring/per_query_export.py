"""``mdcr export --per-query``: the per-query rows (:mod:`mdcr.scoring.per_query`) of a
score, benchmark-score or report output, written as Parquet and CSV."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mdcr.core.errors import ConfigError, InputDataError
from mdcr.exports.registry import EXPORTS, Export, ExportRequest
from mdcr.scoring.per_query import (
    ReadPapers,
    benchmark_rows,
    ordered,
    pools_of,
    pools_rows,
    score_rows,
)

if TYPE_CHECKING:
    import pandas as pd

FILE_STEM = "per_query"
PER_QUERY_FORMAT = "per-query"


def per_query_rows(folder: Path, read_papers: ReadPapers | None = None) -> pd.DataFrame:
    """The rows (:data:`mdcr.scoring.per_query.PER_QUERY_COLUMNS`) of a score,
    benchmark-score or report output (a report: those of its score and benchmark-score
    inputs, each retriever taken from the score output the report takes it from, and
    from the last benchmark-score output holding it); papers files are read by
    ``read_papers`` (default: a scan, :func:`mdcr.scoring.per_query.scan_papers`)."""
    import pandas as pd

    from mdcr.contracts.outputs import input_paths, stage_of
    from mdcr.core.manifests import read_manifest

    stage = stage_of(folder)
    if stage == "score":
        return score_rows(folder, read_papers)
    if stage == "benchmark-score":
        return benchmark_rows(folder, read_papers)
    if stage != "report":
        raise InputDataError(
            f"'{folder}' is {f'a {stage} output' if stage else 'no stage output'}; give a score, "
            "benchmark-score or report output for per-query values"
        )
    from mdcr.scoring.report import load_scores

    manifest = read_manifest(folder) or {}
    repeated = str(manifest.get("params", {}).get("repeated_retrievers", "error"))
    score_folders = input_paths(folder, "scores")
    scores = load_scores(score_folders, repeated)
    frames = [pools_rows(scores.per_query, pools_of(score_folders[0]), read_papers)]
    # A retriever in several benchmark-score outputs (the demo's bm25 and minilm are in
    # both of its) is taken from the last one holding it, once.
    taken: dict[str, pd.DataFrame] = {}
    for bench in input_paths(folder, "benchmark"):
        rows = benchmark_rows(bench, read_papers)
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


def _export_per_query(request: ExportRequest) -> list[str]:
    """``mdcr export --per-query`` (``--format per-query``): ``--run``'s rows into ``--out``."""
    assert request.run is not None  # the registry asks for it
    if request.out.exists() and not request.out.is_dir():
        raise ConfigError(f"export --out '{request.out}' is a file; give a folder")
    rows = per_query_rows(request.run)
    return [f"{path}: {len(rows)} rows" for path in write_per_query(rows, request.out)]


_USAGE = "--run OUTPUT (a score, benchmark-score or report output) and --out DIR, nothing else"
for _kind, _what in (("pools", "a score or report output's"), ("benchmark", "MDCR's")):
    EXPORTS.register(
        Export(
            format=PER_QUERY_FORMAT,
            kind=_kind,
            write=_export_per_query,
            help=f"{_what} per-query values with each query's facts as Parquet and CSV",
            usage=_USAGE,
            writes="per_query.parquet and per_query.csv",
            run="required",
            qrels="refused",
        )
    )
