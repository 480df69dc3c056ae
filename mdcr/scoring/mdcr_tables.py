"""The MDCR benchmark's tables and printouts, from benchmark-score's per-query values:
the mean over each field's queries and the plain mean over fields (AVG), the original
scorer's rounding and printout, the paper's Table 3 and Table 4 layouts and the nDCG
table, the candidate types' order and labels. benchmark-score's own report and the pools
report's MDCR section draw them alike (:mod:`mdcr.scoring.mdcr_report`); the scores they
take are computed in :mod:`mdcr.benchmark.scoring`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from mdcr.contracts.paper import MDCR_FIXED_TYPES as FIXED_TYPES
from mdcr.contracts.paper import MDCR_POSITIVE as POSITIVE
from mdcr.contracts.paper import MDCR_RECALL_K, field_abbreviation
from mdcr.measures import registry as measures
from mdcr.retrievers.builtin import MDCR_MODELS as PAPER_MODELS
from mdcr.scoring.published import field_order, order_retrievers, retriever_label

if TYPE_CHECKING:
    from mdcr.scoring.tables import Table

# MDCR's stored measure names (section 4.2): MAP and nDCG over the whole candidate list
# (``map``, ``ndcg``) and R@5 (``recall@5``); Tables 3 and 4 show MAP and R@5.
MDCR_METRICS = measures.MDCR_NAMES
R_AT_K = measures.RECALL.name(MDCR_RECALL_K)
TABLE_METRICS = (measures.MAP.name(None), R_AT_K)
ALL = "all"  # the subset name of the full candidate lists
# Table 4's columns are kinds of negative candidates, not retrievers: the label says how a
# column's candidates were chosen; the paper's column names (the keys of
# mdcr/data/paper_results.json) are used only to find the paper's numbers. A model-based
# type's label and column come from its retriever's record (mdcr/retrievers/builtin.py);
# the fixed types' are these.
FIXED_TYPE_LABELS = {
    "graph": "citation graph",
    "most_cited": "most cited",
    "random": "random papers",
}
FIXED_TYPE_COLUMNS = {"graph": "Graph", "most_cited": "Most cited", "random": "Random"}
AVG = "AVG"


def type_order(types: Iterable[str]) -> list[str]:
    """Candidate types in the paper's order: the paper's model types (bm25, specter,
    scincl), other model types as given, graph, most_cited, random, and ``true`` last (the
    order the original scorer reads them in is irrelevant: a candidate's label is 1 iff it
    is in ``true``)."""
    seen = list(dict.fromkeys(types))
    others = [t for t in seen if t not in (*FIXED_TYPES, POSITIVE)]
    models = [m for m in PAPER_MODELS if m in others] + [t for t in others if t not in PAPER_MODELS]
    fixed = [t for t in FIXED_TYPES if t in seen]
    return models + fixed + ([POSITIVE] if POSITIVE in seen else [])


def type_label(candidate_type: str) -> str:
    """A Table 4 column's label: how the type's candidates were chosen."""
    from mdcr.retrievers.builtin import negative_type_label

    return (
        FIXED_TYPE_LABELS.get(candidate_type)
        or negative_type_label(candidate_type)
        or f"chosen by {retriever_label(candidate_type)}"
    )


def paper_type_column(candidate_type: str) -> str | None:
    """The paper's Table 4 column of a candidate type (None: not one of the paper's)."""
    from mdcr.retrievers.builtin import record_for

    record = record_for(candidate_type)
    if record is not None and record.mdcr_negative is not None:
        return record.mdcr_negative.label
    return FIXED_TYPE_COLUMNS.get(candidate_type)


def queries_without_positives(bench: pd.DataFrame) -> pd.DataFrame:
    """Per split and field, the queries whose ``true`` list is empty: split, field, n
    (only fields that have such queries). They score 0 and count, as in the original."""
    keys = ["split", "field", "query_id"]
    has_pos = (bench["candidate_type"] == POSITIVE).groupby([bench[k] for k in keys]).any()
    none = has_pos[~has_pos].reset_index()
    return (
        none.groupby(["split", "field"], sort=True)
        .size()
        .rename("n")
        .reset_index()
        .astype({"n": np.int64})
    )


def without_positives_line(counts: pd.DataFrame, split: str) -> str:
    """One sentence naming how many queries of a split have no positive, per field."""
    sub = counts[counts["split"] == split]
    if sub.empty:
        return ""
    total = int(sub["n"].sum())
    where = ", ".join(f"{f}: {n}" for f, n in zip(sub["field"], sub["n"], strict=True))
    return (
        f"{total} {'query has' if total == 1 else 'queries have'} an empty `true` list "
        f"({where}); {'it scores' if total == 1 else 'they score'} 0 and count in the field "
        "means, as in the original scorer (pytrec_eval scores a query whose judgments are "
        "all 0 as 0)."
    )


def field_means(per_query: pd.DataFrame) -> pd.DataFrame:
    """Mean over each field's queries; keys are all columns but query_id and value."""
    keys = [c for c in per_query.columns if c not in ("query_id", "value")]
    return (
        per_query.groupby(keys, sort=True)["value"]
        .agg(value="mean", n_queries="size")
        .reset_index()
    )


def macro_means(per_field: pd.DataFrame) -> pd.DataFrame:
    """The plain mean of the field values over the fields (each field counts once)."""
    keys = [c for c in per_field.columns if c not in ("field", "value", "n_queries")]
    return (
        per_field.groupby(keys, sort=True)["value"].agg(value="mean", n_fields="size").reset_index()
    )


def official_round(per_field: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The original scorer's printed numbers: per field ``round(100 * mean, 4)``; the
    average is ``round(mean of the rounded field values, 4)`` (numpy rounding, as there)."""
    fields = per_field.assign(value=np.round(100 * per_field["value"].to_numpy(), 4))
    keys = [c for c in per_field.columns if c not in ("field", "value", "n_queries")]
    avg = (
        fields.groupby(keys, sort=True)["value"]
        .agg(lambda v: float(np.round(np.mean(v.to_numpy()), 4)))
        .reset_index()
    )
    return fields, avg


def official_key(name: str) -> str:
    """The original scorer's key of a measure (pytrec_eval's name): ``map``, ``recall_5``."""
    measure, k = measures.parse(name)
    return measure.pytrec_eval_name(k)


def _labeller(labels: Mapping[str, str] | None) -> Callable[[object], str]:
    """A retriever's display name: from ``labels`` (identity-checked by the caller), else
    its name as recorded."""
    given = dict(labels or {})
    return lambda r: given.get(str(r), str(r))


def table3(
    per_field: pd.DataFrame,
    macro: pd.DataFrame,
    split: str,
    name: str = "",
    labels: Mapping[str, str] | None = None,
) -> Table:
    """Table 3 layout: rows the fields and AVG; per retriever MAP and R@5 (x100).

    ``labels``: display names of retrievers (e.g. the paper's, for built-in entries only);
    the others show their names."""
    from mdcr.scoring.tables import build_table

    pf = per_field[(per_field["split"] == split) & (per_field["subset"] == ALL)]
    mc = macro[(macro["split"] == split) & (macro["subset"] == ALL)]
    data = pd.concat([pf, mc.assign(field=AVG)], ignore_index=True)
    data = data[data["metric"].isin(TABLE_METRICS)]
    retrievers = order_retrievers(sorted(data["retriever"].unique()))
    fields = [*field_order(sorted(pf["field"].unique())), AVG]
    table = build_table(
        data,
        name=name or f"mdcr_{split}_table3",
        title=f"MDCR {split}: MAP and R@5 per field (Table 3 layout)",
        row="field",
        col="retriever",
        sub="metric",
        value="value",
        rows=fields,
        cols=retrievers,
        subs=list(TABLE_METRICS),
        row_labels=lambda f: f if f == AVG else field_abbreviation(f),
        col_labels=_labeller(labels),
        sub_labels=measures.label,
        row_header="Fields",
        bold_best=False,
        rule_before=[AVG],
    )
    _bold_row_best(table, retrievers)
    return table


def _bold_row_best(table: Table, retrievers: list[str]) -> None:
    """Bold the best retriever of each row and metric (the paper bolds per field)."""
    cells = table.cells
    subs = list(dict.fromkeys(s for _, s in table.columns))
    for r in table.rows:
        for s in subs:
            vals = [
                (cells[(r, c)].mean, c)
                for c in table.columns
                if c[1] == s and (r, c) in cells and not np.isnan(cells[(r, c)].mean)
            ]
            if len(vals) > 1:
                best = max(v for v, _ in vals)
                for v, c in vals:
                    cells[(r, c)].bold = v == best


def table_ndcg(
    per_field: pd.DataFrame,
    macro: pd.DataFrame,
    split: str,
    labels: Mapping[str, str] | None = None,
) -> Table:
    """nDCG per field (rows fields and AVG, columns retrievers): the metric Table 3 omits."""
    from mdcr.scoring.tables import build_table

    pf = per_field[(per_field["split"] == split) & (per_field["subset"] == ALL)]
    mc = macro[(macro["split"] == split) & (macro["subset"] == ALL)]
    data = pd.concat([pf, mc.assign(field=AVG)], ignore_index=True)
    data = data[data["metric"] == measures.NDCG.name(None)]
    retrievers = order_retrievers(sorted(data["retriever"].unique()))
    table = build_table(
        data,
        name=f"mdcr_{split}_ndcg",
        title=f"MDCR {split}: nDCG (whole candidate list) per field",
        row="field",
        col=None,
        sub="retriever",
        value="value",
        rows=[*field_order(sorted(pf["field"].unique())), AVG],
        subs=retrievers,
        row_labels=lambda f: f if f == AVG else field_abbreviation(f),
        sub_labels=_labeller(labels),
        row_header="Fields",
        rule_before=[AVG],
    )
    _bold_row_best(table, retrievers)
    return table


def table4(macro: pd.DataFrame, split: str, labels: Mapping[str, str] | None = None) -> Table:
    """Table 4 layout: rows the retrievers and AVG; per candidate type MAP and R@5 (x100),
    each on the positives plus that type's negatives, macro-averaged over fields."""
    from mdcr.scoring.tables import build_table

    mc = macro[(macro["split"] == split) & (macro["subset"] != ALL)]
    mc = mc[mc["metric"].isin(TABLE_METRICS)]
    retrievers = order_retrievers(sorted(mc["retriever"].unique()))
    avg = mc.groupby(["subset", "metric"], sort=True)["value"].mean().reset_index()
    data = pd.concat([mc, avg.assign(retriever=AVG)], ignore_index=True)
    types = type_order(mc["subset"].unique())
    return build_table(
        data,
        name=f"mdcr_{split}_table4",
        title=f"MDCR {split}: MAP and R@5 with the negatives of one kind (Table 4 layout)",
        row="retriever",
        col="subset",
        sub="metric",
        value="value",
        rows=[*retrievers, AVG],
        cols=types,
        subs=list(TABLE_METRICS),
        row_labels=lambda r: r if r == AVG else _labeller(labels)(r),
        # A benchmark's type names are bound to the registry (benchmark build refuses a run
        # that only calls itself by a built-in's name), so a type's label is the registry's.
        col_labels=lambda t: type_label(str(t)),
        sub_labels=measures.label,
        row_header="Models",
        bold_best=True,
        no_bold_rows=[AVG],
        rule_before=[AVG],
    )


def summary_lines(per_field: pd.DataFrame, split: str, retriever: str) -> list[str]:
    """The original scorer's printout for one retriever: a line per field, then AVG."""
    sub = per_field[
        (per_field["split"] == split)
        & (per_field["subset"] == ALL)
        & (per_field["retriever"] == retriever)
    ]
    fields, avg = official_round(sub)
    lines = []
    for field in field_order(sorted(fields["field"].unique())):
        f = fields[fields["field"] == field].set_index("metric")["value"]
        lines.append("\t".join([field] + [f"{official_key(m)}: {f[m]:g}" for m in MDCR_METRICS]))
    a = avg.set_index("metric")["value"]
    lines.append("")
    lines.append("\t".join([AVG] + [f"{official_key(m)}: {a[m]:g}" for m in MDCR_METRICS]))
    return lines
