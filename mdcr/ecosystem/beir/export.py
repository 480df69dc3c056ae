"""``mdcr export --format beir``: a pools output or an MDCR benchmark as BEIR folders.

- Pools: one folder per pool (its id with every character but letters, digits, ``-`` and
  ``.`` made ``_``): the pool's papers as the corpus, its queries (the query papers' text),
  and its qrels under the pool's split.
- MDCR: one folder per field, its splits side by side: every candidate of the field as
  the corpus, the queries, qrels judging every candidate (1: in the ``true`` list, else 0,
  as the original scorer builds them, so a query with an empty list scores 0 and is not
  dropped) and ``top_ranked/<split>.jsonl``, each query's candidates: MDCR ranks only
  those, and MTEB's retrieval tasks rerank exactly such lists.

Text: by default a corpus row is the paper's title and abstract and a query the two joined
by a space (:func:`paper_text`, MTEB's own join), which is how ``mdcr.evaluate`` feeds an
MTEB model. With ``encoder`` (``--encoder SPEC``) each corpus row and query carries that
encoder's own input instead (:func:`encoder_text`): for mdcr's transformer encoders,
whose default ``input_format`` is ``sep``, ``title + sep_token + abstract`` (``[SEP]``
for BERT-style tokenizers) in ``text`` with an empty title, so that MTEB tokenizes what
mdcr tokenized and its numbers equal mdcr's for that encoder. The model's prompts are not
written: MTEB applies a model's own.

``mdcr-export.json`` at the top names each folder with what it holds (pool id or field,
splits, counts) and how mdcr scores it (depth, R@k, whether a query is left out of its own
ranking), which :mod:`mdcr.mteb` turns into the task's settings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mdcr.core.errors import ConfigError
from mdcr.ecosystem.beir.layout import BeirFolder, paper_text, write_folder
from mdcr.exports.registry import EXPORTS, Export, ExportRequest

# (title, abstract) -> (corpus title, corpus text, query text)
TextFormat = Callable[[str, str], tuple[str, str, str]]


def _mteb_text(title: str, abstract: str) -> tuple[str, str, str]:
    return title, abstract, paper_text(title, abstract)


def encoder_text(spec: str) -> tuple[TextFormat, dict[str, Any]]:
    """The text format of encoder ``spec`` (its ``input_format`` and separator) and how the
    export records it; a one-line error for an encoder with no single input string."""
    from mdcr.encoders.registry import build_encoder

    enc = build_encoder(spec)
    fmt = getattr(enc, "input_format", None)
    tokenizer = getattr(getattr(enc, "runner", None), "tokenizer", None)
    if fmt not in ("sep", "space") or tokenizer is None:
        why = "encodes title and abstract as a pair" if fmt == "pair" else "reads no one string"
        raise ConfigError(
            f"export --encoder: '{spec}' {why}, which MTEB cannot feed a model; give a "
            "transformer encoder with input_format sep or space, or leave --encoder out"
        )
    sep = str(tokenizer.sep_token) if fmt == "sep" else " "

    def text(title: str, abstract: str) -> tuple[str, str, str]:
        joined = (title or "") + sep + (abstract or "")
        return "", joined, joined

    return text, {"encoder": spec, "input_format": fmt, "separator": sep}


def _export_index(kind: str, source: Path, encoder: str | None) -> tuple[Any, dict[str, Any]]:
    """The text format an export writes (:func:`_text_format`) and the start of its
    ``mdcr-export.json``: kind, source, text, and the folders to come."""
    fmt, text_format = _text_format(encoder)
    return fmt, {"kind": kind, "source": str(source.resolve()), "text": text_format, "folders": {}}


def _text_format(encoder: str | None) -> tuple[TextFormat, dict[str, Any]]:
    if not encoder:
        return _mteb_text, {"encoder": None, "input_format": "space", "separator": " "}
    return encoder_text(encoder)


def _rows(
    fmt: TextFormat, doc_ids: list[str], docs: Any, query_ids: list[str], queries: Any
) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """Corpus rows (id, title, text) and query rows (id, text) in the export's format."""
    corpus = []
    for i, t, a in zip(doc_ids, docs["title"].fillna(""), docs["abstract"].fillna(""), strict=True):
        title, text, _ = fmt(str(t), str(a))
        corpus.append((i, title, text))
    rows = zip(query_ids, queries["title"].fillna(""), queries["abstract"].fillna(""), strict=True)
    return corpus, [(q, fmt(str(t), str(a))[2]) for q, t, a in rows]


INDEX = "mdcr-export.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9.\-]+")


def folder_name(key: str) -> str:
    """A pool id or field as a folder name."""
    return _UNSAFE.sub("_", key).strip("_") or "_"


def _unique_names(keys: list[str]) -> dict[str, str]:
    names = {k: folder_name(k) for k in keys}
    seen: dict[str, str] = {}
    for k, n in names.items():
        if n in seen:
            raise ConfigError(
                f"export: '{seen[n]}' and '{k}' would share the folder '{n}'; rename one"
            )
        seen[n] = k
    return names


def _write_index(out: Path, payload: dict[str, Any]) -> Path:
    from mdcr.core.atomic import atomic_path

    path = out / INDEX
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    return path


def export_pools(
    pools: Path, out: Path, depth: int, recall_k: int, encoder: str | None = None
) -> list[Path]:
    """Write every pool of a pools output as a BEIR folder under ``out``; return them."""
    from mdcr.contracts.artifacts import PAPERS, POOL_META, POOLS, QRELS
    from mdcr.contracts.outputs import input_paths
    from mdcr.contracts.paper import DEPTH

    corpus_dirs = input_paths(pools, "corpus")
    papers_dir = corpus_dirs[0] if corpus_dirs else pools
    papers = PAPERS.read_pandas(papers_dir, columns=["paper_id", "title", "abstract"])
    papers = papers.astype({"paper_id": str}).set_index("paper_id")
    meta = POOL_META.read_pandas(pools).astype({"pool_id": str})
    members = POOLS.read_pandas(pools).astype({"pool_id": str, "paper_id": str})
    qrels = QRELS.read_pandas(pools).astype({"pool_id": str, "query_id": str, "paper_id": str})
    names = _unique_names(sorted(meta["pool_id"]))
    fmt, index = _export_index("pools", pools, encoder)
    written = []
    by_pool = dict(tuple(members.groupby("pool_id", sort=True)))
    qrels_by_pool = dict(tuple(qrels.groupby("pool_id", sort=True)))
    for row in meta.sort_values("pool_id").itertuples(index=False):
        pool_id = str(row.pool_id)
        ids = sorted(set(by_pool[pool_id]["paper_id"])) if pool_id in by_pool else []
        q = qrels_by_pool.get(pool_id)
        if q is None or q.empty:
            continue
        q = q.sort_values(["query_id", "paper_id"])
        query_ids = sorted(set(q["query_id"]))
        corpus, query_rows = _rows(fmt, ids, papers.loc[ids], query_ids, papers.loc[query_ids])
        data = BeirFolder(
            corpus=corpus,
            queries=query_rows,
            qrels={
                str(row.split): list(
                    zip(q["query_id"], q["paper_id"], q["relevance"].astype(int), strict=True)
                )
            },
        )
        folder = out / names[pool_id]
        write_folder(folder, data, f"mdcr pool {pool_id}")
        written.append(folder)
        index["folders"][names[pool_id]] = {
            "pool_id": pool_id,
            "setup": str(row.setup),
            "field": None if row.field is None else str(row.field),
            "splits": [str(row.split)],
            "counts": data.counts(),
            "depth": int(depth or DEPTH),
            "recall_k": int(recall_k),
            "query_left_out_of_its_ranking": True,
        }
    _write_index(out, index)
    return written


def export_benchmark(benchmark: Path, out: Path, encoder: str | None = None) -> list[Path]:
    """Write an MDCR benchmark as one BEIR folder per field under ``out``; return them."""
    from mdcr.benchmark.formats import POSITIVE, read_benchmark
    from mdcr.contracts.artifacts import PAPERS
    from mdcr.contracts.paper import MDCR_RECALL_K

    bench = read_benchmark(benchmark).astype({"field": str, "query_id": str, "paper_id": str})
    papers = PAPERS.read_pandas(benchmark, columns=["paper_id", "title", "abstract"])
    papers = papers.astype({"paper_id": str}).set_index("paper_id")
    names = _unique_names(sorted(set(bench["field"])))
    fmt, index = _export_index("mdcr", benchmark, encoder)
    written = []
    for field_name, b in bench.groupby("field", sort=True):
        b = b.sort_values(["split", "query_id", "paper_id"], kind="stable")
        ids = sorted(set(b["paper_id"]))
        query_ids = sorted(set(b["query_id"]))
        qrels: dict[str, list[tuple[str, str, int]]] = {}
        top: dict[str, dict[str, list[str]]] = {}
        for split, s in b.groupby("split", sort=True):
            # a candidate listed under two types counts once; a positive stays positive
            s = s.assign(rel=(s["candidate_type"] == POSITIVE).astype(int))
            judged = s.groupby(["query_id", "paper_id"], sort=True)["rel"].max().reset_index()
            qrels[str(split)] = list(
                zip(judged["query_id"], judged["paper_id"], judged["rel"], strict=True)
            )
            top[str(split)] = {
                str(qid): list(dict.fromkeys(g["paper_id"]))
                for qid, g in s.groupby("query_id", sort=True)
            }
        corpus, query_rows = _rows(
            fmt, ids, papers.reindex(ids), query_ids, papers.reindex(query_ids)
        )
        data = BeirFolder(
            corpus=corpus,
            queries=query_rows,
            qrels=qrels,
            top_ranked=top,
        )
        name = names[str(field_name)]
        write_folder(out / name, data, f"MDCR, field {field_name}")
        written.append(out / name)
        index["folders"][name] = {
            "field": str(field_name),
            "splits": sorted(qrels),
            "counts": data.counts(),
            "depth": 0,  # every candidate is ranked
            "recall_k": MDCR_RECALL_K,
            "query_left_out_of_its_ranking": False,
        }
    _write_index(out, index)
    return written


def read_index(out: Path) -> dict[str, Any]:
    """The ``mdcr-export.json`` of an export, or a one-line error."""
    path = out / INDEX
    if not path.is_file():
        raise ConfigError(
            f"'{out}' has no {INDEX}; give a folder written by mdcr export --format beir"
        )
    return dict(json.loads(path.read_text()))


def _lines(out: Path, folders: list[Path]) -> list[str]:
    return [*map(str, folders), f"{out / INDEX}: {len(folders)} folder(s)"]


def export_beir_pools(request: ExportRequest) -> list[str]:
    """``mdcr export --format beir --pools POOLS``: one BEIR folder per pool."""
    from mdcr.contracts.paper import DEPTH, RECALL_K

    assert request.qrels is not None
    folders = export_pools(request.qrels, request.out, DEPTH, RECALL_K, encoder=request.encoder)
    return _lines(request.out, folders)


def export_beir_benchmark(request: ExportRequest) -> list[str]:
    """``mdcr export --format beir --benchmark BENCHMARK``: one BEIR folder per field."""
    assert request.qrels is not None
    folders = export_benchmark(request.qrels, request.out, encoder=request.encoder)
    return _lines(request.out, folders)


EXPORTS.register(
    Export(
        format="beir",
        kind="pools",
        write=export_beir_pools,
        help="a pools output as one BEIR folder per pool (MTEB reads them too)",
        usage="--pools POOLS (a pools or beir-import output), and no --run",
        writes="the BEIR folders",
        run="refused",
        qrels="required",
        options=frozenset({"encoder"}),
    )
)
EXPORTS.register(
    Export(
        format="beir",
        kind="benchmark",
        write=export_beir_benchmark,
        help="an MDCR benchmark as one BEIR folder per field",
        usage="--benchmark BENCHMARK (a benchmark or benchmark-import output), and no --run",
        writes="the BEIR folders",
        run="refused",
        qrels="required",
        options=frozenset({"encoder"}),
    )
)
