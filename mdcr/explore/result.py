"""A result opened for exploring: its setups, its per-query values, its retrievers, and
where their rankings, the qrels and the papers' texts are stored.

Everything is found through the manifests, never through a path a request names: the
per-query values are ``mdcr export --per-query``'s rows
(:func:`mdcr.scoring.per_query_export.per_query_rows`), kept in a compact form (one row
per pool and query, one column per retriever and measure), so memory follows the number
of queries; the rankings (``runs.parquet``, MDCR's ``scores.parquet``), the qrels and the
papers stay on disk and are read on demand (:mod:`mdcr.explore.reads`). Each file is
checked against its manifest (:meth:`mdcr.contracts.artifacts.Contract.require`) once,
when the result is opened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.core.errors import InputDataError
from mdcr.scoring.per_query import PER_QUERY_COLUMNS

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from mdcr.scoring.document import Report
    from mdcr.scoring.per_query import ReadPapers

RESULT_STAGES = ("report", "score", "benchmark-score")
MDCR = "mdcr"  # the setup of the MDCR benchmark's rows (mdcr.scoring.per_query.MDCR_SETUP)
# The facts of a unit (one query in one pool): export --per-query's columns less the
# retriever's own (which retriever, which metric, its value).
UNIT_FACTS = tuple(c for c in PER_QUERY_COLUMNS if c not in ("retriever", "metric", "value"))


@dataclass(frozen=True)
class Setup:
    """One setup of the result: a pool size of the dataset-level pools, the field-level
    pools, or an MDCR split; each of its units is one query in one of its pools."""

    key: str
    setup: str
    split: str
    pool_size: int | None
    pool_ids: tuple[str, ...]
    metrics: tuple[str, ...]
    retrievers: tuple[str, ...]
    fields: tuple[str, ...]
    years: tuple[int, ...]
    queries: int  # distinct queries

    @property
    def is_mdcr(self) -> bool:
        return self.setup == MDCR

    @property
    def label(self) -> str:
        if self.is_mdcr:
            return f"MDCR, {self.split}"
        level = "dataset-level" if self.setup == "dataset" else f"{self.setup}-level"
        size = f", pools of {self.pool_size:,}" if self.pool_size else ""
        return f"{level}, {self.split}{size}"


def setup_key(setup: str, split: str, pool_size: Any) -> str:
    """``dataset-test-800``, ``field-test-600``, ``mdcr-test``."""
    import pandas as pd

    size = "" if pool_size is None or pd.isna(pool_size) else f"-{int(pool_size)}"
    return f"{setup}-{split}{size}"


@dataclass(frozen=True)
class Ranking:
    """Where one retriever's ranking is stored: a run (``runs.parquet``, pools) or an
    MDCR rank output (``scores.parquet``, ranked with ``ties`` as benchmark-score did)."""

    retriever: str
    folder: Path
    file: Path
    mdcr: bool
    ties: str = "trec_eval"


@dataclass
class Result:
    """One result output, opened: what every page reads."""

    folder: Path
    stage: str
    fingerprint: str
    title: str
    units: pd.DataFrame  # UNIT_FACTS + setup_key, one row per (pool_id, query_id)
    values: dict[str, pd.DataFrame]  # measure -> units x retrievers (NaN: not scored)
    setups: dict[str, Setup]
    baseline: str
    rankings: dict[tuple[bool, str], Ranking]  # (is MDCR, retriever) -> ranking
    qrels: Path | None = None  # the pools' qrels.parquet
    pool_papers: Path | None = None  # papers.parquet with the pools' texts
    benchmark: Path | None = None  # benchmark.parquet
    benchmark_papers: Path | None = None  # papers.parquet with the benchmark's texts
    report: Report | None = None
    intervals: pd.DataFrame | None = None
    per_pool: pd.DataFrame | None = None  # a score output's per_pool.parquet
    _by_unit: dict[tuple[str, str], int] = field(default_factory=dict, repr=False)
    _by_query: dict[str, list[int]] = field(default_factory=dict, repr=False)
    _by_setup: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        import numpy as np

        keys = zip(self.units["pool_id"], self.units["query_id"], strict=True)
        self._by_unit = {k: i for i, k in enumerate(keys)}
        for i, q in enumerate(self.units["query_id"]):
            self._by_query.setdefault(str(q), []).append(i)
        for key, idx in self.units.groupby("setup_key", sort=False).indices.items():
            self._by_setup[str(key)] = np.asarray(idx)

    def unit(self, pool_id: str, query_id: str) -> int | None:
        """The row of ``units`` for this query in this pool (None: the result has none)."""
        return self._by_unit.get((pool_id, query_id))

    def occurrences(self, query_id: str) -> list[int]:
        """Every unit of this query: its repetitions, other pool sizes, other setups."""
        return self._by_query.get(query_id, [])

    def setup_units(self, key: str) -> np.ndarray:
        return self._by_setup[key]

    def ranking(self, setup: Setup, retriever: str) -> Ranking | None:
        return self.rankings.get((setup.is_mdcr, retriever))

    @property
    def retrievers(self) -> list[str]:
        seen: dict[str, None] = {}
        for s in self.setups.values():
            seen.update(dict.fromkeys(s.retrievers))
        return list(seen)


def open_result(folder: Path, read_papers: ReadPapers | None = None) -> Result:
    """Open a report, score or benchmark-score output (an ``mdcr evaluate`` output is one
    of them) for exploring; anything else is a one-line error. Papers files are read by
    ``read_papers`` (the session's copies: :meth:`mdcr.explore.copies.SessionFiles.
    read_papers`; default: a scan of each)."""
    from mdcr.contracts.outputs import stage_of
    from mdcr.core.manifests import open_output
    from mdcr.scoring.per_query_export import per_query_rows

    folder = folder.resolve()
    stage = stage_of(folder)
    if stage not in RESULT_STAGES:
        what = f"a {stage} output" if stage else "no finished store output"
        raise InputDataError(
            f"'{folder}' is {what}; give a report, score or benchmark-score output (an "
            "`mdcr evaluate` result is one): `mdcr ls report` lists them"
        )
    out = open_output(folder)
    assert out is not None  # stage_of found it
    params = out.manifest.get("params", {})
    rows = per_query_rows(folder, read_papers)
    if rows.empty:
        raise InputDataError(f"'{folder}' holds no per-query values; nothing to explore")
    units, values = _units(rows)
    setups = _setups(units, values)
    result = Result(
        folder=folder,
        stage=stage,
        fingerprint=out.fingerprint,
        title=str(params.get("title") or f"{stage} {out.fingerprint}"),
        units=units,
        values=values,
        setups=setups,
        baseline=str(params.get("baseline") or "bm25"),
        rankings={},
    )
    _find_pools_side(result, folder, stage)
    _find_mdcr_side(result, folder, stage)
    _find_tables(result, folder, stage)
    return result


def _units(rows: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The per-query rows in compact form: the units' facts once, and per measure a
    units x retrievers frame of the stored values."""
    keys = ["pool_id", "query_id"]
    units = rows.drop_duplicates(keys)[list(UNIT_FACTS)].reset_index(drop=True)
    units["setup_key"] = [
        setup_key(s, sp, n)
        for s, sp, n in zip(units["setup"], units["split"], units["pool_size"], strict=True)
    ]
    index = units.set_index(keys).index
    values = {}
    for metric, block in rows.groupby("metric", sort=False):
        wide = block.pivot(index=keys, columns="retriever", values="value")
        values[str(metric)] = wide.reindex(index).reset_index(drop=True)
    return units, values


def _setups(units: pd.DataFrame, values: dict[str, pd.DataFrame]) -> dict[str, Setup]:
    """Every setup of the units: dataset-level by pool size, field-level, MDCR; test
    before val."""
    import pandas as pd

    setups = {}
    for key, block in units.groupby("setup_key", sort=False):
        idx = block.index.to_numpy()
        metrics = tuple(m for m, v in values.items() if v.iloc[idx].notna().any().any())
        retrievers: dict[str, None] = {}
        for m in metrics:
            scored = values[m].iloc[idx].notna().any()
            retrievers.update(dict.fromkeys(str(r) for r in scored[scored].index))
        first = block.iloc[0]
        size = None if pd.isna(first["pool_size"]) else int(first["pool_size"])
        setups[str(key)] = Setup(
            key=str(key),
            setup=str(first["setup"]),
            split=str(first["split"]),
            pool_size=size,
            pool_ids=tuple(dict.fromkeys(str(p) for p in block["pool_id"])),
            metrics=metrics,
            retrievers=tuple(sorted(retrievers)),
            fields=tuple(sorted({str(f) for f in block["field"].dropna()})),
            years=tuple(sorted({int(y) for y in block["year"].dropna()})),
            queries=int(block["query_id"].nunique()),
        )
    kinds = {"dataset": 0, "field": 1, MDCR: 3}
    splits = {"test": 0, "val": 1}

    def order(s: Setup) -> tuple[int, int, str, int]:
        return (kinds.get(s.setup, 2), splits.get(s.split, 2), s.split, s.pool_size or 0)

    return {s.key: s for s in sorted(setups.values(), key=order)}


def _score_folders(folder: Path, stage: str) -> list[Path]:
    from mdcr.contracts.outputs import input_paths

    if stage == "score":
        return [folder]
    return input_paths(folder, "scores") if stage == "report" else []


def _bench_folders(folder: Path, stage: str) -> list[Path]:
    from mdcr.contracts.outputs import input_paths

    if stage == "benchmark-score":
        return [folder]
    return input_paths(folder, "benchmark") if stage == "report" else []


def _find_pools_side(result: Result, folder: Path, stage: str) -> None:
    """The runs of the pools' retrievers (each from the last score output holding it, as
    export --per-query takes its values), the qrels and the papers with the texts."""
    from mdcr.contracts.artifacts import PAPERS, QRELS, RUNS
    from mdcr.contracts.facts import ScoreInfo
    from mdcr.contracts.outputs import input_paths
    from mdcr.core.fingerprints import artifact_fingerprint
    from mdcr.core.manifests import open_output
    from mdcr.scoring.per_query import corpus_or_own, pools_of

    scores = _score_folders(folder, stage)
    for score in scores:
        out = open_output(score)
        if out is None:
            continue
        runs = {artifact_fingerprint(p): p for p in input_paths(score, "runs") if p.is_dir()}
        for entry in ScoreInfo.of(out).runs:
            run = runs.get(str(entry.get("fingerprint")))
            name = str(entry.get("retriever"))
            if run is not None:
                result.rankings[(False, name)] = Ranking(name, run, RUNS.require(run), False)
    if scores:
        pools = pools_of(scores[0])
        result.qrels = QRELS.require(pools)
        papers = corpus_or_own(pools)
        result.pool_papers = PAPERS.require(papers) if papers is not None else None


def _find_mdcr_side(result: Result, folder: Path, stage: str) -> None:
    """The MDCR rank outputs (each retriever from the last benchmark-score output holding
    it, as export --per-query takes its values), the benchmark and its texts."""
    from mdcr.contracts.artifacts import BENCHMARK, PAIR_SCORES, PAPERS
    from mdcr.contracts.outputs import input_paths, rank_info
    from mdcr.core.manifests import open_output

    for bench_score in _bench_folders(folder, stage):
        out = open_output(bench_score)
        if out is None:
            continue
        ties = str(out.manifest.get("params", {}).get("ties", "trec_eval"))
        for rank in input_paths(bench_score, "ranks"):
            if rank.is_dir():
                name = rank_info(rank).retriever
                scores = PAIR_SCORES.require(rank)
                result.rankings[(True, name)] = Ranking(name, rank, scores, True, ties)
        found = input_paths(bench_score, "benchmark")
        if found and found[0].is_dir():
            result.benchmark = BENCHMARK.require(found[0])
            if PAPERS.exists(found[0]):
                result.benchmark_papers = PAPERS.require(found[0])


def _find_tables(result: Result, folder: Path, stage: str) -> None:
    """The report's model and intervals (a report or benchmark-score output), or a score
    output's per-pool means."""
    from mdcr.contracts.artifacts import INTERVALS, POOL_MEANS
    from mdcr.scoring.document import REPORT_JSON, read_report

    if (folder / REPORT_JSON).is_file():
        result.report = read_report(folder)
    if INTERVALS.exists(folder):
        result.intervals = INTERVALS.read_pandas(folder)
    if stage == "score":
        result.per_pool = POOL_MEANS.read_pandas(folder)
