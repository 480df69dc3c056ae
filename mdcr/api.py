"""The Python API for notebooks: score a model object in one call, as MTEB users expect.

``mdcr.evaluate(model, benchmark=...)`` takes an in-memory SentenceTransformer, any object
with ``encode(list of str)``, an mdcr Encoder or an encoder spec string, runs the same
cached pipeline as ``mdcr evaluate`` and returns an
:class:`~mdcr.benchmark.results.EvaluationResult`: a ``summary`` and a ``per_pool`` pandas
DataFrame of the same columns in both modes (percent) and the ``report_path``. The
model's identity is the hash of its weights, config and whole state (arrays, tensors and
modules at any depth) plus its class's code (:mod:`mdcr.encoders.in_memory`), so a second
call with the same model is read from the store, and a changed model is scored again. A
model whose state cannot be hashed (it holds a lock or an open file) is refused in one line
that asks for ``cache_key=``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mdcr.benchmark.results import EvaluationResult


def evaluate(
    model: Any,
    *,
    benchmark: str | Path | None = None,
    pools: str | Path | None = None,
    name: str | None = None,
    metric: str | None = None,
    cache_key: str | None = None,
    splits: tuple[str, ...] = (),
    home: str | Path | None = None,
    encode_options: dict[str, Any] | None = None,
    quiet: bool = True,
    engine: str = "local",
    ray_address: str = "",
    ray_workers: int = 0,
) -> EvaluationResult:
    """Score ``model`` on an MDCR benchmark (or on pools); the CLI's numbers as frames.

    Returns an :class:`~mdcr.benchmark.results.EvaluationResult`, the same in both modes:

    - ``summary``: retriever, setup, split, field, pool_size, measure, mean, std, n. Mean
      and sample std over repetitions, in percent (metric x 100, unrounded; report.md and
      the CLI show one decimal). Pools: every retriever of the report (this model beside
      those scored earlier on the pools, and ``expected chance``), setup ``dataset`` (per
      pool size) or ``field`` (per field and ``AVG``, the macro average over fields); n:
      the repetitions (for AVG, the fields). Benchmark: setup ``mdcr``, per field and
      ``AVG``; pool_size empty, std NaN, n 1 (for AVG, the fields).
    - ``per_pool``: retriever, pool_id, setup, split, field, pool_size, rep, measure,
      value (percent), n_queries: the mean over each pool's queries (on a benchmark, a
      field's queries of a split).
    - ``report_path``: the report.md with every table, significance test and plot.

    ``cache_key`` stands in for the hash of the model's weights and state: outputs are
    cached under it (and the class's code), so give another key whenever the model changes.

    ``engine="ray"`` runs encoding and search on Ray (``ray_address``, else ``$RAY_ADDRESS``,
    else a local Ray instance with ``ray_workers`` CPUs); results are the same.
    """
    from mdcr.benchmark.evaluate import EvaluateRequest
    from mdcr.benchmark.evaluate import evaluate as run_evaluation
    from mdcr.benchmark.results import result_of
    from mdcr.encoders.in_memory import register_model
    from mdcr.engine import engine_values
    from mdcr.errors import ConfigError
    from mdcr.store import Store, default_home

    if isinstance(model, str) and cache_key is not None:
        raise ConfigError(
            f"cache_key applies to a model object, not to the encoder spec '{model}' "
            "(which is identified by its own rule); drop cache_key"
        )
    spec = model if isinstance(model, str) else register_model(model, name, metric, cache_key)
    options = tuple(f"{k}={v}" for k, v in (encode_options or {}).items())
    req = EvaluateRequest(
        encoders=(spec,),
        benchmark=Path(benchmark) if benchmark is not None else None,
        pools=Path(pools) if pools is not None else None,
        splits=splits,
        encode_set=options,
        engine=engine_values(engine, ray_address, ray_workers),
    )
    store = Store(Path(home) if home is not None else default_home())
    done = run_evaluation(req, store, quiet=quiet)
    return result_of(done)


def load_run(folder: str | Path, pool_id: str | None = None) -> Any:
    """A ranx ``Run`` of a search or bm25 output; see :mod:`mdcr.eval.trec`."""
    from mdcr.eval.trec import load_run as load

    return load(folder, pool_id)


def load_qrels(folder: str | Path, pool_id: str | None = None) -> Any:
    """A ranx ``Qrels`` of a pools output; see :mod:`mdcr.eval.trec`."""
    from mdcr.eval.trec import load_qrels as load

    return load(folder, pool_id)
