"""Stage ``benchmark-import`` (``mdcr benchmark import``): MDCR benchmark files in.

Files in the release's layout (``mdcr_{val,test}.json`` + ``mdcr_{val,test}_data.jsonl``,
see :mod:`mdcr.benchmark.formats`), one such JSON file, or an HF export folder become the
internal form: ``benchmark.parquet`` and ``papers.parquet`` (paper_id, title, abstract).

Each split's data file is required (``texts``; a missing one is an error naming it, and
nothing is written); ``texts = false`` imports the candidate lists alone, enough to score a
scores file. The import records the files' origin (:mod:`mdcr.benchmark.release`): official
only when every file it reads matches a provenance record of the release. The origin and
every file's sha256 are hashed into its identity, so a relabel is a new output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mdcr.contracts.artifacts import BENCHMARK, PAPERS
from mdcr.core.config import input_path, param
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.hints import key
from mdcr.core.stage import STAGES, StageContext, StageSpec

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class ImportConfig:
    source: str = input_path(
        help="a folder with mdcr_<split>.json and mdcr_<split>_data.jsonl (the release's "
        "layout), one such JSON file (its data file beside it), or an HF export folder "
        "(queries/ and papers/)"
    )
    splits: tuple[Literal["val", "test"], ...] = param((), help="splits to import; empty = all")
    texts: bool = param(
        True,
        help="read each split's titles and abstracts (mdcr_<split>_data.jsonl, required); "
        "--no-texts: the candidate lists alone, enough to score a scores file",
    )


def _is_hf(source: Path) -> bool:
    return source.is_dir() and (source / "queries").is_dir() and (source / "papers").is_dir()


def files_to_read(source: Path, cfg: ImportConfig) -> dict[str, tuple[Path, Path | None]]:
    """Split -> (benchmark JSON, data JSONL or None without ``texts``) for the splits the
    import reads; a missing data file is an error naming it."""
    from mdcr.benchmark.formats import data_name, find_release_files

    found = find_release_files(source)
    if not found:
        raise InputDataError(
            f"'{source}' holds no mdcr_val.json or mdcr_test.json; give a folder of MDCR "
            "benchmark files (mdcr download mdcr fetches the official release)"
        )
    wanted = {s: f for s, f in found.items() if not cfg.splits or s in cfg.splits}
    if not wanted:
        raise ConfigError(
            f"{key('benchmark-import', 'splits')}: '{source}' has no "
            f"{' or '.join(cfg.splits)} split; it has: {', '.join(sorted(found))}"
        )
    out: dict[str, tuple[Path, Path | None]] = {}
    for split, (js, data) in sorted(wanted.items()):
        if cfg.texts and data is None:
            raise InputDataError(
                f"'{js.with_name(data_name(split))}' does not exist: the titles and abstracts "
                f"of {js.name}'s papers are read from it; put it beside {js.name} (mdcr "
                "download mdcr fetches all four release files), or score a scores file, "
                "which needs none (evaluate --scores, or import with --no-texts)"
            )
        out[split] = (js, data if cfg.texts else None)
    return out


def identify_benchmark_import(
    cfg: ImportConfig, inputs: Mapping[str, list[Path]]
) -> dict[str, Any]:
    """The sha256 of every file the import reads and their origin (official or not)."""
    from mdcr.benchmark.release import origin_of
    from mdcr.contracts.facts import MDCR_FORMAT, BenchmarkOrigin

    source = Path(cfg.source).expanduser()
    if cfg.source.startswith("@") or not source.exists():
        origin = BenchmarkOrigin(MDCR_FORMAT, "the output of a pipeline step")
        return {"origin": origin.as_dict()}
    if _is_hf(source):
        return {"origin": BenchmarkOrigin(MDCR_FORMAT, "an HF datasets export").as_dict()}
    files = [p for pair in files_to_read(source, cfg).values() for p in pair if p is not None]
    origin, sums = origin_of(files)
    return {"files": sums, "origin": origin.as_dict()}


def run_benchmark_import(cfg: ImportConfig, ctx: StageContext) -> None:
    import pandas as pd

    from mdcr.benchmark.formats import (
        benchmark_splits,
        check_benchmark,
        check_no_self_candidates,
        load_hf,
        read_papers_jsonl,
        read_release_json,
        sort_benchmark,
    )
    from mdcr.contracts.artifacts import BENCHMARK, PAPERS

    source = ctx.input("source")
    identity = ctx.identity or identify_benchmark_import(cfg, ctx.inputs)
    papers: pd.DataFrame | None
    if _is_hf(source):
        bench, papers = load_hf(source)
        kind = "hf"
    else:
        found = files_to_read(source, cfg)
        frames = [read_release_json(js) for js, _ in found.values()]
        texts = [read_papers_jsonl(data) for _, data in found.values() if data is not None]
        bench = pd.concat(frames, ignore_index=True)
        papers = pd.concat(texts, ignore_index=True).drop_duplicates("paper_id") if texts else None
        kind = "release"
    splits = benchmark_splits(bench, cfg.splits, "benchmark-import")
    bench = sort_benchmark(check_benchmark(bench[bench["split"].isin(splits)], str(source)))
    check_no_self_candidates(bench, str(source))
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
    bench.to_parquet(BENCHMARK.output(ctx, rows=len(bench)), index=False)
    ctx.record("format", kind)
    ctx.record("source", str(source))
    ctx.record("origin", identity["origin"])
    ctx.record("splits", splits)
    ctx.record("queries", int(bench.groupby(["split", "field", "query_id"]).ngroups))
    ctx.record("texts", papers is not None)


SPEC = STAGES.register(
    StageSpec(
        name="benchmark-import",
        version="2",
        config=ImportConfig,
        run=run_benchmark_import,
        identity=identify_benchmark_import,
        help="read MDCR benchmark files (the release's layout, or an HF export) into a "
        "benchmark folder, recording whether they are the official release",
        main_output="benchmark.parquet",
        command="benchmark import",
        writes=(BENCHMARK, PAPERS),
    )
)
