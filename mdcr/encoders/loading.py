"""Loading a Hugging Face model: tokenizer and model from a hub id or a folder, and the
revision the manifest records.

Loading uses ``from_pretrained`` with ``trust_remote_code=False`` unless the user opts in;
transformers prefers ``model.safetensors`` when a model has it. SDPA attention is asked
for (the default kept when the architecture lacks it). The revision is the hub commit
hash when known, else the ``snapshots/<hash>`` folder name, else (a plain local folder)
the sha256 of the weights file.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from mdcr.core.errors import InputDataError, require

_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")
_SNAPSHOT = re.compile(r"/snapshots/([0-9a-f]{40})(/|$)")


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
