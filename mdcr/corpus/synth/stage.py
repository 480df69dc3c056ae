"""A synthetic S2ORC corpus: metadata shards in the real schema, or the prefiltered tables.

Why: the pipeline must be testable and benchmarkable without the 100 GB S2ORC release.
The generator mimics what matters for citation-recommendation pools:

- the S2ORC metadata schema (release v2020-07-05), key for key and JSON type for type;
- the 19 MAG fields with S2ORC's skew, papers with two fields and papers with none;
- publication years growing about 6% a year up to 2020, so 2019 (the query year) is dense;
- topical text from real English domain words (see :mod:`mdcr.corpus.synth.text`), so that
  BM25 and neural encoders both find a paper's references far above chance;
- a citation graph that respects years (a paper cites only older papers, or papers of its
  own year), is local (niche, then topic, then field, then anywhere) and heavy-tailed
  (Pareto attractiveness, like preferential attachment);
- records that fail each prefilter rule (null year, empty title, missing or short
  abstract, fewer than three citations), in S2ORC-like shares.

How it stays fast and bounded in memory: papers are numbered in year order, so "older or
same year" becomes "smaller index", and the graph is a DAG (no mutual citations, so the
distinct citation count of a paper is n_in + n_out). For each locality level the papers
sit in an urn (each paper repeated by its integer attractiveness), sorted by (group,
index); the eligible targets of paper i are a contiguous slice of that urn, so sampling
an edge is one random integer and one array lookup, vectorized with numpy. Edges are
generated chunk by chunk of citing papers; raw mode spills them to disk in buckets by
cited chunk so that inbound lists can be written later, chunk by chunk.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import random
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from mdcr.contracts.paper import QUERY_YEAR
from mdcr.core.atomic import atomic_path
from mdcr.core.errors import ConfigError
from mdcr.core.stage import STAGES, PlanFacts, StageContext, StagePlan, StageSpec, Work
from mdcr.corpus.formats.s2ag_write import (
    S2agWriter,
    abstract_record,
    corpus_id,
    edge_record,
    paper_record,
)
from mdcr.corpus.synth import text as st
from mdcr.corpus.synth.config import SynthConfig, make_config
from mdcr.corpus.synth.graph import CHUNK, Latent, edge_chunks, latent_corpus, py_rng_for, rng_for

# Defaults of write_tables (post-prefilter form): every paper has at least 3 references.
TABLES_MIN_REFS = 3
TABLES_REFS_RECENT = 27.0


_ARXIV_FIELDS = frozenset({"Physics", "Mathematics", "Computer Science"})
_PUBMED_FIELDS = frozenset({"Medicine", "Biology", "Psychology"})
_ARXIV_OLD = ("hep-th", "hep-ph", "cond-mat", "math", "astro-ph", "quant-ph", "cs")
_JOURNAL_FORMS = (
    "Journal of {topic}",
    "International Journal of {topic}",
    "{field} Research",
    "Annals of {field}",
    "{topic} Letters",
    "Frontiers in {topic}",
    "Advances in {field}",
)


def _authors(rnd: random.Random) -> list[dict[str, Any]]:
    if rnd.random() < 0.004:
        return []
    k = min(25, 1 + int(rnd.expovariate(1 / 1.8)))
    out = []
    for _ in range(k):
        middle = [rnd.choice("ABCDEFGHJKLMNPRSTW") + "."] if rnd.random() < 0.1 else []
        out.append(
            {
                "first": rnd.choice(st.FIRST_NAMES),
                "middle": middle,
                "last": rnd.choice(st.LAST_NAMES),
                "suffix": "",
            }
        )
    return out


def _arxiv_id(rnd: random.Random, year: int) -> str:
    yy, mm = year % 100, rnd.randint(1, 12)
    if year >= 2015:
        return f"{yy:02d}{mm:02d}.{rnd.randint(1, 99999):05d}"
    if year >= 2007:
        return f"{yy:02d}{mm:02d}.{rnd.randint(1, 9999):04d}"
    return f"{rnd.choice(_ARXIV_OLD)}/{yy:02d}{mm:02d}{rnd.randint(1, 999):03d}"


def _record(
    rnd: random.Random,
    pid: str,
    title: str,
    abstract: str | None,
    year: int | None,
    latent_year: int,
    field: str,
    topic_name: str,
    mag_fields: list[str] | None,
    outbound: list[str],
    inbound: list[str],
) -> dict[str, Any]:
    """One metadata record, keys in S2ORC's order (with the PDF-parse keys when parsed)."""
    rand = rnd.random
    arxiv = pubmed = pmc = journal = venue = doi = mag_id = None
    if field in _ARXIV_FIELDS and latent_year >= 1992 and rand() < 0.3:
        arxiv = _arxiv_id(rnd, latent_year)
    if field in _PUBMED_FIELDS and rand() < 0.35:
        pubmed = str(rnd.randint(1_000_000, 33_000_000))
        if latent_year >= 2000 and rand() < 0.3:
            pmc = f"PMC{rnd.randint(1_000_000, 7_500_000)}"
    if rand() < 0.7:
        journal = rnd.choice(_JOURNAL_FORMS).format(topic=topic_name, field=field)
    if rand() < 0.25:
        venue = journal if journal is not None and rand() < 0.5 else f"{topic_name} Conference"
    if rand() < 0.6:
        doi = f"10.{rnd.randint(1000, 9999)}/{latent_year}.{rnd.randint(1, 999_999)}"
    if mag_fields is not None and rand() < 0.98:
        mag_id = str(rnd.randint(1_000_000_000, 3_100_000_000))
    parsed = rand() < (0.55 if outbound else 0.05)
    rec: dict[str, Any] = {
        "paper_id": pid,
        "title": title,
        "authors": _authors(rnd),
        "abstract": abstract,
        "year": year,
        "arxiv_id": arxiv,
        "acl_id": None,
        "pmc_id": pmc,
        "pubmed_id": pubmed,
        "doi": doi,
        "venue": venue,
        "journal": journal,
    }
    if parsed:
        rec["has_pdf_body_text"] = rand() < 0.95
    rec["mag_id"] = mag_id
    rec["mag_field_of_study"] = mag_fields
    rec["outbound_citations"] = outbound
    rec["inbound_citations"] = inbound
    rec["has_outbound_citations"] = bool(outbound)
    rec["has_inbound_citations"] = bool(inbound)
    rec["has_pdf_parse"] = parsed
    if parsed:
        rec["has_pdf_parsed_abstract"] = abstract is not None and rand() < 0.9
        rec["has_pdf_parsed_body_text"] = rec["has_pdf_body_text"]
        rec["has_pdf_parsed_bib_entries"] = bool(outbound) or rand() < 0.5
        rec["has_pdf_parsed_ref_entries"] = rand() < 0.9
    rec["s2_url"] = f"https://api.semanticscholar.org/CorpusID:{pid}"
    return rec


def _n_sentences(cfg: SynthConfig, rng: np.random.Generator, size: int) -> np.ndarray:
    n = np.rint(rng.lognormal(np.log(cfg.abstract_sentences), 0.5, size))
    return np.clip(n, 2, 40).astype(np.int64)


def _ids_as_str(pid: np.ndarray) -> list[str]:
    return [str(x) for x in pid.tolist()]


N_CITED_MENTIONS = 6  # cited papers whose names and key phrases a text may mention


def _render_texts(
    gen: st.TextGenerator,
    lat: Latent,
    a: int,
    b: int,
    out_cited: np.ndarray,
    out_off: np.ndarray,
    rnd: random.Random,
    n_sent: list[int],
    with_abstract: np.ndarray,
) -> list[tuple[str, str]]:
    """(title, abstract) of papers a..b-1; each may mention a few of the papers it cites."""
    c_topic = lat.topic[out_cited].tolist()
    c_niche = lat.niche[out_cited].tolist()
    c_sig = lat.sig[out_cited].tolist()
    topic = lat.topic[a:b].tolist()
    niche = lat.niche[a:b].tolist()
    sig = lat.sig[a:b].tolist()
    field2 = lat.field2[a:b].tolist()
    offs = out_off.tolist()
    wa = with_abstract.tolist()
    out = []
    for j in range(b - a):
        lo, hi = offs[j], offs[j + 1]
        picks = rnd.sample(range(lo, hi), min(N_CITED_MENTIONS, hi - lo)) if hi > lo else []
        cited = tuple((c_topic[k], c_niche[k], c_sig[k]) for k in picks)
        f2 = field2[j]
        out.append(
            gen.render(
                rnd,
                topic[j],
                st.FIELDS[f2] if f2 >= 0 else None,
                niche[j],
                n_sent[j],
                sig=sig[j],
                cited=cited,
                with_abstract=wa[j],
            )
        )
    return out


# --------------------------------------------------------------------------- raw shards


def _spill_inbound(tmp: Path, citing: np.ndarray, cited: np.ndarray) -> None:
    """Append (cited, citing) pairs to per-cited-chunk bucket files."""
    order = np.argsort(cited, kind="stable")
    cd, ct = cited[order], citing[order]
    buckets = cd // CHUNK
    bounds = np.flatnonzero(np.diff(buckets)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, cd.size], strict=True):
        if hi <= lo:
            continue
        pairs = np.stack([cd[lo:hi], ct[lo:hi]], axis=1).astype(np.int32)
        with (tmp / f"in_{int(buckets[lo])}.bin").open("ab") as f:
            f.write(pairs.tobytes())


def _load_inbound(tmp: Path, c: int, a: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Citing papers of the chunk's papers, sorted by (cited, citing), and per-paper counts."""
    path = tmp / f"in_{c}.bin"
    if not path.exists():
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    pairs = np.fromfile(path, dtype=np.int32).reshape(-1, 2).astype(np.int64)
    keys = np.sort(pairs[:, 0] * n + pairs[:, 1])
    return keys // n - a, keys % n


def _prefilter_pass(lat: Latent, n_in: np.ndarray, n_out: np.ndarray) -> np.ndarray:
    return (
        ~lat.year_null
        & ~lat.title_empty
        & (lat.abstract_kind == 0)
        & (n_in.astype(np.int64) + n_out >= 3)
    )


def _summary(
    cfg: SynthConfig, lat: Latent, n_in: np.ndarray, n_out: np.ndarray, mode: str
) -> dict[str, Any]:
    n = lat.n
    total = n_in.astype(np.int64) + n_out
    passes = _prefilter_pass(lat, n_in, n_out)
    out_year = np.where(lat.year_null, -1, lat.year)
    years, ycounts = np.unique(out_year, return_counts=True)
    per_year = {
        ("null" if y < 0 else str(int(y))): int(c) for y, c in zip(years, ycounts, strict=True)
    }
    per_field: dict[str, int] = {}
    labelled = ~lat.no_field
    for fi, name in enumerate(st.FIELDS):
        cnt = int(np.sum(labelled & ((lat.field == fi) | (lat.field2 == fi))))
        per_field[name] = cnt
    per_field["null"] = int(np.sum(lat.no_field))
    is_q = ~lat.year_null & (lat.year == QUERY_YEAR)
    n_edges = int(n_out.sum())
    in_pct = np.percentile(n_in, [50, 90, 99]).tolist() if n else [0, 0, 0]
    return {
        "mode": mode,
        "n_papers": n,
        "n_edges": n_edges,
        "papers_per_year": per_year,
        "papers_per_field": dict(sorted(per_field.items(), key=lambda kv: -kv[1])),
        "two_field_share": round(float(np.mean(labelled & (lat.field2 >= 0))), 4),
        "failure_shares": {
            "null_year": round(float(np.mean(lat.year_null)), 4),
            "empty_title": round(float(np.mean(lat.title_empty)), 4),
            "null_abstract": round(float(np.mean(lat.abstract_kind == 1)), 4),
            "short_abstract": round(float(np.mean(lat.abstract_kind == 2)), 4),
            "abstract_under_30": round(float(np.mean(lat.abstract_kind != 0)), 4),
            "under_3_citations": round(float(np.mean(total < 3)), 4),
        },
        "prefilter_pass_share": round(float(np.mean(passes)), 4),
        "n_prefiltered": int(passes.sum()),
        "edges": {
            "mean_out": round(n_edges / n, 3),
            "mean_out_2019": round(float(n_out[is_q].mean()) if is_q.any() else 0.0, 3),
            "share_without_out": round(float(np.mean(n_out == 0)), 4),
            "share_without_in": round(float(np.mean(n_in == 0)), 4),
            "in_degree_p50_p90_p99": [float(x) for x in in_pct],
            "in_degree_max": int(n_in.max()) if n else 0,
        },
    }


# S2 taxonomy categories beyond MAG's 19, given by the S2 model to a few papers.
S2_ONLY_FIELDS = ("Education", "Agricultural and Food Sciences", "Law", "Linguistics")


def _write_s2ag(
    writer: S2agWriter, shard: int, rec: dict[str, Any], field: str, rnd: random.Random
) -> None:
    """One S2ORC-style record in the S2AG layout, with what a real release adds.

    s2-fos-model labels (usually repeating the MAG field, sometimes for a paper without
    MAG fields, sometimes an S2-only category), unresolved references (a null cited id),
    and some ids written as strings. With the default field source (external) and
    resolved edges only, the prefilter reads the same corpus as from the S2ORC layout.
    """
    extra = []
    if rec["mag_field_of_study"] is not None and rnd.random() < 0.9:
        extra.append({"category": rec["mag_field_of_study"][0], "source": "s2-fos-model"})
    elif rec["mag_field_of_study"] is None and rnd.random() < 0.5:
        extra.append({"category": field, "source": "s2-fos-model"})
    if rnd.random() < 0.05:
        extra.append({"category": rnd.choice(S2_ONLY_FIELDS), "source": "s2-fos-model"})
    writer.write("papers", shard, [json.dumps(paper_record(rec, extra)).encode()])
    if (abstract := abstract_record(rec)) is not None:
        writer.write("abstracts", shard, [json.dumps(abstract).encode()])
    citing = corpus_id(rec["paper_id"])
    edges = []
    for q in rec["outbound_citations"]:
        cited = corpus_id(q)
        edges.append(edge_record(citing, str(cited) if rnd.random() < 0.05 else cited))
    if rnd.random() < 0.1:
        edges.append(edge_record(citing, None))
    writer.write("citations", shard, [json.dumps(e).encode() for e in edges])


def _open_shards(stack: contextlib.ExitStack, out_dir: Path, n_shards: int) -> list[Any]:
    writers = []
    for s in range(n_shards):
        tmp = stack.enter_context(atomic_path(out_dir / f"metadata_{s}.jsonl.gz"))
        raw = stack.enter_context(tmp.open("wb"))
        writers.append(
            stack.enter_context(
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=1, mtime=0)
            )
        )
    return writers


def _write_shards(
    out_dir: Path, cfg: SynthConfig, log: Callable[[str], None] = lambda _m: None
) -> dict[str, Any]:
    """The synthetic release in ``out_dir`` (S2ORC shards or an S2AG release) in two
    passes: the citation graph, spilled to disk, then the records chunk by chunk."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lat = latent_corpus(cfg, min_refs=0)
    n = lat.n
    n_in = np.zeros(n, dtype=np.int64)
    n_out = np.zeros(n, dtype=np.int64)
    gen = st.TextGenerator()
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".synth-edges-") as tmp_name:
        tmp = Path(tmp_name)
        # Pass 1: the citation graph, spilled to disk by citing chunk and by cited chunk.
        for a, b, citing, cited in edge_chunks(cfg, lat, min_out=0):
            n_out[a:b] = np.bincount(citing - a, minlength=b - a)
            n_in += np.bincount(cited, minlength=n)
            np.save(tmp / f"out_{a // CHUNK}.npy", cited.astype(np.int32))
            _spill_inbound(tmp, citing, cited)
        log(f"synth: {int(n_out.sum()):,} citation edges among {n:,} papers")
        passes = _prefilter_pass(lat, n_in, n_out)
        summary = _summary(cfg, lat, n_in, n_out, "raw")
        rows = [0] * cfg.n_shards
        pf_refs_2019 = 0
        with contextlib.ExitStack() as stack:
            s2ag = S2agWriter(stack, out_dir, cfg.n_shards) if cfg.format == "s2ag" else None
            writers = _open_shards(stack, out_dir, cfg.n_shards) if s2ag is None else []
            # Pass 2: records, chunk by chunk, shard = index mod n_shards.
            for c, a in enumerate(range(0, n, CHUNK)):
                b = min(n, a + CHUNK)
                out_cited = np.load(tmp / f"out_{c}.npy").astype(np.int64)
                q = passes[a:b] & (lat.year[a:b] == QUERY_YEAR)
                if q.any():
                    owner = np.repeat(np.arange(b - a), n_out[a:b])
                    pf_refs_2019 += int(np.sum(q[owner] & passes[out_cited]))
                s2ag_rnd = py_rng_for(cfg.seed, "s2ag", c)
                lines: list[list[bytes]] = [[] for _ in range(cfg.n_shards)]
                for j, rec, field in _chunk_records(
                    cfg, lat, gen, tmp, c, a, b, out_cited, n_in, n_out
                ):
                    if s2ag is not None:
                        _write_s2ag(s2ag, (a + j) % cfg.n_shards, rec, field, s2ag_rnd)
                    else:
                        lines[(a + j) % cfg.n_shards].append(json.dumps(rec).encode())
                for k, ls in enumerate(lines):
                    if ls:
                        writers[k].write(b"\n".join(ls) + b"\n")
                        rows[k] += len(ls)
                if c % 20 == 19 or b == n:
                    log(f"synth: wrote {b:,} of {n:,} records")
    n_pf_2019 = int(np.sum(passes & (lat.year == QUERY_YEAR) & ~lat.year_null))
    summary["prefiltered_2019"] = n_pf_2019
    summary["mean_prefiltered_refs_per_prefiltered_2019"] = round(
        pf_refs_2019 / n_pf_2019 if n_pf_2019 else 0.0, 3
    )
    if s2ag is not None:
        summary["shards"] = dict(s2ag.rows)
    else:
        summary["shards"] = {f"metadata_{s}.jsonl.gz": rows[s] for s in range(cfg.n_shards)}
    summary["config"] = asdict(cfg)
    return summary


def _chunk_records(
    cfg: SynthConfig,
    lat: Latent,
    gen: st.TextGenerator,
    tmp: Path,
    c: int,
    a: int,
    b: int,
    out_cited: np.ndarray,
    n_in: np.ndarray,
    n_out: np.ndarray,
) -> Iterator[tuple[int, dict[str, Any], str]]:
    """Chunk ``c`` (papers ``a`` to ``b``) as S2ORC records, in order: (position in the
    chunk, record, its first field). Draws from the chunk's seeded streams only."""
    out_off = np.concatenate([[0], np.cumsum(n_out[a:b])])
    in_local, in_citing = _load_inbound(tmp, c, a, lat.n)
    in_off = np.concatenate([[0], np.cumsum(n_in[a:b])])
    if in_local.size != in_off[-1]:  # pragma: no cover - internal invariant
        raise RuntimeError("synth: inbound bucket does not match the in-degrees")
    out_ids = _ids_as_str(lat.pid[out_cited])
    in_ids = _ids_as_str(lat.pid[in_citing])
    rnd = py_rng_for(cfg.seed, "records", c)
    n_sent = _n_sentences(cfg, rng_for(cfg.seed, "sentences", c), b - a).tolist()
    kinds = lat.abstract_kind[a:b]
    texts = _render_texts(gen, lat, a, b, out_cited, out_off, rnd, n_sent, kinds == 0)
    pids = _ids_as_str(lat.pid[a:b])
    kinds_l = kinds.tolist()
    years_l = lat.year[a:b].tolist()
    ynull_l = lat.year_null[a:b].tolist()
    tempty_l = lat.title_empty[a:b].tolist()
    nofield_l = lat.no_field[a:b].tolist()
    f1_l = lat.field[a:b].tolist()
    f2_l = lat.field2[a:b].tolist()
    topic_l = lat.topic[a:b].tolist()
    offs_o, offs_i = out_off.tolist(), in_off.tolist()
    for j in range(b - a):
        title, abstract = texts[j]
        if tempty_l[j]:
            title = ""
        abs_out: str | None = abstract
        if kinds_l[j] == 1:
            abs_out = None
        elif kinds_l[j] == 2:
            abs_out = rnd.choice(st.SHORT_ABSTRACTS)
        field = st.FIELDS[f1_l[j]]
        field2 = st.FIELDS[f2_l[j]] if f2_l[j] >= 0 else None
        mag = None if nofield_l[j] else [field] if field2 is None else [field, field2]
        rec = _record(
            rnd,
            pids[j],
            title,
            abs_out,
            None if ynull_l[j] else years_l[j],
            years_l[j],
            field,
            st.TOPICS[topic_l[j]].name,
            mag,
            out_ids[offs_o[j] : offs_o[j + 1]],
            in_ids[offs_i[j] : offs_i[j + 1]],
        )
        yield j, rec, field


def write_shards(out_dir: Path, *, n_papers: int, n_shards: int, seed: int, **knobs: Any) -> dict:
    """Write ``metadata_{i}.jsonl.gz`` shards in the S2ORC metadata schema; return a summary.

    ``knobs`` are the other :class:`SynthConfig` fields (shares of failing records, growth,
    locality, ...). The same arguments give byte-identical shards.
    """
    cfg = make_config(n_papers, n_shards, seed, knobs)
    return _write_shards(Path(out_dir), cfg)


# --------------------------------------------------------------------------- post-prefilter tables


def write_tables(
    out_dir: Path, *, n_papers: int, seed: int, with_text: bool = False, **knobs: Any
) -> dict:
    """Write ``papers.parquet`` + ``citations.parquet`` directly in the prefiltered form.

    For scale benchmarks (16M papers): every paper has a year, at least three distinct
    citations inside the corpus (n_in + n_out >= 3) and cites only papers of its own year
    or older; n_in and n_out count the rows of citations.parquet exactly (the graph has no
    mutual citations, so n_in + n_out is the distinct citation count). Papers without a
    MAG field (about 4.5%) have an empty ``fields`` list. Titles and abstracts are
    synthetic text with ``with_text``; without it both are empty strings (cheap; the text
    rules are then the caller's concern). ``knobs`` override :class:`SynthConfig` fields
    (e.g. ``refs_recent``, the mean reference count in 2019). Returns a summary dict.
    """
    overrides: dict[str, Any] = {
        "null_year_share": 0.0,
        "empty_title_share": 0.0,
        "no_abstract_share": 0.0,
        "short_abstract_share": 0.0,
        "no_refs_share": 0.0,
        "refs_recent": TABLES_REFS_RECENT,
    }
    overrides.update(knobs)
    cfg = make_config(n_papers, 1, seed, overrides)
    if cfg.null_year_share or cfg.empty_title_share or cfg.no_abstract_share:
        raise ConfigError("write_tables: the failure-share knobs must be 0 in the prefiltered form")
    if cfg.short_abstract_share or cfg.no_refs_share:
        raise ConfigError("write_tables: the failure-share knobs must be 0 in the prefiltered form")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    lat = latent_corpus(cfg, min_refs=TABLES_MIN_REFS)
    n_in = np.zeros(lat.n, dtype=np.int64)
    n_out = np.zeros(lat.n, dtype=np.int64)
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=out_dir, prefix=".synth-")))
        tmp_c = stack.enter_context(atomic_path(out_dir / "citations.parquet"))
        _write_citations_table(tmp_c, cfg, lat, n_in, n_out, tmp if with_text else None)
        tmp_p = stack.enter_context(atomic_path(out_dir / "papers.parquet"))
        _write_papers_table(tmp_p, cfg, lat, n_in, n_out, tmp if with_text else None)
    summary = _summary(cfg, lat, n_in, n_out, "tables")
    summary["config"] = asdict(cfg)
    summary["with_text"] = with_text
    return summary


def _write_citations_table(
    path: Path,
    cfg: SynthConfig,
    lat: Latent,
    n_in: np.ndarray,
    n_out: np.ndarray,
    spill: Path | None,
) -> None:
    """citations.parquet, edge chunk by edge chunk, counting n_in and n_out in place; with
    a ``spill`` folder each chunk's cited papers are kept there for the texts."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    cit_schema = pa.schema([("citing_id", pa.string()), ("cited_id", pa.string())])
    with pq.ParquetWriter(path, cit_schema, compression="zstd", use_dictionary=False) as w:
        for a, b, citing, cited in edge_chunks(cfg, lat, min_out=TABLES_MIN_REFS):
            n_out[a:b] = np.bincount(citing - a, minlength=b - a)
            n_in += np.bincount(cited, minlength=lat.n)
            if spill is not None:  # the texts mention cited papers: keep the edges for pass 2
                np.save(spill / f"out_{a // CHUNK}.npy", cited.astype(np.int32))
            w.write_table(
                pa.table(
                    {
                        "citing_id": pc.cast(pa.array(lat.pid[citing]), pa.string()),
                        "cited_id": pc.cast(pa.array(lat.pid[cited]), pa.string()),
                    },
                    schema=cit_schema,
                )
            )


def _write_papers_table(
    path: Path,
    cfg: SynthConfig,
    lat: Latent,
    n_in: np.ndarray,
    n_out: np.ndarray,
    spill: Path | None,
) -> None:
    """papers.parquet, chunk by chunk; texts rendered when the edges were kept in
    ``spill``, else empty strings."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    paper_schema = pa.schema(
        [
            ("paper_id", pa.string()),
            ("title", pa.string()),
            ("abstract", pa.string()),
            ("year", pa.int64()),
            ("fields", pa.list_(pa.string())),
            ("n_out", pa.int64()),
            ("n_in", pa.int64()),
        ]
    )
    names = pa.array(list(st.FIELDS), pa.string())
    gen = st.TextGenerator()
    with pq.ParquetWriter(path, paper_schema, compression="zstd") as w:
        for c, a in enumerate(range(0, lat.n, CHUNK)):
            b = min(lat.n, a + CHUNK)
            m = b - a
            nf = np.where(lat.no_field[a:b], 0, np.where(lat.field2[a:b] >= 0, 2, 1))
            offsets = np.zeros(m + 1, dtype=np.int32)
            np.cumsum(nf, out=offsets[1:])
            vals = np.empty(int(offsets[-1]), dtype=np.int32)
            vals[offsets[:-1][nf >= 1]] = lat.field[a:b][nf >= 1]
            vals[offsets[:-1][nf == 2] + 1] = lat.field2[a:b][nf == 2]
            flist = pa.ListArray.from_arrays(pa.array(offsets), pc.take(names, pa.array(vals)))
            if spill is not None:
                out_cited = np.load(spill / f"out_{c}.npy").astype(np.int64)
                out_off = np.concatenate([[0], np.cumsum(n_out[a:b])])
                n_sent = _n_sentences(cfg, rng_for(cfg.seed, "table-sentences", c), m).tolist()
                rnd = py_rng_for(cfg.seed, "table-text", c)
                texts = _render_texts(
                    gen, lat, a, b, out_cited, out_off, rnd, n_sent, np.ones(m, dtype=bool)
                )
                titles = pa.array([t for t, _ in texts], pa.string())
                abstracts = pa.array([x for _, x in texts], pa.string())
            else:
                titles = abstracts = pa.array([""] * m, pa.string())
            table = pa.table(
                {
                    "paper_id": pc.cast(pa.array(lat.pid[a:b]), pa.string()),
                    "title": titles,
                    "abstract": abstracts,
                    "year": pa.array(lat.year[a:b].astype(np.int64)),
                    "fields": flist,
                    "n_out": pa.array(n_out[a:b]),
                    "n_in": pa.array(n_in[a:b]),
                },
                schema=paper_schema,
            )
            w.write_table(table)


# --------------------------------------------------------------------------- stage


def run_synth(cfg: SynthConfig, ctx: StageContext) -> None:
    with ctx.timed("generate"):
        summary = _write_shards(ctx.out, cfg, ctx.log)
    for name, rows in summary["shards"].items():
        ctx.output(name, rows=rows)
    summary.pop("config", None)
    ctx.record("summary", summary)


def plan_synth(
    cfg: SynthConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    return StagePlan(
        f"generate {cfg.n_papers:,} synthetic S2ORC records ({cfg.first_year}-{cfg.last_year}, "
        f"seed {cfg.seed}) into {cfg.n_shards} "
        + (
            "metadata_*.jsonl.gz shards"
            if cfg.format == "s2orc"
            else "shards each of S2AG papers/, abstracts/ and citations/"
        ),
        facts=PlanFacts(records=cfg.n_papers),
        work=Work("synth", units=float(cfg.n_papers)),
    )


SPEC = STAGES.register(
    StageSpec(
        name="synth",
        version="1",
        config=SynthConfig,
        run=run_synth,
        help="write a synthetic corpus (S2ORC metadata shards or an S2AG release)",
        plan=plan_synth,
    )
)

__all__ = ["SPEC", "SynthConfig", "write_shards", "write_tables"]
