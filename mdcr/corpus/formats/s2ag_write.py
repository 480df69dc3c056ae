"""Writing S2ORC-style records in the S2AG layout (papers/, abstracts/, citations/).

Used by ``mdcr synth --format s2ag`` and to rewrite an S2ORC folder (such as the real
sample) as an S2AG release. One S2ORC record becomes a ``papers`` record (with
``s2fieldsofstudy`` entries of source "external" for its MAG fields), an ``abstracts``
record when it has an abstract, and one ``citations`` edge per outbound id (and, with
``inbound``, per inbound id). The prefilter reads both layouts of one corpus to identical
outputs (tested), ids without a record of their own included.
"""

from __future__ import annotations

import contextlib
import gzip
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mdcr.core.atomic import atomic_path
from mdcr.corpus import jsonl

DATASET_NAMES = ("papers", "abstracts", "citations")


def corpus_id(pid: str) -> int | str:
    """An S2AG corpusid: the number when the id is a string of digits, else the string."""
    return int(pid) if pid.isdigit() and (pid == "0" or pid[0] != "0") else pid


def paper_record(rec: dict[str, Any], extra_fields: Iterable[dict[str, str]] = ()) -> dict:
    """The ``papers`` record of an S2ORC record (``extra_fields``: more s2fieldsofstudy
    entries, e.g. of source "s2-fos-model")."""
    cid = corpus_id(rec["paper_id"])
    mag = rec.get("mag_field_of_study")
    fos = [{"category": f, "source": "external"} for f in mag or []] + list(extra_fields)
    return {
        "corpusid": cid,
        "externalids": {
            "MAG": rec.get("mag_id"),
            "DOI": rec.get("doi"),
            "ArXiv": rec.get("arxiv_id"),
            "PubMed": rec.get("pubmed_id"),
            "PubMedCentral": rec.get("pmc_id"),
            "ACL": rec.get("acl_id"),
            "CorpusId": str(cid),
        },
        "url": f"https://www.semanticscholar.org/paper/{cid}",
        "title": rec.get("title"),
        "authors": [
            {"authorId": None, "name": " ".join(filter(None, [a.get("first"), a.get("last")]))}
            for a in rec.get("authors") or []
        ],
        "venue": rec.get("venue") or "",
        "year": rec.get("year"),
        "referencecount": len(rec.get("outbound_citations") or []),
        "citationcount": len(rec.get("inbound_citations") or []),
        "isopenaccess": False,
        "s2fieldsofstudy": fos or None,
        "publicationtypes": None,
        "publicationdate": None,
        "journal": {"name": rec["journal"]} if rec.get("journal") else None,
    }


def abstract_record(rec: dict[str, Any]) -> dict | None:
    """The ``abstracts`` record of an S2ORC record, or None when it has no abstract."""
    if rec.get("abstract") is None:
        return None
    return {
        "corpusid": corpus_id(rec["paper_id"]),
        "openaccessinfo": {"externalids": {}, "license": None, "url": None, "status": None},
        "abstract": rec["abstract"],
    }


def edge_record(citing: int | str | None, cited: int | str | None) -> dict:
    """One ``citations`` record."""
    return {
        "citingcorpusid": citing,
        "citedcorpusid": cited,
        "isinfluential": False,
        "contexts": None,
        "intents": None,
    }


class S2agWriter:
    """Gzipped JSONL files of the three datasets, ``n_shards`` each, written atomically.

    ``write(dataset, shard, lines)`` appends encoded JSON lines; ``rows`` counts them
    per file name (relative to the output folder).
    """

    def __init__(self, stack: contextlib.ExitStack, out_dir: Path, n_shards: int) -> None:
        self.files: dict[str, list[Any]] = {}
        self.rows: dict[str, int] = {}
        for name in DATASET_NAMES:
            (out_dir / name).mkdir(parents=True, exist_ok=True)
            writers = []
            for s in range(n_shards):
                rel = f"{name}/{name}-{s}.jsonl.gz"
                tmp = stack.enter_context(atomic_path(out_dir / rel))
                raw = stack.enter_context(tmp.open("wb"))
                writers.append(
                    stack.enter_context(
                        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=1, mtime=0)
                    )
                )
                self.rows[rel] = 0
            self.files[name] = writers

    def write(self, dataset: str, shard: int, lines: list[bytes]) -> None:
        if lines:
            self.files[dataset][shard].write(b"\n".join(lines) + b"\n")
            self.rows[f"{dataset}/{dataset}-{shard}.jsonl.gz"] += len(lines)


def rewrite_s2orc(
    shards: Iterable[Path],
    out_dir: Path,
    *,
    n_shards: int = 1,
    inbound: bool = True,
    stubs: bool = False,
) -> dict[str, int]:
    """Rewrite S2ORC metadata shards as an S2AG release in ``out_dir``; return rows per file.

    Edges come from the outbound lists and, with ``inbound``, the inbound lists (the
    prefilter counts a repeat once), every listed id included: the ids a sample cites
    mostly have no record in it, as in a release downloaded in part. With ``stubs`` each
    such id also gets a bare ``papers`` record (failing the rules), as in a complete
    release. The prefilter counts citations the same either way.
    """
    records: list[dict[str, Any]] = []
    for path in shards:
        for _, line in jsonl.iter_lines(Path(path)):
            if isinstance(line, bytes):
                records.append(json.loads(line))
    known = {r["paper_id"] for r in records}
    out_dir = Path(out_dir)
    with contextlib.ExitStack() as stack:
        writer = S2agWriter(stack, out_dir, n_shards)
        outside: dict[str, None] = {}
        for i, rec in enumerate(records):
            shard = i % n_shards
            pid = rec["paper_id"]
            writer.write("papers", shard, [json.dumps(paper_record(rec)).encode()])
            if (abstract := abstract_record(rec)) is not None:
                writer.write("abstracts", shard, [json.dumps(abstract).encode()])
            pairs = [(pid, q) for q in rec.get("outbound_citations") or []]
            if inbound:
                pairs += [(q, pid) for q in rec.get("inbound_citations") or []]
            edges = [json.dumps(edge_record(corpus_id(a), corpus_id(b))).encode() for a, b in pairs]
            writer.write("citations", shard, edges)
            for a, b in pairs:
                for q in (a, b):
                    if q not in known:
                        outside[q] = None
        if stubs:
            bare = [{"corpusid": corpus_id(q), "title": None, "year": None} for q in outside]
            writer.write("papers", n_shards - 1, [json.dumps(r).encode() for r in bare])
    return dict(writer.rows)
