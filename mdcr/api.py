"""The Python API for notebooks: score a model object in one call, as MTEB users expect.

``mdcr.evaluate(model, benchmark=...)`` takes an in-memory SentenceTransformer, any object
with ``encode(list of str)``, an mdcr Encoder or an encoder spec string, runs the same
cached pipeline as ``mdcr evaluate`` and returns the results as a pandas DataFrame. The
model's identity is the hash of its weights plus its config
(:mod:`mdcr.encoders.in_memory`), so a second call with the same model is read from the
store, and a changed model is scored again.

``mdcr.ls()``, ``mdcr.show(fp)`` and ``mdcr.gc()`` are the store's catalog, as ``mdcr ls``,
``mdcr show`` and ``mdcr gc`` print it (:mod:`mdcr.catalog`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def evaluate(
    model: Any,
    *,
    benchmark: str | Path | None = None,
    pools: str | Path | None = None,
    name: str | None = None,
    metric: str | None = None,
    splits: tuple[str, ...] = (),
    home: str | Path | None = None,
    encode_options: dict[str, Any] | None = None,
    quiet: bool = True,
    engine: str = "local",
    ray_address: str = "",
    ray_workers: int = 0,
) -> pd.DataFrame:
    """Score ``model`` on an MDCR benchmark (or on pools); the CLI's numbers as a table.

    Benchmark: one row per (retriever, split, field) and an ``AVG`` row per split, with
    ``map``, ``ndcg`` and ``recall_5`` x100, rounded as the original scorer prints them.
    Pools: the score stage's per-pool means (retriever, pool_id, setup, split, field, size,
    rep, metric, value, n_queries).

    ``engine="ray"`` runs encoding and search on Ray (``ray_address``, else ``$RAY_ADDRESS``,
    else a local Ray instance with ``ray_workers`` CPUs); results are the same.
    """
    import pandas as pd

    from mdcr.benchmark.evaluate import EvaluateRequest
    from mdcr.benchmark.evaluate import evaluate as run_evaluation
    from mdcr.encoders.in_memory import register_model
    from mdcr.engine import engine_values
    from mdcr.home import find_home
    from mdcr.store import Store

    spec = model if isinstance(model, str) else register_model(model, name, metric)
    options = tuple(f"{k}={v}" for k, v in (encode_options or {}).items())
    req = EvaluateRequest(
        encoders=(spec,),
        benchmark=Path(benchmark) if benchmark is not None else None,
        pools=Path(pools) if pools is not None else None,
        splits=splits,
        encode_set=options,
        engine=engine_values(engine, ray_address, ray_workers),
    )
    found = find_home(home)
    store = Store(found.path, source=found.source)
    done = run_evaluation(req, store, quiet=quiet)
    if done.pools is not None:
        from mdcr.artifacts import POOL_MEANS

        return POOL_MEANS.read_pandas(done.scores[0])
    from mdcr.benchmark.score import read_official_results

    rows = []
    for retriever, by_split in read_official_results(done.result).items():
        for split, fields in by_split.items():
            for field, metrics in fields.items():
                rows.append({"retriever": retriever, "split": split, "field": field, **metrics})
    return pd.DataFrame(rows)


def load_run(folder: str | Path, pool_id: str | None = None) -> Any:
    """A ranx ``Run`` of a search or bm25 output; see :mod:`mdcr.eval.trec`."""
    from mdcr.eval.trec import load_run as load

    return load(folder, pool_id)


def load_qrels(folder: str | Path, pool_id: str | None = None) -> Any:
    """A ranx ``Qrels`` of a pools output; see :mod:`mdcr.eval.trec`."""
    from mdcr.eval.trec import load_qrels as load

    return load(folder, pool_id)


def ls(
    stage: str | None = None, *, retriever: str | None = None, home: str | Path | None = None
) -> pd.DataFrame:
    """The store's outputs as a table, as ``mdcr ls`` lists them: stage, fingerprint, name
    (retriever or encoder), params (those not at their default), date (UTC), bytes, state
    (complete, running, unfinished) and path; Lucene indexes too (stage ``lucene-index``).
    ``home``: the store (default: found as the CLI finds it, :mod:`mdcr.home`)."""
    import pandas as pd

    from mdcr import catalog
    from mdcr.catalog_text import ls_rows
    from mdcr.home import find_home

    entries = catalog.select(catalog.scan(find_home(home).path, stage), retriever)
    columns = ["stage", "fingerprint", "name", "params", "date", "bytes", "state", "path"]
    return pd.DataFrame(ls_rows(entries), columns=columns)


def show(ref: str | Path, *, home: str | Path | None = None) -> dict[str, Any]:
    """One output, as ``mdcr show`` describes it: a dict with its ``stage``,
    ``fingerprint``, ``path``, ``state``, ``bytes``, ``manifest``, ``used_by`` (the
    outputs that use it), ``numbers`` (its main numbers, as lines) and ``text`` (what
    ``mdcr show`` prints). ``ref``: a fingerprint (or 4+ of its first digits) or a
    folder."""
    from mdcr import catalog, catalog_text
    from mdcr.home import find_home

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

    from mdcr import catalog
    from mdcr.home import find_home

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
