"""The paper's published numbers, and the side-by-side comparison of ours with them.

Source: Medić & Šnajder (2022), "Large-scale Evaluation of Transformer-based Article
Encoders on the Task of Citation Recommendation" (SDP 2022); Tables 1, 2, 3, 4, 7 and 8,
transcribed exactly into ``mdcr/data/paper_results.json`` (values x 100, one decimal).

A number of ours is compared with the paper's only when the setup is the paper's: the
test split, the same model, dataset-level pools of 200k/500k/1M/2M or field-level pools
of 100k, and the same metric definition (MAP and nDCG at depth 500, R@30; MDCR: R@5).
"The same model" is decided by the retriever's built-in entry
(:mod:`mdcr.retrievers.builtin_entry`: the built-in record with a ``paper_name``, and BM25,
at its default setup), never by its name: a ``py:`` encoder called ``specter`` gets no paper row.
Published MDCR rows beyond the paper are matched the same way (and, where a row names the
model's commit, only at that commit).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mdcr.contracts.paper import MAG_FIELDS, MDCR_RECALL_K
from mdcr.measures import registry as measures

if TYPE_CHECKING:
    from mdcr.contracts.facts import BenchmarkOrigin

# The paper's column label -> our metric name: MAP, nDCG and R@30 of the pools (at depth
# 500), and MDCR's R@5 (``MAP``, ``nDCG``, ``R@30``, ``R@5``).
PAPER_METRICS = {
    measures.label(name): name
    for name in (*measures.PAPER_NAMES, measures.RECALL.name(MDCR_RECALL_K))
}
RANDOM = "random"


@lru_cache(maxsize=1)
def load_paper() -> dict[str, Any]:
    """The parsed ``paper_results.json`` (source citation, tables)."""
    text = resources.files("mdcr").joinpath("data/paper_results.json").read_text("utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


def citation() -> str:
    return str(load_paper()["source"]["citation"])


def paper_retrievers() -> list[str]:
    """Our names of the paper's models, in the order of the paper's tables."""
    from mdcr.retrievers.builtin import paper_names

    ours = {paper: name for name, paper in paper_names().items()}
    order: list[str] = []
    for t in load_paper()["tables"].values():
        models = t["groups"] if t["rows_are"] != "model" else list(t["rows"])
        order += [ours[m] for m in models if m in ours and ours[m] not in order]
    return order


def order_retrievers(names: Sequence[str]) -> list[str]:
    """The paper's models in its order, then the others alphabetically, random last."""
    paper = paper_retrievers()
    known = [n for n in paper if n in names]
    others = sorted(n for n in set(names) if n not in paper and n != RANDOM)
    return known + others + ([RANDOM] if RANDOM in names else [])


def retriever_label(name: str) -> str:
    """A retriever's display name: the paper's for its models, else its record's label
    (:mod:`mdcr.retrievers.builtin`), else the name."""
    from mdcr.retrievers.builtin import retriever_label as label

    return label(name)


def label_for(name: str, entry: Mapping[str, Any] | None) -> str:
    """A retriever's display name: the paper's or the registry's label when it is the
    built-in entry of that name, else its name as recorded."""
    from mdcr.retrievers.builtin_entry import builtin_key

    return retriever_label(name) if builtin_key(entry) == name else name


def paper_models(entries: Mapping[str, Mapping[str, Any] | None]) -> dict[str, str]:
    """Retriever name -> the paper's model it is, for the retrievers whose built-in entry is
    one of the paper's models at its default setup (the others are not compared)."""
    from mdcr.retrievers.builtin_entry import builtin_key, paper_model

    # One retriever per paper model: the one named after its entry, else the first by name.
    order = sorted(entries, key=lambda n: (builtin_key(entries[n]) != n, n))
    out: dict[str, str] = {}
    for name in order:
        model = paper_model(entries[name])
        if model is not None and model not in out.values():
            out[name] = model
    return dict(sorted(out.items()))


def field_order(fields: Sequence[str]) -> list[str]:
    """Fields in the paper's order (Table 5), then the others alphabetically."""
    known = [f for f in MAG_FIELDS if f in fields]
    return known + sorted(f for f in set(fields) if f not in MAG_FIELDS)


def paper_values() -> pd.DataFrame:
    """All published numbers in long form.

    Columns: table, setup, model (the paper's name), column (size label, field
    abbreviation or AVG, or candidate type), size (pool size for dataset- and field-level
    tables, else NaN), metric (the paper's label), value (x 100).
    """
    rows = []
    for tname, t in load_paper()["tables"].items():
        if "columns" in t:  # field-level: rows are models, columns fields, one metric
            for model, vals in t["rows"].items():
                for col, v in zip(t["columns"], vals, strict=True):
                    rows.append((tname, t["setup"], model, col, t["pool_size"], t["metric"], v))
            continue
        cells = [(g, m) for g in t["groups"] for m in t["metrics"]]
        sizes = dict(
            zip(t["groups"], t.get("group_values") or [None] * len(t["groups"]), strict=True)
        )
        for label, vals in t["rows"].items():
            for (g, m), v in zip(cells, vals, strict=True):
                if t["rows_are"] == "model":
                    model, col = label, g
                else:  # table 3: rows are fields, groups are models
                    model, col = g, label
                rows.append((tname, t["setup"], model, col, sizes.get(g), m, v))
    df = pd.DataFrame(
        rows, columns=["table", "setup", "model", "column", "size", "metric", "value"]
    )
    df["size"] = df["size"].astype("float64")
    return df


def compare_with_paper(
    ours: pd.DataFrame, models: Mapping[str, str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Our numbers next to the paper's, with deltas and the rank correlation of the models.

    ``ours`` has setup ('dataset' | 'field'), retriever, column (size label or field
    abbreviation or 'AVG'), size, metric (our name, e.g. ``map@500``) and value (x 100),
    already restricted to the test split. ``models``: retriever name -> the paper's model
    it is (:func:`paper_models`, from built-in entries); other retrievers are left out.
    Returns (cells, correlations): cells has table,
    column, metric, model, ours, paper, delta (ours - paper); correlations has table,
    column, metric, n_models, spearman (NaN below three models or for constant values).
    """
    paper = paper_values()
    paper = paper[paper["setup"].isin(["dataset", "field"])].copy()
    paper["metric_name"] = paper["metric"].map(PAPER_METRICS)
    mine = ours[ours["retriever"].isin(list(models))]
    mine = mine.assign(model=mine["retriever"].map(dict(models)))
    mine = mine.rename(columns={"metric": "metric_name", "value": "ours"})
    merged = paper.merge(
        mine[["setup", "model", "column", "size", "metric_name", "ours"]],
        on=["setup", "model", "column", "size", "metric_name"],
        how="inner",
    )
    cells = merged.rename(columns={"value": "paper"})[
        ["table", "column", "metric", "model", "ours", "paper"]
    ].copy()
    cells["delta"] = cells["ours"] - cells["paper"]
    cells = cells.reset_index(drop=True)  # the paper's order (merge keeps the left order)
    corr_rows = []
    for (table, column, metric), g in cells.groupby(["table", "column", "metric"], sort=False):
        corr_rows.append((table, column, metric, len(g), spearman(g["ours"], g["paper"])))
    corr = pd.DataFrame(corr_rows, columns=["table", "column", "metric", "n_models", "spearman"])
    return cells, corr


def spearman(a: pd.Series | np.ndarray, b: pd.Series | np.ndarray) -> float:
    """Spearman's rho of two orderings; NaN below three items or when either is constant."""
    from scipy.stats import spearmanr

    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if len(x) < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    return float(spearmanr(x, y).statistic)


# -- published MDCR results (beyond the paper) --------------------------------------------


@lru_cache(maxsize=1)
def load_published_mdcr() -> dict[str, Any]:
    """``published_mdcr.json``: MDCR test results published elsewhere, with their sources."""
    text = resources.files("mdcr").joinpath("data/published_mdcr.json").read_text("utf-8")
    return json.loads(text)  # type: ignore[no-any-return]


def published_mdcr(entry: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The published MDCR test rows of a retriever, by its built-in entry
    (:mod:`mdcr.retrievers.builtin_entry`), each with its source's citation (``field`` is a
    field name or ``AVG``; metrics x100 as published).

    A row applies only to the built-in entry it names, at its default setup, and, where
    the row records the model's ``commit``, only at that commit. A retriever that is not a
    built-in entry (a ``py:``/``hf:`` encoder, a model object, a scores file) gets none,
    whatever its name.
    """
    from mdcr.retrievers.builtin_entry import default_setup, model_commit

    key = default_setup(entry)
    if key is None:
        return []
    data = load_published_mdcr()
    commit = model_commit(entry)
    return [
        {**row, "citation": data["sources"][row["source"]]["citation"]}
        for row in data["results"]
        if row["retriever"] == key and row.get("commit") in (None, commit)
    ]


def comparable_with_published(origin: BenchmarkOrigin | None) -> bool:
    """Whether published MDCR numbers (the paper's Tables 3 and 4, the SPECTER2 card, the
    MDCR README) may stand beside ours on a benchmark: only on the official release, proven
    by provenance (``mdcr download mdcr``, or files registered as declared by the user; see
    :mod:`mdcr.benchmark.release`). Any other benchmark, in the release's layout or built by
    mdcr, has other queries and candidates."""
    return origin is not None and origin.official
