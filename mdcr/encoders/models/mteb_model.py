"""MTEB models in ``mdcr.evaluate``: ``mdcr.evaluate(mteb.get_model(name), pools=...)``.

An MTEB model (MTEB's encoder protocol: ``encode(dataloader, *, task_metadata, hf_split,
hf_subset, prompt_type)``; every model ``mteb.get_model`` returns) is fed as MTEB feeds
it in a retrieval task, so the model's own query and document instructions from MTEB's
registry apply:

- candidates (``prompt_type`` document) are corpus rows ``{id, title, text}`` (title and
  abstract), which MTEB's dataloader turns into ``title + " " + text``; query papers
  (``prompt_type`` query) are query rows whose text is the same string
  (:func:`paper_text`), as ``mdcr export --format beir``
  writes them. Both go through MTEB's own ``create_dataloader``;
- the task metadata the model sees: name ``mdcr``, type ``Retrieval``, category t2t, as
  :mod:`mdcr.mteb`'s tasks (whose names are ``mdcr.<folder>``): prompts keyed by a task
  type or a prompt type apply alike; none keyed by an MTEB task's name applies to either;
- the similarity is the model's (``mteb_model_meta.similarity_fn_name``: cosine -> cos,
  dot -> ip, euclidean -> l2; none given: cosine, MTEB's default);
- every MTEB model is asymmetric for mdcr (queries encoded as queries, candidates as
  documents), since its prompts are resolved inside ``encode``.

Its identity is that of any model object (:mod:`mdcr.encoders.models.in_memory`): class, code,
weights and whole state, which hold its prompts.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from mdcr.encoders.base import METRICS, Metric, PaperText

_SIMILARITY = {"cosine": "cos", "dot": "ip", "euclidean": "l2"}
TASK_NAME = "mdcr"


def paper_text(title: str | None, abstract: str | None) -> str:
    """A paper as one string, as MTEB joins a corpus entry's title and text."""
    return f"{title or ''} {abstract or ''}".strip()


def is_mteb_model(model: Any) -> bool:
    """True for an MTEB encoder: an ``AbsEncoder`` or any object carrying MTEB's model
    metadata (``mteb_model_meta``) with an ``encode``."""
    mteb = sys.modules.get("mteb")
    if mteb is None:
        return False
    from mteb.models.abs_encoder import AbsEncoder

    if isinstance(model, AbsEncoder):
        return True
    meta = hasattr(type(model), "mteb_model_meta") or "mteb_model_meta" in vars_of(model)
    return meta and callable(getattr(model, "encode", None))


def vars_of(model: Any) -> dict[str, Any]:
    return dict(getattr(model, "__dict__", {}))


def task_metadata() -> Any:
    """The task metadata mdcr hands an MTEB model (see the module doc)."""
    from mteb.abstasks.task_metadata import TaskMetadata

    return TaskMetadata(
        name=TASK_NAME,
        description="mdcr: citation recommendation (Medić & Šnajder, 2022)",
        dataset={"path": "mdcr", "revision": "local"},
        type="Retrieval",
        category="t2t",
        modalities=["text"],
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        main_score="map_at_1000",
        domains=["Academic"],
    )


class MtebModel:
    """An MTEB model as an mdcr encoder (single vector, asymmetric)."""

    multi_vector = False
    asymmetric = True

    def __init__(self, model: Any, name: str, metric: str | None, batch_size: int = 32) -> None:
        from mdcr.core.errors import ConfigError

        self.model = model
        self.name = name
        self.batch_size = batch_size
        self.metadata = task_metadata()
        meta = getattr(model, "mteb_model_meta", None)
        sim = getattr(meta, "similarity_fn_name", None)
        sim = str(getattr(sim, "value", sim) or "cosine")
        default = _SIMILARITY.get(sim)
        if metric is None and default is None:
            raise ConfigError(
                f"MTEB model '{name}' scores with '{sim}', which mdcr's search has not; pass "
                "metric='cos', 'ip' or 'l2' to mdcr.evaluate"
            )
        self.metric: Metric = metric or default  # type: ignore[assignment]
        if self.metric not in METRICS:
            raise ConfigError(f"metric '{metric}' is not valid; valid options: cos, ip, l2")
        self.dim = int(self.encode([PaperText("probe", "probe", "")], "document").shape[1])

    def encode(self, texts: Sequence[PaperText], role: str = "document") -> np.ndarray:
        from datasets import Dataset
        from mteb._create_dataloaders import create_dataloader
        from mteb.types import PromptType

        ids = [t.paper_id for t in texts]
        if role == "query":
            prompt_type = PromptType.query
            rows = {"id": ids, "text": [paper_text(t.title, t.abstract) for t in texts]}
        else:
            prompt_type = PromptType.document
            rows = {
                "id": ids,
                "title": [t.title or "" for t in texts],
                "text": [t.abstract or "" for t in texts],
            }
        from datasets.utils import logging as ds_logging

        quiet = ds_logging.is_progress_bar_enabled()
        ds_logging.disable_progress_bar()  # datasets' per-call map bars
        try:
            loader = create_dataloader(
                Dataset.from_dict(rows),
                task_metadata=self.metadata,
                prompt_type=prompt_type,
                batch_size=self.batch_size,
            )
        finally:
            if quiet:
                ds_logging.enable_progress_bar()
        out = self.model.encode(
            loader,
            task_metadata=self.metadata,
            hf_split="test",
            hf_subset="default",
            prompt_type=prompt_type,
            batch_size=self.batch_size,
            show_progress_bar=False,
        )
        if hasattr(out, "detach"):
            out = out.detach().float().cpu().numpy()
        return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)
