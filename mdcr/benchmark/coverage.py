"""A model's run must rank some pool of every split a benchmark builds from; a run that
ranks none of a split's pools is refused with the command that searches them, written in
the syntax the user typed (:func:`mdcr.core.hints.option`)."""

from __future__ import annotations

from typing import Any

from mdcr.core.errors import InputDataError
from mdcr.core.hints import option

SPLITS = ("val", "test")  # the splits a benchmark builds from, in order


def no_split_hint(model: str, run: Any, split: str) -> str:
    """A run that searched none of a split's pools: which command searches them."""
    splits = option("bm25", "splits", SPLITS)
    if model == "bm25":
        return f"this BM25 run ('{run}') has no {split} pools; run {splits}"
    return (
        f"the run of '{model}' ('{run}') has no {split} pools; search the {split} pools "
        "with that model (a search covers every pool)"
    )


def require_splits(model: str, run: Any, pools: dict[tuple[str, str], str], covered: set) -> None:
    """A model's run must cover some pool of every split a benchmark builds from
    (``pools``: (split, field) -> pool id; ``covered``: the pool ids the run ranks)."""
    for split in sorted({sp for sp, _ in pools}, key=SPLITS.index):
        if not any(p in covered for (sp, _), p in pools.items() if sp == split):
            raise InputDataError(no_split_hint(model, run, split))
