"""Encoding progress per batch: encoders say how many papers each batch finished.

The encode stage hands each shard it encodes in this process a sink (:func:`report_to`)
that moves its progress bar; the batch loop mdcr runs itself
(:class:`mdcr.encoders.models.hf.TransformerRunner`, so every ``hf:`` model, the paper's models
and Aspire) calls :func:`papers_done` after each batch, and the stage calls it for the
papers it copies from earlier outputs. A ``py:`` encoder may call
``mdcr.encoders.progress.papers_done(n)`` from its own batch loop too. Without a sink (a
Ray worker, a direct call) :func:`papers_done` does nothing; an encoder that reports
nothing moves the bar once per shard, when the shard is finished.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

Sink = Callable[[int], None]

_SINK: ContextVar[Sink | None] = ContextVar("mdcr_encode_progress", default=None)


@contextmanager
def report_to(sink: Sink) -> Iterator[None]:
    """Send the papers finished in this thread (and context) to ``sink`` while inside."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


def papers_done(n: int) -> None:
    """``n`` more papers are encoded (or copied); a no-op when nobody listens."""
    sink = _SINK.get()
    if sink is not None and n > 0:
        sink(int(n))


class ShardProgress:
    """A bar that moves by what the running shard reports, never past the shard's size.

    ``sizes``: the papers of each shard, in the order they run. ``next_shard()`` when a
    shard is finished moves the bar by what it did not report, so the bar always ends
    exactly at its total, and starts the next shard.
    """

    def __init__(self, bar: Any, sizes: Sequence[int]) -> None:
        self.bar = bar
        self.sizes = list(sizes)
        self.shard = 0
        self.moved = 0

    def __call__(self, n: int) -> None:
        limit = self.sizes[self.shard] if self.shard < len(self.sizes) else 0
        n = min(n, limit - self.moved)
        if n > 0:
            self.moved += n
            self.bar.update(n)

    def next_shard(self) -> None:
        self(self.sizes[self.shard] - self.moved)
        self.shard += 1
        self.moved = 0
