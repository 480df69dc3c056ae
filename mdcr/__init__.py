"""mdcr: large-scale citation-recommendation evaluation of scientific-article encoders.

Rebuilds the experiments and the MDCR benchmark of Medić & Šnajder (2022),
"Large-scale Evaluation of Transformer-based Article Encoders on the Task of
Citation Recommendation".
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["evaluate", "gc", "load_qrels", "load_run", "ls", "show", "verify"]


def __getattr__(name: str) -> Any:
    """The Python API (:mod:`mdcr.api`), imported on first use so ``import mdcr`` stays light."""
    if name in __all__:
        from mdcr import api

        return getattr(api, name)
    raise AttributeError(f"module 'mdcr' has no attribute {name!r}")
