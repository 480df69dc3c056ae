"""Stage ``benchmark-import`` (``mdcr benchmark import``): the official MDCR release files.

The official files (``mdcr_{val,test}.json`` + ``mdcr_{val,test}_data.jsonl``, see
:mod:`mdcr.benchmark.formats`), one such JSON file, or an HF export folder become the
internal form: ``benchmark.parquet`` and ``papers.parquet`` (paper_id, title, abstract).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from mdcr.config import input_path, param
from mdcr.errors import InputDataError
from mdcr.stage import StageContext, StageSpec, register

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ImportConfig:
    source: str = input_path(
        help="official release: a folder with mdcr_<split>.json (+ mdcr_<split>_data.jsonl), "
        "one such JSON file, or an HF export folder (queries/ and papers/)"
    )
    splits: tuple[Literal["val", "test"], ...] = param((), help="splits to import; empty = all")


def run_benchmark_import(cfg: ImportConfig, ctx: StageContext) -> None:
    import pandas as pd

    from mdcr.artifacts import BENCHMARK, PAPERS
    from mdcr.benchmark.formats import (
        benchmark_splits,
        check_benchmark,
        find_release_files,
        load_hf,
        read_papers_jsonl,
        read_release_json,
        sort_benchmark,
    )

    source = ctx.input("source")
    papers: pd.DataFrame | None
    if source.is_dir() and (source / "queries").is_dir() and (source / "papers").is_dir():
        bench, papers = load_hf(source)
        kind = "hf"
    else:
        found = find_release_files(source)
        if not found:
            raise InputDataError(
                f"'{source}' holds no mdcr_val.json or mdcr_test.json; give the official files"
            )
        frames, texts = [], []
        for _split, (js, data) in sorted(found.items()):
            frames.append(read_release_json(js))
            if data is not None:
                texts.append(read_papers_jsonl(data))
        bench = pd.concat(frames, ignore_index=True)
        papers = pd.concat(texts, ignore_index=True).drop_duplicates("paper_id") if texts else None
        if papers is not None and len(texts) < len(found):
            missing = [s for s, (_, d) in found.items() if d is None]
            raise InputDataError(
                f"'{source}': mdcr_{missing[0]}_data.jsonl is missing while another split has "
                "its data file; give both or neither"
            )
        kind = "official"
    splits = benchmark_splits(bench, cfg.splits, "benchmark-import")
    bench = sort_benchmark(check_benchmark(bench[bench["split"].isin(splits)], str(source)))
    bench.to_parquet(BENCHMARK.output(ctx, rows=len(bench)), index=False)
    if papers is not None:
        ids = set(bench["paper_id"]) | set(bench["query_id"])
        missing_ids = sorted(ids - set(papers["paper_id"]))
        if missing_ids:
            raise InputDataError(
                f"'{source}': {len(missing_ids)} benchmark papers have no title/abstract in the "
                f"data file (e.g. '{missing_ids[0]}')"
            )
        papers = papers[papers["paper_id"].isin(ids)].sort_values("paper_id")
        papers.to_parquet(PAPERS.output(ctx, rows=len(papers)), index=False)
    ctx.record("format", kind)
    ctx.record("splits", splits)
    ctx.record("queries", int(bench.groupby(["split", "field", "query_id"]).ngroups))
    ctx.record("texts", papers is not None)


SPEC = register(
    StageSpec(
        name="benchmark-import",
        version="1",
        config=ImportConfig,
        run=run_benchmark_import,
        help="read the official MDCR files (or an HF export) into a benchmark folder",
        main_output="benchmark.parquet",
        command="benchmark import",
    )
)
