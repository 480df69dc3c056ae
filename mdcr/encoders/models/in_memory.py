"""Models handed over in Python (a notebook): a SentenceTransformer, an MTEB model
(:mod:`mdcr.encoders.models.mteb_model`), an object with ``encode``, or an mdcr
:class:`~mdcr.encoders.base.Encoder`.

``register_model(model)`` keeps the object for this process under the spec
``mem:<name>@<digest>``, so that it runs through the same stages and cache as any other
encoder. The digest is its identity for the fingerprint, hashed by the store's one recipe
(:func:`mdcr.core.fingerprints.digest`; the byte digests below are values in it):

- its class, and the source files of the user's code it runs (its class's module and what
  that imports, and every user module met in its state);
- a torch module (a SentenceTransformer included): the sha256 of its state dict plus its
  configuration (a SentenceTransformer's modules, prompts, max length);
- for every model, the digest of its whole state (:mod:`mdcr.encoders.state_digest`):
  arrays, tensors, modules, tokenizers and the user's code at any depth, so a wrapper
  class that keeps a transformers model in an attribute, or numpy weights in a dict, gets
  a new fingerprint when a weight changes;
- its vectors for the probe papers (:mod:`mdcr.encoders.probe`), so a change of behaviour
  from outside its state (an environment variable it reads) is a new fingerprint too.

A model whose state cannot be hashed (it holds a lock, an open file, a generator) is
refused with a one-line error naming the attribute; ``cache_key=`` then names its state
instead (the caller changes the key when the model changes). The same model in a new
process finds its cached outputs.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from mdcr.core.errors import ConfigError, InputDataError, MdcrError, first_line
from mdcr.core.fingerprints import FINGERPRINT_LEN, digest
from mdcr.encoders.base import METRICS, Metric, PaperText, encoder_failed
from mdcr.encoders.state_digest import UnhashableState, state_digest

MEM_PREFIX = "mem:"
# spec argument ("<name>@<digest>") -> (the encoder, its identity)
_MODELS: dict[str, tuple[Any, dict[str, Any]]] = {}


def _is_mdcr_encoder(model: Any) -> bool:
    return all(hasattr(model, a) for a in ("name", "dim", "metric", "encode")) and (
        getattr(model, "metric", None) in METRICS
    )


def _is_sentence_transformer(model: Any) -> bool:
    return type(model).__name__ == "SentenceTransformer" and hasattr(model, "tokenizer")


def _weights_digest(module: Any) -> tuple[str, dict[int, str]]:
    """sha256 of a module's state dict, and its tensors' ids -> their keys."""
    import torch

    h = hashlib.sha256()
    known: dict[int, str] = {}
    for key, tensor in sorted(module.state_dict(keep_vars=True).items()):
        known[id(tensor)] = key
        t = tensor.detach().cpu().contiguous()
        h.update(f"{key}\0{t.dtype}\0{tuple(t.shape)}\0".encode())
        h.update(t.view(-1).view(dtype=torch.uint8).numpy().tobytes())
    return h.hexdigest(), known


def _st_config(model: Any) -> dict[str, Any]:
    """What a SentenceTransformer's outputs depend on besides its weights."""
    modules = []
    for m in model:
        conf = m.get_config_dict() if hasattr(m, "get_config_dict") else {}
        modules.append({"type": type(m).__name__, "config": conf})
    return {
        "modules": modules,
        "max_seq_length": model.max_seq_length,
        "prompts": dict(getattr(model, "prompts", None) or {}),
        "default_prompt_name": getattr(model, "default_prompt_name", None),
        "similarity": getattr(model, "similarity_fn_name", None),
    }


_CACHE_KEY_FIX = (
    "pass cache_key='<a name for this exact model state>' to mdcr.evaluate (and change it "
    "whenever the model changes)"
)


def model_identity(
    model: Any, cache_key: str | None = None, *, fix: str = _CACHE_KEY_FIX
) -> dict[str, Any]:
    """The identity the fingerprint hashes: the model's class and code, its weights and
    config (a torch module), and the digest of its whole state (:mod:`.state_digest`);
    with ``cache_key``, the key given in place of the weights and state. ``fix``: what the
    one-line error for a state that cannot be hashed tells the user to do."""
    from mdcr.encoders.identity import code_identity, is_user_module

    cls = type(model)
    out: dict[str, Any] = {"class": f"{cls.__module__}.{cls.__qualname__}"}
    modules = [cls.__module__] if is_user_module(cls.__module__) else []
    torch = sys.modules.get("torch")
    is_module = torch is not None and isinstance(model, torch.nn.Module)
    if cache_key is not None:
        out["cache_key"] = str(cache_key)
    else:
        known: dict[int, str] = {}
        if is_module:
            weights, known = _weights_digest(model)
            out["weights"] = "sha256:" + weights[:32]
            out["config"] = _st_config(model) if _is_sentence_transformer(model) else {}
        else:
            out["attributes"] = _public_attributes(model)
        try:
            state, seen = state_digest(model, is_user_module, known=known)
        except UnhashableState as exc:
            raise ConfigError(
                f"cannot hash {exc.path} ({exc.what}), so a change to the model could not be "
                f"told from its cached results; {fix}"
            ) from None
        out["state"] = "sha256:" + state[:32]
        modules += sorted(seen - set(modules))
    if modules or not is_module:
        out.update(code_identity(modules))
    return out


def _public_attributes(model: Any) -> dict[str, Any]:
    """The plain public attributes, shown in the manifest (the state digest hashes all)."""
    try:
        public = vars(model)
    except TypeError:  # __slots__
        public = {}
    return {
        k: v
        for k, v in sorted(public.items())
        if not k.startswith("_") and isinstance(v, str | int | float | bool | type(None))
    }


class _TextModel:
    """An object with ``encode(list[str])`` (a SentenceTransformer, an MTEB-style model),
    fed ``title [SEP] abstract``."""

    multi_vector = False

    def __init__(self, model: Any, name: str, metric: str | None) -> None:
        self.model = model
        self.name = name
        tokenizer = getattr(model, "tokenizer", None)
        self.sep = getattr(tokenizer, "sep_token", None) or " "
        if _is_sentence_transformer(model):
            normalize = any(type(m).__name__ == "Normalize" for m in model)
            sim = getattr(model, "similarity_fn_name", None) or "cosine"
            default = "cos" if normalize or sim == "cosine" else {"dot": "ip"}.get(sim, "l2")
        else:
            default = "cos"  # MTEB's default similarity
        self.metric: Metric = metric or default  # type: ignore[assignment]
        if self.metric not in METRICS:
            raise ConfigError(f"metric '{metric}' is not valid; valid options: cos, ip, l2")
        # A SentenceTransformer with different query and document prompts is asymmetric:
        # queries go through encode_query, candidates through encode_document.
        prompts = (
            dict(getattr(model, "prompts", None) or {}) if _is_sentence_transformer(model) else {}
        )
        self.asymmetric = bool(prompts.get("query", "") != prompts.get("document", ""))
        try:
            probe = self._encode(["probe"], "document")
        except Exception as exc:  # the model's own code may raise anything
            if isinstance(exc, MdcrError):
                raise
            raise encoder_failed(self.name, exc, "a probe text") from exc
        self.dim = int(probe.shape[1])

    def _encode(self, strings: list[str], role: str) -> np.ndarray:
        if not _is_sentence_transformer(self.model):
            return self._matrix(self.model.encode(strings), len(strings))
        method = self.model.encode_query if role == "query" else self.model.encode_document
        out = method(strings, convert_to_numpy=True, show_progress_bar=False)
        return self._matrix(out, len(strings))

    def _matrix(self, out: Any, n: int) -> np.ndarray:
        """What ``encode`` returned as (n, dim) float32, or a one-line error naming it."""
        want = f"return an array (or list of lists) of floats, one row per text: ({n}, dim)"
        problem = ""
        if isinstance(out, str | bytes | dict) or out is None:
            problem = type(out).__name__
        else:
            try:
                matrix = np.asarray(out, dtype=np.float32)
            except (TypeError, ValueError) as exc:
                problem = f"{type(out).__name__} that is not numbers ({first_line(exc, 80)})"
            else:
                if matrix.ndim == 2 and matrix.shape[0] == n:
                    return matrix
                problem = f"an array of shape {matrix.shape} for {n} texts"
        raise InputDataError(f"encoder '{self.name}': encode returned {problem}; {want}")

    def encode(self, texts: Sequence[PaperText], role: str = "document") -> np.ndarray:
        strings = [f"{t.title or ''}{self.sep}{t.abstract or ''}" for t in texts]
        return self._encode(strings, role)


def register_model(
    model: Any,
    name: str | None = None,
    metric: str | None = None,
    cache_key: str | None = None,
) -> str:
    """Keep ``model`` for this process; return its encoder spec (``mem:<name>@<digest>``).

    ``cache_key`` replaces the digest of the model's weights and state (for a model whose
    state cannot be hashed, or is too large to hash at every call): the caller answers for
    giving another key whenever the model changes.
    """
    from mdcr.encoders.models.mteb_model import MtebModel, is_mteb_model
    from mdcr.encoders.naming import model_object_name

    mteb_name = None
    if is_mteb_model(model):  # MTEB's encoder protocol (mdcr.encoders.models.mteb_model)
        mteb_name = getattr(getattr(model, "mteb_model_meta", None), "name", None)
        if mteb_name == "no_model_name/available":  # MTEB's placeholder: name the model
            mteb_name = model_object_name(getattr(model, "model", model), type(model).__name__)
    if _is_mdcr_encoder(model):
        encoder = model
    elif is_mteb_model(model):
        encoder = MtebModel(model, name or mteb_name or type(model).__name__, metric)
    elif hasattr(model, "encode"):
        encoder = _TextModel(model, name or type(model).__name__, metric)
    else:
        raise ConfigError(
            f"{type(model).__name__} has no encode method; pass a SentenceTransformer, an "
            "object with encode(list of str), or an mdcr Encoder"
        )
    from mdcr.encoders.probe import probe

    identity = model_identity(model, cache_key)
    identity["metric"] = encoder.metric
    identity["probe"] = probe(name or type(model).__name__, encoder).identity
    hexdigest = digest(identity)  # the store's one recipe, as the fingerprint hashes it
    if name:
        label = name
    elif _is_mdcr_encoder(model):
        label = encoder.name
    elif isinstance(mteb_name, str) and mteb_name:
        label = mteb_name
    else:  # a readable default (mdcr.encoders.naming)
        label = model_object_name(model, hexdigest)
    arg = f"{label}@{hexdigest[:FINGERPRINT_LEN]}"
    encoder.name = label
    _MODELS[arg] = (encoder, identity)
    return MEM_PREFIX + arg


def registered(arg: str) -> tuple[Any, dict[str, Any]]:
    """The encoder and identity kept under ``mem:<arg>``, or a one-line error."""
    if arg not in _MODELS:
        raise ConfigError(
            f"no in-memory model 'mem:{arg}' in this process; pass the model object to "
            "mdcr.evaluate (in-memory specs do not carry over to other processes)"
        )
    return _MODELS[arg]
