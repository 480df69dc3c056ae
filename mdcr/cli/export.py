"""``mdcr export``: runs and qrels as TREC files, pools and MDCR as BEIR folders, scores
as MTEB result files."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mdcr.cli.options import add_common_options
from mdcr.errors import ConfigError, MdcrError


def add_parsers(sub: Any) -> None:
    """``mdcr export``: runs and qrels as TREC files (:mod:`mdcr.scoring.trec`)."""
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
        "--out",
        type=Path,
        required=True,
        help="folder to write run.trec, qrels.trec (MDCR: run_<split>.trec, qrels_<split>.trec)",
    )
    add_common_options(p, top=False)
    p.set_defaults(func=_run_export)


def _run_export(args: argparse.Namespace) -> int:
    from mdcr.outputs import stage_of

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
    mdcr_run = args.run is not None and stage_of(args.run) == "benchmark-rank"
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
            from mdcr.scoring.trec import check_same_pools

            check_same_pools(args.run, args.qrels)
    if mdcr_run or mdcr_qrels:
        return _export_mdcr(args, mdcr_run, mdcr_qrels)
    if args.split is not None:
        raise MdcrError("export --split: only for MDCR (a benchmark-rank or benchmark output)")
    from mdcr.scoring.trec import write_trec_qrels, write_trec_run

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
