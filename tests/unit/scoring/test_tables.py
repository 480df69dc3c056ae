"""Tables: one builder, three renderings (Markdown, CSV at full precision, booktabs LaTeX)."""

from __future__ import annotations

import csv
import io

import pandas as pd

from mdcr.scoring.tables import build_table


def _data() -> pd.DataFrame:
    return pd.DataFrame(
        [
            ("bm25", 200, "map@500", 0.40444, 0.0101),
            ("bm25", 200, "recall@30", 0.43, 0.02),
            ("enc", 200, "map@500", 0.1, float("nan")),
            ("enc", 500, "map@500", 0.05, 0.001),
        ],
        columns=["retriever", "size", "metric", "mean", "std"],
    )


def test_grouped_table_renderings() -> None:
    t = build_table(
        _data(),
        name="t1",
        title="Title & more",
        row="retriever",
        col="size",
        sub="metric",
        std="std",
        rows=["bm25", "enc"],
        cols=[200, 500],
        subs=["map@500", "recall@30"],
        col_labels=lambda s: f"{s}k",
        sub_labels={"map@500": "MAP", "recall@30": "R@30"},
        row_header="Model",
        marks={("bm25", 200, "map@500"): "b"},
        bold_best=True,
    )
    md = t.to_markdown().splitlines()
    assert md[0] == "| Model | 200k MAP | 200k R@30 | 500k MAP | 500k R@30 |"
    assert md[2] == "| bm25 | **40.4** ± 1.0<sup>b</sup> | 43.0 ± 2.0 | – | – |"
    assert md[3] == "| enc | 10.0 | – | 5.0 ± 0.1 | – |"
    rows = list(csv.reader(io.StringIO(t.to_csv())))
    assert rows[0][:4] == ["Model", "200k MAP", "200k MAP std", "200k MAP sig"]
    assert float(rows[1][1]) == 0.40444  # full precision, 0-1 scale
    assert rows[1][3] == "b"
    tex = t.to_latex()
    assert "\\toprule" in tex and "\\bottomrule" in tex and "\\midrule" in tex
    assert "\\multicolumn{2}{c}{200k} & \\multicolumn{2}{c}{500k}" in tex
    assert "\\cmidrule(lr){2-3} \\cmidrule(lr){4-5}" in tex
    assert "\\textbf{40.4} $\\pm$ 1.0\\textsuperscript{b}" in tex
    assert "% Title & more" in tex


def test_one_level_table_without_std_in_text() -> None:
    d = pd.DataFrame(
        {
            "retriever": ["a", "a", "b"],
            "field": ["Art", "AVG", "Art"],
            "mean": [0.5, 0.5, 0.25],
            "std": [0.1, float("nan"), 0.0],
        }
    )
    t = build_table(
        d,
        name="f",
        title="",
        row="retriever",
        col=None,
        sub="field",
        std="std",
        subs=["Art", "AVG"],
        row_header="Retriever",
        rule_before=["b"],
    )
    t.std_in_text = False
    assert t.to_markdown().splitlines()[2] == "| a | 50.0 | 50.0 |"
    assert "multicolumn" not in t.to_latex()
    assert t.to_latex().count("\\midrule") == 2  # header rule + the one before b
    assert list(csv.reader(io.StringIO(t.to_csv())))[1] == ["a", "0.5", "0.1", "0.5", ""]
