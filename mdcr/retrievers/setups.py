"""The setup of a run: what made its ranking, to tell two retrievers apart by more than a name.

For a ``search`` run: the encoder key of its embeddings (the spec, the model's commit or
digest and every model option: :func:`mdcr.encoders.stage.encoder_key`) and the search
metric; for a ``bm25`` run: its k1 and b (or the bm25-tune output they come from); for a
``fuse`` run: the fuse spec ``mdcr evaluate`` takes (``fuse:bm25+minilm``), its method,
normalisation and weights, and the setups of the runs it fuses. Two
runs of one setup are the same retriever scored again; two setups under one name in a
report are an error (:func:`mdcr.evaluation.pools.report_pipeline`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _describe_model(model: Mapping[str, Any]) -> str:
    """The model's revision or hash: its hub commit, a folder's or an object's weights
    digest, a package version; else a hash of the whole identity the fingerprint took."""
    import hashlib
    import json

    found = [f"package {model['package']}"] if model.get("package") else []
    found += [
        f"{key} {str(model[key]).removeprefix('sha256:')[:12]}"
        for key in ("commit", "revision", "digest", "sha256", "weights", "cache_key")
        if model.get(key)
    ]
    if found:
        return ", ".join(found)
    if not model:
        return ""
    text = json.dumps(model, sort_keys=True, default=str)
    return f"identity {hashlib.sha256(text.encode()).hexdigest()[:12]}"


def _changed_options(params: Mapping[str, Any]) -> dict[str, Any]:
    """The encode parameters set away from their defaults (the spec and shard size aside)."""
    from mdcr.retrievers.options import DEFAULT_STORAGE, default_option_params

    defaults = {**default_option_params(), "storage": DEFAULT_STORAGE}
    return {k: v for k, v in sorted(params.items()) if k in defaults and v != defaults[k]}


def run_setup(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The setup of a run a ``score`` output records (an entry of its ``runs``): what
    made its ranking (see the module docstring). ``key`` compares two setups; ``spec``
    and ``detail`` describe it. A run folder gone or changed since: its fingerprint."""
    from mdcr.contracts.outputs import input_paths
    from mdcr.core.errors import MdcrError
    from mdcr.core.fingerprints import artifact_fingerprint
    from mdcr.core.manifests import open_output

    fingerprint = str(entry.get("fingerprint", ""))
    path = Path(str(entry.get("path", "")))
    unknown = {"key": f"run {fingerprint}", "spec": "?", "detail": f"run {fingerprint}"}
    out = open_output(path) if path.is_dir() else None
    if out is None or artifact_fingerprint(path) != fingerprint:
        return unknown
    params = out.manifest.get("params", {})
    if out.stage == "bm25":
        detail = f"k1 {params.get('k1')}, b {params.get('b')}"
        try:
            tuned = input_paths(path, "params")
        except MdcrError:
            tuned = []
        if tuned:
            detail = f"k1, b from bm25-tune {artifact_fingerprint(tuned[0])}"
        return {"key": f"bm25 {detail}", "spec": "bm25", "detail": detail}
    if out.stage == "fuse":
        return _fused_setup(out.manifest)
    if out.stage != "search":
        return unknown
    try:
        found = input_paths(path, "embeddings")
    except MdcrError:
        found = []
    enc = open_output(found[0]) if len(found) == 1 and found[0].is_dir() else None
    if enc is None:
        return unknown
    enc_params = enc.manifest.get("params", {})
    spec = str(enc_params.get("encoder", "?"))
    options = _changed_options(enc_params)
    model = enc.manifest.get("identity", {}).get("encoder") or {}
    parts = [_describe_model(model)] if isinstance(model, Mapping) else []
    parts += [f"{k}={v}" for k, v in options.items()]
    metric = str(params.get("metric", "default"))
    if metric != "default":
        parts.append(f"search metric {metric}")
    key = f"{enc.info('encoder_key', found[0].name)} {metric}"
    return {"key": key, "spec": spec, "detail": ", ".join(p for p in parts if p)}


def _fused_setup(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """A fuse run's setup: its spec (``fuse:[METHOD:]A+B``, the method left out when it is
    rrf, as ``mdcr evaluate --encoder`` takes it), method, normalisation and weights; its
    key holds the setups of the runs it fuses."""
    info = manifest.get("info", {})
    names = [str(part.get("retriever", "?")) for part in info.get("fused", [])]
    how = info.get("method", {})
    method, norm = str(how.get("method", "?")), str(how.get("norm", "?"))
    spec = "fuse:" + ("" if method == "rrf" else f"{method}:") + "+".join(names)
    detail = f"method {method}, {norm} normalisation"
    if method == "rrf":
        detail += " (rrf fuses ranks: the normalisation leaves it unmoved)"
    weights = info.get("weights")
    if isinstance(weights, Mapping) and weights.get("values"):
        values = ", ".join(f"{float(w):g}" for w in weights["values"])
        detail += f", weights {values} ({weights.get('how', 'given')})"
    runs = manifest.get("inputs", {}).get("runs", [])
    parts = [run_setup(run)["key"] for run in runs]
    key = f"{spec} {method} {norm} {weights} [" + "; ".join(parts) + "]"
    return {"key": key, "spec": spec, "detail": f"{detail}; of {', '.join(names)}"}
