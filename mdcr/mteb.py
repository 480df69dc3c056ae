"""MDCR and mdcr's pools as MTEB tasks: ``mteb.evaluate(model, mdcr.mteb.tasks(EXPORT))``.

``EXPORT`` is a folder written by ``mdcr export --format beir``; each of its folders (a
pool, or an MDCR field) becomes one retrieval task that MTEB's own loader reads from the
folder (:mod:`mdcr.ecosystem.beir.layout`), named ``mdcr.<folder>``.

The same cut-offs as mdcr. MTEB reports ``map_at_k``, ``ndcg_at_k`` and ``recall_at_k``
for its ``k_values`` (pytrec_eval's ``map_cut``, ``ndcg_cut``, ``recall``). mdcr's pool
measures are MAP@500 and nDCG@500 (only the top 500 count) and R@30, so a pool task's
``k_values`` hold 500 and 30 and mdcr's numbers are ``map_at_500``, ``ndcg_at_500`` and
``recall_at_30`` (MTEB's default k stop at 1000, whose MAP counts more ranks). MDCR ranks
all of a query's candidates, so its MAP and nDCG are MTEB's at any k past the longest
list (``map_at_1000``, ``ndcg_at_1000``) and its R@5 is ``recall_at_5``; an MDCR task
reranks each query's candidate list (``top_ranked``), as MDCR does.

What else makes the numbers agree:

- mdcr never ranks a query paper in its own pool ranking; a pool task sets MTEB's
  ``ignore_identical_ids`` and retrieves 1000 documents, so at least 500 remain once the
  query is taken out;
- MDCR's qrels judge every candidate (0 or 1), so a query with an empty ``true`` list
  stays in MTEB's average and scores 0, as in the original scorer;
- ties: MTEB and pytrec_eval order equal scores by document id descending, as MDCR's
  scoring does; mdcr's pool runs order them by paper id ascending (exact ties only);
- MTEB scores float32 vectors, mdcr stores float16 ones: near ties can swap (MiniLM on a
  pool of 600: a mean moves in its 5th decimal, far below what mdcr prints).

Prompts: a model sees the task's name (``mdcr.<folder>``), type ``Retrieval`` and the
prompt type (query or document); ``mdcr.evaluate`` gives an MTEB model the same type and
prompt types (:mod:`mdcr.encoders.models.mteb_model`), so a model's query and document prompts
(and type-level ones) apply alike in both. Needs the ``ecosystem`` extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mdcr.core.errors import require

POOL_K = (1, 3, 5, 10, 20, 100, 1000)
TASK_PREFIX = "mdcr."


def _k_values(entry: dict[str, Any]) -> tuple[int, ...]:
    ks = set(POOL_K) | {int(entry["recall_k"])}
    if entry.get("depth"):
        ks.add(int(entry["depth"]))
    return tuple(sorted(ks))


def main_score(entry: dict[str, Any]) -> str:
    """MTEB's name for mdcr's MAP of this folder (``map_at_500``, or ``map_at_1000``)."""
    return f"map_at_{int(entry['depth']) or 1000}"


def task(folder: str | Path, entry: dict[str, Any] | None = None) -> Any:
    """The MTEB retrieval task of one exported folder."""
    require("mteb")
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.task_metadata import TaskMetadata

    from mdcr.ecosystem.beir.export import read_index

    folder = Path(folder).resolve()
    if entry is None:
        entry = read_index(folder.parent)["folders"][folder.name]
    what = f"pool {entry['pool_id']}" if "pool_id" in entry else f"MDCR field {entry['field']}"
    metadata = TaskMetadata(
        name=TASK_PREFIX + folder.name,
        description=f"{what}, exported by mdcr (Medić & Šnajder, 2022)",
        dataset={"path": str(folder), "revision": "local"},
        type="Retrieval",
        category="t2t",
        modalities=["text"],
        eval_splits=list(entry["splits"]),
        eval_langs=["eng-Latn"],
        main_score=main_score(entry),
        reference="https://aclanthology.org/2022.emnlp-main.263/",
        domains=["Academic"],
    )
    attrs = {
        "metadata": metadata,
        "k_values": _k_values(entry),
        "ignore_identical_ids": bool(entry["query_left_out_of_its_ranking"]),
    }
    attrs["load_data"] = _load_uncached
    cls = type(f"Mdcr_{folder.name}", (AbsTaskRetrieval,), attrs)
    return cls()


def _load_uncached(self: Any, *args: Any, **kwargs: Any) -> Any:
    """MTEB's loading, with the HF datasets cache of this task object alone.

    HF datasets caches a local folder's files under the folder's name and its dataset
    card's configs, so a second export of another pool to a folder of the same name would be
    read back from the first one's cache: a stale number. Each task object parses its own
    files into its own temporary cache instead (kept while the task lives)."""
    import tempfile

    import datasets.config
    from mteb.abstasks.retrieval import AbsTaskRetrieval

    if getattr(self, "_mdcr_cache", None) is None:
        self._mdcr_cache = tempfile.TemporaryDirectory(prefix="mdcr-mteb-")
    before = datasets.config.HF_DATASETS_CACHE
    datasets.config.HF_DATASETS_CACHE = Path(self._mdcr_cache.name)
    try:
        return AbsTaskRetrieval.load_data(self, *args, **kwargs)
    finally:
        datasets.config.HF_DATASETS_CACHE = before


def tasks(export: str | Path) -> list[Any]:
    """One task per folder of an ``mdcr export --format beir`` output, in name order."""
    from mdcr.ecosystem.beir.export import read_index

    export = Path(export)
    index = read_index(export)
    return [task(export / name, entry) for name, entry in sorted(index["folders"].items())]
