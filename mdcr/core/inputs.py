"""A config's input references, resolved to paths: one function for every caller.

An ``input_path()`` field holds a path, or ``@step``, the output of an earlier step of a
pipeline. The CLI's stage commands, ``mdcr run``, ``mdcr evaluate`` and the tests resolve
them here, with the same checks and the same one-line errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mdcr.core.config import inputs_of
from mdcr.core.errors import ConfigError


def resolve_inputs(
    cfg: Any,
    steps: Mapping[str, Path] | None = None,
    *,
    where: str = "config",
    missing: dict[Path, str] | None = None,
) -> dict[str, list[Path]]:
    """``cfg``'s input references (paths or ``@step``) as paths, by input name.

    ``steps`` maps the ids of earlier steps to their output folders (planned, maybe not
    built yet). A path that does not exist is an error or, given ``missing`` (a dry run:
    data not downloaded yet), recorded there and planned on.
    """
    out: dict[str, list[Path]] = {}
    for name, refs in inputs_of(cfg).items():
        paths: list[Path] = []
        for ref in refs:
            if ref.startswith("@"):
                step = ref[1:]
                if steps is None or step not in steps:
                    known = ", ".join(steps or {}) or "none"
                    raise ConfigError(
                        f"{where}.{name}: '{ref}' names no earlier step; earlier steps: {known}"
                    )
                paths.append(steps[step])
            else:
                path = Path(ref).expanduser()
                if not path.exists():
                    if missing is None:
                        raise ConfigError(f"{where}.{name}: path '{ref}' does not exist")
                    missing[path] = f"'{ref}' (not there yet)"
                paths.append(path)
        out[name] = paths
    return out
