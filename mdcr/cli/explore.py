"""``mdcr explore``: look at a result's rankings in a local, read-only web page
(:mod:`mdcr.explore`), or write them as files with ``--static DIR``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mdcr.cli.options import add_common_options
from mdcr.core.errors import ConfigError


def add_parsers(sub: Any) -> None:
    """``mdcr explore [OUTPUT]``."""
    p = sub.add_parser(
        "explore",
        help="look at a result's rankings query by query in a local web page (read-only)",
        description="Serve a report, score, benchmark-score or `mdcr evaluate` output as "
        "local web pages: the report's tables, each value a link to its queries; the "
        "queries of a setup with each retriever's value, its difference from the baseline "
        "and the rank correlation of two top-k lists, sortable and filtered; one query with "
        "every retriever's top k side by side, its cited papers marked and where each "
        "landed; two retrievers' per-query values as a scatter. It binds to 127.0.0.1 and "
        "a free port, prints the URL and stops on ctrl-C. Every page has its JSON under "
        "/api (docs/explore.md).",
    )
    p.add_argument(
        "output",
        nargs="?",
        metavar="OUTPUT",
        help="a report, score or benchmark-score output: its folder or fingerprint (4+ "
        "digits) [default: the newest report in the store]",
    )
    p.add_argument(
        "--static",
        type=Path,
        metavar="DIR",
        help="write one setup's pages as files into DIR (open DIR/index.html offline) "
        "instead of serving them",
    )
    p.add_argument(
        "--setup",
        metavar="KEY",
        help="--static: the setup to write, e.g. dataset-test-200000, field-test-100000, "
        "mdcr-test [default: the first]",
    )
    p.add_argument(
        "-k",
        "--k",
        type=int,
        default=10,
        help="--static: the top k written per retriever and query [default: 10]",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to bind [default: 127.0.0.1, this machine only]; another one "
        "lets others on the network read the result",
    )
    p.add_argument("--port", type=int, default=0, help="the port [default: a free one]")
    add_common_options(p, top=False)
    p.set_defaults(func=run_explore)


def run_explore(args: argparse.Namespace) -> int:
    """Open the result, then serve it (or write it with --static)."""
    from mdcr.core.errors import require

    require("flask")  # the one-line install hint before anything else is imported
    from mdcr.core.home import find_home
    from mdcr.explore.copies import SessionFiles
    from mdcr.explore.pages import MAX_K

    if not 1 <= args.k <= MAX_K:
        raise ConfigError(f"explore --k {args.k}: give a whole number from 1 to {MAX_K}")
    if args.setup and args.static is None:
        raise ConfigError("explore --setup chooses what --static writes; give --static DIR too")
    home = find_home(args.home)
    folder = _chosen(home.path, args.output)
    if not args.quiet:
        print(f"store: {home.describe()}")
        print(f"reading {folder} ...", file=sys.stderr, flush=True)
    files = SessionFiles(quiet=args.quiet)  # the copies of runs and papers, for this session
    with _terminate_as_interrupt():
        return _open_and_serve(folder, files, args)


def _open_and_serve(folder: Path, files: Any, args: argparse.Namespace) -> int:
    """Open the result with the session's copies, serve or write it, and remove the
    copies whatever happens."""
    from mdcr.explore.pages import Explorer
    from mdcr.explore.reads import Reader
    from mdcr.explore.result import open_result

    try:
        result = open_result(folder, files.read_papers)
        explorer = Explorer(result, Reader(result, files, quiet=args.quiet))
        try:
            return _write_or_serve(explorer, args)
        finally:
            explorer.reader.close()
    finally:
        files.close()


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP (``kill``, a closed terminal) stop explore as ctrl-C does, so
    the session's copies (a gigabyte at the paper's scale) are removed, not left in the
    temporary folder."""
    import signal
    import threading

    def interrupt(*_: Any) -> None:  # (signal number, frame)
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (explore called from a thread)
        return
    kept = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)


def _write_or_serve(explorer: Any, args: argparse.Namespace) -> int:
    result = explorer.result
    if args.static is not None:
        if args.setup and args.setup not in result.setups:
            raise ConfigError(
                f"explore --setup '{args.setup}' is not a setup of this result; valid: "
                f"{', '.join(result.setups)}"
            )
        from mdcr.explore.static import write_static

        for line in write_static(explorer, args.static, args.setup, args.k):
            print(line)
        return 0
    return _serve(explorer, args)


def _chosen(home: Path, ref: str | None) -> Path:
    """The output OUTPUT names, else the store's newest finished report."""
    from mdcr.catalog import entries as catalog

    if ref:
        return catalog.find(home, ref).path
    reports = [e for e in catalog.scan(home, "report", size=False) if e.state == catalog.COMPLETE]
    if not reports:
        raise ConfigError(
            f"no finished report in the store {home}; give an OUTPUT (a report, score or "
            "benchmark-score output: `mdcr ls`), or run `make demo` for one"
        )
    return max(reports, key=lambda e: (e.date, e.fingerprint)).path


def _serve(explorer: Any, args: argparse.Namespace) -> int:
    from mdcr.explore.app import LOCAL_HOSTS, make_server

    if args.host not in LOCAL_HOSTS:
        print(
            f"mdcr: warning: serving on {args.host}: anyone who can reach this machine "
            "there can read this result",
            file=sys.stderr,
        )
    try:
        server = make_server(explorer, args.host, args.port, debug=args.debug)
    except OSError as exc:
        raise ConfigError(
            f"explore cannot listen on {args.host}:{args.port} ({exc.strerror or exc}); "
            "give another --port (0: a free one)"
        ) from exc
    result = explorer.result
    queries = sum(s.queries for s in result.setups.values())
    print(
        f"exploring {result.stage} {result.fingerprint} ({result.title}): "
        f"{len(result.setups)} setups, {queries} queries"
    )
    print(f"{server.url}  (read-only; ctrl-C to stop)", flush=True)
    try:
        server.wsgi.serve_forever()  # werkzeug's returns on ctrl-C
    except KeyboardInterrupt:
        pass
    finally:
        server.wsgi.server_close()
    print("stopped", file=sys.stderr)
    return 0
