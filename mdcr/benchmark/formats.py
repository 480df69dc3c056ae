"""The MDCR benchmark on disk: the release format, HF datasets, and scores files.

Internal form (docs/architecture.md §3): one row per (query, candidate) with columns
``query_id, field, paper_id, candidate_type, split``; ``candidate_type`` is ``"true"`` for a
positive (a paper the query cites) and a negative type otherwise (``bm25``, ``specter``,
``scincl``, ``graph``, ``most_cited``, ``random``, or another model's name).

The release format (github.com/zoranmedic/mdcr; any files in this layout are read the
same way, and only :mod:`mdcr.benchmark.release` decides whether they are the official
release):

- ``mdcr_{val,test}.json``: ``{field: {query_id: {type: [paper ids], "true": [ids]}}}``;
- ``mdcr_{val,test}_data.jsonl``: one ``{"paper_id", "title", "abstract"}`` per line, for
  every query and candidate;
- a scores file for the original scorer (``evaluate.py``): ``{"<qid>_<cid>": score}``,
  higher is more relevant.

HF datasets export: two ``DatasetDict`` folders written with ``save_to_disk``, one split
per benchmark split. ``queries`` has one row per (field, query) with a ``field`` column and
one list column per candidate type; ``papers`` has ``paper_id, title, abstract``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from mdcr.contracts.paper import MDCR_POSITIVE as POSITIVE
from mdcr.core.atomic import atomic_path
from mdcr.core.errors import InputDataError, require
from mdcr.scoring.mdcr_tables import type_order

BENCHMARK_COLUMNS = ["query_id", "field", "paper_id", "candidate_type", "split"]
PAPER_COLUMNS = ["paper_id", "title", "abstract"]
SPLITS = ("val", "test")
_RELEASE_JSON = re.compile(r"^mdcr_(val|test)\.json$")


def check_benchmark(df: pd.DataFrame, where: str) -> pd.DataFrame:
    """Check the internal columns and that no candidate is listed twice for a query."""
    missing = [c for c in BENCHMARK_COLUMNS if c not in df.columns]
    if missing:
        raise InputDataError(f"{where}: missing column(s) {', '.join(missing)}")
    df = df[BENCHMARK_COLUMNS].astype(str)
    dup = df.duplicated(["split", "field", "query_id", "paper_id"])
    if dup.any():
        r = df[dup].iloc[0]
        raise InputDataError(
            f"{where}: paper '{r['paper_id']}' is listed twice for query '{r['query_id']}' "
            f"({r['field']}, {r['split']}); a candidate may appear once per query"
        )
    return df


def sort_benchmark(df: pd.DataFrame) -> pd.DataFrame:
    """Canonical row order: split, field, query, type (release order), paper id."""
    order = {t: i for i, t in enumerate(type_order(sorted(df["candidate_type"].unique())))}
    split_rank = {s: i for i, s in enumerate(SPLITS)}
    key = df.assign(
        _s=df["split"].map(lambda s: split_rank.get(s, len(SPLITS))),
        _t=df["candidate_type"].map(order),
    )
    key = key.sort_values(["_s", "split", "field", "query_id", "_t", "paper_id"], kind="stable")
    return key[BENCHMARK_COLUMNS].reset_index(drop=True)


def read_benchmark(folder: Path) -> pd.DataFrame:
    """The internal benchmark rows of a ``benchmark`` or ``benchmark-import`` output."""
    from mdcr.contracts.artifacts import BENCHMARK

    bench = check_benchmark(BENCHMARK.read_pandas(folder), str(BENCHMARK.path(folder)))
    if bench.empty:
        raise InputDataError(
            f"'{folder}' holds an empty benchmark (no query); remove it and build or import "
            "a benchmark with queries"
        )
    return bench


def read_texts(folder: Path) -> pd.DataFrame:
    """The benchmark papers' ``paper_id, title, abstract`` (its data files, imported)."""
    from mdcr.contracts.artifacts import PAPERS

    if not PAPERS.exists(folder):
        raise InputDataError(
            f"no {PAPERS.file} (titles and abstracts) in '{folder}'; import the benchmark "
            "with its mdcr_<split>_data.jsonl files"
        )
    return PAPERS.read_pandas(folder, columns=PAPER_COLUMNS).astype(str)


def benchmark_splits(bench: pd.DataFrame, wanted: Sequence[str], where: str) -> list[str]:
    """The splits of ``bench`` to use: all it has, or the ``wanted`` ones (which it must have)."""
    from mdcr.core.errors import ConfigError

    have = [s for s in SPLITS if s in set(bench["split"])]
    if not wanted:
        return have
    missing = [s for s in wanted if s not in have]
    if missing:
        raise ConfigError(
            f"{where}.splits: the benchmark has no '{missing[0]}' split; it has: "
            f"{', '.join(have) or 'none'}"
        )
    return [s for s in have if s in wanted]


# ------------------------------------------------------------------ release JSON


def to_release_json(df: pd.DataFrame) -> dict[str, dict[str, dict[str, list[str]]]]:
    """One split of the internal form as the release's nested dict."""
    splits = df["split"].unique()
    if len(splits) > 1:
        raise InputDataError(f"to_release_json: one split at a time, got {sorted(splits)}")
    df = sort_benchmark(df)
    types = type_order(df["candidate_type"].unique())
    out: dict[str, dict[str, dict[str, list[str]]]] = {}
    for (field, qid), g in df.groupby(["field", "query_id"], sort=True):
        lists = {t: [] for t in types}  # type: dict[str, list[str]]
        for t, pid in zip(g["candidate_type"], g["paper_id"], strict=True):
            lists[t].append(pid)
        out.setdefault(str(field), {})[str(qid)] = {t: v for t, v in lists.items() if v}
    return out


def from_release_json(obj: Any, split: str, where: str) -> pd.DataFrame:
    """The release's nested dict as the internal form (checked, one-line errors).

    A paper listed under several types of one query keeps one row: ``true`` if it is
    among the positives (the original scorer's labels), else the first negative type in
    the file's order.
    """
    if not isinstance(obj, dict):
        raise InputDataError(f"{where}: expected a JSON object {{field: {{query_id: ...}}}}")
    rows: list[tuple[str, str, str, str, str]] = []
    empty: list[str] = []  # fields without queries
    for field, queries in obj.items():
        if not isinstance(queries, dict):
            raise InputDataError(f"{where}: field '{field}' must map query ids to objects")
        if not queries:
            empty.append(str(field))
        for qid, lists in queries.items():
            if not isinstance(lists, dict):
                raise InputDataError(f"{where}: query '{qid}' must map candidate types to lists")
            positives = lists.get(POSITIVE, [])
            if not isinstance(positives, list):
                raise InputDataError(f"{where}: query '{qid}': 'true' must be a list of ids")
            seen: dict[str, str] = {str(p): POSITIVE for p in positives}
            for ctype, ids in lists.items():
                if not isinstance(ids, list) or not all(isinstance(i, str | int) for i in ids):
                    raise InputDataError(
                        f"{where}: query '{qid}', type '{ctype}': expected a list of paper ids"
                    )
                for pid in map(str, ids):
                    seen.setdefault(pid, str(ctype))
            rows.extend((str(qid), str(field), pid, t, split) for pid, t in seen.items())
    if not rows:
        raise InputDataError(
            f"{where}: lists no query and no candidate (an empty benchmark); give the official "
            'file, {field: {query_id: {"bm25": [ids], ..., "true": [ids]}}}'
        )
    if empty:  # dropped, it would leave the macro average without saying so
        raise InputDataError(
            f"{where}: field '{empty[0]}' lists no queries, so it has no score to average "
            "(the original scorer's average would be NaN); remove the field or give its "
            "queries"
        )
    return pd.DataFrame(rows, columns=BENCHMARK_COLUMNS)


def release_json_name(split: str) -> str:
    return f"mdcr_{split}.json"


def data_name(split: str) -> str:
    return f"mdcr_{split}_data.jsonl"


def write_release_json(df: pd.DataFrame, path: Path) -> None:
    """Write one split as ``mdcr_<split>.json`` (atomically)."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(to_release_json(df)) + "\n", encoding="utf-8")


def split_of_file(path: Path) -> str | None:
    m = _RELEASE_JSON.match(path.name)
    return m.group(1) if m else None


def read_release_json(path: Path, split: str | None = None) -> pd.DataFrame:
    """Read ``mdcr_<split>.json``; the split comes from the file name unless given."""
    split = split or split_of_file(path)
    if split is None:
        raise InputDataError(
            f"cannot tell the split of '{path.name}'; name it mdcr_val.json or mdcr_test.json"
        )
    try:
        obj = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputDataError(f"cannot read '{path}' as JSON ({exc})") from None
    return from_release_json(obj, split, str(path))


# ------------------------------------------------------------------ papers JSONL


def write_papers_jsonl(papers: pd.DataFrame, path: Path) -> int:
    """Write ``paper_id, title, abstract`` one JSON object per line, sorted by paper_id."""
    df = papers[PAPER_COLUMNS].sort_values("paper_id", kind="stable")
    n = 0
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as f:
        for pid, title, abstract in df.itertuples(index=False):
            rec = {"paper_id": str(pid), "title": _text(title), "abstract": _text(abstract)}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    return n


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value)


def read_papers_jsonl(path: Path) -> pd.DataFrame:
    """Read a ``*_data.jsonl``: columns paper_id, title, abstract (one row per paper)."""
    rows = []
    try:
        with path.open(encoding="utf-8-sig") as f:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputDataError(f"{path}:{i}: not a JSON object ({exc})") from None
                if not isinstance(rec, dict) or "paper_id" not in rec:
                    raise InputDataError(f"{path}:{i}: expected an object with 'paper_id'")
                rows.append(
                    (
                        str(rec["paper_id"]),
                        _text(rec.get("title")),
                        _text(rec.get("abstract")),
                    )
                )
    except (OSError, UnicodeDecodeError) as exc:
        raise InputDataError(f"cannot read '{path}' ({exc})") from None
    df = pd.DataFrame(rows, columns=PAPER_COLUMNS)
    dup = df.duplicated("paper_id", keep=False)
    if dup.any():
        texts = df[dup].drop_duplicates()
        if texts["paper_id"].duplicated().any():
            pid = texts[texts["paper_id"].duplicated()].iloc[0]["paper_id"]
            raise InputDataError(f"{path}: paper '{pid}' appears twice with different texts")
        df = df.drop_duplicates("paper_id")
    return df.reset_index(drop=True)


def find_release_files(path: Path) -> dict[str, tuple[Path, Path | None]]:
    """The release-format files at ``path`` (a folder, or one ``mdcr_<split>.json``): split ->
    (benchmark JSON, data JSONL or None when it is not beside the JSON)."""
    if path.is_file():
        split = split_of_file(path)
        if split is None:
            raise InputDataError(
                f"'{path.name}' is not an MDCR benchmark file; expected mdcr_val.json or "
                "mdcr_test.json"
            )
        data = path.with_name(data_name(split))
        return {split: (path, data if data.is_file() else None)}
    out: dict[str, tuple[Path, Path | None]] = {}
    for split in SPLITS:
        js = path / release_json_name(split)
        if js.is_file():
            data = path / data_name(split)
            out[split] = (js, data if data.is_file() else None)
    return out


# ------------------------------------------------------------------ HF datasets


def to_query_rows(df: pd.DataFrame, types: Sequence[str]) -> list[dict[str, Any]]:
    """One record per (field, query): ``field, query_id`` and one id list per type."""
    records = []
    for (field, qid), g in sort_benchmark(df).groupby(["field", "query_id"], sort=True):
        rec: dict[str, Any] = {"field": str(field), "query_id": str(qid)}
        for t in types:
            rec[t] = g.loc[g["candidate_type"] == t, "paper_id"].tolist()
        records.append(rec)
    return records


def export_hf(bench: pd.DataFrame, papers: pd.DataFrame, folder: Path) -> list[Path]:
    """Save the benchmark as HF ``DatasetDict``s under ``folder/queries`` and
    ``folder/papers`` (one split each per benchmark split). Returns the files written."""
    datasets = require("datasets")
    datasets.disable_progress_bars()
    types = type_order(bench["candidate_type"].unique())
    features = datasets.Features(
        {
            "field": datasets.Value("string"),
            "query_id": datasets.Value("string"),
            **{t: datasets.Sequence(datasets.Value("string")) for t in types},
        }
    )
    pfeatures = datasets.Features({c: datasets.Value("string") for c in PAPER_COLUMNS})
    queries, paper_sets = {}, {}
    papers = papers[PAPER_COLUMNS].astype(str).set_index("paper_id", drop=False)
    for split in [s for s in SPLITS if s in set(bench["split"])]:
        part = bench[bench["split"] == split]
        queries[split] = datasets.Dataset.from_list(to_query_rows(part, types), features=features)
        ids = sorted(set(part["paper_id"]) | set(part["query_id"]))
        missing = [p for p in ids if p not in papers.index]
        if missing:
            raise InputDataError(f"export_hf: no text for paper '{missing[0]}' ({split})")
        rows = papers.loc[ids].to_dict("records")
        paper_sets[split] = datasets.Dataset.from_list(rows, features=pfeatures)
    datasets.DatasetDict(queries).save_to_disk(str(folder / "queries"))
    datasets.DatasetDict(paper_sets).save_to_disk(str(folder / "papers"))
    return sorted(p for p in folder.rglob("*") if p.is_file())


def load_hf(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read an :func:`export_hf` folder back: (benchmark rows, papers)."""
    datasets = require("datasets")
    for sub in ("queries", "papers"):
        if not (folder / sub).is_dir():
            raise InputDataError(f"'{folder}' has no '{sub}' DatasetDict; give an export_hf folder")
    qd = datasets.load_from_disk(str(folder / "queries"))
    pd_ = datasets.load_from_disk(str(folder / "papers"))
    rows: list[tuple[str, str, str, str, str]] = []
    for split, ds in qd.items():
        types = [c for c in ds.column_names if c not in ("field", "query_id")]
        for rec in ds:
            for t in types:
                rows.extend((rec["query_id"], rec["field"], pid, t, split) for pid in rec[t])
    bench = pd.DataFrame(rows, columns=BENCHMARK_COLUMNS)
    papers = pd.concat([ds.to_pandas() for ds in pd_.values()], ignore_index=True)
    papers = papers[PAPER_COLUMNS].drop_duplicates("paper_id").reset_index(drop=True)
    return sort_benchmark(bench), papers


# ------------------------------------------------------------------ scores files


def score_key(query_id: str, paper_id: str) -> str:
    """The original scorer's key: query and candidate ids joined by an underscore."""
    return f"{query_id}_{paper_id}"


def write_scores(scores: pd.DataFrame, path: Path) -> int:
    """Write ``{"<qid>_<cid>": score}`` from columns query_id, paper_id, score.

    A (query, candidate) pair listed twice must have one score (e.g. a query of two fields).
    """
    df = scores[["query_id", "paper_id", "score"]].drop_duplicates()
    dup = df.duplicated(["query_id", "paper_id"])
    if dup.any():
        r = df[dup].iloc[0]
        raise InputDataError(
            f"write_scores: pair ({r['query_id']}, {r['paper_id']}) has two different scores"
        )
    out: dict[str, float] = {}
    for q, p, s in df.sort_values(["query_id", "paper_id"]).itertuples(index=False):
        key = score_key(str(q), str(p))
        if key in out:
            raise InputDataError(
                f"write_scores: key '{key}' is ambiguous (ids contain '_'); the original "
                "scorer's format cannot hold these ids"
            )
        out[key] = float(s)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(out) + "\n", encoding="utf-8")
    return len(out)


def read_scores(path: Path) -> dict[str, float]:
    """Read a scores file ``{"<qid>_<cid>": score}``."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputDataError(f"cannot read scores file '{path}' as JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise InputDataError(f"'{path}': expected a JSON object {{\"<qid>_<cid>\": score}}")
    out: dict[str, float] = {}
    for k, v in obj.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InputDataError(f"'{path}': score of '{k}' is {v!r}, not a number")
        out[str(k)] = float(v)
    return out


def check_score_keys(bench: pd.DataFrame, scores: Mapping[str, float], where: str) -> None:
    """Every key of a scores file names a query-candidate pair of the benchmark (of any of
    its splits): a key that names none (a file made for another benchmark, a typo) is a
    one-line error, never skipped."""
    known = {score_key(q, p) for q, p in zip(bench["query_id"], bench["paper_id"], strict=True)}
    unknown = [k for k in scores if k not in known]
    if unknown:
        raise InputDataError(
            f"{where}: {len(unknown)} of {len(scores)} keys name no query-candidate pair of "
            f"the benchmark (e.g. '{unknown[0]}'); a key is '<query id>_<candidate id>' of a "
            "candidate in that query's list: remove the others, or score the benchmark the "
            "file was made for"
        )


def check_no_self_candidates(bench: pd.DataFrame, where: str) -> None:
    """No query is among its own candidates (a query is never a candidate in its own
    ranking); a benchmark that lists one is a one-line error naming it."""
    own = bench[bench["query_id"] == bench["paper_id"]]
    if len(own):
        r = own.iloc[0]
        raise InputDataError(
            f"{where}: query '{r['query_id']}' ({r['field']}, {r['split']}) is listed among "
            f"its own candidates (type '{r['candidate_type']}'), in {len(own)} list(s) in "
            "all; a query is never its own candidate: remove it from its lists"
        )


def scores_for(bench: pd.DataFrame, scores: Mapping[str, float], where: str) -> pd.DataFrame:
    """The score of every benchmark pair, looked up by ``<qid>_<cid>`` as the original
    scorer does; a missing pair is an error (the original would stop with a KeyError)."""
    pairs = bench[["split", "field", "query_id", "paper_id"]].drop_duplicates()
    keys = [score_key(q, p) for q, p in zip(pairs["query_id"], pairs["paper_id"], strict=True)]
    missing = [k for k in keys if k not in scores]
    if missing:
        raise InputDataError(
            f"{where}: {len(missing)} of {len(keys)} query-candidate pairs have no score "
            f"(e.g. '{missing[0]}'); score every pair of the benchmark"
        )
    return pairs.assign(score=[scores[k] for k in keys]).reset_index(drop=True)
