"""What every ``mdcr`` command shares: the common options (declared once here), the engine
options, and the store a command writes to."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_common_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    default = None if top else argparse.SUPPRESS
    parser.add_argument(
        "--home",
        type=Path,
        default=default,
        help="the store folder (default: $MDCR_HOME, else the store the nearest mdcr.toml "
        "or .mdcr up from here names, else $XDG_CACHE_HOME/mdcr or ~/.cache/mdcr)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="no progress bars or progress messages (for CI and logs); also MDCR_QUIET=1",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="show full tracebacks on errors",
    )
    parser.add_argument(
        "--no-wait",
        dest="no_wait",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="when another process is building an output this run needs, stop at once "
        "(naming it) instead of waiting for it",
    )


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """``--engine``, ``--ray-address``, ``--ray-workers``: set on every step that scales out."""
    from mdcr.engine import EXECUTORS

    parser.add_argument(
        "--engine",
        choices=EXECUTORS,
        help="run encode, search, bm25 and bm25-tune locally or on Ray (their executor "
        "setting; not hashed) [default: each step's own, local]",
    )
    parser.add_argument(
        "--ray-address",
        help="Ray cluster address for --engine ray (default: $RAY_ADDRESS, else a local Ray "
        "instance)",
    )
    parser.add_argument(
        "--ray-workers",
        type=int,
        help="Ray workers (default: one per CPU, or per GPU for GPU stages); also the workers "
        "a --dry-run plans for",
    )


def engine_values(args: argparse.Namespace) -> dict[str, Any]:
    from mdcr.engine import engine_values

    return engine_values(args.engine, args.ray_address, args.ray_workers)


def open_store(
    args: argparse.Namespace, pipeline_home: Path | None = None, holding: Path | None = None
) -> Any:
    """The store: --home, $MDCR_HOME, the pipeline file's home or the store holding the
    output ``holding``, the nearest mdcr.toml or .mdcr, the user cache
    (:func:`mdcr.core.home.find_home`)."""
    from mdcr.core.home import find_home
    from mdcr.core.store import Store

    home = find_home(args.home, pipeline=pipeline_home, holding=holding)
    return Store(home.path, wait=not args.no_wait, source=home.source)
