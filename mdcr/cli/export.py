"""``mdcr export``: the formats of :data:`mdcr.exports.registry.EXPORTS` (runs and qrels as
TREC files, pools and MDCR as BEIR folders, scores as MTEB result files, ...): its
``--format`` choices, help and dispatch are read from the registry."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mdcr.cli.options import add_common_options
from mdcr.core.errors import ConfigError
from mdcr.exports.registry import ExportRequest, formats, formats_help, run_export


def add_parsers(sub: Any) -> None:
    """``mdcr export``: one ``--format`` per registered export format."""
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
        choices=formats(),
        help=f"{formats_help()} (docs/ecosystem.md) [default: trec]",
    )
    p.add_argument(
        "--per-query",
        action="store_true",
        help="the same as --format per-query: --run's per-query values (a score, "
        "benchmark-score or report output) with each query's field, year, positives, "
        "citations and text length, as per_query.parquet and per_query.csv "
        "(docs/scoring.md#per-query-analysis)",
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
    p.set_defaults(func=run_export_command)


def run_export_command(args: argparse.Namespace) -> int:
    """Write the export ``--format`` names for the kind of the inputs given; print what it
    wrote."""
    fmt = args.format or ("per-query" if args.per_query else "trec")
    if args.per_query and fmt != "per-query":
        raise ConfigError(
            f"export --per-query is --format per-query; give one of them, not --format {fmt}"
        )
    request = ExportRequest(
        out=args.out,
        run=args.run,
        qrels=args.qrels,
        retriever=args.retriever,
        encoder=args.encoder,
        split=args.split,
        ties=args.ties,
    )
    for line in run_export(fmt, request):
        print(line)
    return 0
