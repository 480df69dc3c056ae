"""Runs and qrels out of mdcr: ranx objects, and TREC files for pyserini, ranx,
ir_measures and trec_eval.

A pool's query is one TREC topic: its id is ``<pool_id>:<query_id>``. TREC files are
split on whitespace, so every id written, topic and document alike, has each whitespace
character made ``_`` (:func:`trec_id`; pool ids such as ``field/test/Computer
Science/r0`` hold spaces). Two different ids that would be written alike (``a b`` and
``a_b``), or an empty id, are refused with a one-line error. Run lines are ``qid Q0 doc
rank score tag`` in mdcr's rank order; qrels lines are ``qid 0 doc relevance``.

Ties. trec_eval, ranx and ir_measures order a run by its scores and break ties their own
way (trec_eval: doc id descending), while mdcr breaks them by paper_id ascending; and
trec_eval reads scores in single precision. So that every tool sees mdcr's ranking, the
scores written are float32 values made strictly decreasing within a query by the fewest
float32 steps that do it: a tie of n scores becomes n adjacent float32 values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.core.errors import InputDataError
from mdcr.exports.registry import EXPORTS, Export, ExportRequest

if TYPE_CHECKING:
    import pandas as pd

_WHITESPACE = re.compile(r"\s")


def trec_id(value: str) -> str:
    """An id as a TREC file carries it: each whitespace character made ``_``."""
    return _WHITESPACE.sub("_", value)


def topic_id(pool_id: str, query_id: str) -> str:
    return trec_id(f"{pool_id}:{query_id}")


def trec_ids(ids: Iterable[str], what: str, where: Path | str) -> list[str]:
    """``ids`` as written (:func:`trec_id`), or a one-line error when one is empty or two
    different ids would be written alike (a TREC reader would merge them)."""
    ids = list(ids)
    written = [trec_id(i) for i in ids]
    seen: dict[str, str] = {}
    for raw, out in zip(ids, written, strict=True):
        if not out:
            raise InputDataError(
                f"'{where}' has an empty {what}, which a TREC line cannot carry; give it an id"
            )
        first = seen.setdefault(out, raw)
        if first != raw:
            a, b = sorted((first, raw))
            raise InputDataError(
                f"'{where}': {what}s {a!r} and {b!r} are both written '{out}' in a TREC "
                "file (whitespace becomes '_'); rename one so that they differ otherwise"
            )
    return written


def _run_frame(folder: Path, pool_id: str | None) -> pd.DataFrame:
    from mdcr.contracts.artifacts import RUNS

    filters = [("pool_id", "==", pool_id)] if pool_id else None
    df = RUNS.read_pandas(folder, filters=filters)
    if df.empty:
        raise InputDataError(
            f"'{folder}' has no run rows" + (f" for pool '{pool_id}'" if pool_id else "")
        )
    return df.astype({"pool_id": str, "query_id": str, "paper_id": str})


def _qrels_frame(folder: Path, pool_id: str | None) -> pd.DataFrame:
    from mdcr.contracts.artifacts import QRELS

    filters = [("pool_id", "==", pool_id)] if pool_id else None
    return QRELS.read_pandas(folder, filters=filters).astype(
        {"pool_id": str, "query_id": str, "paper_id": str}
    )


def check_same_pools(run: Path, qrels: Path) -> None:
    """A run and qrels of different pools would pair silently into wrong metrics: refuse
    them. The run's recorded pools fingerprint must be the qrels' pools output's, and every
    (pool, query) of the run must have qrels."""
    from mdcr.contracts.artifacts import QRELS, RUNS, Contract
    from mdcr.contracts.outputs import check_run_pools
    from mdcr.core.errors import ManifestMismatchError

    check_run_pools(run, qrels)
    columns = ["pool_id", "query_id"]

    def topics(contract: Contract, folder: Path) -> set[tuple[str, str]]:
        import pyarrow as pa

        # pool_id may be dictionary-encoded with one dictionary per row group (the pools
        # stage writes qrels pool by pool): plain strings before grouping.
        table = contract.read(folder, columns)
        table = pa.table({c: table[c].cast(pa.string()) for c in columns})
        table = table.group_by(columns).aggregate([])
        pools, queries = (table[c].to_pylist() for c in columns)
        return set(zip(pools, queries, strict=True))

    ranked, judged = topics(RUNS, run), topics(QRELS, qrels)
    missing = sorted(ranked - judged)
    if missing:
        raise ManifestMismatchError(
            f"run '{run}' and qrels '{qrels}' are of different pools: {len(missing)} of the "
            f"run's {len(ranked)} queries have no qrels (e.g. "
            f"'{topic_id(*missing[0])}'); pass the pools output the run was searched on"
        )


def strictly_decreasing(df: pd.DataFrame) -> Any:
    """Scores in rank order made strictly decreasing per query by the fewest float32 steps.

    float32, because trec_eval reads scores into single precision: distinct float64 scores
    can tie there. ``df`` is sorted by (pool, query, rank). With ``u`` the float32 order as
    integers, the written value is ``t_i = min(u_i, t_(i-1) - 1)``, i.e. ``cummin(u_j + j) - i``.
    """
    import numpy as np
    import pandas as pd

    bits = df["score"].to_numpy(dtype=np.float64).astype(np.float32).view(np.int32)
    u = (bits ^ ((bits >> 31) & np.int32(0x7FFFFFFF))).astype(np.int64)  # monotone
    keys = (df["pool_id"].astype(str) + "\x1f" + df["query_id"].astype(str)).to_numpy()
    i = pd.Series(keys).groupby(keys, sort=False).cumcount().to_numpy(dtype=np.int64)
    t = (pd.Series(u + i).groupby(keys, sort=False).cummin().to_numpy() - i).astype(np.int32)
    back = t ^ ((t >> 31) & np.int32(0x7FFFFFFF))
    return back.view(np.float32).astype(np.float64)


def _topics(df: pd.DataFrame, pool_id: str | None) -> Any:
    if pool_id:
        return df["query_id"]
    return [topic_id(p, q) for p, q in zip(df["pool_id"], df["query_id"], strict=True)]


def written_ids(
    df: pd.DataFrame, folder: Path, group: str = "pool_id"
) -> tuple[list[str], list[str]]:
    """The topic (``<group>:<query_id>``) and document ids of ``df`` as a TREC file writes
    them, checked by :func:`trec_ids`."""
    import pandas as pd

    pairs = df[[group, "query_id"]].drop_duplicates()
    keys = list(zip(pairs[group], pairs["query_id"], strict=True))
    topics = trec_ids((f"{p}:{q}" for p, q in keys), f"topic id ({group}:query_id)", folder)
    by_pair = dict(zip(keys, topics, strict=True))
    docs = pd.unique(df["paper_id"])
    by_doc = dict(zip(docs, trec_ids(docs, "paper id", folder), strict=True))
    return (
        [by_pair[k] for k in zip(df[group], df["query_id"], strict=True)],
        [by_doc[d] for d in df["paper_id"]],
    )


def load_run(folder: Path | str, pool_id: str | None = None) -> Any:
    """A ranx ``Run`` of a search or bm25 output (one pool's, or every pool's as topics
    ``<pool_id>:<query_id>``)."""
    from ranx import Run

    df = _run_frame(Path(folder), pool_id)
    df = df.sort_values(["pool_id", "query_id", "rank"], kind="stable").reset_index(drop=True)
    df = df.assign(q=_topics(df, pool_id), score=strictly_decreasing(df))
    df = df.astype({"q": object, "paper_id": object})
    return Run.from_df(df, q_id_col="q", doc_id_col="paper_id", score_col="score")


def load_qrels(folder: Path | str, pool_id: str | None = None) -> Any:
    """A ranx ``Qrels`` of a pools output (one pool's, or every pool's as topics)."""
    from ranx import Qrels

    df = _qrels_frame(Path(folder), pool_id)
    df = df.assign(q=_topics(df, pool_id), relevance=df["relevance"].astype(int))
    df = df.astype({"q": object, "paper_id": object})
    return Qrels.from_df(df, q_id_col="q", doc_id_col="paper_id", score_col="relevance")


def write_trec_run(folder: Path, path: Path, tag: str = "mdcr") -> int:
    """Write a run output as a TREC run file; return the number of lines."""
    from mdcr.core.atomic import atomic_path

    df = _run_frame(folder, None).sort_values(["pool_id", "query_id", "rank"], kind="stable")
    df = df.reset_index(drop=True)
    topics, docs = written_ids(df, folder)
    scores = strictly_decreasing(df)
    with atomic_path(path) as tmp, tmp.open("w") as f:
        for q, doc, rank, score in zip(topics, docs, df["rank"], scores, strict=True):
            f.write(f"{q} Q0 {doc} {int(rank)} {float(score)!r} {tag}\n")
    return len(df)


def write_trec_qrels(folder: Path, path: Path) -> int:
    """Write a pools output's qrels as a TREC qrels file; return the number of lines."""
    from mdcr.core.atomic import atomic_path

    df = _qrels_frame(folder, None).sort_values(["pool_id", "query_id", "paper_id"])
    topics, docs = written_ids(df, folder)
    with atomic_path(path) as tmp, tmp.open("w") as f:
        for q, doc, rel in zip(topics, docs, df["relevance"], strict=True):
            f.write(f"{q} 0 {doc} {int(rel)}\n")
    return len(df)


def export_trec_pools(request: ExportRequest) -> list[str]:
    """``mdcr export --format trec`` of pools outputs: ``run.trec`` from a search/bm25
    output, ``qrels.trec`` from a pools output (a run and qrels of the same pools)."""
    lines = []
    if request.run is not None and request.qrels is not None:
        check_same_pools(request.run, request.qrels)
    if request.run is not None:
        path = request.out / "run.trec"
        n = write_trec_run(request.run, path, tag=f"mdcr-{request.run.name}")
        lines.append(f"{path}: {n} lines")
    if request.qrels is not None:
        path = request.out / "qrels.trec"
        lines.append(f"{path}: {write_trec_qrels(request.qrels, path)} lines")
    return lines


EXPORTS.register(
    Export(
        format="trec",
        kind="pools",
        write=export_trec_pools,
        help="a search/bm25 output's runs and a pools output's qrels as run.trec, qrels.trec",
        usage="--run RUNS (a search or bm25 output) and/or --qrels POOLS (a pools output)",
        writes="the TREC files",
    )
)
