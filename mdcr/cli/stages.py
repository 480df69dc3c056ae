"""``mdcr STAGE``: one subcommand per registered stage, generated from its config
dataclass (so ``mdcr X --help`` shows the real options and defaults), and ``mdcr run`` for
pipeline files."""

from __future__ import annotations

import argparse
import typing
from pathlib import Path
from typing import Any

from mdcr.cli.options import add_common_options, add_engine_options, engine_values, open_store
from mdcr.core.config import (
    config_fields,
    default_of,
    field_kind,
    from_mapping,
    has_default,
    is_input,
    type_name,
)
from mdcr.core.errors import MdcrError
from mdcr.core.stage import StageSpec, stages


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
        if field_kind(f) == "setting":
            kind = f"setting, not hashed; {kind}"
        help_text = f.metadata.get("help", "")
        if has_default(f):
            d = default_of(f)
            shown = ",".join(map(str, d)) if isinstance(d, tuple) else "unset" if d is None else d
            help_text += f" [{kind}; default: {shown}]"
        else:
            help_text += f" [{kind}; required]"
        help_text = help_text.replace("%", "%%")  # argparse formats help with %
        if hints[f.name] in (bool, bool | None):
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
        metavar="FILE",
        help="TOML file with this stage's keys; command-line options override it",
    )
    add_common_options(p, top=False)
    p.set_defaults(_stage=spec.name, func=_run_stage)


def _run_stage(args: argparse.Namespace) -> int:
    import tomllib

    from mdcr.core.inputs import resolve_inputs

    spec = stages()[args._stage]
    values: dict[str, Any] = {}
    if args._config is not None:
        try:
            values.update(tomllib.loads(args._config.read_text(encoding="utf-8-sig")))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise MdcrError(f"cannot read config file '{args._config}': {exc}") from None
    base = from_mapping(spec.config, values, spec.name) if values else None
    keys = [f.name for f in config_fields(spec.config)]
    cli = {key: getattr(args, key) for key in keys if hasattr(args, key)}
    cfg: Any
    if base is None:
        cfg = from_mapping(spec.config, cli, spec.name, from_text=True)
    else:
        from mdcr.core.config import override

        cfg = override(base, {k: str(v) for k, v in cli.items()}, spec.name)
    inputs = resolve_inputs(cfg, where=spec.name)
    store = open_store(args)
    from mdcr.core.hints import typed_in

    with typed_in("cli", spec.name):
        art = store.execute(spec, cfg, inputs, quiet=args.quiet)
    print(art.path)  # the output folder: what the next stage takes as its input
    return 0


def _run_pipeline(args: argparse.Namespace) -> int:
    from mdcr.core.pipeline import load_pipeline, run_pipeline, set_engine, summarize

    pipeline = set_engine(load_pipeline(args.pipeline, args.overrides), engine_values(args))
    store = open_store(args, pipeline.home)
    if args.dry_run:  # the plan's folders are in this store
        print(f"store: {store.home} ({store.source})")
    from mdcr.core.hints import typed_in

    with typed_in("file"):
        results = run_pipeline(
            pipeline,
            store,
            until=args.until,
            only=args.only,
            dry_run=args.dry_run,
            quiet=args.quiet,
        )
    if not args.dry_run:
        notes = evaluate_hints([art.path for art in results.values()])
        for line in summarize(pipeline, results, store, notes):
            print(line)
    return 0


def evaluate_hints(folders: list[Path]) -> list[str]:
    """The ``mdcr evaluate`` commands that score a user's encoder on the pools and
    benchmarks among ``folders`` (a pipeline's outputs)."""
    from mdcr.contracts.artifacts import BENCHMARK, POOLS
    from mdcr.contracts.outputs import writes

    commands = [
        f"  mdcr evaluate --encoder py:MODULE:CLASS --{flag} {folder}"
        for folder in folders
        for flag, contract in (("pools", POOLS), ("benchmark", BENCHMARK))
        if writes(folder, contract)
    ]
    if not commands:
        return []
    return [
        "Score your own encoder on these (README, 'Scoring your encoder'; PYTHONPATH=. for a "
        "module in this folder):",
        *commands,
    ]


def add_parsers(sub: Any) -> None:
    """``mdcr run`` and one subcommand per registered stage (grouped ones, such as
    ``mdcr benchmark build``, under their first word)."""
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
    add_engine_options(run)
    add_common_options(run, top=False)
    run.set_defaults(func=_run_pipeline)
    groups: dict[str, Any] = {}
    for spec in stages().values():
        _add_stage_parser(sub, spec, groups)
