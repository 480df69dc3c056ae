"""Feeding the model: papers tokenized on several threads, ahead of the forward pass.

A GPU encodes BERT-base at over 10,000 papers a second, several times what one CPU core
tokenizes. :class:`Feed` cuts the papers into pieces and prepares them (tokenization and
batching: :meth:`TransformerRunner._prepare_piece <mdcr.encoders.models.hf.TransformerRunner>`)
on a pool of threads, ahead of the model, handing them over in input order. The Rust
tokenizers of Hugging Face release the GIL while they encode a batch, so threads use as
many cores whatever ``TOKENIZERS_PARALLELISM`` says (the Makefile and the Ray workers set
it to false; tokenizers' own thread pool is then off, and is not needed).

Pieces start small and grow (:func:`piece_bounds`): the first round of pieces, one per
thread, is ready after a few dozen papers, so the model starts at once instead of waiting
for one large chunk, and later pieces are large enough for full batches.

:class:`FeedStats` counts what a run did, and how long the model side waited for tokens
(``wait_s``; on a GPU, measured once its queued work is done, so it is time the GPU
idled for want of input). The encode stage records it in the manifest (``runtime``).
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from typing import Any, Generic, TypeVar

P = TypeVar("P")

# Papers in the first round of pieces, and the most in any piece (the runner's
# ``chunk_docs`` caps it too).
FIRST_PIECE = 64
# Pieces prepared ahead of the model, per thread.
AHEAD_PER_THREAD = 2
# Counters are added to from the tokenizer threads and one thread per device.
_COUNTING = threading.Lock()
_COUNTERS = ("papers", "pieces", "batches", "tokens", "computed_tokens")
_SECONDS = ("wait_s", "prepare_s", "run_s")


@dataclass
class FeedStats:
    """What a run of the runner did, summed over its calls (:meth:`add`).

    ``tokens``: real tokens; ``computed_tokens``: the token positions the forward passes
    computed (real tokens when unpadded, with padding otherwise); ``wait_s``: seconds the
    model side waited for the next piece, summed over devices; ``prepare_s``: thread
    seconds spent tokenizing and batching; ``run_s``: wall seconds; ``attention``: how the
    forward ran (and why, when it fell back).
    """

    papers: int = 0
    pieces: int = 0
    batches: int = 0
    tokens: int = 0
    computed_tokens: int = 0
    wait_s: float = 0.0
    prepare_s: float = 0.0
    run_s: float = 0.0
    threads: int = 0
    devices: int = 1
    attention: str = ""
    compiled: str = ""

    @property
    def wait_share(self) -> float:
        """The share of the devices' time spent waiting for tokens (0 to 1)."""
        busy = self.run_s * max(self.devices, 1)
        return self.wait_s / busy if busy > 0 else 0.0

    def count(self, **amounts: float) -> None:
        """Add to counters, from any thread."""
        with _COUNTING:
            for name, value in amounts.items():
                setattr(self, name, getattr(self, name) + value)

    def add(self, other: FeedStats) -> None:
        """Sum another run into this one (threads, devices and notes: the latest)."""
        for name in (*_COUNTERS, *_SECONDS):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if other.papers:
            self.threads, self.devices = other.threads, other.devices
            self.attention = other.attention or self.attention
            self.compiled = other.compiled or self.compiled

    def since(self, before: FeedStats) -> FeedStats:
        """What was added to these stats since ``before`` (a copy taken earlier)."""
        out = replace(self)
        for name in (*_COUNTERS, *_SECONDS):
            setattr(out, name, getattr(self, name) - getattr(before, name))
        return out

    def as_dict(self) -> dict[str, Any]:
        """For the manifest: counts, seconds (3 decimals) and the notes."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in _SECONDS:
            out[name] = round(out[name], 3)
        out["wait_share"] = round(self.wait_share, 4)
        return out


def piece_bounds(n: int, *, threads: int, first: int, cap: int) -> list[tuple[int, int]]:
    """``[start, stop)`` of each piece of ``n`` papers: rounds of ``threads`` pieces, the
    first of ``first`` papers each, doubling each round up to ``cap``. ``threads = 0``:
    one piece of everything (tokenized in the calling thread)."""
    if n <= 0:
        return []
    if threads <= 0:
        return [(0, n)]
    first = max(1, min(first, cap))
    bounds, start, size, in_round = [], 0, first, 0
    while start < n:
        stop = min(n, start + size)
        bounds.append((start, stop))
        start = stop
        in_round += 1
        if in_round == threads:
            in_round, size = 0, min(cap, size * 2)
    return bounds


@dataclass
class Piece(Generic[P]):
    """Papers ``start`` to ``stop`` of the input, prepared (tokens and batches)."""

    start: int
    stop: int
    prepared: P


class Feed(Generic[P]):
    """Pieces of the input prepared on ``threads`` threads, taken in input order.

    ``prepare(start, stop)`` makes one piece; with ``threads = 0`` it runs in the taking
    thread (no background work). :meth:`take` is safe from several threads at once (one
    per device); each taker passes ``drain``, which waits for its device's queued work, so
    that the time it then waits for a piece that is not ready is time its device idled.
    """

    def __init__(
        self,
        prepare: Callable[[int, int], P],
        bounds: Sequence[tuple[int, int]],
        threads: int,
        stats: FeedStats,
    ) -> None:
        self._prepare = prepare
        self._bounds = deque(bounds)
        self._stats = stats
        self._lock = threading.Lock()
        self._pending: deque[tuple[int, int, Future[P]]] = deque()
        self._pool = (
            ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mdcr-tokenize")
            if threads > 0
            else None
        )
        for _ in range(threads * AHEAD_PER_THREAD):
            self._submit()

    def _timed(self, start: int, stop: int) -> P:
        t0 = time.perf_counter()
        try:
            return self._prepare(start, stop)
        finally:
            self._stats.count(prepare_s=time.perf_counter() - t0)

    def _submit(self) -> None:
        if self._pool is None or not self._bounds:
            return
        start, stop = self._bounds.popleft()
        ctx = contextvars.copy_context()
        self._pending.append((start, stop, self._pool.submit(ctx.run, self._timed, start, stop)))

    def take(self, drain: Callable[[], None] = lambda: None) -> Piece[P] | None:
        """The next piece in input order, or None when every piece was taken."""
        with self._lock:
            if self._pool is None:
                if not self._bounds:
                    return None
                start, stop = self._bounds.popleft()
                t0 = time.perf_counter()
                prepared = self._timed(start, stop)
                self._stats.count(wait_s=time.perf_counter() - t0)
                return Piece(start, stop, prepared)
            if not self._pending:
                return None
            start, stop, future = self._pending.popleft()
            if not future.done():
                drain()
                t0 = time.perf_counter()
                prepared = future.result()
                self._stats.count(wait_s=time.perf_counter() - t0)
            else:
                prepared = future.result()
            self._submit()
            return Piece(start, stop, prepared)

    def stop(self) -> None:
        """Hand out no more pieces (another taker failed)."""
        with self._lock:
            self._bounds.clear()
            for _, _, future in self._pending:
                future.cancel()
            self._pending.clear()

    def close(self) -> None:
        """Stop the threads; pieces not started yet are dropped."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> Feed[P]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Piece[P]]:
        while (piece := self.take()) is not None:
            yield piece
