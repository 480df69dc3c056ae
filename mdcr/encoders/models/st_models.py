"""Models with a sentence-transformers config, loaded as their authors configured them.

A model folder (or hub repo) with ``modules.json`` is read by sentence-transformers itself:
its pooling mode (cls, mean, max, lasttoken), its Normalize module, its max_seq_length,
its named prompts and its similarity function. When its modules are a Transformer, a
Pooling and optionally a Normalize, the vectors are computed by mdcr's fast runner
(:class:`~mdcr.encoders.models.hf.HFEncoder`, length-sorted batches under a token budget) on the
model sentence-transformers loaded, with those settings: ``hf:<all-MiniLM-L6-v2 folder>``
gives exactly the vectors of ``minilm``. Any other module (Dense, Router, ...) is run by
sentence-transformers' own ``encode``.

Options given explicitly (pooling, metric, max_length) override the config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mdcr.core.errors import ConfigError, InputDataError, require
from mdcr.encoders.base import EncoderOptions, Metric, PaperText

MODULES_JSON = "modules.json"
# sentence-transformers' pooling modes -> mdcr's.
POOLING_MODES = {"cls": "cls", "mean": "mean", "max": "max", "lasttoken": "last"}
# sentence-transformers' similarity functions -> mdcr's metric.
SIMILARITIES = {"cosine": "cos", "dot": "ip", "euclidean": "l2"}
_RUNNABLE = ("Transformer", "Pooling", "Normalize")


@dataclass
class STSettings:
    """What a sentence-transformers config says, and the model it loaded."""

    model: Any  # the SentenceTransformer
    modules: list[str]
    pooling: str | None  # mdcr's name, None when the pooling is one mdcr does not run
    include_prompt: bool
    normalize: bool
    max_seq_length: int
    metric: str
    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt_name: str | None = None

    @property
    def runnable(self) -> bool:
        """Whether mdcr's runner computes exactly what sentence-transformers would."""
        return self.pooling is not None and all(m in _RUNNABLE for m in self.modules)


def has_st_config(source: str, revision: str | None) -> bool:
    """Whether ``source`` (a folder, or a hub repo in the cache or on the hub) has one."""
    path = Path(source).expanduser()
    if path.is_dir():
        return (path / MODULES_JSON).is_file()
    if path.exists() or source.startswith((".", "/", "~")):
        return False
    try:
        from huggingface_hub import hf_hub_download

        hf_hub_download(source, MODULES_JSON, revision=revision)
        return True
    except Exception:  # not in the repo, not cached offline: no config to follow
        return False


def load_st(source: str, *, revision: str | None, trust_remote_code: bool) -> STSettings:
    """Load a sentence-transformers model on the CPU and read its settings."""
    st = require("sentence_transformers")
    require("transformers").utils.logging.disable_progress_bar()
    try:
        model = st.SentenceTransformer(
            source, device="cpu", revision=revision, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputDataError(
            f"could not load sentence-transformers model '{source}': {first[:300]}; check "
            "the path, or pass trust_remote_code=true if the model needs its own code"
        ) from exc
    modules = [type(m).__name__ for m in model]
    pooling = next((m for m in model if type(m).__name__ == "Pooling"), None)
    mode = str(getattr(pooling, "pooling_mode", "")) if pooling is not None else ""
    normalize = "Normalize" in modules
    similarity = str(getattr(model, "similarity_fn_name", None) or "cosine")
    if similarity not in SIMILARITIES:
        raise ConfigError(
            f"model '{source}' compares vectors by {similarity}, which mdcr's search does not "
            f"do ({', '.join(SIMILARITIES)}); set metric explicitly"
        )
    return STSettings(
        model=model,
        modules=modules,
        pooling=POOLING_MODES.get(mode),
        include_prompt=bool(getattr(pooling, "include_prompt", True)),
        normalize=normalize,
        max_seq_length=int(model.max_seq_length or 512),
        metric="cos" if normalize else SIMILARITIES[similarity],
        prompts=dict(getattr(model, "prompts", None) or {}),
        default_prompt_name=getattr(model, "default_prompt_name", None),
    )


def resolve_prompt(settings: STSettings, prompt: str | None, role: str = "document") -> str:
    """A prompt option: a name from the model's config, or the text itself. None: the
    config's prompt for the role (``query`` / ``document``, as sentence-transformers'
    ``encode_query`` and ``encode_document`` use them), else its default prompt, else none."""
    if prompt is None:
        if settings.prompts.get(role):
            return settings.prompts[role]
        name = settings.default_prompt_name
        return settings.prompts.get(name, "") if name else ""
    return settings.prompts.get(prompt, prompt)


def st_encoder(source: str, *, name: str, o: EncoderOptions, model_id: str | None = None) -> Any:
    """The encoder for a model with a sentence-transformers config (see the module doc)."""
    from mdcr.encoders.models.hf import HFEncoder

    settings = load_st(source, revision=o.revision, trust_remote_code=bool(o.trust_remote_code))
    prompt = resolve_prompt(settings, o.document_prompt, "document")
    query_prompt = resolve_prompt(settings, o.query_prompt, "query")
    if not settings.runnable:
        if o.pooling or o.max_length or o.input_format or o.layers:
            raise ConfigError(
                f"model '{source}' has sentence-transformers modules mdcr does not run itself "
                f"({', '.join(settings.modules)}): it is encoded by sentence-transformers, "
                "which takes no pooling, max_length, input_format or layers options"
            )
        return LibraryEncoder(
            settings,
            name=name,
            model_id=model_id or source,
            o=o,
            prompts={"document": prompt, "query": query_prompt},
        )
    transformer = settings.model[0]
    loaded = (settings.model.tokenizer, transformer.auto_model, None)
    from mdcr.encoders.loading import model_revision

    revision = model_revision(transformer.auto_model, source) or o.revision
    return HFEncoder(
        source,
        name=name,
        model_id=model_id,
        pooling=o.pooling or settings.pooling,  # type: ignore[arg-type]
        metric=o.metric or settings.metric,  # type: ignore[arg-type]
        max_length=o.max_length or settings.max_seq_length,
        input_format=o.input_format or "sep",  # type: ignore[arg-type]
        layers=o.layers or "last",  # type: ignore[arg-type]
        prompt=prompt,
        query_prompt=query_prompt,
        include_prompt=settings.include_prompt,
        loaded=(loaded[0], loaded[1], revision),
        **o.runtime(),
    )


class LibraryEncoder:
    """A sentence-transformers model with modules mdcr does not run (Dense, Router, ...),
    encoded by ``SentenceTransformer.encode`` on ``title [SEP] abstract``."""

    multi_vector = False

    def __init__(
        self,
        settings: STSettings,
        *,
        name: str,
        model_id: str,
        o: EncoderOptions,
        prompts: dict[str, str],
    ) -> None:
        from mdcr.retrievers.device import resolve_device

        self.model = settings.model
        self.device = resolve_device(o.device)
        self.model.to(self.device.torch_device)
        self.name = name
        self.metric: Metric = o.metric or settings.metric  # type: ignore[assignment]
        self.dim = int(self.model.get_sentence_embedding_dimension() or 0)
        self.prompts = prompts
        self.asymmetric = prompts["query"] != prompts["document"]
        self.identity = {
            "model_id": model_id,
            "modules": settings.modules,
            "prompts": prompts,
            "encoded_by": "sentence-transformers",
        }

    def encode(self, texts: Sequence[PaperText], role: str = "document") -> np.ndarray:
        sep = self.model.tokenizer.sep_token or " "
        strings = [f"{t.title or ''}{sep}{t.abstract or ''}" for t in texts]
        prompt = self.prompts[role] or None
        out = self.model.encode(
            strings, prompt=prompt, convert_to_numpy=True, show_progress_bar=False
        )
        return np.asarray(out, dtype=np.float32)
