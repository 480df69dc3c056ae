"""The Python API for notebooks: score a model object in one call, as MTEB users expect.

``mdcr.evaluate(model, benchmark=...)`` takes an in-memory SentenceTransformer, any object
with ``encode(list of str)``, an mdcr Encoder or an encoder spec string, runs the same
cached pipeline as ``mdcr evaluate`` and returns an
:class:`~mdcr.evaluation.result.EvaluationResult`: a ``summary`` and a ``per_pool`` pandas
DataFrame of the same columns in both modes (percent) and the ``report_path``. The
model's identity is the hash of its weights, config and whole state (arrays, tensors and
modules at any depth) plus its class's code (:mod:`mdcr.encoders.models.in_memory`), so a second
call with the same model is read from the store, and a changed model is scored again. A
model whose state cannot be hashed (it holds a lock or an open file) is refused in one line
that asks for ``cache_key=``.

``mdcr.ls()``, ``mdcr.show(fp)``, ``mdcr.gc()`` and ``mdcr.verify()`` are the store's
catalog, as ``mdcr ls``, ``mdcr show``, ``mdcr gc`` and ``mdcr verify`` print it
(:mod:`mdcr.catalog.entries`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from mdcr.evaluation.result import EvaluationResult


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
    progress: bool = True,
    engine: str = "local",
    ray_address: str = "",
    ray_workers: int = 0,
) -> EvaluationResult:
    """Score ``model`` on an MDCR benchmark (or on pools); the CLI's numbers as frames.

    Returns an :class:`~mdcr.evaluation.result.EvaluationResult`, the same in both modes:

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

    ``progress``: the stages' progress bars, as the CLI shows them (``tqdm.auto``: a
    notebook's widget where it applies, else text on stderr); ``progress=False`` hides
    them. ``quiet`` (default True) hides the status lines (``store: ...``, ``[step]
    running ...``); ``quiet=False`` shows them as the CLI does.

    ``engine="ray"`` runs encoding and search on Ray (``ray_address``, else ``$RAY_ADDRESS``,
    else a local Ray instance with ``ray_workers`` CPUs); results are the same.
    """
    from mdcr.core.errors import ConfigError
    from mdcr.core.hints import typed_in
    from mdcr.core.home import find_home
    from mdcr.core.stage import progress_bars
    from mdcr.core.store import Store
    from mdcr.encoders.models.in_memory import register_model
    from mdcr.engine import engine_values
    from mdcr.evaluation.request import EvaluateRequest, typed_arguments
    from mdcr.evaluation.run import run_request

    for label, value in (("benchmark", benchmark), ("pools", pools), ("home", home)):
        if value is not None and not isinstance(value, str | os.PathLike):
            raise ConfigError(
                f"{label}={value!r}: give a folder as a str or a pathlib.Path, "
                f"e.g. {label}='data/mdcr'"
            )
    if name is not None:
        from mdcr.encoders.naming import NAME, name_rule

        if not isinstance(name, str) or ":" in name or not NAME.match(name):
            raise ConfigError(f"name={name!r}: {name_rule(str(name))}")
    if isinstance(splits, str):  # splits="test" means that one split
        splits = (splits,)
    if isinstance(model, str) and cache_key is not None:
        raise ConfigError(
            f"cache_key applies to a model object, not to the encoder spec '{model}' "
            "(which is identified by its own rule); drop cache_key"
        )
    # The name labels the retriever (NAME=SPEC), never the model: renaming re-scores only.
    spec = model if isinstance(model, str) else register_model(model, None, metric, cache_key)
    options = tuple(f"{k}={v}" for k, v in (encode_options or {}).items())
    req = EvaluateRequest(
        encoders=(spec,),
        benchmark=Path(benchmark) if benchmark is not None else None,
        pools=Path(pools) if pools is not None else None,
        splits=splits,
        encode_set=options,
        name=name or "",
        engine=engine_values(engine, ray_address, ray_workers),
    )
    with typed_in(
        "python", "evaluate", {"encode": "encode_options"}, **typed_arguments(req, "python")
    ):
        found = find_home(home, holding=pools or benchmark)  # the store of the scored pools
        store = Store(found.path, source=found.source)
        with progress_bars(progress):  # bars even when quiet, as the CLI shows them
            return run_request(req, store, quiet=quiet)


def load_run(folder: str | Path, pool_id: str | None = None) -> Any:
    """A ranx ``Run`` of a search or bm25 output; see :mod:`mdcr.scoring.trec`."""
    from mdcr.scoring.trec import load_run as load

    return load(folder, pool_id)


def load_qrels(folder: str | Path, pool_id: str | None = None) -> Any:
    """A ranx ``Qrels`` of a pools output; see :mod:`mdcr.scoring.trec`."""
    from mdcr.scoring.trec import load_qrels as load

    return load(folder, pool_id)


def ls(
    stage: str | None = None, *, retriever: str | None = None, home: str | Path | None = None
) -> pd.DataFrame:
    """The store's outputs as a table, as ``mdcr ls`` lists them: stage, fingerprint, name
    (retriever or encoder), params (those not at their default), date (UTC), bytes, state
    (complete, running, unfinished, damaged) and path; Lucene indexes too (stage ``lucene-index``).
    ``home``: the store (default: found as the CLI finds it, :mod:`mdcr.core.home`)."""
    import pandas as pd

    from mdcr.catalog import entries as catalog
    from mdcr.catalog.text import ls_rows
    from mdcr.core.home import find_home

    entries = catalog.select(catalog.scan(find_home(home).path, stage), retriever)
    columns = ["stage", "fingerprint", "name", "params", "date", "bytes", "state", "path"]
    return pd.DataFrame(ls_rows(entries), columns=columns)


def show(ref: str | Path, *, home: str | Path | None = None) -> dict[str, Any]:
    """One output, as ``mdcr show`` describes it: a dict with its ``stage``,
    ``fingerprint``, ``path``, ``state``, ``bytes``, ``manifest``, ``used_by`` (the
    outputs that use it), ``numbers`` (its main numbers, as lines) and ``text`` (what
    ``mdcr show`` prints). ``ref``: a fingerprint (or 4+ of its first digits) or a
    folder."""
    from mdcr.catalog import entries as catalog
    from mdcr.catalog import text as catalog_text
    from mdcr.core.home import find_home

    entry = catalog.find(find_home(home).path, str(ref))
    everything = catalog.scan(entry.path.parent.parent, size=False)
    return {
        "stage": entry.stage,
        "fingerprint": entry.fingerprint,
        "path": entry.path,
        "state": entry.state,
        "bytes": entry.bytes,
        "manifest": entry.manifest,
        "used_by": sorted({u.key for u in catalog.users(everything).get(entry.fingerprint, [])}),
        "numbers": catalog_text.numbers_lines(entry),
        "text": "\n".join(catalog_text.show_lines(entry)),
    }


def gc(*stages: str, dry_run: bool = True, home: str | Path | None = None) -> pd.DataFrame:
    """What ``mdcr gc`` lists (what no result uses, and unfinished work): stage,
    fingerprint, path, bytes, reason. ``dry_run=False`` also removes them, as
    ``mdcr gc --yes`` does."""
    import pandas as pd

    from mdcr.catalog import entries as catalog
    from mdcr.core.home import find_home

    items = catalog.garbage(catalog.scan(find_home(home).path), stages)
    table = pd.DataFrame(
        [
            {
                "stage": g.entry.stage,
                "fingerprint": g.entry.fingerprint,
                "path": str(g.entry.path),
                "bytes": g.entry.bytes,
                "reason": g.reason,
            }
            for g in items
        ],
        columns=["stage", "fingerprint", "path", "bytes", "reason"],
    )
    if not dry_run:
        catalog.remove(items, echo=lambda _: None)
    return table


def verify(ref: str | Path | None = None, *, home: str | Path | None = None) -> pd.DataFrame:
    """Every file of one finished output (``ref``: a fingerprint, 4+ of its first digits,
    or a folder) or of every output, checked against its manifest (size and full sha256),
    as ``mdcr verify`` does it: stage, fingerprint, path, bytes, ok, problem (the file that
    is not what the manifest records, empty when ok)."""
    import pandas as pd

    from mdcr.catalog import entries as catalog
    from mdcr.core.home import find_home

    where = find_home(home).path
    entries = [catalog.find(where, str(ref))] if ref is not None else catalog.scan(where)
    return pd.DataFrame(
        [
            {
                "stage": v.entry.stage,
                "fingerprint": v.entry.fingerprint,
                "path": str(v.entry.path),
                "bytes": v.entry.bytes,
                "ok": v.damage is None,
                "problem": "" if v.damage is None else str(v.damage),
            }
            for v in catalog.verify(entries)
        ],
        columns=["stage", "fingerprint", "path", "bytes", "ok", "problem"],
    )
