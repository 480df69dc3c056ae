"""The ``mdcr`` command: one subcommand per stage, plus ``run`` for pipeline files.

Stage subcommands are generated from the stages' config dataclasses, so ``mdcr X --help``
always shows the real options and defaults. Errors are printed as one line (``--debug``
shows the traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mdcr import __version__
from mdcr.config import config_fields, default_of, from_mapping, has_default, is_input, type_name
from mdcr.errors import MdcrError
from mdcr.stage import StageSpec, stages


def _common(parser: argparse.ArgumentParser, *, top: bool) -> None:
    default = None if top else argparse.SUPPRESS
    parser.add_argument(
        "--home",
        type=Path,
        default=default,
        help="artifact store folder (default: $MDCR_HOME or ./data/mdcr-home)",
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


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def _add_stage_parser(sub: Any, spec: StageSpec, groups: dict[str, Any]) -> None:
    words = spec.words
    if len(words) == 2:  # a grouped command, e.g. `mdcr benchmark build`
        if words[0] not in groups:
            g = sub.add_parser(words[0], help=f"{words[0]} commands")
            groups[words[0]] = g.add_subparsers(dest="subcommand", metavar="SUBCOMMAND")
        sub = groups[words[0]]
    p = sub.add_parser(
        words[-1],
        help=spec.help,
        description=spec.help,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    hints = typing.get_type_hints(spec.config)
    for f in config_fields(spec.config):
        kind = "input" if is_input(f) else type_name(hints[f.name])
        help_text = f.metadata.get("help", "")
        if has_default(f):
            d = default_of(f)
            shown = ",".join(map(str, d)) if isinstance(d, tuple) else d
            help_text += f" [{kind}; default: {shown}]"
        else:
            help_text += f" [{kind}; required]"
        if hints[f.name] is bool:
            p.add_argument(
                _option(f.name),
                dest=f.name,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=help_text,
            )
        else:
            p.add_argument(_option(f.name), dest=f.name, default=argparse.SUPPRESS, help=help_text)
    p.add_argument(
        "--config",
        dest="_config",
        type=Path,
        default=None,
        help="TOML file with this stage's keys; command-line options override it",
    )
    _common(p, top=False)
    p.set_defaults(_stage=spec.name)


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
    _common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = sub.add_parser("run", help="run a pipeline file, skipping steps that are up to date")
    run.add_argument("pipeline", type=Path, help="a pipeline file, e.g. pipelines/demo.toml")
    run.add_argument("--until", help="run the steps up to and including this step id")
    run.add_argument("--only", help="run only this step (its inputs must be built)")
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="STEP.KEY=VALUE",
        help="override a step's config key, e.g. --set pools.seed=1 (repeatable)",
    )
    run.add_argument("--dry-run", action="store_true", help="print the plan; run nothing")
    _common(run, top=False)
    groups: dict[str, Any] = {}
    for spec in stages().values():
        _add_stage_parser(sub, spec, groups)
    from mdcr.evaluate import add_evaluate_parser

    add_evaluate_parser(sub)
    return parser


def _store(args: argparse.Namespace, pipeline_home: Path | None = None) -> Any:
    from mdcr.store import Store, default_home

    if args.home is not None:
        home = args.home
    elif "MDCR_HOME" in os.environ or pipeline_home is None:
        home = default_home()
    else:
        home = pipeline_home
    return Store(home)


def _run_stage(args: argparse.Namespace) -> int:
    import tomllib

    from mdcr.store import resolve_inputs

    spec = stages()[args._stage]
    values: dict[str, Any] = {}
    if args._config is not None:
        try:
            values.update(tomllib.loads(args._config.read_text()))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise MdcrError(f"cannot read config file '{args._config}': {exc}") from None
    base = from_mapping(spec.config, values, spec.name) if values else None
    cli = {
        f.name: getattr(args, f.name) for f in config_fields(spec.config) if hasattr(args, f.name)
    }
    cfg: Any
    if base is None:
        cfg = from_mapping(spec.config, cli, spec.name, from_text=True)
    else:
        from mdcr.config import override

        cfg = override(base, {k: str(v) for k, v in cli.items()}, spec.name)
    inputs = resolve_inputs(cfg, where=spec.name)
    store = _store(args)
    art = store.execute(spec, cfg, inputs, quiet=args.quiet)
    target = art.path / spec.main_output if spec.main_output else art.path
    print(target)
    return 0


def _run_pipeline(args: argparse.Namespace) -> int:
    from mdcr.pipeline import load_pipeline, run_pipeline, summarize

    pipeline = load_pipeline(args.pipeline, args.overrides)
    store = _store(args, pipeline.home)
    results = run_pipeline(
        pipeline,
        store,
        until=args.until,
        only=args.only,
        dry_run=args.dry_run,
        quiet=args.quiet,
    )
    if not args.dry_run:
        for line in summarize(pipeline, results, store):
            print(line)
    return 0


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
        if args.command == "run":
            return _run_pipeline(args)
        if args.command == "evaluate":
            from mdcr.evaluate import run_evaluate

            return run_evaluate(args)
        if not hasattr(args, "_stage"):
            parser.parse_args([args.command, "--help"])
        return _run_stage(args)
    except MdcrError as exc:
        if debug:
            raise
        print(f"mdcr: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mdcr: interrupted; finished outputs are kept, re-run to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
