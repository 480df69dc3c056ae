"""Names a person can read for retrievers, and the setup that tells two retrievers apart.

A retriever's name is a label: it is what reports, printouts and ``mdcr ls`` show, and
it never decides what computes the scores (:mod:`mdcr.retrievers.builtin_entry`). ``mdcr
evaluate --encoder NAME=SPEC`` (``name=`` in the API) gives one; without it the name is:

- a registry name (``minilm``, ``random``, ``bm25``): itself;
- ``hf:<hub id>``: the hub id; ``hf:<folder>``: the model card's title (the ``# title``
  line of the folder's README.md, as sentence-transformers writes it), else the folder's
  last part (its parent's when that is ``model``). A config's ``_name_or_path`` is not
  used: it names the model a checkpoint was fine-tuned from (all-MiniLM-L6-v2 says
  ``nreimers/MiniLM-L6-H384-uncased``);
- a model object: its ``model_card_data`` name (``model_name``, ``model_id``,
  ``base_model``), else its config's ``name_or_path`` read as an ``hf:`` spec, else its
  class name plus a short hash of its identity;
- ``py:<module>:<attr>``: ``<module>:<attr>`` (the name the encoder declares is not
  known before it is built).

Two default names that would be equal in one command get a short hash of their spec
(``model-1a2b3c``). The name lives on the steps that name a retriever (``benchmark-rank``
``retriever``, ``score`` ``names``), never on ``encode``: renaming re-scores, it never
re-encodes.

What tells two retrievers apart is their setup (:mod:`mdcr.retrievers.setups`), never
their names.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from mdcr.core.errors import ConfigError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+/-]*$")
_TITLE = re.compile(r"^#\s+([A-Za-z0-9][A-Za-z0-9_.+/-]*)\s*$")
_GENERIC = ("model", "models")


def short_hash(text: str, n: int = 6) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def split_named(item: str) -> tuple[str, str]:
    """``NAME=SPEC`` -> (NAME, SPEC); a plain ``SPEC`` -> ("", SPEC)."""
    head, sep, tail = item.partition("=")
    if sep and ":" not in head and NAME.match(head):
        if not tail:
            raise ConfigError(f"--encoder '{item}': no encoder after '='; give NAME=SPEC")
        return head, tail
    if sep and not head:
        raise ConfigError(f"--encoder '{item}': no name before '='; give NAME=SPEC")
    if sep and ":" not in head:  # NAME=SPEC with a name no retriever may have (a space)
        raise ConfigError(f"--encoder '{item}': {name_rule(head)}")
    return "", item


def name_rule(name: str) -> str:
    """Why ``name`` cannot name a retriever, and which names can (for one-line errors)."""
    return (
        f"'{name}' cannot name a retriever; a name is letters, digits and _ . + / -, "
        "starting with a letter or digit (e.g. my-model or my_model), with no spaces"
    )


def folder_name(folder: Path) -> str:
    """A model folder's readable name: its model card's title, else its last part."""
    readme = folder / "README.md"
    if readme.is_file():
        try:
            lines = readme.read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        for line in lines:
            if line.startswith("# "):
                m = _TITLE.match(line)
                if m:
                    return m.group(1)
                break
    resolved = folder.resolve()
    if resolved.name in _GENERIC and resolved.parent.name:
        return resolved.parent.name
    return resolved.name or str(folder)


def default_name(spec: str) -> str:
    """The name a retriever gets when none is given (see the module docstring)."""
    if spec.startswith("hf:"):
        arg = spec[3:]
        folder = Path(arg).expanduser()
        return folder_name(folder) if folder.is_dir() else arg
    if spec.startswith("mem:"):
        return spec[4:].rsplit("@", 1)[0]
    if spec.startswith("fuse:"):  # fuse:[METHOD:]A+B is named A+B (a name may hold ':')
        body = spec.removeprefix("fuse:")
        head, sep, rest = body.partition(":")
        return rest if sep and "+" not in head else body
    return spec.removeprefix("py:")


def model_object_name(model: Any, digest: str) -> str:
    """The default name of a model object (``digest``: its identity's hash)."""
    card = getattr(model, "model_card_data", None)
    for key in ("model_name", "model_id", "base_model"):
        value = getattr(card, key, None) if card is not None else None
        if isinstance(value, str) and value.strip():
            return value.strip()
    for config in _configs(model):
        path = getattr(config, "name_or_path", None) or getattr(config, "_name_or_path", None)
        if isinstance(path, str) and path:
            return default_name(f"hf:{path}")
    return f"{type(model).__name__}-{digest[:6]}"


def _configs(model: Any) -> list[Any]:
    """The transformers configs of a model object (itself, or a sentence-transformers
    model's first module)."""
    found = [getattr(model, "config", None)]
    try:
        first = model[0]
    except (TypeError, IndexError, KeyError, AttributeError):
        first = None
    auto = getattr(first, "auto_model", None) if first is not None else None
    found.append(getattr(auto, "config", None))
    return [c for c in found if c is not None]


def name_retrievers(items: list[str]) -> list[tuple[str, str]]:
    """(name, spec) of each ``--encoder`` item; a one-line error for two items with one
    name. Default names that would be equal get a short hash of their spec."""
    parsed = [split_named(item) for item in items]
    given = [n for n, _ in parsed if n]
    defaults = [default_name(spec) for n, spec in parsed if not n]
    named: list[tuple[str, str]] = []
    for name, spec in parsed:
        if not name:
            name = default_name(spec)
            if defaults.count(name) > 1 or name in given:
                name = f"{name}-{short_hash(spec)}"
        named.append((name, spec))
    seen: dict[str, str] = {}
    for (name, _), item in zip(named, items, strict=True):
        if name in seen:
            raise ConfigError(
                f"--encoder: two retrievers are named '{name}' ({seen[name]}, {item}); "
                f"name each with --encoder NAME=SPEC"
            )
        seen[name] = item
    return named
