"""The transcribed paper numbers are internally consistent, and the comparison is right."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mdcr.contracts.paper import FIELD_ABBREVIATIONS, field_abbreviation, size_label
from mdcr.scoring.published import (
    compare_with_paper,
    label_for,
    load_paper,
    order_retrievers,
    paper_models,
    paper_retrievers,
    paper_values,
    published_mdcr,
    spearman,
)


def test_source_is_cited_and_tables_complete() -> None:
    paper = load_paper()
    assert "Medić" in paper["source"]["citation"] and paper["source"]["year"] == 2022
    assert set(paper["tables"]) == {"table1", "table2", "table3", "table4", "table7", "table8"}
    v = paper_values()
    counts = v.groupby("table").size().to_dict()
    assert counts == {
        "table1": 5 * 12,
        "table2": 6 * 20,
        "table3": 20 * 12,
        "table4": 7 * 12,
        "table7": 6 * 20,
        "table8": 6 * 20,
    }
    assert len(FIELD_ABBREVIATIONS) == 19


@pytest.mark.parametrize(
    ("table", "model", "column", "metric", "value"),
    [
        ("table1", "BM25", "2M", "MAP", 22.5),
        ("table1", "SciNCL", "200k", "R@30", 45.2),
        ("table2", "Aspire-BM", "Bio", "MAP", 44.7),
        ("table7", "SciBERT", "Soc", "nDCG", 32.9),
        ("table8", "BM25", "AVG", "R@30", 37.2),
        ("table3", "Aspire-CS", "Mat", "R@5", 32.2),
        ("table4", "SciNCL", "Graph", "MAP", 58.1),
    ],
)
def test_spot_values(table: str, model: str, column: str, metric: str, value: float) -> None:
    v = paper_values()
    row = v[
        (v["table"] == table)
        & (v["model"] == model)
        & (v["column"] == column)
        & (v["metric"] == metric)
    ]
    assert row["value"].tolist() == [value]


def test_field_averages_match_the_fields() -> None:
    """AVG = mean of 19 rounded values, within rounding (0.05 + 0.05)."""
    v = paper_values()
    for table in ("table2", "table7", "table8"):
        t = v[v["table"] == table]
        for _model, g in t.groupby("model"):
            fields = g[g["column"] != "AVG"]["value"]
            assert len(fields) == 19
            assert abs(fields.mean() - g[g["column"] == "AVG"]["value"].iloc[0]) <= 0.1
    t3 = v[v["table"] == "table3"]
    for (_m, _metric), g in t3.groupby(["model", "metric"]):
        assert (
            abs(g[g["column"] != "AVG"]["value"].mean() - g[g["column"] == "AVG"]["value"].iloc[0])
            <= 0.1
        )
    t4 = v[v["table"] == "table4"]
    for (_c, _metric), g in t4.groupby(["column", "metric"]):
        assert (
            abs(g[g["model"] != "AVG"]["value"].mean() - g[g["model"] == "AVG"]["value"].iloc[0])
            <= 0.1
        )


def test_names_and_labels() -> None:
    from mdcr.retrievers.builtin import paper_names

    assert paper_names()["aspire-bm"] == "Aspire-BM" and "minilm" not in paper_names()
    # The paper's models in the order of its tables, from the registry's paper names.
    assert paper_retrievers() == ["bm25", "scibert", "specter", "scincl", "aspire-bm", "aspire-cs"]
    assert order_retrievers(["random", "zeta", "scincl", "bm25", "alpha"]) == [
        "bm25",
        "scincl",
        "alpha",
        "zeta",
        "random",
    ]
    assert field_abbreviation("Computer Science") == "CS" and field_abbreviation("X") == "X"
    assert [size_label(s) for s in (200000, 1000000, 3000, 750)] == ["200k", "1M", "3k", "750"]


def test_compare_with_paper_deltas_and_rank_correlation() -> None:
    v = paper_values()
    t1 = v[(v["table"] == "table1") & (v["column"] == "200k")]
    ids = {
        "BM25": "bm25",
        "SciBERT": "scibert",
        "Specter": "specter",
        "SciNCL": "scincl",
        "Aspire-BM": "aspire-bm",
    }
    metric = {"MAP": "map@500", "nDCG": "ndcg@500", "R@30": "recall@30"}
    ours = pd.DataFrame(
        {
            "setup": "dataset",
            "retriever": t1["model"].map(ids),
            "column": "200k",
            "size": 200000.0,
            "metric": t1["metric"].map(metric),
            "value": t1["value"] + 1.0,  # ours = paper + 1 everywhere
        }
    )
    # a model the paper lacks and a size it lacks are not compared
    extra = pd.DataFrame(
        {
            "setup": ["dataset", "dataset"],
            "retriever": ["minilm", "bm25"],
            "column": ["200k", "300"],
            "size": [200000.0, 300.0],
            "metric": ["map@500", "map@500"],
            "value": [1.0, 2.0],
        }
    )
    models = paper_models({r: _builtin(r) for r in [*ids.values(), "minilm"]})
    assert "minilm" not in models and models["specter"] == "Specter"
    cells, corr = compare_with_paper(pd.concat([ours, extra]), models)
    assert len(cells) == 15
    assert np.allclose(cells["delta"], 1.0)
    assert len(corr) == 3 and (corr["n_models"] == 5).all()
    assert np.allclose(corr["spearman"], 1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(spearman([1, 2], [1, 2]))


def _builtin(key: str, **options: object) -> dict:
    """The built-in entry a run of ``key`` records (mdcr.retrievers.builtin_entry)."""
    return {"builtin": key, "model": {"commit": "c0ffee"}, "options": dict(options)}


def test_a_name_alone_never_gets_the_papers_or_a_published_number() -> None:
    """A retriever is one of the paper's models, or has published MDCR rows, only by its
    built-in entry: a py:/hf:/in-memory encoder or a scores file named ``specter`` or
    ``scincl`` (entry None) gets neither; nor does the built-in with other options."""
    v = paper_values()
    t1 = v[(v["table"] == "table1") & (v["column"] == "200k") & (v["model"] == "Specter")]
    ours = pd.DataFrame(
        {
            "setup": "dataset",
            "retriever": "specter",
            "column": "200k",
            "size": 200000.0,
            "metric": t1["metric"].map({"MAP": "map@500", "nDCG": "ndcg@500", "R@30": "recall@30"}),
            "value": t1["value"],
        }
    )
    for impostor in (None, {"builtin": "py:mine:Specter"}, _builtin("specter", pooling="mean")):
        models = paper_models({"specter": impostor, "scincl": impostor})
        assert models == {}
        cells, _ = compare_with_paper(ours, models)
        assert cells.empty
        assert published_mdcr(impostor) == []
    genuine = paper_models({"specter": _builtin("specter")})
    assert len(compare_with_paper(ours, genuine)[0]) == 3
    rows = published_mdcr(_builtin("scincl"))
    assert {r["source"] for r in rows} == {"specter2_card", "mdcr_readme"} and len(rows) == 21
    # A built-in under another name is still that model; two of one model count once.
    assert paper_models({"mine": _builtin("specter"), "specter": _builtin("specter")}) == {
        "specter": "Specter"
    }
    # Labels: the paper's name only for the built-in entry of that name.
    assert label_for("specter", _builtin("specter")) == "Specter"
    assert label_for("specter", None) == "specter"


def test_published_rows_that_name_a_commit_need_that_commit(monkeypatch) -> None:
    from mdcr.scoring import published

    data = published.load_published_mdcr()
    pinned = {**data, "results": [{**data["results"][1], "commit": "c0ffee"}]}
    monkeypatch.setattr(published, "load_published_mdcr", lambda: pinned)
    assert len(published_mdcr(_builtin("specter"))) == 1
    other = {**_builtin("specter"), "model": {"commit": "beef"}}
    assert published_mdcr(other) == []
