"""Compile once, into $NUMBA_CACHE_DIR, what numba compiles for the tests (``make setup``).

Two parts: the small pipeline of numba_warmup.toml (ranx's measures and fusions as mdcr
calls them, the BM25 sweep, exact search), run into a temporary store that is thrown away;
then the ranx calls the tests make themselves as references (``ranx.fuse`` with min-max
and zmuv norms, ``optimize_fusion``, precision, the Fisher randomization test), whose
kernels take other types, for each width of the tests' document ids. The test processes
load all of it instead of each compiling it again. Usage: ``python
tests/support/numba_warmup.py``; exit status 1 if a part failed (the tests then compile
what they need themselves).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import warnings
from pathlib import Path

PIPELINE = Path(__file__).with_name("numba_warmup.toml")


def run_pipeline(folder: Path) -> None:
    """The pipeline, in a store under ``folder``; its stores list is kept there too."""
    os.environ["XDG_CACHE_HOME"] = str(folder / "cache")
    from mdcr.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = main(["run", str(PIPELINE), "--home", str(folder / "home"), "-q"])
    if status:
        raise RuntimeError(out.getvalue().strip().splitlines()[-1])


# numba compiles ranx's dict and normalisation kernels for each width of the document ids
# (numpy's fixed-width strings): these are the widths of the tests' ids.
ID_WIDTHS = (2, 4, 6, 8)


def ranx_references() -> None:
    """The ranx calls of the tests' references, on small random runs, for each id width."""
    import numpy as np
    from ranx import Qrels, Run, evaluate, fuse, optimize_fusion
    from ranx.statistical_tests import fisher_randomization_test

    rng = np.random.default_rng(0)

    def scores(docs: list[str], seed: int) -> dict[str, dict[str, float]]:
        r = np.random.default_rng(seed)
        picked = (r.choice(docs, 12, replace=False) for _ in range(6))
        return {f"q{q}": {str(d): float(r.random()) for d in ds} for q, ds in enumerate(picked)}

    for width in ID_WIDTHS:
        docs = [f"{i:0{width}d}" for i in range(30)]
        qrels = Qrels({f"q{q}": {d: 1 for d in docs[q : q + 3]} for q in range(6)})
        runs = [Run(scores(docs, 1)), Run(scores(docs, 2))]
        for norm in ("min-max", "zmuv"):
            fuse(runs, norm=norm, method="rrf", params={"k": 60}).to_dict()
            fuse(runs, norm=norm, method="sum").to_dict()
            fuse(runs, norm=norm, method="mnz").to_dict()
            fuse(runs, norm=norm, method="wsum", params={"weights": [0.5, 0.5]}).to_dict()
        evaluate(qrels, runs[0], ["map@500", "ndcg@500", "recall@30", "precision@10"])
        evaluate(qrels, runs[0], "map@500")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        optimize_fusion(qrels, runs, norm="min-max", method="wsum", metric="map@500", step=0.5)
    a = rng.random(50)
    fisher_randomization_test(a, a + 0.01, 100, 0.05, 42)


def main() -> int:
    failed = []
    with tempfile.TemporaryDirectory(prefix="mdcr-numba-warmup-") as tmp:
        for part in (lambda: run_pipeline(Path(tmp)), ranx_references):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    part()
            except Exception as exc:  # a warm-up only: the tests compile on their own
                failed.append(f"{type(exc).__name__}: {exc}")
    for line in failed:
        print(f"numba warm-up: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
