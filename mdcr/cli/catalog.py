"""``mdcr ls``, ``mdcr show``, ``mdcr gc``, ``mdcr verify``: the store's catalog."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mdcr.cli.options import add_common_options


def add_parsers(sub: Any) -> None:
    """``mdcr ls``, ``mdcr show``, ``mdcr gc``, ``mdcr verify``: the store's catalog
    (:mod:`mdcr.catalog.entries`)."""
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
    add_common_options(p, top=False)
    p.set_defaults(func=_run_catalog)
    p = sub.add_parser(
        "show",
        help="one output in words: inputs, users, identity, settings, timings, numbers",
        description="Describe one output: its inputs and the outputs that use it, identity, "
        "parameters, settings, timings, files, and its main numbers where it has them.",
    )
    p.add_argument("ref", metavar="FP|PATH", help="a fingerprint (or 4+ of its first digits, "
                   "optionally stage/FP) or an output folder")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    add_common_options(p, top=False)
    p.set_defaults(func=_run_catalog)
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
    add_common_options(p, top=False)
    p.set_defaults(func=_run_catalog)
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
    add_common_options(p, top=False)
    p.set_defaults(func=_run_catalog)


def _run_catalog(args: argparse.Namespace) -> int:
    from mdcr.catalog import entries as catalog
    from mdcr.catalog import text as catalog_text
    from mdcr.core.home import find_home

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
        from mdcr.core.recent import hint_lines

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
