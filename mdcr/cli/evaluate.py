"""``mdcr evaluate``: the request from its flags, run (:mod:`mdcr.evaluation.run`), its
result printed (``str(result)``) and, with ``--scores-out``, saved."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mdcr.cli.options import add_common_options, add_engine_options, engine_values, open_store
from mdcr.encoders.registry import valid_specs


def add_parsers(sub: Any) -> None:
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
    add_engine_options(p)
    add_common_options(p, top=False)
    p.set_defaults(func=_run_evaluate)


def _run_evaluate(args: argparse.Namespace) -> int:
    from mdcr.evaluation.request import EvaluateRequest
    from mdcr.evaluation.run import run_request

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
        engine=engine_values(args),
    )
    from mdcr.core.hints import typed_in
    from mdcr.evaluation.request import typed_arguments

    typed = typed_arguments(req, "cli")
    with typed_in("cli", "evaluate", set_flags={"encode": "--encode-set"}, **typed):
        store = open_store(args, holding=req.pools or req.benchmark)
        result = run_request(req, store, quiet=args.quiet)
    if args.scores_out is not None:
        result.save(args.scores_out)
    print(result)
    return 0
