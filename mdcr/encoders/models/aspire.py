"""Aspire (ts-Aspire): one vector per abstract sentence, from one forward pass per paper.

Following the Aspire authors' released code (``examples/ex_aspire_consent.py`` in
allenai/aspire): the abstract is split into sentences; the input is ``title [SEP]``
followed by the sentences, each tokenized on its own and concatenated, truncated to 500
content tokens by cutting the last sentences; a sentence's vector is the mean of its token
vectors; the title is context only and gets no vector. Documents are compared by their
best-matching sentence pair: ``max over pairs of -L2 distance`` (metric ``"l2"``).

Layers. The paper says it "mean-pooled token embeddings across all layers for each
sentence". The authors' code sets ``output_hidden_states`` but pools the final layer's
``last_hidden_state``, and that is what the released models were trained and evaluated
with, so the default is ``layers="last"``; ``layers="all"`` averages every hidden state
(embeddings + 12 layers) first, to reproduce the paper's wording.

Sentence splitting uses pysbd (rule-based, no download). It costs about 2 ms per abstract,
so large inputs are split in worker processes (``workers``; default: all cores on a GPU
machine, where the model would otherwise wait for the splitter, one on a CPU machine).

A paper with no abstract sentence left (an empty abstract, or a title that fills the
budget) gets one vector: the mean of its title tokens (or of ``[CLS]`` if it has no text).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from mdcr.core.errors import ConfigError, require
from mdcr.encoders.base import Metric, PaperText
from mdcr.encoders.forward import Prepared
from mdcr.encoders.models.hf import Attention, Layers, TransformerRunner

if TYPE_CHECKING:
    import torch

# The authors' limit: 500 content tokens, plus [CLS] and [SEP].
ASPIRE_MAX_LENGTH = 502
_PARALLEL_MIN = 512
# The most papers in one piece on a GPU: each large piece starts a pool of splitting
# processes, so pieces stay large.
ASPIRE_PIECE = 8192


@lru_cache(maxsize=1)
def _segmenter() -> Any:
    pysbd = require("pysbd")
    return pysbd.Segmenter(language="en", clean=False)


def _split_many(abstracts: list[str]) -> list[list[str]]:
    seg = _segmenter()
    out = []
    for text in abstracts:
        sents = [s.strip() for s in seg.segment(text)] if text and text.strip() else []
        out.append([s for s in sents if s])
    return out


def split_sentences(abstracts: Sequence[str], workers: int = 1) -> list[list[str]]:
    """Split each abstract into sentences with pysbd, in ``workers`` processes if many."""
    texts = [a or "" for a in abstracts]
    if workers <= 1 or len(texts) < _PARALLEL_MIN:
        return _split_many(texts)
    import multiprocessing

    size = -(-len(texts) // (workers * 4))
    parts = [texts[i : i + size] for i in range(0, len(texts), size)]
    ctx = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        results = list(pool.map(_split_many, parts))
    return [sents for part in results for sents in part]


@dataclass
class SentenceSpans:
    """Per paper of a chunk: token spans ``[start, end)`` of its sentence vectors."""

    starts: list[np.ndarray]
    ends: list[np.ndarray]

    def counts(self) -> np.ndarray:
        return np.array([len(s) for s in self.starts], dtype=np.int64)


def build_inputs(
    title_ids: list[int],
    sentence_ids: list[list[int]],
    *,
    cls_id: int,
    sep_id: int,
    max_length: int,
) -> tuple[list[int], np.ndarray, np.ndarray]:
    """One paper's input ids and sentence spans, truncated as the Aspire authors do.

    ``title_ids`` are the tokens of ``title [SEP]``. Content (title + sentences) is capped
    at ``max_length - 2`` tokens; the sentence that crosses the cap is cut, later ones
    dropped. Spans index the final sequence (position 0 is ``[CLS]``).
    """
    budget = max_length - 2
    content: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    for i, seg in enumerate([title_ids, *sentence_ids]):
        room = budget - len(content)
        take = seg[: max(room, 0)]
        if not take:
            break
        if i > 0:  # the title is context only
            starts.append(len(content) + 1)
            ends.append(len(content) + 1 + len(take))
        content.extend(take)
        if len(take) < len(seg):
            break
    if not starts:
        # No abstract sentence: the title tokens without their [SEP], else [CLS] itself.
        n_title = len(content) - (1 if content and content[-1] == sep_id else 0)
        if n_title > 0:
            starts, ends = [1], [1 + n_title]
        else:
            starts, ends = [0], [1]
    ids = [cls_id, *content, sep_id]
    return ids, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)


class AspireEncoder:
    """ts-Aspire multi-vector encoder: sentence vectors from one pass over the paper."""

    multi_vector: Literal[True] = True

    def __init__(
        self,
        source: str,
        *,
        name: str,
        model_id: str | None = None,
        max_length: int = ASPIRE_MAX_LENGTH,
        layers: Layers = "last",
        metric: Metric = "l2",
        workers: int | None = None,
        trust_remote_code: bool = False,
        revision: str | None = None,
        device: str | int | None = "auto",
        precision: str = "auto",
        batch_tokens: int | None = None,
        attention: Attention = "auto",
        compile: bool = False,
    ) -> None:
        self.runner = TransformerRunner(
            source,
            trust_remote_code=trust_remote_code,
            revision=revision,
            device=device,
            precision=precision,
            batch_tokens=batch_tokens,
            layers=layers,
            attention=attention,
            compile=compile,
        )
        # Its input is prepared by one thread (on a GPU), which splits large pieces in
        # ``workers`` processes: pysbd is pure Python, so more threads would wait on the GIL.
        self.runner.workers = 1
        self.runner.chunk_docs = ASPIRE_PIECE
        if max_length > self.runner.max_positions or max_length < 3:
            raise ConfigError(
                f"max_length {max_length} is not valid for '{source}'; "
                f"use 3 to {self.runner.max_positions}"
            )
        tok = self.runner.tokenizer
        if tok.sep_token_id is None or tok.cls_token_id is None:
            raise ConfigError(f"model '{source}' lacks [CLS]/[SEP] tokens; Aspire needs both")
        self.name = name
        self.metric: Metric = metric
        self.max_length = max_length
        self.dim = self.runner.hidden_size
        self.model_id = model_id or source
        self.workers = workers or ((os.cpu_count() or 1) if self.runner.device.is_cuda else 1)
        self.identity = {
            "model_id": self.model_id,
            "revision": self.runner.revision,
            "pooling": "sentence-mean",
            "layers": layers,
            "max_length": max_length,
            "input_format": "title [SEP] sentences",
            "sentence_splitter": "pysbd",
        }

    @property
    def revision(self) -> str | None:
        return self.runner.revision

    def prepare(self, texts: Sequence[PaperText]) -> Prepared:
        tok = self.runner.tokenizer
        sentences = split_sentences([t.abstract for t in texts], self.workers)
        segments: list[str] = []
        for t, sents in zip(texts, sentences, strict=True):
            segments.append(f"{t.title or ''} {tok.sep_token} ")
            segments.extend(sents)
        enc = tok(segments, add_special_tokens=False, return_attention_mask=False)["input_ids"]
        ids_out: list[list[int]] = []
        spans = SentenceSpans([], [])
        at = 0
        for sents in sentences:
            title_ids, sent_ids = enc[at], enc[at + 1 : at + 1 + len(sents)]
            at += 1 + len(sents)
            ids, starts, ends = build_inputs(
                list(title_ids),
                [list(s) for s in sent_ids],
                cls_id=int(tok.cls_token_id),
                sep_id=int(tok.sep_token_id),
                max_length=self.max_length,
            )
            ids_out.append(ids)
            spans.starts.append(starts)
            spans.ends.append(ends)
        return Prepared(ids_out, None, spans)

    def _pool(
        self, hidden: torch.Tensor, mask: torch.Tensor, rows: np.ndarray, prepared: Prepared
    ) -> torch.Tensor:
        import torch

        spans: SentenceSpans = prepared.extra
        starts = np.concatenate([spans.starts[r] for r in rows])
        ends = np.concatenate([spans.ends[r] for r in rows])
        docpos = np.repeat(np.arange(len(rows)), [len(spans.starts[r]) for r in rows])
        lens = ends - starts
        n_sent, width, dim = len(starts), hidden.shape[1], hidden.shape[2]
        seg = np.repeat(np.arange(n_sent), lens)
        first = np.repeat(np.cumsum(lens) - lens, lens)
        tokpos = np.repeat(starts, lens) + (np.arange(int(lens.sum())) - first)
        flat = np.repeat(docpos, lens) * width + tokpos
        dev = hidden.device
        tokens = hidden.reshape(-1, dim).index_select(0, torch.from_numpy(flat).to(dev))
        sums = torch.zeros((n_sent, dim), dtype=hidden.dtype, device=dev)
        sums.index_add_(0, torch.from_numpy(seg).to(dev), tokens)
        return sums / torch.from_numpy(lens).to(dev, hidden.dtype).unsqueeze(1)

    def encode(self, texts: Sequence[PaperText]) -> tuple[np.ndarray, np.ndarray]:
        """Sentence vectors ``(m, dim)`` float32 and offsets ``(n + 1,)`` in input order."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32), np.zeros(1, dtype=np.int64)
        batches = self.runner.run(texts, self.prepare, self._pool)
        counts = np.zeros(len(texts), dtype=np.int64)
        for b in batches:
            counts[b.start + b.rows] = b.prepared.extra.counts()[b.rows]
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        vectors = np.zeros((int(offsets[-1]), self.dim), dtype=np.float32)
        for b in batches:
            c = counts[b.start + b.rows]
            dest_start = offsets[b.start + b.rows]
            dest = np.repeat(dest_start, c) + (
                np.arange(int(c.sum())) - np.repeat(np.cumsum(c) - c, c)
            )
            vectors[dest] = b.vectors
        return vectors, offsets
