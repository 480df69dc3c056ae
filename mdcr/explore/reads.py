"""The store's files read on demand: one query's ranking by each retriever, the top k of
every query of a setup, its positives, and papers' texts.

Every path comes from the opened result (:mod:`mdcr.explore.result`), found through the
manifests; a request only chooses values (a pool, a query, a retriever), which DuckDB
receives as bound parameters.

Runs, qrels and papers files are read through the session's copies
(:mod:`mdcr.explore.copies`): a query's ranking is one small batch of its run's copy, its
positives one of the qrels' copy, a page's papers a few small batches of the papers'
copy. The papers' copy is made before the server starts (it gives the per-query facts
too), the others in the background after it. Each query's top 10 of every run is read
when the reader opens and held in memory (what the queries page's rank correlation reads
by default). What a copy does
not answer (yet) is read from the files with DuckDB: a ranking whose rows are not together
in its run, the top k beyond 10 of every query of a setup (one scan of the run), and the
MDCR rankings, ranked from the pair scores as benchmark-score ranks them
(:func:`mdcr.benchmark.scoring.rank_scores`, with the ties the benchmark-score output
used), so a rank shown is the rank that was scored.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mdcr.explore.copies import SessionFiles

HELD_TOP = 10  # each query's first this many papers of every run, held in memory
PER_UNIT_TOP = 2_000  # up to this many queries, a longer top k is read query by query

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    import pyarrow as pa

    from mdcr.explore.copies import UnitCopy
    from mdcr.explore.result import Ranking, Result, Setup


@dataclass(frozen=True)
class Ranked:
    """One retriever's ranking of one query: every paper it ranked (rank 1 first, at most
    its run's depth), with scores."""

    retriever: str
    paper_ids: list[str]
    scores: list[float]

    @property
    def depth(self) -> int:
        return len(self.paper_ids)

    def rank_of(self) -> dict[str, int]:
        return {p: i + 1 for i, p in enumerate(self.paper_ids)}


@dataclass(frozen=True)
class HeldTop:
    """A run's first :data:`HELD_TOP` papers of every unit (unit x rank; None where it
    ranks fewer), and whether it ranks each unit."""

    ids: np.ndarray
    ranked: np.ndarray


@dataclass(frozen=True)
class TopLists:
    """One retriever's first ``k`` papers of each of some units: ``ids[i]`` is the paper
    at slot ``slots[i]`` (the unit's position x k + rank - 1); ``ranked``: whether it
    ranked each unit."""

    k: int
    slots: np.ndarray
    ids: pa.Array
    ranked: np.ndarray


class Reader:
    """The result's files, read through the session's copies (``files``; a reader given
    none makes its own and removes them on :meth:`close`) and a DuckDB connection; each
    call takes its own cursor, so the server's threads read in parallel. One DuckDB thread
    per call: its reads are small, and on a busy machine each handoff to another thread
    waits for a core."""

    def __init__(self, result: Result, files: SessionFiles | None = None, threads: int = 1,
                 memory_limit: str = "512MB", *, quiet: bool = True) -> None:  # fmt: skip
        import duckdb

        self.result = result
        self._own_files = files is None
        self.files = files if files is not None else SessionFiles(quiet=quiet)
        self._con = duckdb.connect(
            config={
                "threads": threads,
                "memory_limit": memory_limit,
                "temp_directory": str(self.files.spill_folder()),
            }
        )
        self._con.execute("SET parquet_metadata_cache = true")  # footers read once
        self._con.execute("SET enable_progress_bar = false")
        self._lock = threading.Lock()
        for path in (result.pool_papers, result.benchmark_papers):
            if path is not None:
                self.files.papers(path)
        pools_runs = {n: r for (mdcr, n), r in result.rankings.items() if not mdcr}
        self._tops = {name: self._held_top(ranking) for name, ranking in pools_runs.items()}
        # The runs' and the qrels' copies are made in the background: until each is made,
        # what it would answer is read from its file.
        self._runs: dict[str, UnitCopy] = {}
        self._qrels: UnitCopy | None = None
        self._quiet = quiet
        self._closing = threading.Event()
        self._copying = threading.Thread(target=self._copy_by_unit, daemon=True)
        self._copying.start()

    def _held_top(self, ranking: Ranking) -> HeldTop:
        """The run's first :data:`HELD_TOP` papers of every unit, from one scan."""
        import pandas as pd

        units = self.result.units
        keys = pd.Index(units["pool_id"].astype(str) + "\x1f" + units["query_id"].astype(str))
        top = self._frame(
            "SELECT pool_id, query_id, paper_id, rank FROM read_parquet(?) WHERE rank <= ?",
            [str(ranking.file), HELD_TOP],
        )
        wanted = pd.Index(top["pool_id"].astype(str) + "\x1f" + top["query_id"].astype(str))
        unit = keys.get_indexer(wanted)
        held = (unit >= 0) & (top["rank"].to_numpy() >= 1)
        ids = np.full((len(units), HELD_TOP), None, dtype=object)
        ranks = top["rank"].to_numpy()[held].astype(np.int64) - 1
        ids[unit[held], ranks] = top["paper_id"].astype(str).to_numpy()[held]
        ranked = np.zeros(len(units), dtype=bool)
        ranked[unit[held]] = True
        return HeldTop(ids, ranked)

    def _copy_by_unit(self) -> None:
        """Make the qrels' and each run's copy, one after the other."""
        import sys
        import time

        result = self.result
        started = time.perf_counter()
        try:
            if result.qrels is not None:
                self._qrels = self.files.qrels(result.qrels, result.unit, len(result.units))
            for (mdcr, name), ranking in result.rankings.items():
                if self._closing.is_set():
                    return
                if not mdcr:
                    copy = self.files.run(ranking.file, result.unit, len(result.units))
                    self._runs[name] = copy
        except Exception as exc:  # the pages go on reading the files; say why, once
            if not self._closing.is_set():
                print(f"mdcr: explore reads the runs from their files ({exc})", file=sys.stderr)
            return
        if not self._quiet:
            took = time.perf_counter() - started
            print(f"runs and qrels copied for this session in {took:.1f} s", file=sys.stderr)

    def wait_for_copies(self) -> None:
        """Return when the runs' and the qrels' copies are made (a static export, tests)."""
        self._copying.join()

    def close(self) -> None:
        """Close the connection and, if this reader made them, remove the copies."""
        import contextlib

        import duckdb

        self._closing.set()
        self._copying.join()  # the copy being made is finished (seconds at most)
        with contextlib.suppress(duckdb.Error):  # a read still running: the process ends
            self._con.close()
        if self._own_files:
            self.files.close()

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            return self._con.cursor()

    def _frame(self, sql: str, params: list[Any]) -> pd.DataFrame:
        cur = self._cursor()
        try:
            return cur.execute(sql, params).df()
        finally:
            cur.close()

    def _rows(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        cur = self._cursor()
        try:
            return cur.execute(sql, params).fetchall()
        finally:
            cur.close()

    # -- one query ----------------------------------------------------------------------

    def rankings(self, setup: Setup, unit: int) -> dict[str, Ranked | None]:
        """Each retriever's whole ranking of the query of ``unit`` (None: no ranking of it
        is stored with this result): from the runs' copies; what they do not answer is
        read from the runs in one statement."""
        row = self.result.units.iloc[unit]
        sources = {r: self.result.ranking(setup, r) for r in setup.retrievers}
        found: dict[str, Ranked | None] = {r: None for r, s in sources.items() if s is None}
        runs = []
        for name, source in sources.items():
            if source is None or source.mdcr:
                continue
            copy = self._runs.get(name)
            held = copy.ranking(unit) if copy is not None else None
            if held is None:
                runs.append((name, source))
            else:
                found[name] = Ranked(name, *held)
        if runs:
            one = "SELECT ? AS retriever, paper_id, score, rank FROM read_parquet(?) "
            one += "WHERE pool_id = ? AND query_id = ?"
            params: list[Any] = []
            for name, source in runs:
                params += [name, str(source.file), str(row["pool_id"]), str(row["query_id"])]
            sql = " UNION ALL ".join([one] * len(runs)) + " ORDER BY retriever, rank"
            lists: dict[str, tuple[list[str], list[float]]] = {r: ([], []) for r, _ in runs}
            for name, paper, score, _ in self._rows(sql, params):
                lists[name][0].append(str(paper))
                lists[name][1].append(float(score))
            found.update({r: Ranked(r, ids, scores) for r, (ids, scores) in lists.items()})
        for name, mdcr in sources.items():
            if mdcr is not None and mdcr.mdcr:
                ranked = self._mdcr_ranked(mdcr, str(row["split"]), str(row["field"]), row)
                ids = [str(p) for p in ranked["paper_id"]]
                found[name] = Ranked(name, ids, [float(x) for x in ranked["score"]])
        return {r: found[r] for r in setup.retrievers}

    def _mdcr_ranked(self, source: Ranking, split: str, field: str, row: Any) -> pd.DataFrame:
        from mdcr.benchmark.scoring import rank_scores

        scored = self._frame(
            "SELECT split, field, query_id, paper_id, score FROM read_parquet(?) "
            "WHERE split = ? AND field = ? AND query_id = ?",
            [str(source.file), split, field, str(row["query_id"])],
        )
        return rank_scores(scored, source.ties)  # type: ignore[arg-type]

    def positives(self, setup: Setup, unit: int) -> list[str]:
        """The query's cited papers in that pool: its qrels with relevance >= 1 (MDCR: its
        ``true`` candidates), by paper id."""
        from mdcr.contracts.paper import MDCR_POSITIVE

        row = self.result.units.iloc[unit]
        if setup.is_mdcr:
            if self.result.benchmark is None:
                return []
            found = self._frame(
                "SELECT DISTINCT paper_id FROM read_parquet(?) WHERE split = ? AND field = ? "
                "AND query_id = ? AND candidate_type = ? ORDER BY paper_id",
                [
                    str(self.result.benchmark),
                    str(row["split"]),
                    str(row["field"]),
                    str(row["query_id"]),
                    MDCR_POSITIVE,
                ],
            )
        else:
            if self.result.qrels is None:
                return []
            held = self._qrels.rows(unit) if self._qrels is not None else None
            if held is not None:
                relevance = held.column("relevance").to_numpy(zero_copy_only=False)
                papers = held.column("paper_id").to_pylist()
                return sorted({str(p) for p, r in zip(papers, relevance, strict=True) if r >= 1})
            found = self._frame(
                "SELECT DISTINCT paper_id FROM read_parquet(?) WHERE pool_id = ? "
                "AND query_id = ? AND relevance >= 1 ORDER BY paper_id",
                [str(self.result.qrels), str(row["pool_id"]), str(row["query_id"])],
            )
        return [str(p) for p in found["paper_id"]]

    def papers(self, setup: Setup, ids: list[str]) -> dict[str, dict[str, Any]]:
        """paper_id -> title, abstract and year (where the papers file has one) of the
        papers ``ids`` that the setup's papers file holds (its first row of each)."""
        path = self.result.benchmark_papers if setup.is_mdcr else self.result.pool_papers
        if path is None or not ids:
            return {}
        table = self.files.papers(path).rows(ids)
        years = table.column("year").to_pylist() if "year" in table.column_names else None
        columns = [table.column(c).to_pylist() for c in ("paper_id", "title", "abstract")]
        out: dict[str, dict[str, Any]] = {}
        for i, (paper, title, abstract) in enumerate(zip(*columns, strict=True)):
            if str(paper) in out:
                continue
            when = years[i] if years is not None else None
            out[str(paper)] = {
                "title": "" if title is None else str(title),
                "abstract": "" if abstract is None else str(abstract),
                "year": None if when is None else int(when),
            }
        return out

    # -- the top k of many queries ------------------------------------------------------

    def top_lists(self, setup: Setup, retriever: str, k: int, units: np.ndarray
                  ) -> TopLists | None:  # fmt: skip
        """``retriever``'s first ``k`` papers of each of ``units`` (rows of the result's
        units, all of ``setup``); None: no ranking of it is stored with this result.

        Up to :data:`HELD_TOP` from the top papers held in memory; beyond, query by query
        from the run's copy for up to :data:`PER_UNIT_TOP` units, else from one scan of the
        run (MDCR: always one scan of its pair scores)."""
        import pandas as pd
        import pyarrow as pa

        source = self.result.ranking(setup, retriever)
        if source is None:
            return None
        held_top = None if source.mdcr else self._tops.get(retriever)
        if held_top is not None and k <= HELD_TOP:
            block = held_top.ids[units, :k].ravel()
            slots = np.nonzero(pd.notna(block))[0]
            return TopLists(k, slots, pa.array(block[slots], pa.string()), held_top.ranked[units])
        copy = self._runs.get(retriever)
        if source.mdcr or copy is None or held_top is None or len(units) > PER_UNIT_TOP:
            return self._scanned_top(source, setup, k, units)
        slots_of: list[np.ndarray] = []
        papers: list[str] = []
        for at, unit in enumerate(units):
            held = copy.ranking(int(unit))
            if held is None:  # its rows are not together in the run: read from the run
                ranked = self.rankings(setup, int(unit))[retriever]
                top = ranked.paper_ids[:k] if ranked is not None else []
            else:
                top = held[0][:k]
            papers += top
            slots_of.append(at * k + np.arange(len(top)))
        slots = np.concatenate(slots_of) if slots_of else np.zeros(0, dtype=np.int64)
        return TopLists(k, slots, pa.array(papers, pa.string()), held_top.ranked[units])

    def _scanned_top(self, source: Ranking, setup: Setup, k: int, units: np.ndarray) -> TopLists:
        """The first ``k`` of each of ``units``, from one scan of the run (MDCR: its pair
        scores ranked as benchmark-score ranked them)."""
        import pandas as pd
        import pyarrow as pa

        if source.mdcr:
            top = self._mdcr_top_k(source, setup, k)
        else:
            pools = ", ".join("?" * len(setup.pool_ids))
            top = self._frame(
                "SELECT pool_id, query_id, paper_id, rank FROM read_parquet(?) "
                f"WHERE pool_id IN ({pools}) AND rank <= ?",
                [str(source.file), *setup.pool_ids, k],
            )
        wanted = self.result.units.iloc[units]
        at = pd.DataFrame(
            {
                "pool_id": wanted["pool_id"].astype(str).to_numpy(),
                "query_id": wanted["query_id"].astype(str).to_numpy(),
                "at": np.arange(len(units)),
            }
        )
        top = top.astype({"pool_id": str, "query_id": str, "paper_id": str})
        placed = top.merge(at, on=["pool_id", "query_id"], how="inner")
        slots = placed["at"].to_numpy() * k + placed["rank"].to_numpy().astype(np.int64) - 1
        ranked = np.zeros(len(units), dtype=bool)
        ranked[placed["at"].to_numpy()] = True
        return TopLists(k, slots, pa.array(placed["paper_id"].to_numpy(), pa.string()), ranked)

    def _mdcr_top_k(self, source: Ranking, setup: Setup, k: int) -> pd.DataFrame:
        from mdcr.benchmark.scoring import rank_scores
        from mdcr.scoring.per_query import MDCR_SETUP

        scored = self._frame(
            "SELECT split, field, query_id, paper_id, score FROM read_parquet(?) WHERE split = ?",
            [str(source.file), setup.split],
        )
        ranked = rank_scores(scored, source.ties)  # type: ignore[arg-type]
        top = ranked[ranked["rank"] <= k]
        pool = MDCR_SETUP + "/" + top["split"] + "/" + top["field"]
        return top.assign(pool_id=pool)[["pool_id", "query_id", "paper_id", "rank"]]
