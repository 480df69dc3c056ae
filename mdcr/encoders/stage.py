"""Stage ``encode``: every distinct paper of the targets, once per encoder, into float16 shards.

The papers to encode are the union over all target folders (a paper in 12 pools is
encoded once), sorted by paper_id and cut into shards of ``shard_size``. Each finished
shard is written atomically, so a killed run resumes at the first unfinished shard and
ends with the same files as an uninterrupted one, whatever the settings (batch size,
device, workers) of either run.

The fingerprint hashes the encoder's identity (:mod:`mdcr.encoders.identity`: its code and
weights, or its hub commit), the registry's defaults for the model options left unset, and
the precision it computes in (``auto`` resolved), so a changed encoder or default never
returns a cached vector. The same hash without the inputs is the
encoder key: with ``reuse`` (a setting, on by default) a paper that a finished encode
output of the same key in this store already holds, with the same title and abstract, is
copied instead of encoded.

Targets: any folder that names papers by the convention of
:func:`mdcr.contracts.artifacts.target_sources` (``pools.parquet`` + ``queries.parquet`` from
``pools``, ``benchmark.parquet`` from the MDCR benchmark, or a ``papers_to_encode.parquet``
with ``paper_id``); without targets the whole corpus is encoded.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from mdcr.core.config import canonical_json, input_path, param, params_of, setting
from mdcr.core.errors import ConfigError, MdcrError
from mdcr.core.stage import STAGES, PlanFacts, StageContext, StagePlan, StageSpec, Work
from mdcr.encoders.feed import FeedStats
from mdcr.encoders.probe import NONDETERMINISTIC
from mdcr.encoders.registry import valid_specs
from mdcr.engine import EngineSettings, check_engine_settings
from mdcr.retrievers.device import check_device_spec
from mdcr.retrievers.options import (
    DEFAULT_STORAGE,
    EncoderOptions,
    ModelOptions,
    RuntimeOptions,
    options_of,
)

TEXTS = "_texts.parquet"
# The input probe's papers (an encoder identified by its vectors), kept beside its vectors
# so a later encode can check the encoder still computes them before copying any.
PROBE_TEXTS = "probe_papers.parquet"
# The identity's key of the input probe's digest (hashed into this output's fingerprint
# only, never into the encoder key).
INPUT_PROBE = "input_probe"
QUERY_TEXTS = "_query_texts.parquet"
_ROLE_PLURAL = {"document": "documents", "query": "queries"}


@dataclass(frozen=True)
class EncodeConfig(EngineSettings, RuntimeOptions, ModelOptions):
    """The encode stage: its own fields, then the encoder options (declared once in
    :mod:`mdcr.retrievers.options`) and the engine settings."""

    corpus: str = input_path(
        help="prefilter output folder (papers.parquet: paper_id, title, abstract) or that file"
    )
    encoder: str = param(help=f"encoder: {valid_specs()}")
    targets: tuple[str, ...] = input_path(
        (),
        multiple=True,
        help="folders naming the papers to encode (pools, benchmark); empty = whole corpus",
    )
    shard_size: int = param(20_000, help="papers per shard (the unit of resume)")
    storage: Literal["float16", "float32"] = param(
        DEFAULT_STORAGE,
        help="how vectors are stored: float16 (half the disk; values up to 65504) or "
        "float32 (for encoders whose values float16 cannot hold)",
    )
    reuse: bool = setting(
        True,
        help="copy vectors of papers (same id, title and abstract) from finished encode "
        "outputs of the same encoder in this store instead of encoding them again",
    )
    label: str = setting(
        "",
        help="the name shown for the encoder in status lines and the progress bar (a label, "
        "never hashed; mdcr evaluate sets the retriever's name) [default: the encoder's own]",
    )

    def validate(self) -> None:
        from mdcr.encoders.registry import check_options, lookup

        self.check_options("encode")
        self.check_runtime("encode")
        if self.shard_size < 1:
            raise ConfigError(f"encode.shard_size: {self.shard_size} is not valid; use >= 1")
        check_device_spec(self.device, "encode.device")
        check_engine_settings(self, "encode")
        entry, _ = lookup(self.encoder)
        check_options(entry, self.encoder, self.options())

    def options(self) -> EncoderOptions:
        """The options the encoder is built with."""
        return options_of(self)

    def shown(self, encoder: Any) -> str:
        """What status lines and the bar call the encoder: ``label``, else its name."""
        return self.label or str(encoder.name)


def identify_encode(cfg: EncodeConfig, inputs: Mapping[str, list[Path]]) -> dict[str, Any]:
    """The encoder's code and weights identity, the defaults the registry fills in for the
    model options left unset (``max_length = 0``: the encoder's default, e.g. 512), the
    precision it will compute in, and, for an encoder identified by what it computes
    (``py:``, a model object), its vectors for the input probe: the longest papers of
    ``inputs`` and a seeded sample (:mod:`mdcr.encoders.probe`)."""
    from mdcr.encoders.registry import identify_encoder, lookup, option_defaults, probed_encoder
    from mdcr.retrievers.device import resolve_device, resolve_precision

    entry, _ = lookup(cfg.encoder)
    out: dict[str, Any] = {"encoder": identify_encoder(cfg.encoder, cfg.options())}
    defaults = option_defaults(cfg.encoder, cfg.options())
    if defaults:
        out["option_defaults"] = defaults
    if entry.torch_model:
        out["precision"] = resolve_precision(cfg.precision, resolve_device(cfg.device))
    encoder = probed_encoder(cfg.encoder, cfg.options())
    if encoder is not None and out["encoder"].get("probe") != NONDETERMINISTIC:
        out[INPUT_PROBE] = _input_probe(cfg, inputs, encoder).identity
    return out


def _input_probe_papers(cfg: EncodeConfig, inputs: Mapping[str, list[Path]]) -> list[Any]:
    """The input probe's papers (:func:`mdcr.encoders.probe.input_probe_papers`); inputs
    not built yet (a dry run) leave the fingerprint unknown."""
    from mdcr.contracts.artifacts import PAPERS
    from mdcr.core.errors import UnresolvedIdentityError
    from mdcr.encoders.probe import input_probe_papers

    paths = [*inputs.get("corpus", []), *inputs.get("targets", [])]
    absent = [p for p in paths if not p.exists()]
    if absent:
        raise UnresolvedIdentityError(
            f"encoder '{cfg.encoder}' is identified by its vectors for papers of its inputs, "
            f"and '{absent[0]}' is not built yet"
        )
    corpus = PAPERS.require(inputs["corpus"][0])
    return input_probe_papers(corpus, list(inputs.get("targets", [])), "all")


def _input_probe(cfg: EncodeConfig, inputs: Mapping[str, list[Path]], encoder: Any) -> Any:
    from mdcr.encoders.probe import probe

    return probe(cfg.label or cfg.encoder, encoder, _input_probe_papers(cfg, inputs), again=0)


def encoder_key(cfg: EncodeConfig, identity: dict[str, Any]) -> str:
    """What determines one paper's vector: the encoder, its model options and identity
    (without the input probe, which depends on the inputs: the key is the same for one
    encoder on every dataset).

    Equal keys give equal vectors for the same text; :func:`run_encode` copies between
    outputs of one key (for an encoder identified by its vectors, only from an output whose
    input probe it still encodes to the same vectors: :func:`_reuse_sources`).
    """
    import hashlib

    params = params_of(cfg, hashed=True)
    params.pop("shard_size", None)
    same_everywhere = {k: v for k, v in identity.items() if k != INPUT_PROBE}
    body = canonical_json({"encoder": cfg.encoder, "params": params, "identity": same_everywhere})
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _reuse_sources(cfg: EncodeConfig, ctx: StageContext, key: str, encoder: Any) -> list[Any]:
    """Embedding stores of finished encode outputs with the same encoder key; for an
    encoder identified by its vectors, only those whose input probe it still encodes to
    the vectors their fingerprint hashed (a change its fixed probe cannot see, on their
    long papers, must not be copied over)."""
    from mdcr.contracts.outputs import encode_outputs
    from mdcr.core.manifests import read_manifest
    from mdcr.encoders.store import EmbeddingStore

    if not cfg.reuse or ctx.store is None:
        return []
    found = [EmbeddingStore(path) for path in encode_outputs(ctx.store, key)]
    if INPUT_PROBE not in ctx.identity:
        return found
    kept = []
    for source in found:
        recorded = (read_manifest(source.folder) or {}).get("identity", {}).get(INPUT_PROBE)
        papers = source.folder / PROBE_TEXTS
        if recorded is not None and papers.is_file():
            again = _probe_texts(cfg, encoder, papers)
            if again == recorded:
                kept.append(source)
                continue
        ctx.log(
            f"[encode] not copying vectors from {source.folder}: {cfg.shown(encoder)} computes "
            "other vectors now for the papers it was probed on there"
        )
    return kept


def _probe_texts(cfg: EncodeConfig, encoder: Any, papers: Path) -> str:
    """The input-probe identity of ``encoder`` on the papers of a ``probe_papers.parquet``."""
    import pyarrow.parquet as pq

    from mdcr.encoders.base import PaperText
    from mdcr.encoders.probe import probe

    rows = pq.read_table(papers).to_pylist()
    texts = [PaperText(r["paper_id"], r["title"], r["abstract"]) for r in rows]
    return probe(cfg.label or cfg.encoder, encoder, texts, again=0).identity


def _write_probe_texts(cfg: EncodeConfig, ctx: StageContext) -> None:
    """Keep the input probe's papers beside the vectors (an encoder identified by its
    vectors), for :func:`_reuse_sources` of later encodes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mdcr.core.atomic import atomic_path

    papers = _input_probe_papers(cfg, ctx.inputs)
    table = pa.table(
        {
            "paper_id": pa.array([p.paper_id for p in papers], pa.string()),
            "title": pa.array([p.title for p in papers], pa.string()),
            "abstract": pa.array([p.abstract for p in papers], pa.string()),
        }
    )
    with atomic_path(ctx.output(PROBE_TEXTS, rows=len(papers))) as tmp:
        pq.write_table(table, tmp)


@dataclass(frozen=True)
class ShardJob:
    """What a worker needs to encode the shards of one role (paths absolute, picklable).

    ``role`` is None for a symmetric encoder (called without it), else ``"document"`` or
    ``"query"``; ``reuse``: finished outputs of the same encoder key to copy from.
    """

    spec: str
    options: Any
    out: Path
    texts: Path
    reuse: tuple[Path, ...]
    role: str | None
    multi: bool
    storage: str

    @property
    def shard_role(self) -> str:
        return self.role or "document"


@dataclass
class ShardWorker:
    """A worker's state: the encoder, the texts file and the stores to copy from."""

    job: ShardJob
    encoder: Any
    texts: Any
    reuse: list[Any]


@dataclass(frozen=True)
class ShardResult:
    """Papers of one shard encoded, copied, or found finished; seconds in the encoder; the
    counts of degenerate vectors (:mod:`mdcr.encoders.degenerate`); what mdcr's runner did
    for it (:class:`mdcr.encoders.feed.FeedStats`; None for an encoder without one)."""

    encoded: int = 0
    reused: int = 0
    resumed: int = 0
    encode_s: float = 0.0
    vectors: Any = None
    feed: Any = None


def open_shard_worker(job: ShardJob, encoder: Any = None) -> ShardWorker:
    """A worker's state; ``encoder``: one already loaded (else built from the job)."""
    import pyarrow.parquet as pq

    from mdcr.encoders.registry import build_encoder
    from mdcr.encoders.store import EmbeddingStore

    if encoder is None:
        encoder = build_encoder(job.spec, job.options)
    reuse = [EmbeddingStore(path, job.shard_role) for path in job.reuse]
    return ShardWorker(job, encoder, pq.ParquetFile(job.texts), reuse)


def encode_shard(worker: ShardWorker, i: int) -> ShardResult:
    """Encode (or copy) shard ``i`` and write it atomically; a finished one is skipped."""
    from mdcr.encoders.base import PaperText, encoder_failed
    from mdcr.encoders.degenerate import count_shard, count_stored
    from mdcr.encoders.progress import papers_done
    from mdcr.encoders.store import (
        assemble,
        checked_vectors,
        shard_done,
        shard_names,
        text_hashes,
        write_shard,
    )
    from mdcr.engine.faults import fault_point

    job, encoder = worker.job, worker.encoder
    if shard_done(job.out, i, job.shard_role):  # finished by an earlier try of this unit
        counts = count_stored(job.out, shard_names(i, job.shard_role), encoder.metric)
        return ShardResult(resumed=worker.texts.metadata.row_group(i).num_rows, vectors=counts)
    table = worker.texts.read_row_group(i)
    ids = table["paper_id"].to_pylist()
    titles, abstracts = table["title"].to_pylist(), table["abstract"].to_pylist()
    hashes = text_hashes(titles, abstracts)
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray | None]] = []
    todo = np.ones(len(ids), dtype=bool)
    for store in worker.reuse:
        rows = store.rows(table["paper_id"].combine_chunks())
        same = rows >= 0
        same[same] = store.text_hashes(rows[same]) == hashes[same]
        take = np.flatnonzero(same & todo)
        if take.size:
            vecs, offs = store.doc_vectors(rows[take])
            parts.append((take, vecs, offs if job.multi else None))
            todo[take] = False
    new = np.flatnonzero(todo)
    papers_done(len(ids) - int(new.size))  # the copied papers move the bar at once
    encode_s = 0.0
    feed = None
    if new.size:
        papers = [PaperText(ids[j], titles[j], abstracts[j]) for j in new]
        stats = getattr(getattr(encoder, "runner", None), "stats", None)
        before = dataclasses.replace(stats) if stats is not None else None
        t0 = time.perf_counter()
        role = job.role
        try:
            result = encoder.encode(papers) if role is None else encoder.encode(papers, role=role)
        except MdcrError:
            raise
        except Exception as exc:  # the encoder's own code may raise anything
            raise encoder_failed(job.spec, exc, f"{len(papers)} papers of shard {i}") from exc
        encode_s = time.perf_counter() - t0
        if before is not None:
            feed = encoder.runner.stats.since(before)
        vecs, offs = checked_vectors(
            job.spec, result, papers, encoder.dim, job.multi, job.storage, encoder.metric
        )
        parts.append((new, vecs, offs))
    fault_point(f"encode-{'' if job.role in (None, 'document') else 'query-'}shard-{i}")
    vectors, offsets = assemble(len(ids), parts, encoder.dim, job.storage)
    counts = count_shard(vectors, offsets, ids, hashes, encoder.metric)
    write_shard(job.out, i, ids, vectors, offsets, hashes, role=job.shard_role, storage=job.storage)
    return ShardResult(int(new.size), len(ids) - int(new.size), 0, encode_s, counts, feed)


def _encode_shards(
    cfg: EncodeConfig, ctx: StageContext, engine: Any, job: ShardJob, encoder: Any, feed: Any
) -> tuple[dict[str, int], float, list[int], Any]:
    """Encode (or copy, or skip as finished) every shard of one role's texts.

    Finished shards are skipped here, whichever engine made them (their vectors are read
    back for the degenerate-vector counts); the others go to the engine. On the local
    engine the bar moves per batch (:mod:`mdcr.encoders.progress`), on Ray per finished
    shard. Returns the counts, the seconds spent in the encoder, the shards written and the
    :class:`~mdcr.encoders.degenerate.VectorCheck` of all shards; what the runner did is
    summed into ``feed``.
    """
    import functools

    import pyarrow.parquet as pq

    from mdcr.encoders.degenerate import VectorCheck, count_stored
    from mdcr.encoders.progress import ShardProgress, report_to
    from mdcr.encoders.store import shard_done, shard_names

    texts_file = pq.ParquetFile(job.texts)
    sizes = [texts_file.metadata.row_group(i).num_rows for i in range(texts_file.num_row_groups)]
    counts = {"encoded": 0, "reused": 0, "resumed": 0}
    desc = f"encode {cfg.shown(encoder)}" + (f" ({_ROLE_PLURAL[job.role]})" if job.role else "")
    bar = ctx.progress(total=sum(sizes), desc=desc, unit="paper")
    todo = []
    check = VectorCheck()
    for i, n in enumerate(sizes):
        if shard_done(job.out, i, job.shard_role):
            counts["resumed"] += n
            check.add(count_stored(job.out, shard_names(i, job.shard_role), encoder.metric))
            bar.update(n)
        else:
            todo.append(i)
    # In this process the loaded encoder is used; elsewhere each worker loads its own (an
    # in-memory model object, which no worker can load, travels with the job).
    shipped = encoder if engine.in_process or job.spec.startswith("mem:") else None
    setup = functools.partial(open_shard_worker, job, shipped)
    gpus = engine.worker_gpus(cfg.device)
    encode_s = 0.0
    results = engine.map(encode_shard, todo, setup=setup, gpus=gpus)
    moved = ShardProgress(bar, [sizes[i] for i in todo])
    with report_to(moved):  # the local engine encodes each shard here, as results are read
        for result in results:
            moved.next_shard()
            counts["encoded"] += result.encoded
            counts["reused"] += result.reused
            counts["resumed"] += result.resumed
            encode_s += result.encode_s
            check.add(result.vectors)
            if result.feed is not None:
                feed.add(result.feed)
    bar.close()
    return counts, encode_s, todo, check


def encode_end_line(name: str, counts: Mapping[str, int]) -> str:
    """What an encode did, in one line: papers encoded, copied, and found finished."""
    line = f"[encode] {name}: encoded {counts['encoded']:,} papers, reused {counts['reused']:,}"
    line += " from earlier outputs"
    if counts["resumed"]:
        line += f", {counts['resumed']:,} finished by an interrupted run"
    return line


def _worker_options(cfg: EncodeConfig, ctx: StageContext, options: Any, engine: Any) -> Any:
    """The encoder options a worker elsewhere builds with: the precision the fingerprint
    hashes, the one GPU (or the CPU) the engine gives it, and on a GPU, unless ``workers``
    is set, as many input workers (tokenizer threads) as the CPUs the engine gives it."""
    gpus = engine.worker_gpus(cfg.device)
    precision = ctx.identity.get("precision", options.precision)
    device = "auto" if gpus else "cpu"
    workers = options.workers or (engine.worker_cpus(gpus) if gpus else None)
    return dataclasses.replace(options, precision=precision, device=device, workers=workers)


def _name_unhashed_code(spec: str, ctx: StageContext, since: set[str], ran: set[Path]) -> None:
    """Record, and warn of (now and on every run that reuses this output), the user files
    a ``py:`` encoder loaded while it encoded that its fingerprint does not hash: code on a
    path the probe papers did not take (:mod:`mdcr.encoders.probe`)."""
    from mdcr.encoders.identity import unhashed_user_files

    missed = unhashed_user_files(spec.removeprefix("py:"), since, ran)
    ctx.record("unhashed_user_files", missed)
    if missed:
        ctx.warn(
            f"encoder '{spec}' loaded user code that is not hashed into its fingerprint "
            f"({', '.join(missed)}), so edits to it are not seen: import it by name at the "
            "top of the module, or declare a version and change it with the code"
        )


@dataclass
class EncodeTally:
    """What an encode did, summed over its roles (documents, and queries for an
    asymmetric encoder): papers and vectors, papers encoded, copied and found finished,
    seconds in the encoder, papers per role, the degenerate-vector summaries, and the
    shards written per role; what mdcr's runner did (``feed``)."""

    counts: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            ("papers", "vectors", "encoded", "reused", "resumed"), 0
        )
    )
    encode_s: float = 0.0
    role_papers: dict[str, int] = field(default_factory=dict)
    degenerate: dict[str, dict[str, int]] = field(default_factory=dict)
    shards_written: dict[str, list[int]] = field(default_factory=dict)
    feed: FeedStats = field(default_factory=FeedStats)


def run_encode(cfg: EncodeConfig, ctx: StageContext) -> None:
    from mdcr.contracts.artifacts import PAPERS
    from mdcr.encoders.base import encoder_identity
    from mdcr.engine import open_engine

    corpus = PAPERS.require(ctx.input("corpus"))
    modules_before = set(sys.modules)
    encoder, options = _load_encoder(cfg, ctx)
    identity = encoder_identity(encoder)
    key = encoder_key(cfg, ctx.identity)
    if ctx.identity.get("encoder", {}).get("probe") == NONDETERMINISTIC:
        from mdcr.encoders.probe import nondeterministic_line

        ctx.warn(nondeterministic_line(cfg.label or cfg.encoder))
        ctx.unreproducible(f"encoder '{cfg.label or cfg.encoder}' is not deterministic")
    reuse = _reuse_sources(cfg, ctx, key, encoder)
    engine = open_engine(cfg, ctx, reads=[r.folder for r in reuse])
    if not engine.in_process:
        options = _worker_options(cfg, ctx, options, engine)
    tally = EncodeTally()
    with _watched(cfg.encoder) as ran:
        _encode_roles(cfg, ctx, corpus, engine, options, reuse, encoder, tally)
    ctx.log(encode_end_line(cfg.shown(encoder), tally.counts))
    _write_encoder_json(cfg, ctx, encoder, identity, tally)
    if INPUT_PROBE in ctx.identity:
        _write_probe_texts(cfg, ctx)
    _remove_work_files(ctx)
    if cfg.encoder.startswith("py:"):
        _name_unhashed_code(cfg.encoder, ctx, modules_before, ran)
    _record_encode(cfg, ctx, encoder, identity, key, reuse, tally)


def _watched(spec: str) -> Any:
    """For a ``py:`` encoder, the user files whose code runs while it encodes (to name what
    its fingerprint did not hash); for any other, nothing is watched."""
    import contextlib

    from mdcr.encoders.identity import watch_code

    if not spec.startswith("py:"):
        return contextlib.nullcontext(set())
    return watch_code(spec.removeprefix("py:").split(":")[0], hash_them=False)


def _encode_roles(
    cfg: EncodeConfig,
    ctx: StageContext,
    corpus: Path,
    engine: Any,
    options: EncoderOptions,
    reuse: list[Any],
    encoder: Any,
    tally: EncodeTally,
) -> None:
    """Encode every role of the encoder (documents, and queries for an asymmetric one)."""
    from mdcr.encoders.base import is_asymmetric, is_multi_vector

    asymmetric = is_asymmetric(encoder)
    for role in ["document", "query"] if asymmetric else ["document"]:
        job = ShardJob(
            spec=cfg.encoder,
            options=options,
            out=ctx.out.resolve(),
            texts=ctx.out.resolve() / (TEXTS if role == "document" else QUERY_TEXTS),
            reuse=tuple(Path(r.folder).resolve() for r in reuse),
            role=role if asymmetric else None,
            multi=is_multi_vector(encoder),
            storage=cfg.storage,
        )
        _encode_role(cfg, ctx, corpus, engine, job, encoder, tally)


def _load_encoder(cfg: EncodeConfig, ctx: StageContext) -> tuple[Any, EncoderOptions]:
    """The encoder, built at exactly the hub commit the fingerprint hashed, and the options
    it was built with; what mdcr chose for it (an hf: model without a
    sentence-transformers config) is said and recorded."""
    from mdcr.encoders.degenerate import check_dim
    from mdcr.encoders.registry import build_encoder

    options = cfg.options()
    commit = ctx.identity.get("encoder", {}).get("commit")
    if commit:  # load exactly the hub commit the fingerprint hashes
        options = dataclasses.replace(options, revision=commit)
    with ctx.timed("load_model"):
        encoder = build_encoder(cfg.encoder, options)
    check_dim(cfg.encoder, encoder.dim)
    choices = getattr(encoder, "choices", None)
    if choices:
        ctx.log(f"[encode] {choices}")
        ctx.record("choices", choices)
    return encoder, options


def _encode_role(
    cfg: EncodeConfig,
    ctx: StageContext,
    corpus: Path,
    engine: Any,
    job: ShardJob,
    encoder: Any,
    tally: EncodeTally,
) -> None:
    """Collect one role's texts (once), encode its shards, check its vectors and declare
    its files. A symmetric encoder encodes every target paper once; an asymmetric one every
    candidate as a document and every query paper (again) as a query."""
    import pyarrow.parquet as pq

    from mdcr.core.atomic import atomic_path
    from mdcr.encoders.store import shard_names
    from mdcr.encoders.texts import write_texts

    role = job.shard_role
    which = "all" if job.role is None else ("queries" if role == "query" else "documents")
    texts_path = ctx.out / job.texts.name
    with ctx.timed(f"collect_texts_{role}"):
        if not texts_path.is_file():
            with atomic_path(texts_path) as tmp:
                write_texts(corpus, ctx.inputs.get("targets", []), tmp, cfg.shard_size, which)
    texts_file = pq.ParquetFile(texts_path)
    n_papers = texts_file.metadata.num_rows
    tally.role_papers[role] = n_papers
    what = f" as {_ROLE_PLURAL[role]}" if job.role else ""
    n_shards = texts_file.num_row_groups
    ctx.log(f"[encode] {cfg.shown(encoder)}: {n_papers} papers{what} in {n_shards} shard(s)")
    with ctx.timed(f"encode_{role}"):
        role_counts, seconds, written, check = _encode_shards(
            cfg, ctx, engine, job, encoder, tally.feed
        )
    # Degenerate vectors: a one-line error before anything marks the output finished.
    spec = f"{cfg.label} ({cfg.encoder})" if cfg.label else cfg.encoder
    warning = check.verdict(spec, encoder.metric, role)
    if warning:
        ctx.log(f"[encode] warning: {warning}")
    tally.degenerate[role] = check.summary()
    tally.encode_s += seconds
    tally.shards_written[role] = written
    for k, v in role_counts.items():
        tally.counts[k] += v
    tally.counts["papers"] += n_papers
    for i in range(n_shards):
        ids_name, emb_name, off_name = shard_names(i, role)
        rows = texts_file.metadata.row_group(i).num_rows
        ctx.output(ids_name, rows=rows)
        n_vec = int(np.load(ctx.out / emb_name, mmap_mode="r").shape[0])
        tally.counts["vectors"] += n_vec
        ctx.output(emb_name, rows=n_vec)
        if job.multi:
            ctx.output(off_name, rows=rows + 1)


def _write_encoder_json(
    cfg: EncodeConfig, ctx: StageContext, encoder: Any, identity: Any, tally: EncodeTally
) -> None:
    """The embedding store's ``encoder.json``: what made the vectors and their layout."""
    import pyarrow.parquet as pq

    from mdcr.core.atomic import atomic_write_text
    from mdcr.encoders.base import is_asymmetric, is_multi_vector
    from mdcr.encoders.store import ENCODER_JSON

    meta = {
        "identity": identity,
        "name": encoder.name,
        "dim": encoder.dim,
        "metric": encoder.metric,
        "multi_vector": is_multi_vector(encoder),
        "n_papers": tally.role_papers["document"],
        "n_shards": pq.ParquetFile(ctx.out / TEXTS).num_row_groups,
    }
    if cfg.storage != "float16":
        meta["storage"] = cfg.storage
    if is_asymmetric(encoder):
        meta["asymmetric"] = True
        meta["n_query_papers"] = tally.role_papers["query"]
    atomic_write_text(ctx.out / ENCODER_JSON, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    ctx.output(ENCODER_JSON)


def _remove_work_files(ctx: StageContext) -> None:
    """The collected texts and any temporary file left by a killed shard write."""
    for name in (TEXTS, QUERY_TEXTS):
        (ctx.out / name).unlink(missing_ok=True)
    for stray in ctx.out.glob(".*.tmp*"):
        if stray.is_dir():
            shutil.rmtree(stray)
        else:
            stray.unlink()


def _record_encode(
    cfg: EncodeConfig,
    ctx: StageContext,
    encoder: Any,
    identity: Any,
    key: str,
    reuse: list[Any],
    tally: EncodeTally,
) -> None:
    """What the manifest tells later stages and readers about this encode."""
    from mdcr.contracts.facts import EncodeInfo
    from mdcr.encoders.base import is_asymmetric, is_multi_vector
    from mdcr.retrievers.builtin_entry import encode_entry

    runner = getattr(encoder, "runner", None)
    counts, encode_s = tally.counts, tally.encode_s
    ctx.record("encoder", identity)
    EncodeInfo(key, encode_entry(params_of(cfg, hashed=False), ctx.identity)).record(ctx)
    ctx.record("retriever", encoder.name)
    ctx.record("model_id", identity.get("model_id"))
    ctx.record("revision", identity.get("revision"))
    ctx.record("metric", encoder.metric)
    ctx.record("dim", encoder.dim)
    ctx.record("multi_vector", is_multi_vector(encoder))
    ctx.record("counts", counts)
    ctx.record("degenerate_vectors", tally.degenerate)
    ctx.record("shards_written", tally.shards_written)
    ctx.record("asymmetric", is_asymmetric(encoder))
    ctx.record("reused_from", sorted(str(r.folder) for r in reuse))
    runtime = {
        "device": str(runner.device) if runner else "cpu",
        "precision": runner.precision if runner else "fp32",
        "batch_tokens": runner.batch_tokens if runner else None,
        "encode_s": round(encode_s, 3),
        "papers_per_s": round(counts["encoded"] / encode_s, 2) if encode_s > 0 else None,
    }
    if tally.feed.papers:
        # Pieces, tokens, tokenizer threads, how long the model waited for tokens, how the
        # attention ran, summed over the shards encoded (on any engine).
        runtime["feed"] = tally.feed.as_dict()
    ctx.record("runtime", runtime)


def finished_encode_shards(work: Path) -> int:
    """Shards a failed encode finished: a later run resumes from them (a failed run without
    any leaves no work folder)."""
    from mdcr.encoders.store import finished_shards

    return finished_shards(work)


def plan_encode(
    cfg: EncodeConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    from mdcr.encoders.registry import lookup
    from mdcr.planning import encode_estimate
    from mdcr.planning.sizes import ASPIRE_SENTENCES
    from mdcr.planning.timing import MODEL_ENCODE

    n_targets = len(inputs.get("targets", []))
    what = f"the union of {n_targets} target folder(s)" if n_targets else "every corpus paper"
    extra = ", copying papers that earlier outputs of the same encoder hold" if cfg.reuse else ""
    entry, _ = lookup(cfg.encoder)
    dim = cfg.dim or entry.dim
    estimate, papers = encode_estimate(
        cfg,
        inputs,
        upstream,
        dim=dim or 768,
        multi_vector=entry.multi_vector,
        cost=entry.cost,
    )
    note = "" if dim else " (vector size assumed 768; known once the model is loaded)"
    shards = -(-papers // cfg.shard_size)
    work = Work(
        MODEL_ENCODE if entry.cost > 0 else "encode-no-model",
        units=papers * entry.cost if entry.cost > 0 else float(papers),
        parts=shards,
        largest=1 / shards if shards else 0.0,
    )
    facts = PlanFacts(
        papers=papers,
        papers_max=papers,
        vectors_per_paper=float(ASPIRE_SENTENCES if entry.multi_vector else 1),
        dim=dim or 768,
    )
    return StagePlan(
        f"encode {what} once with '{cfg.encoder}' into float16 shards of {cfg.shard_size} "
        f"papers{extra}\n{estimate}{note}",
        facts,
        work if papers else None,
    )


SPEC = STAGES.register(
    StageSpec(
        name="encode",
        version="3",
        config=EncodeConfig,
        run=run_encode,
        help="encode every distinct paper of the targets once per encoder (float16 shards)",
        resumable=True,
        plan=plan_encode,
        identity=identify_encode,
        main_output="encoder.json",
        finished_units=finished_encode_shards,
    )
)
