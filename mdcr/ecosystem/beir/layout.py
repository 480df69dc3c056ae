"""One BEIR folder, written so that BEIR, MTEB and Hugging Face ``datasets`` read it.

The layout (BEIR's, plus what MTEB's loader needs)::

    corpus.jsonl          {"_id", "title", "text"}: a paper's title and abstract
    queries.jsonl         {"_id", "text"}: the query paper's title and abstract, joined
    qrels/<split>.tsv     query-id <TAB> corpus-id <TAB> score, with that header (BEIR)
    qrels/<split>.jsonl   the same rows as JSON lines (MTEB reads these)
    top_ranked/<split>.jsonl  {"query-id", "corpus-ids": [...]}: each query's candidates,
                          for a benchmark that ranks only them (MTEB's reranking form)
    README.md             a dataset card whose ``configs`` name the files above, so
                          ``datasets.load_dataset(folder, config)`` and MTEB's
                          ``RetrievalDatasetLoader(folder)`` find them

MTEB reads every config through one ``datasets`` builder per folder, chosen from the
files' extensions, so MTEB's configs point at JSON lines only; the TSV qrels are BEIR's.

A query's text is ``f"{title} {abstract}".strip()``: the string MTEB makes of a corpus
entry (title, a space, text), so a paper reads the same as a query and as a candidate.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mdcr.core.errors import InputDataError
from mdcr.encoders.models.mteb_model import paper_text

__all__ = ["BeirFolder", "paper_text", "write_folder"]

CORPUS = "corpus.jsonl"
QUERIES = "queries.jsonl"
README = "README.md"


@dataclass
class BeirFolder:
    """What one folder holds: corpus rows (id, title, text), query rows (id, text), qrels
    and candidate lists per split."""

    corpus: list[tuple[str, str, str]]
    queries: list[tuple[str, str]]
    qrels: dict[str, list[tuple[str, str, int]]]
    top_ranked: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def counts(self) -> dict[str, object]:
        return {
            "corpus": len(self.corpus),
            "queries": len(self.queries),
            "qrels": {s: len(rows) for s, rows in self.qrels.items()},
            "top_ranked": {s: len(q) for s, q in self.top_ranked.items()},
        }


def _check_id(value: str, what: str) -> str:
    if not value or any(c in value for c in "\t\n\r"):
        raise InputDataError(
            f"{what} {value!r} is empty or holds a tab or newline, which a BEIR qrels file "
            "cannot carry; give ids without them"
        )
    return value


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    from mdcr.core.atomic import atomic_path

    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")


def _json(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False)


def _card(splits: Sequence[str], top_ranked: bool, title: str) -> str:
    """The dataset card: a YAML ``configs`` block naming each file (all JSON lines)."""

    def config(name: str, files: list[tuple[str, str]]) -> list[str]:
        out = [f"- config_name: {name}", "  data_files:"]
        for split, path in files:
            out += [f"  - split: {split}", f"    path: {path}"]
        return out

    first = splits[0]
    lines = ["---", "configs:"]
    lines += config("corpus", [(first, CORPUS)])
    lines += config("queries", [(first, QUERIES)])
    lines += config("default", [(s, f"qrels/{s}.jsonl") for s in splits])
    if top_ranked:
        lines += config("top_ranked", [(s, f"top_ranked/{s}.jsonl") for s in splits])
    lines += ["---", "", f"# {title}", ""]
    lines += [
        "Written by `mdcr export --format beir`: a BEIR folder (corpus.jsonl, queries.jsonl, "
        "qrels/<split>.tsv) that MTEB's retrieval loader and Hugging Face `datasets` also "
        "read (qrels/<split>.jsonl" + (", top_ranked/<split>.jsonl" if top_ranked else "") + ").",
        "",
    ]
    return "\n".join(lines)


def write_folder(folder: Path, data: BeirFolder, title: str) -> None:
    """Write ``data`` into ``folder`` in the layout above (each file atomically)."""
    splits = sorted(data.qrels)
    if not splits:
        raise InputDataError(f"'{folder}': nothing to write (no qrels)")
    _write_lines(
        folder / CORPUS,
        (
            _json({"_id": _check_id(i, "paper id"), "title": t, "text": x})
            for i, t, x in data.corpus
        ),
    )
    _write_lines(
        folder / QUERIES,
        (_json({"_id": _check_id(i, "query id"), "text": x}) for i, x in data.queries),
    )
    for split, rows in data.qrels.items():
        _write_lines(
            folder / "qrels" / f"{split}.tsv",
            ["query-id\tcorpus-id\tscore", *(f"{q}\t{d}\t{int(r)}" for q, d, r in rows)],
        )
        _write_lines(
            folder / "qrels" / f"{split}.jsonl",
            (_json({"query-id": q, "corpus-id": d, "score": int(r)}) for q, d, r in rows),
        )
    for split, lists in data.top_ranked.items():
        _write_lines(
            folder / "top_ranked" / f"{split}.jsonl",
            (_json({"query-id": q, "corpus-ids": list(ids)}) for q, ids in lists.items()),
        )
    _write_lines(folder / README, [_card(splits, bool(data.top_ranked), title)])


# -- reading a BEIR folder (mdcr import beir) -------------------------------------------------


@dataclass
class ReadCounts:
    """Lines read and lines refused (malformed), per file, for the import's manifest."""

    read: dict[str, int] = field(default_factory=dict)
    bad: dict[str, int] = field(default_factory=dict)
    first_bad: dict[str, str] = field(default_factory=dict)

    def refuse(self, name: str, line_no: int, why: str) -> None:
        self.bad[name] = self.bad.get(name, 0) + 1
        self.first_bad.setdefault(name, f"line {line_no}: {why}")


def check_import_id(value: str, path: Path, line_no: int, what: str) -> str:
    """An id read from a BEIR file, or a one-line error when it holds a tab or newline (which
    neither a BEIR qrels file nor a TREC file can carry)."""
    if any(c in value for c in "\t\n\r"):
        raise InputDataError(
            f"'{path}' line {line_no}: {what} {value!r} holds a tab or newline, which qrels "
            "and TREC files cannot carry; give ids without them"
        )
    return value


def read_jsonl(path: Path, keys: Sequence[str], counts: ReadCounts) -> list[dict[str, str]]:
    """The records of a BEIR JSONL file that have a string ``_id`` and ``keys`` (strings or
    missing: empty); malformed lines are counted, not kept. A leading UTF-8 byte-order mark
    is read as none; an id holding a tab or newline is a one-line error."""
    out: list[dict[str, str]] = []
    name = path.name
    with path.open(encoding="utf-8-sig") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                counts.refuse(name, n, f"not JSON ({exc.msg})")
                continue
            if not isinstance(rec, dict) or rec.get("_id") in (None, ""):
                counts.refuse(name, n, "no _id")
                continue
            values = {k: rec.get(k) or "" for k in keys}
            if not all(isinstance(v, str) for v in values.values()):
                counts.refuse(name, n, f"{', '.join(keys)} must be strings")
                continue
            out.append({"_id": check_import_id(str(rec["_id"]), path, n, "_id"), **values})
    counts.read[name] = len(out)
    return out


def _is_int(value: str) -> bool:
    try:
        int(value)
    except ValueError:
        return False
    return True


def read_qrels_tsv(path: Path, counts: ReadCounts) -> list[tuple[str, str, int]]:
    """A BEIR qrels file: query-id, corpus-id, integer score per line. The first line is a
    header when its score is not an integer (BEIR writes ``query-id corpus-id score``), else
    the first judgment. A leading UTF-8 byte-order mark is read as none. A (query, document)
    pair judged twice, or an id holding a tab or newline, is a one-line error naming the
    line."""
    import csv

    name = f"qrels/{path.name}"
    out: list[tuple[str, str, int]] = []
    first_line: dict[tuple[str, str], int] = {}
    with path.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL)
        seen_row = False
        for row in reader:
            n = reader.line_num
            if not row or not any(c.strip() for c in row):
                continue
            if not seen_row:
                seen_row = True
                if len(row) >= 3 and not _is_int(row[2]):
                    continue  # the header
            if len(row) < 3:
                counts.refuse(name, n, "fewer than 3 columns")
                continue
            if not _is_int(row[2]):
                counts.refuse(name, n, f"score {row[2]!r} is not an integer")
                continue
            qid = check_import_id(row[0], path, n, "query-id")
            did = check_import_id(row[1], path, n, "corpus-id")
            before = first_line.setdefault((qid, did), n)
            if before != n:
                raise InputDataError(
                    f"'{path}' line {n}: query '{qid}' and document '{did}' are judged again "
                    f"(first on line {before}); keep one line per pair"
                )
            out.append((qid, did, int(row[2])))
    counts.read[name] = len(out)
    return out


def qrels_splits(folder: Path) -> list[str]:
    """The splits a BEIR folder has qrels for (``qrels/<split>.tsv``)."""
    return sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))


def check_beir_folder(folder: Path) -> None:
    """A one-line error unless ``folder`` holds corpus.jsonl, queries.jsonl and qrels."""
    missing = [n for n in (CORPUS, QUERIES) if not (folder / n).is_file()]
    if not (folder / "qrels").is_dir() or not qrels_splits(folder):
        missing.append("qrels/<split>.tsv")
    if missing:
        raise InputDataError(
            f"'{folder}' is not a BEIR folder: no {', '.join(missing)}; give a folder with "
            "corpus.jsonl, queries.jsonl and qrels/<split>.tsv (as BEIR's datasets unpack)"
        )
