"""``mdcr download mdcr``: the official MDCR release and its provenance."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mdcr.cli.options import add_common_options
from mdcr.core.errors import MdcrError


def add_parsers(sub: Any) -> None:
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
    add_common_options(p, top=False)
    p.set_defaults(func=_run_download)


def _run_download(args: argparse.Namespace) -> int:
    from mdcr.benchmark.release import PROVENANCE, download_release, register_release

    if args.register is not None:
        if args.to is not None:
            raise MdcrError("download: give --to (fetch) or --register (record), not both")
        folder = args.register
        records = register_release(folder, quiet=args.quiet)
    else:
        from mdcr.benchmark.release import store_folder
        from mdcr.core.home import find_home

        folder = args.to if args.to is not None else store_folder(find_home(args.home), args.quiet)
        records = download_release(folder, quiet=args.quiet, wait=not args.no_wait)
    for name, rec in records.items():
        print(f"{folder / name}\t{rec['size']} bytes\tsha256 {rec['sha256']}\t{rec['how']}")
    print(f"provenance: {folder / PROVENANCE}")
    return 0
