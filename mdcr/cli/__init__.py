"""The ``mdcr`` command: one subcommand per stage, plus ``run`` for pipeline files, and
``evaluate``, ``export``, ``explore``, ``download``, ``ls``, ``show``, ``gc``, ``verify``.

One module per command family adds its subcommands (``add_parsers``) and sets the function
that runs each (``set_defaults(func=...)``); the common options are declared once
(:mod:`mdcr.cli.options`). Errors are printed as one line (``--debug`` shows the
traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from mdcr import __version__
from mdcr.cli import catalog, download, evaluate, explore, export, stages
from mdcr.cli.options import add_common_options
from mdcr.core.errors import MdcrError, storage_error


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mdcr",
        description=(
            "Large-scale citation-recommendation evaluation of scientific-article encoders "
            "(Medić & Šnajder, 2022). Each stage reads artifacts and writes a fingerprinted "
            "output folder under the store; `mdcr run PIPELINE.toml` runs a whole pipeline."
        ),
    )
    parser.add_argument("--version", action="version", version=f"mdcr {__version__}")
    add_common_options(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for family in (stages, evaluate, export, explore, download, catalog):
        family.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if os.environ.get("MDCR_QUIET", "") not in ("", "0"):
            args.quiet = True
        if args.command is None:
            parser.print_help()
            return 2
        if not hasattr(args, "func"):  # a group without its subcommand, e.g. `mdcr benchmark`
            parser.parse_args([args.command, "--help"])
        code: int = args.func(args)
        return code
    except MdcrError as exc:
        if debug:
            raise
        print(f"mdcr: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `mdcr ls | head`: the reader stopped; so do we, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a write outside the store (export --out, --scores-out)
        error = storage_error(exc)
        if debug or error is None:
            raise
        print(f"mdcr: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mdcr: interrupted; finished outputs are kept, re-run to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
