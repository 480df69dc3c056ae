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
from mdcr.config import (
    config_fields,
    default_of,
    field_kind,
    from_mapping,
    has_default,
    is_input,
    renamed_keys,
    type_name,
)
from mdcr.encoders.registry import valid_specs
from mdcr.errors import ConfigError, MdcrError, storage_error
from mdcr.stage import StageSpec, stages


def _common(parser: argparse.ArgumentParser, *, top: bool) -> None:
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


def _engine_options(parser: argparse.ArgumentParser) -> None:
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


def _engine_values(args: argparse.Namespace) -> dict[str, Any]:
    from mdcr.engine import engine_values

    return engine_values(args.engine, args.ray_address, args.ray_workers)


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
    for old in renamed_keys(spec.config):  # a former key: a one-line error naming its new name
        p.add_argument(_option(old), dest=old, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.add_argument(
        "--config",
        dest="_config",
        type=Path,
        default=None,
        metavar="FILE",
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
    _engine_options(run)
    _common(run, top=False)
    groups: dict[str, Any] = {}
    for spec in stages().values():
        _add_stage_parser(sub, spec, groups)
    _add_evaluate_parser(sub)
    _add_export_parser(sub)
    _add_download_parser(sub)
    _add_catalog_parsers(sub)
    return parser


def _store(
    args: argparse.Namespace, pipeline_home: Path | None = None, holding: Path | None = None
) -> Any:
    """The store: --home, $MDCR_HOME, the pipeline file's home or the store holding the
    output ``holding``, the nearest mdcr.toml or .mdcr, the user cache
    (:func:`mdcr.home.find_home`)."""
    from mdcr.home import find_home
    from mdcr.store import Store

    home = find_home(args.home, pipeline=pipeline_home, holding=holding)
    return Store(home.path, wait=not args.no_wait, source=home.source)


def _run_evaluate(args: argparse.Namespace) -> int:
    from mdcr.api import run_request
    from mdcr.benchmark.results import print_results, write_scores_out
    from mdcr.evaluation.request import EvaluateRequest

    req = EvaluateRequest(
        encoders=tuple(args.encoder),
        benchmark=args.benchmark,
        pools=args.pools,
        corpus=args.corpus,
        scores=args.scores,
        name=args.name,
        splits=tuple(args.split),
        ties=args.ties,
        by_type=not args.no_types,
        k1=args.k1,
        b=args.b,
        bm25_params=args.bm25_params,
        encode_set=tuple(args.encode_set),
        device=args.device,
        engine=_engine_values(args),
    )
    from mdcr.hints import typed_in

    with typed_in("cli", "evaluate"):
        store = _store(args, holding=req.pools or req.benchmark)
        done = run_request(req, store, quiet=args.quiet)
    if args.scores_out is not None:
        write_scores_out(args.scores_out, done)
    print_results(done)
    return 0


def _run_stage(args: argparse.Namespace) -> int:
    import tomllib

    from mdcr.inputs import resolve_inputs

    spec = stages()[args._stage]
    values: dict[str, Any] = {}
    if args._config is not None:
        try:
            values.update(tomllib.loads(args._config.read_text(encoding="utf-8-sig")))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise MdcrError(f"cannot read config file '{args._config}': {exc}") from None
    base = from_mapping(spec.config, values, spec.name) if values else None
    keys = [f.name for f in config_fields(spec.config)] + list(renamed_keys(spec.config))
    cli = {key: getattr(args, key) for key in keys if hasattr(args, key)}
    cfg: Any
    if base is None:
        cfg = from_mapping(spec.config, cli, spec.name, from_text=True)
    else:
        from mdcr.config import override

        cfg = override(base, {k: str(v) for k, v in cli.items()}, spec.name)
    inputs = resolve_inputs(cfg, where=spec.name)
    store = _store(args)
    from mdcr.hints import typed_in

    with typed_in("cli", spec.name):
        art = store.execute(spec, cfg, inputs, quiet=args.quiet)
    print(art.path)  # the output folder: what the next stage takes as its input
    return 0


def _run_pipeline(args: argparse.Namespace) -> int:
    from mdcr.pipeline import load_pipeline, run_pipeline, set_engine, summarize

    pipeline = set_engine(load_pipeline(args.pipeline, args.overrides), _engine_values(args))
    store = _store(args, pipeline.home)
    if args.dry_run:  # the plan's folders are in this store
        print(f"store: {store.home} ({store.source})")
    from mdcr.hints import typed_in

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
        for line in summarize(pipeline, results, store):
            print(line)
    return 0


def _add_evaluate_parser(sub: Any) -> None:
    """The ``mdcr evaluate`` subcommand (:mod:`mdcr.evaluation.request`)."""
    p = sub.add_parser(
        "evaluate",
        help="score encoders on an MDCR benchmark (or on pools) with one command",
        description=(
            "Encode the benchmark's papers, rank each query's fixed candidate list and print "
            "MAP, nDCG and R@5 per field and their macro average, with the original MDCR "
            "scorer's semantics. Every step is a cached stage under the store."
        ),
    )
    p.add_argument(
        "--encoder",
        action="append",
        default=[],
        metavar="[NAME=]SPEC",
        help=f"encoder: {valid_specs()}, or bm25; NAME= names it in the results (default: a "
        "registry name, an hf: model's own name, a short hash added when two would be equal); "
        "repeatable",
    )
    p.add_argument(
        "--benchmark",
        type=Path,
        help="a benchmark build/import output, or MDCR benchmark files (a folder with "
        "mdcr_<split>.json and mdcr_<split>_data.jsonl, or one mdcr_<split>.json); "
        "official only if fetched with `mdcr download mdcr` (or registered)",
    )
    p.add_argument(
        "--pools", type=Path, help="a pools output: evaluate on its pools instead of a benchmark"
    )
    p.add_argument(
        "--corpus", type=Path, help="with --pools: the prefilter output (default: the pools' own)"
    )
    p.add_argument("--scores", type=Path, help="score this {qid_cid: score} file (no encoding)")
    p.add_argument(
        "--name",
        default="",
        help="retriever name for --scores (default: file name), or for a single --encoder",
    )
    p.add_argument(
        "--scores-out",
        type=Path,
        help="write the scores file for the original scorer; with several encoders or "
        "splits use {encoder} and {split} in the path",
    )
    p.add_argument(
        "--split",
        action="append",
        default=[],
        choices=("val", "test"),
        help="splits to score (default: all the benchmark has; --pools: test)",
    )
    p.add_argument(
        "--ties",
        choices=("trec_eval", "paper_id"),
        default="trec_eval",
        help="tied scores: trec_eval's order, as the original scorer (default), or paper_id "
        "ascending (the project's rule for runs)",
    )
    p.add_argument("--no-types", action="store_true", help="skip the candidate-type analysis")
    p.add_argument("--k1", type=float, help="BM25 k1 (default: Anserini's 0.9)")
    p.add_argument("--b", type=float, help="BM25 b (default: Anserini's 0.4)")
    p.add_argument("--bm25-params", type=Path, help="a bm25-tune output (its chosen k1, b)")
    p.add_argument(
        "--encode-set",
        action="append",
        default=[],
        metavar="[NAME.]KEY=VALUE",
        help="an encode stage option for every encoder, e.g. device=cpu, batch_tokens=8192, "
        "max_length=256; NAME.KEY=VALUE sets it for the encoder named NAME only",
    )
    p.add_argument("--device", help="encode/search device (auto, cpu, cuda, cuda:0, ...)")
    _engine_options(p)
    _common(p, top=False)


def _add_export_parser(sub: Any) -> None:
    """``mdcr export``: runs and qrels as TREC files (:mod:`mdcr.eval.trec`)."""
    p = sub.add_parser(
        "export",
        help="write runs and qrels as TREC files (for pyserini, ranx, ir_measures, trec_eval)",
        description="Write a search/bm25 output's runs and a pools output's qrels as TREC "
        "files (topic ids <pool_id>:<query_id>), or a benchmark-rank output's ranking and "
        "a benchmark's qrels, one MDCR split (topic ids <field>:<query_id>; every candidate "
        "judged, 1 if in the true list, else 0). Whitespace in topic and paper ids is written _.",
    )
    p.add_argument(
        "--format",
        choices=("trec", "beir", "mteb-results"),
        default="trec",
        help="trec: runs and qrels; beir: a pools output or an MDCR benchmark as BEIR folders "
        "MTEB also reads; mteb-results: a score or benchmark-score output as MTEB result "
        "files (docs/ecosystem.md) [default: trec]",
    )
    p.add_argument(
        "--run", type=Path, help="a search or bm25 output, or a benchmark-rank output (MDCR)"
    )
    p.add_argument(
        "--qrels",
        "--pools",
        "--benchmark",
        dest="qrels",
        type=Path,
        help="a pools output, or a benchmark or benchmark-import output",
    )
    p.add_argument(
        "--retriever", help="mteb-results: the retriever to write [default: the only one]"
    )
    p.add_argument(
        "--encoder",
        metavar="SPEC",
        help="beir: write each paper as this encoder reads it (its input_format, e.g. "
        "title [SEP] abstract), so MTEB scores the same text as mdcr [default: title and "
        "abstract, MTEB's own join]",
    )
    p.add_argument(
        "--split", choices=("val", "test"), help="MDCR: the split [default: the only one]"
    )
    p.add_argument(
        "--ties",
        choices=("trec_eval", "paper_id"),
        default="trec_eval",
        help="MDCR run: raw scores, the tool breaks ties (trec_eval, benchmark-score's "
        "default), or scores made strictly decreasing in paper_id order [default: trec_eval]",
    )
    p.add_argument(
        "--per-query",
        action="store_true",
        help="write --run's per-query values (a score, benchmark-score or report output) with "
        "each query's field, year, positives, citations and text length as per_query.parquet "
        "and per_query.csv (docs/scoring.md#per-query-analysis)",
    )
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="folder to write run.trec, qrels.trec (MDCR: run_<split>.trec, qrels_<split>.trec)",
    )
    _common(p, top=False)


def _add_download_parser(sub: Any) -> None:
    """``mdcr download mdcr``: the official release and its provenance
    (:mod:`mdcr.benchmark.release`)."""
    p = sub.add_parser(
        "download",
        help="fetch the official MDCR release (recording where each file came from)",
        description="Fetch the four files of the MDCR release (mdcr_val.json, mdcr_test.json, "
        "mdcr_val_data.jsonl, mdcr_test_data.jsonl) from the addresses in the MDCR README "
        "(github.com/zoranmedic/mdcr), resuming an interrupted transfer, and record each "
        "file's address, time and sha256 in provenance.json beside them. Only files that "
        "match such a record are labelled official.",
    )
    p.add_argument("dataset", choices=("mdcr",), help="what to fetch: mdcr (the MDCR release)")
    p.add_argument("--to", type=Path, help="folder to fetch into [default: <store>/downloads/mdcr]")
    p.add_argument(
        "--register",
        type=Path,
        metavar="DIR",
        help="fetch nothing: record the sha256 of the release files you fetched by hand in DIR "
        "(their names and sizes must be the release's), as declared by the user (their label "
        "says so)",
    )
    _common(p, top=False)


def _run_download(args: argparse.Namespace) -> int:
    from mdcr.benchmark.release import PROVENANCE, download_release, register_release

    if args.register is not None:
        if args.to is not None:
            raise MdcrError("download: give --to (fetch) or --register (record), not both")
        folder = args.register
        records = register_release(folder, quiet=args.quiet)
    else:
        from mdcr.benchmark.release import store_folder
        from mdcr.home import find_home

        folder = args.to if args.to is not None else store_folder(find_home(args.home), args.quiet)
        records = download_release(folder, quiet=args.quiet, wait=not args.no_wait)
    for name, rec in records.items():
        print(f"{folder / name}\t{rec['size']} bytes\tsha256 {rec['sha256']}\t{rec['how']}")
    print(f"provenance: {folder / PROVENANCE}")
    return 0


def _run_export(args: argparse.Namespace) -> int:
    from mdcr.outputs import stage_of

    if args.per_query:
        from mdcr.eval.per_query_export import run_export_per_query

        return run_export_per_query(args)
    if args.format != "trec":
        from mdcr.ecosystem.export_cli import run_export_format

        return run_export_format(args)
    if args.encoder:
        raise MdcrError("export --encoder: only with --format beir")

    if args.run is None and args.qrels is None:
        raise MdcrError("export: give --run FOLDER and/or --qrels FOLDER")
    if args.out.exists() and not args.out.is_dir():
        raise ConfigError(
            f"export --out '{args.out}' is a file; give a folder (the TREC files are written "
            "into it)"
        )
    mdcr_run = args.run is not None and stage_of(args.run) in ("benchmark-rank", "benchmark-fuse")
    mdcr_qrels = args.qrels is not None and stage_of(args.qrels) in (
        "benchmark",
        "benchmark-import",
    )
    if args.run is not None and args.qrels is not None:
        if mdcr_run != mdcr_qrels:
            raise MdcrError(
                "export: pair a benchmark-rank output with a benchmark output, or a search/bm25 "
                "output with a pools output; "
                f"got '{args.run}' ({stage_of(args.run) or 'no stage'}) and '{args.qrels}' "
                f"({stage_of(args.qrels) or 'no stage'})"
            )
        if not mdcr_run:
            from mdcr.eval.trec import check_same_pools

            check_same_pools(args.run, args.qrels)
    if mdcr_run or mdcr_qrels:
        return _export_mdcr(args, mdcr_run, mdcr_qrels)
    if args.split is not None:
        raise MdcrError("export --split: only for MDCR (a benchmark-rank or benchmark output)")
    from mdcr.eval.trec import write_trec_qrels, write_trec_run

    if args.run is not None:
        n = write_trec_run(args.run, args.out / "run.trec", tag=f"mdcr-{args.run.name}")
        print(f"{args.out / 'run.trec'}: {n} lines")
    if args.qrels is not None:
        n = write_trec_qrels(args.qrels, args.out / "qrels.trec")
        print(f"{args.out / 'qrels.trec'}: {n} lines")
    return 0


def _export_mdcr(args: argparse.Namespace, run: bool, qrels: bool) -> int:
    """One MDCR split's ranking and qrels as TREC files (:mod:`mdcr.benchmark.export`)."""
    from mdcr.benchmark import export as ex

    if run and qrels:
        ex.check_rank_benchmark(args.run, args.qrels)
    split = (
        ex.choose_split(ex.rank_splits(args.run), args.split, f"'{args.run}'")
        if run
        else ex.choose_split(ex.benchmark_splits_of(args.qrels), args.split, f"'{args.qrels}'")
    )
    if run and qrels:
        ex.choose_split(ex.benchmark_splits_of(args.qrels), split, f"'{args.qrels}'")
    if run:
        path = args.out / f"run_{split}.trec"
        tag = f"mdcr-{args.run.name}"
        n = ex.write_mdcr_run(args.run, path, split, ties=args.ties, tag=tag)
        print(f"{path}: {n} lines")
    if qrels:
        path = args.out / f"qrels_{split}.trec"
        n = ex.write_mdcr_qrels(args.qrels, path, split)
        print(f"{path}: {n} lines")
    return 0


def _add_catalog_parsers(sub: Any) -> None:
    """``mdcr ls``, ``mdcr show``, ``mdcr gc``, ``mdcr verify``: the store's catalog
    (:mod:`mdcr.catalog`)."""
    p = sub.add_parser(
        "ls",
        help="list the store's outputs: stage, fingerprint, name, parameters, date, size, state",
        description="List the outputs in the store, by stage and date. NAME is the retriever "
        "or encoder an output is about; PARAMS those not at their default; STATE complete, "
        "running, unfinished or damaged (a file missing or of another size than its "
        "manifest records; `mdcr verify` also compares sha256). Lucene indexes are one "
        "line unless STAGE is lucene-index.",
    )
    p.add_argument("stage", nargs="?", help="only this stage (e.g. encode, lucene-index)")
    p.add_argument("--retriever", help="only outputs about this retriever or encoder name")
    _common(p, top=False)
    p = sub.add_parser(
        "show",
        help="one output in words: inputs, users, identity, settings, timings, numbers",
        description="Describe one output: its inputs and the outputs that use it, identity, "
        "parameters, settings, timings, files, and its main numbers where it has them.",
    )
    p.add_argument("ref", metavar="FP|PATH", help="a fingerprint (or 4+ of its first digits, "
                   "optionally stage/FP) or an output folder")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    _common(p, top=False)
    p = sub.add_parser(
        "gc",
        help="list (or with --yes remove) what no result uses, and unfinished work",
        description="Results are score, report, benchmark-score and benchmark-jaccard "
        "outputs. An output is kept when a result uses it, directly or through other kept "
        "outputs (inputs and searched Lucene indexes, as manifests record them). gc lists "
        "everything else and unfinished work folders with their sizes; --yes removes them.",
    )
    p.add_argument("stages", nargs="*", metavar="STAGE", help="only these stages")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--dry-run", action="store_true", help="list only (the default)")
    how.add_argument("--yes", action="store_true", help="remove what is listed")
    _common(p, top=False)
    p = sub.add_parser(
        "verify",
        help="check every file of the store's outputs (or one) against its manifest",
        description="Compare each file a finished output's manifest records with it: size "
        "and full sha256 (slow on a large store: it reads every byte). Prints one line per "
        "damaged output and a summary; exits with 1 when one is damaged. A run that needs a "
        "damaged output builds it again; `mdcr gc --yes` removes it.",
    )
    p.add_argument(
        "ref",
        nargs="?",
        metavar="FP|PATH",
        help="only this output: a fingerprint (or 4+ of its first digits, optionally "
        "stage/FP) or an output folder",
    )
    _common(p, top=False)


def _run_catalog(args: argparse.Namespace) -> int:
    from mdcr import catalog, catalog_text
    from mdcr.home import find_home

    home = find_home(args.home)
    if args.command == "show":
        entry = catalog.find(home.path, args.ref)
        store = catalog_text.store_line(home, entry)  # on stderr beside JSON
        print(store, file=sys.stderr if args.json else sys.stdout)
        print(
            catalog_text.manifest_json(entry)
            if args.json
            else "\n".join(catalog_text.show_lines(entry))
        )
        return 0
    print(f"store: {home.describe()}")
    if args.command == "verify":
        entries = [catalog.find(home.path, args.ref)] if args.ref else catalog.scan(home.path)
        checked = catalog.verify(entries)
        print("\n".join(catalog_text.verify_lines(checked)))
        return 1 if any(v.damage is not None for v in checked) else 0
    if args.command == "ls":
        from mdcr.recent import hint_lines

        entries = catalog.scan(home.path, args.stage)
        chosen = catalog.select(entries, args.retriever)
        fold = args.stage is None and not args.retriever
        lines = catalog_text.ls_lines(
            chosen, fold_indexes=fold, stage=args.stage, retriever=args.retriever or ""
        )
        hints = hint_lines(home.path) if fold else []  # the whole store: where else written
        print("\n".join([*lines, *hints]))
        return 0
    items = catalog.garbage(catalog.scan(home.path), args.stages)
    for line in catalog_text.gc_lines(items, removing=args.yes):
        print(line)
    if args.yes and items:
        removed, freed = catalog.remove(items)
        print(f"removed {removed} folder(s), {catalog_text.human_bytes(freed)}")
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
            return _run_evaluate(args)
        if args.command == "export":
            return _run_export(args)
        if args.command == "download":
            return _run_download(args)
        if args.command in ("ls", "show", "gc", "verify"):
            return _run_catalog(args)
        if not hasattr(args, "_stage"):
            parser.parse_args([args.command, "--help"])
        return _run_stage(args)
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
