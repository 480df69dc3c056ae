"""The registry's entries give exactly the names, labels and keys mdcr stored and printed
before it existed (so outputs and fingerprints stay put), and unknown names fail in one
line that lists the registered measures."""

from __future__ import annotations

import pytest

from mdcr.contracts.paper import DEPTH, MDCR_RECALL_K, RECALL_K
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.measures import registry


def test_the_papers_names_labels_and_order() -> None:
    assert registry.PAPER_KINDS == ("map", "ndcg", "recall")
    assert (f"map@{DEPTH}", f"ndcg@{DEPTH}", f"recall@{RECALL_K}") == registry.PAPER_NAMES
    assert registry.PAPER_NAMES == ("map@500", "ndcg@500", "recall@30")
    assert ("map", "ndcg", f"recall@{MDCR_RECALL_K}") == registry.MDCR_NAMES
    labels = [registry.label(n) for n in (*registry.PAPER_NAMES, *registry.MDCR_NAMES)]
    assert labels == ["MAP", "nDCG", "R@30", "MAP", "nDCG", "R@5"]
    assert [registry.per_query_label(n) for n in registry.PAPER_NAMES] == ["AP", "nDCG", "R@30"]
    shuffled = ["recall@30", "ndcg@500", "map@500", "recall@5", "map"]
    assert sorted(shuffled, key=registry.sort_key) == [
        "map",
        "map@500",
        "ndcg@500",
        "recall@5",
        "recall@30",
    ]


def test_library_names() -> None:
    names = {
        n: (registry.parse(n)[0].ranx_name(k or 500), registry.parse(n)[0].pytrec_eval_name(k))
        for n in (*registry.PAPER_NAMES, *registry.MDCR_NAMES)
        for k in [registry.parse(n)[1]]
    }
    assert names == {
        "map@500": ("map@500", "map_cut_500"),
        "ndcg@500": ("ndcg@500", "ndcg_cut_500"),
        "recall@30": ("recall@30", "recall_30"),
        "map": ("map@500", "map"),
        "ndcg": ("ndcg@500", "ndcg"),
        "recall@5": ("recall@5", "recall_5"),
    }


def test_published_and_mdcr_keys_are_unchanged() -> None:
    from mdcr.scoring.mdcr_tables import MDCR_METRICS, R_AT_K, official_key
    from mdcr.scoring.published import PAPER_METRICS

    assert PAPER_METRICS == {
        "MAP": "map@500",
        "nDCG": "ndcg@500",
        "R@30": "recall@30",
        "R@5": "recall@5",
    }
    assert (MDCR_METRICS, R_AT_K) == (("map", "ndcg", "recall@5"), "recall@5")
    assert [official_key(m) for m in MDCR_METRICS] == ["map", "ndcg", "recall_5"]


def test_config_kinds_and_their_cut_offs() -> None:
    assert registry.names(["recall", "map"], 100, 10) == ["recall@10", "map@100"]
    with pytest.raises(ConfigError) as err:
        registry.names(["MAP"], 500, 30, "score.metrics")
    assert str(err.value) == "score.metrics: unknown measure 'MAP'; valid: map, ndcg, recall"


@pytest.mark.parametrize("name", ["recall", "p@5", "map@", "map@x", "MAP@500", ""])
def test_an_unknown_stored_name_is_one_line(name: str) -> None:
    with pytest.raises(InputDataError) as err:
        registry.parse(name)
    assert str(err.value) == (
        f"unknown measure name '{name}'; registered: map[@N], ndcg[@N], recall@N"
    )


def test_bm25_tune_metric_names() -> None:
    from mdcr.index.bm25.tune import metric_name

    assert metric_name("recall", 200) == "recall@30"  # R@k keeps the paper's k
    assert metric_name("ndcg", 200) == "ndcg@200"
    with pytest.raises(ConfigError) as err:
        metric_name("p@5", 500)
    assert str(err.value) == (
        "bm25-tune.metric: 'p@5' is not valid; valid: map, ndcg, recall (or kind@N)"
    )


def test_printed_names_are_the_table_labels_in_both_modes() -> None:
    from mdcr.measures.registry import percent, shown_name

    pools = [shown_name(n) for n in ("map@500", "ndcg@500", "recall@30")]
    mdcr_names = [shown_name(n) for n in ("map", "ndcg", "recall@5")]
    assert pools == ["MAP", "nDCG", "R@30"] and mdcr_names == ["MAP", "nDCG", "R@5"]
    assert shown_name("map") == "MAP" and shown_name("not-a-measure") == "not-a-measure"
    assert percent(0.2756) == "27.6"
