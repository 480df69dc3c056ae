"""Shared builders: the MDCR-format fixture imported, small pools, and the MiniLM wrapped
by MTEB's sentence-transformers wrapper (offline, from the packaged weights)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mdcr.benchmark.importer import SPEC as IMPORT
from mdcr.benchmark.importer import ImportConfig
from mdcr.core.inputs import resolve_inputs
from mdcr.core.store import Store

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "mdcr_format_fixture"


def import_fixture(home: Path) -> Path:
    cfg = ImportConfig(source=str(FIXTURE))
    return Store(home).execute(IMPORT, cfg, resolve_inputs(cfg), quiet=True).path


def minilm_for_mteb(prompts: dict[str, str] | None = None) -> Any:
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    from mdcr.encoders.models.hf import minilm_path

    return SentenceTransformerEncoderWrapper(
        SentenceTransformer(minilm_path(), device="cpu"), model_prompts=prompts
    )


def mteb_scores(model: Any, tasks: list[Any]) -> dict[str, dict[str, dict[str, float]]]:
    """{task: {split: scores}} of ``mteb.evaluate`` (no result cache)."""
    import mteb

    res = mteb.evaluate(model, tasks, cache=None, show_progress_bar=False)
    return {
        tr.task_name: {split: dict(rows[0]) for split, rows in tr.scores.items()}
        for tr in res.task_results
    }
