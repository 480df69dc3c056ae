"""One evaluation, either mode: the request run on pools (:mod:`mdcr.evaluation.pools`) or
on a benchmark (:mod:`mdcr.evaluation.benchmark`), and its result built once
(:func:`mdcr.evaluation.result.result_of`). ``mdcr evaluate`` and :func:`mdcr.evaluate`
both call :func:`run_request`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mdcr.core.store import Store
    from mdcr.evaluation.request import EvaluateRequest
    from mdcr.evaluation.result import EvaluationResult


def run_request(req: EvaluateRequest, store: Store, *, quiet: bool = False) -> EvaluationResult:
    """Run ``req`` in its mode (``req.pools`` set: on pools; else on a benchmark) and return
    what it found: the frames, the printout and the scores for the original scorer."""
    from mdcr.evaluation.result import result_of

    if req.pools is not None:
        from mdcr.evaluation.pools import evaluate_pools

        return result_of(evaluate_pools(req, store, quiet=quiet))
    from mdcr.evaluation.benchmark import evaluate_benchmark

    return result_of(evaluate_benchmark(req, store, quiet=quiet))
