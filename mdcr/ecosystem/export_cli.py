"""``mdcr export --format beir | mteb-results``: the command's side of
:mod:`.beir_export` and :mod:`.mteb_results`."""

from __future__ import annotations

import argparse

from mdcr.core.errors import ConfigError, MdcrError


def run_export_format(args: argparse.Namespace) -> int:
    from mdcr.contracts.outputs import stage_of

    if args.out.exists() and not args.out.is_dir():
        raise ConfigError(f"export --out '{args.out}' is a file; give a folder")
    if args.format == "beir":
        from mdcr.contracts.paper import DEPTH, RECALL_K
        from mdcr.ecosystem import beir_export

        if args.qrels is None or args.run is not None:
            raise MdcrError(
                "export --format beir: give --pools POOLS (a pools output) or --benchmark "
                "BENCHMARK (a benchmark or benchmark-import output), and no --run"
            )
        kind = stage_of(args.qrels)
        if kind in ("pools", "beir-import"):
            folders = beir_export.export_pools(
                args.qrels, args.out, DEPTH, RECALL_K, encoder=args.encoder
            )
        elif kind in ("benchmark", "benchmark-import"):
            folders = beir_export.export_benchmark(args.qrels, args.out, encoder=args.encoder)
        else:
            raise ConfigError(
                f"export --format beir: '{args.qrels}' is a {kind or 'folder of no stage'}; "
                "give a pools, benchmark or benchmark-import output"
            )
        for folder in folders:
            print(folder)
        print(f"{args.out / beir_export.INDEX}: {len(folders)} folder(s)")
        return 0
    from mdcr.ecosystem.mteb_results import write_results

    if args.encoder:
        raise MdcrError("export --encoder: only with --format beir")
    if args.run is None or args.qrels is not None:
        raise MdcrError(
            "export --format mteb-results: give --run SCORES (a score or benchmark-score "
            "output), and no --qrels"
        )
    for path in write_results(args.run, args.out, args.retriever):
        print(path)
    return 0
