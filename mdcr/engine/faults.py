"""A fault hook for the engine tests: make one unit of work die or fail on purpose.

``$MDCR_FAULT`` = ``POINT=ACTION``. A stage calls :func:`fault_point` with a point name
(``encode-shard-3``: shard 3 of an encode, after it was encoded and before it is
written); where the name is POINT, ACTION happens:

- ``exit-once:MARKER``: the process exits at once (``os._exit``, as a killed worker does),
  the first time only: MARKER is created first, and while it exists nothing happens;
- ``raise``: a :class:`FaultInjected` error (a failed run, resumable like any other).

Unset (always, outside tests), it costs one environment lookup.
"""

from __future__ import annotations

import os
from pathlib import Path

from mdcr.core.errors import MdcrError

ENV = "MDCR_FAULT"


class FaultInjected(MdcrError):
    """The failure ``$MDCR_FAULT`` asked for."""


def fault_point(name: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    point, _, action = spec.partition("=")
    if point != name:
        return
    if action == "raise":
        raise FaultInjected(f"fault injected at {name} ({ENV}); unset {ENV} and re-run to resume")
    kind, _, marker = action.partition(":")
    if kind == "exit-once" and marker:
        try:
            Path(marker).touch(exist_ok=False)
        except FileExistsError:
            return
        os._exit(17)
    raise FaultInjected(f"{ENV}={spec!r}: unknown action; use raise or exit-once:MARKER")
