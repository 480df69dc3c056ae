"""MDCR benchmark scoring with the original scorer's semantics, and the paper's Tables 3 and 4.

The original scorer (``evaluate.py`` of github.com/zoranmedic/mdcr) does, per field:
binary qrels from the ``"true"`` lists (every other candidate is judged 0); a run with the
model's score for every candidate of the query; pytrec_eval's ``map``, ``ndcg`` (no
cut-off: the whole candidate list) and ``recall_5``; the mean over the field's queries,
x100, rounded to 4 decimals; then the plain mean of the field values over the fields,
rounded to 4 decimals. This module computes the same numbers with ranx:

- Ranks come from the scores with trec_eval's order (``ties="trec_eval"``, the default):
  score descending, then paper id *descending* as a byte string (``strcmp``), which is how
  trec_eval, hence pytrec_eval and the original scorer, order a query's results. So even
  tied scores give exactly the original's numbers. ``ties="paper_id"`` breaks ties by
  paper id ascending instead (the project's rule for runs). Either way ranx is fed
  ``-rank``, a value falling strictly with rank, so it applies no tie rule of its own.
- A query whose ``true`` list is empty (or missing) but has candidates scores 0 in every
  metric and counts in its field's mean, as in the original: pytrec_eval evaluates every
  query of the qrels, and one whose judgments are all 0 gets 0. Such queries are counted
  (:func:`queries_without_positives`) and reported. A query without any candidate has no
  row in the internal form and is not scored (pytrec_eval skips it too).
- :func:`official_round` reproduces the original's rounding (per field, then the mean of
  the rounded field values); unrounded values are kept in the outputs too.

Candidate-type analysis (Table 4, paper section 4.4): for each negative type, every query
is scored on its positives plus only that type's negatives (the same scores, so the same
relative order), then aggregated exactly like the full benchmark (field means, then the
plain mean over fields).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal

import numpy as np
import pandas as pd

from mdcr.benchmark.formats import POSITIVE, type_order
from mdcr.contracts.paper import MDCR_RECALL_K, field_abbreviation
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.measures import registry as measures
from mdcr.scoring.published import field_order, order_retrievers, retriever_label

if TYPE_CHECKING:
    from mdcr.scoring.tables import Table

Ties = Literal["paper_id", "trec_eval"]
TIES: tuple[str, ...] = ("paper_id", "trec_eval")
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
_SEP = "\x1f"


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


def rank_scores(scored: pd.DataFrame, ties: Ties = "trec_eval") -> pd.DataFrame:
    """Add a 1-based ``rank`` per (split, field, query) from ``score`` (higher is better).

    Ties: ``trec_eval`` orders tied scores by paper id descending (Python's string order,
    which is the byte order trec_eval's ``strcmp`` uses on UTF-8 ids); ``paper_id``
    ascending."""
    if ties not in TIES:
        raise ConfigError(f"ties: {ties!r} is not valid; valid options: {', '.join(TIES)}")
    bad = ~np.isfinite(scored["score"].to_numpy(dtype=np.float64))
    if bad.any():
        r = scored[bad].iloc[0]
        raise InputDataError(
            f"score of ({r['query_id']}, {r['paper_id']}) is {r['score']}; scores must be "
            "finite numbers"
        )
    keys = ["split", "field", "query_id"]
    out = scored.sort_values(
        [*keys, "score", "paper_id"],
        ascending=[True, True, True, False, ties == "paper_id"],
        kind="stable",
    ).reset_index(drop=True)
    out["rank"] = out.groupby(keys, sort=False).cumcount().astype(np.int64) + 1
    return out


def _labelled(bench: pd.DataFrame, ranked: pd.DataFrame) -> pd.DataFrame:
    """The ranked candidates with their type and label; every benchmark pair must be scored."""
    keys = ["split", "field", "query_id", "paper_id"]
    merged = bench[[*keys, "candidate_type"]].merge(
        ranked[[*keys, "score", "rank"]], on=keys, how="left", validate="one_to_one"
    )
    if merged["rank"].isna().any():
        r = merged[merged["rank"].isna()].iloc[0]
        raise InputDataError(
            f"no score for candidate '{r['paper_id']}' of query '{r['query_id']}' "
            f"({r['field']}, {r['split']}); score every pair of the benchmark"
        )
    merged["relevance"] = (merged["candidate_type"] == POSITIVE).astype(np.int64)
    merged["rank"] = merged["rank"].astype(np.int64)
    return merged


def _metrics_of(lists: pd.DataFrame, subset: str) -> pd.DataFrame:
    """Per-query metrics of ranked candidate lists (``rank`` already within the list)."""
    from mdcr.measures.compute import score_pool

    key = lists["split"] + _SEP + lists["field"] + _SEP + lists["query_id"]
    lists = lists.assign(qkey=key)
    depth = int(lists.groupby("qkey").size().max())  # the longest list: the whole of each
    names = measures.names(measures.PAPER_KINDS, depth, MDCR_RECALL_K)
    pos = lists[lists["relevance"] > 0]
    qrels = pd.DataFrame(
        {"query_id": pos["qkey"], "paper_id": pos["paper_id"], "relevance": pos["relevance"]}
    )
    run = pd.DataFrame(
        {"query_id": lists["qkey"], "paper_id": lists["paper_id"], "rank": lists["rank"]}
    )
    if len(qrels):
        vals = score_pool(qrels, run, names, depth, where=f"benchmark ({subset})")
    else:
        vals = pd.DataFrame({"query_id": [], "metric": [], "value": []})
    vals["metric"] = vals["metric"].map(dict(zip(names, MDCR_METRICS, strict=True)))
    # A query without positives is not in ranx's qrels: it scores 0, as pytrec_eval scores
    # a query whose judgments are all 0 (and counts it in the mean).
    all_q = sorted(set(lists["qkey"]))
    no_pos = sorted(set(all_q) - set(qrels["query_id"]))
    if no_pos:
        zeros = pd.DataFrame(
            {
                "query_id": np.repeat(no_pos, len(MDCR_METRICS)),
                "metric": np.tile(MDCR_METRICS, len(no_pos)),
                "value": 0.0,
            }
        )
        vals = pd.concat([vals, zeros], ignore_index=True)
    parts = vals["query_id"].str.split(_SEP, n=2, expand=True, regex=False)
    return pd.DataFrame(
        {
            "split": parts[0],
            "field": parts[1],
            "query_id": parts[2],
            "subset": subset,
            "metric": vals["metric"],
            "value": vals["value"].astype(np.float64),
        }
    )


def per_query_metrics(
    bench: pd.DataFrame,
    scored: pd.DataFrame,
    *,
    ties: Ties = "trec_eval",
    by_type: bool = True,
) -> pd.DataFrame:
    """MAP, nDCG and R@5 of every benchmark query: on its full list (subset ``all``) and,
    with ``by_type``, on its positives plus each negative type alone (subset = the type).

    ``bench``: the internal benchmark rows; ``scored``: split, field, query_id, paper_id,
    score for every benchmark pair. Returns split, field, query_id, subset, metric, value.
    """
    labelled = _labelled(bench, rank_scores(scored, ties))
    frames = [_metrics_of(labelled, ALL)]
    if by_type:
        negatives = [t for t in type_order(labelled["candidate_type"].unique()) if t != POSITIVE]
        for t in negatives:
            sub = labelled[labelled["candidate_type"].isin((POSITIVE, t))].copy()
            sub = sub.sort_values(["split", "field", "query_id", "rank"], kind="stable")
            sub["rank"] = sub.groupby(["split", "field", "query_id"], sort=False).cumcount() + 1
            frames.append(_metrics_of(sub, t))
    out = pd.concat(frames, ignore_index=True)
    return out.sort_values(["split", "subset", "field", "query_id", "metric"], kind="stable")


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
