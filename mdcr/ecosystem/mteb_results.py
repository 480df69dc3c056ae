"""``mdcr export --format mteb-results``: scored retrievers as MTEB result files (every
retriever of the output, or the one ``--retriever`` names).

The layout of MTEB's results repository, written by MTEB's own ``ResultCache``::

    <out>/results/<model name>/<revision>/model_meta.json
    <out>/results/<model name>/<revision>/mdcr.<folder>.json   one TaskResult per task

The model name is the retriever's name, the revision the fingerprint of the run (search,
bm25) or ranking (benchmark-rank) that was scored. A task is what
``mdcr.mteb.tasks`` makes of ``mdcr export --format beir`` (the same names):

- a score output: one task per pool, ``mdcr.<pool id as a folder name>``, under the pool's
  split, with ``map_at_<depth>``, ``ndcg_at_<depth>`` and ``recall_at_<k>`` (main score
  MAP), the means over the pool's queries;
- a benchmark-score output: one task per field, ``mdcr.<field as a folder name>``, per
  split, with ``map_at_1000``, ``ndcg_at_1000`` (every candidate ranked) and
  ``recall_at_5``: the means over the field's queries (subset ``all``).

``ResultCache(out).load_results(require_model_meta=True, include_remote=False)`` reads
them back, as any MTEB result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mdcr.core.errors import ConfigError, require
from mdcr.ecosystem.beir.export import folder_name
from mdcr.exports.registry import EXPORTS, Export, ExportRequest

TASK_PREFIX = "mdcr."


def _pick(names: list[str], wanted: str | None, where: Path) -> list[str]:
    """The retrievers to write: ``wanted``, else every one ``where`` scores."""
    if wanted:
        if wanted not in names:
            raise ConfigError(
                f"export --retriever: '{where}' scores no '{wanted}'; it scores: {', '.join(names)}"
            )
        return [wanted]
    return names


def _retrievers(score: Path, kind: str, wanted: str | None) -> list[str]:
    if kind == "score":
        from mdcr.contracts.artifacts import POOL_MEANS

        names = POOL_MEANS.read_pandas(score)["retriever"].astype(str)
    else:
        names = _read_parquet(score / "per_query.parquet")["retriever"].astype(str)
    return _pick(sorted(set(names)), wanted, score)


def _pool_scores(score: Path, name: str) -> tuple[str, str, dict[str, Any]]:
    """(retriever, run fingerprint, {task: {split: scores}}) of one retriever of a score
    output."""
    from mdcr.contracts.artifacts import POOL_MEANS, POOL_META
    from mdcr.contracts.outputs import input_paths, score_info
    from mdcr.measures.registry import parse

    means = POOL_MEANS.read_pandas(score).astype({"retriever": str, "pool_id": str})
    found = score_info(score)
    runs = list(found[1].runs) if found else []
    fingerprint = next((str(r["fingerprint"]) for r in runs if r.get("retriever") == name), "")
    pools = input_paths(score, "pools")
    meta = POOL_META.read_pandas(pools[0]).astype({"pool_id": str}) if pools else None
    split_of = (
        dict(zip(meta["pool_id"], meta["split"].astype(str), strict=True))
        if meta is not None
        else {}
    )
    out: dict[str, Any] = {}
    for pool_id, g in means[means["retriever"] == name].groupby("pool_id", sort=True):
        scores: dict[str, Any] = {}
        for metric, value in zip(g["metric"], g["value"], strict=True):
            measure, k = parse(str(metric))
            key = measure.mteb_name(k) if k is not None else None
            if key is None:
                continue  # a measure MTEB's results have no key for
            scores[key] = float(value)
            if measure.kind == "map":
                scores["main_score"] = float(value)
        task = TASK_PREFIX + folder_name(str(pool_id))
        out[task] = {split_of.get(str(pool_id), "test"): scores}
    return name, fingerprint, out


def _mdcr_scores(score: Path, name: str) -> tuple[str, str, dict[str, Any]]:
    """(retriever, ranking fingerprint, {task: {split: scores}}) of one retriever of a
    benchmark-score output."""
    from mdcr.core.manifests import read_manifest

    per_query = _read_parquet(score / "per_query.parquet")
    per_query = per_query[per_query["subset"] == "all"].astype({"retriever": str, "field": str})
    manifest = read_manifest(score) or {}
    ranked = zip(manifest["info"]["retrievers"], manifest["inputs"]["ranks"], strict=False)
    fingerprint = next((str(r["fingerprint"]) for n, r in ranked if n == name), "")
    names = {"map": "map_at_1000", "ndcg": "ndcg_at_1000", "recall@5": "recall_at_5"}
    out: dict[str, Any] = {}
    rows = per_query[per_query["retriever"] == name]
    means = rows.groupby(["field", "split", "metric"], sort=True)["value"].mean()
    for (field_name, split, metric), value in means.items():
        task = TASK_PREFIX + folder_name(str(field_name))
        scores = out.setdefault(task, {}).setdefault(str(split), {})
        scores[names.get(str(metric), str(metric))] = float(value)
        if metric == "map":
            scores["main_score"] = float(value)
    return name, fingerprint, out


def _read_parquet(path: Path) -> Any:
    import pandas as pd

    if not path.is_file():
        raise ConfigError(f"'{path.parent}' has no {path.name}; give a benchmark-score output")
    return pd.read_parquet(path)


def write_results(score: Path, out: Path, retriever: str | None = None) -> list[Path]:
    """Write the scores in ``score`` of ``retriever`` (default: every retriever it scores)
    as MTEB result files in the results cache ``out``; return them."""
    require("mteb")
    from mdcr.contracts.outputs import stage_of

    kind = stage_of(score)
    if kind not in ("score", "benchmark-score"):
        raise ConfigError(
            f"export --format mteb-results: '{score}' is a {kind or 'folder of no stage'}; "
            "give a score or benchmark-score output"
        )
    written = []
    for name in _retrievers(score, str(kind), retriever):
        scored = _pool_scores(score, name) if kind == "score" else _mdcr_scores(score, name)
        written += _write_model(out, *scored)
    return written


def _write_model(out: Path, name: str, fingerprint: str, tasks: dict[str, Any]) -> list[Path]:
    """One retriever's tasks, written by MTEB's ``ResultCache`` under ``out``."""
    import mteb
    from mteb.cache import ResultCache
    from mteb.models.model_meta import ModelMeta
    from mteb.results import TaskResult

    meta = ModelMeta.create_empty(overwrites={"name": name, "revision": fingerprint or "mdcr"})
    cache = ResultCache(out)
    written = []
    for task, splits in sorted(tasks.items()):
        result = TaskResult(
            dataset_revision="local",
            task_name=task,
            mteb_version=mteb.__version__,
            scores={
                split: [{**s, "hf_subset": "default", "languages": ["eng-Latn"]}]
                for split, s in splits.items()
            },
            evaluation_time=None,
        )
        cache.save_to_cache(result, meta)
        written.append(cache.get_task_result_path(task_name=task, model_name=meta))
    return written


def export_mteb_results(request: ExportRequest) -> list[str]:
    """``mdcr export --format mteb-results --run SCORES``: the result files written."""
    assert request.run is not None
    return [str(p) for p in write_results(request.run, request.out, request.retriever)]


def _mteb_export(kind: str, help: str) -> Export:
    return Export(
        format="mteb-results",
        kind=kind,
        write=export_mteb_results,
        help=help,
        usage="--run SCORES (a score or benchmark-score output), and no --qrels",
        writes="the MTEB result files",
        run="required",
        qrels="refused",
        options=frozenset({"retriever"}),
    )


EXPORTS.register(_mteb_export("pools", "a score output as MTEB result files, one task per pool"))
EXPORTS.register(
    _mteb_export("benchmark", "a benchmark-score output as MTEB result files, one task per field")
)
