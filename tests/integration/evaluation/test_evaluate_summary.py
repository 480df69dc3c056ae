"""What ``mdcr evaluate --pools`` prints and what ``mdcr.evaluate`` returns: the report's
numbers, cell for cell, beside the retrievers scored earlier on the same pools."""

from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import mdcr

# the encode and search stages register themselves on import
import mdcr.encoders.stage
import mdcr.index.dense
from mdcr.cli import main
from mdcr.contracts.paper import field_abbreviation, size_label
from mdcr.core.inputs import resolve_inputs
from mdcr.core.store import Store
from mdcr.evaluation.result import PER_POOL_COLUMNS, SUMMARY_COLUMNS
from mdcr.scoring.document import read_report
from mdcr.scoring.score import SPEC as SCORE
from mdcr.scoring.score import ScoreConfig
from tests.integration.benchmark.helpers import make_corpus, make_pools, make_run

LABELS = {"MAP": "map", "nDCG": "ndcg", "R@30": "recall"}


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Dataset-level pools of two sizes and field-level pools, two repetitions each; bm25
    scored earlier, then ``mdcr evaluate --pools --encoder random``."""
    tmp = tmp_path_factory.mktemp("summary")
    home = tmp / "home"
    corpus = make_corpus(tmp / "corpus")
    pools = make_pools(
        home,
        corpus,
        setups=("dataset", "field"),
        dataset_sizes=(500, 900),
        n_queries_dataset=8,
        field_pool_size=400,
        repetitions=2,
        splits=("test",),
    )
    earlier = make_run(home, pools, "bm25", k=100)
    cfg = ScoreConfig(pools=str(pools), runs=(str(earlier),))
    Store(home).execute(SCORE, cfg, resolve_inputs(cfg), quiet=True)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        argv = ["evaluate", "--pools", str(pools), "--encoder", "random", "--home", str(home)]
        assert main([*argv, "-q"]) == 0
    out = buf.getvalue()
    report = Path(out.strip().splitlines()[-1].removeprefix("report: "))
    return {"home": home, "pools": pools, "stdout": out, "report": report}


def _blocks(out: str) -> dict[tuple[str, str], dict[str, dict[str, str]]]:
    """The printed tables: {(measure label, split): {row label: {retriever: cell}}}."""
    blocks: dict[tuple[str, str], dict[str, dict[str, str]]] = {}
    lines = out.splitlines()
    for i, line in enumerate(lines):
        head = line.split("  ")
        if " × 100, " not in head[0] or not head[0].endswith(" split"):
            continue
        label, split = head[0].split(" × 100, ")
        names = [h.strip() for h in head[1:] if h.strip()]
        rows: dict[str, dict[str, str]] = {}
        for row in lines[i + 1 :]:
            if not row:
                break
            text = row.split("  ")
            cells = [c.strip() for c in text[1:] if c.strip()]
            assert len(cells) == len(names), row
            rows[text[0].strip()] = dict(zip(names, cells, strict=True))
        blocks[(label, split.removesuffix(" split"))] = rows
    return blocks


def _text(mean: float, std: float) -> str:
    """A report cell as report.md writes it (x100, one decimal), without marks or bold."""
    text = "–" if math.isnan(mean) else f"{mean * 100:.1f}"
    return text if math.isnan(std) or math.isnan(mean) else f"{text} ± {std * 100:.1f}"


def _report_cells(report: Path) -> dict[tuple[str, str, str, str], tuple[float, float]]:
    """{(measure label, row label, retriever): (mean, std)} from report.json's tables."""
    cells = {}
    for section in read_report(report.parent).sections:
        for table in section.tables:
            if table.name.endswith("_ci"):  # the intervals beside each table
                continue
            if table.name.startswith("dataset_test"):
                for (r, (size, metric)), c in table.cells.items():
                    cells[(metric, f"dataset {size}", r, "")] = (c.mean, c.std)
            elif table.name.startswith("field_test"):
                label = next(k for k, v in LABELS.items() if table.name.endswith("_" + v))
                for (r, (_, fld)), c in table.cells.items():
                    cells[(label, f"field 400 {fld}", r, "")] = (c.mean, c.std)
    return cells


def test_the_printed_summary_is_the_reports_tables(evaluated: dict[str, Any]) -> None:
    blocks = _blocks(evaluated["stdout"])
    assert list(blocks) == [("MAP", "test"), ("nDCG", "test"), ("R@30", "test")]
    cells = _report_cells(evaluated["report"])
    fields = [field_abbreviation(f) for f in ("Biology", "Computer Science", "Medicine")]
    rows = ["dataset 500", "dataset 900", *(f"field 400 {f}" for f in [*fields, "AVG"])]
    printed = 0
    for (label, _), block in blocks.items():
        assert list(block) == rows  # pool sizes, then fields and their AVG
        for row, by_retriever in block.items():
            # the new retriever beside the earlier one, and the chance floor
            assert list(by_retriever) == ["bm25", "random", "expected chance"]
            for retriever, cell in by_retriever.items():
                # mean ± std, then the 95% interval and † for the tied group (not chance)
                shown = cell.removesuffix(" †").split(" [")[0]
                assert shown == _text(*cells[(label, row, retriever, "")]), (label, row)
                assert ("[" in cell) == (retriever != "expected chance"), cell
                printed += 1
    assert printed == 3 * 6 * 3 == len(cells)  # every cell of the report's tables, once
    assert "±" in blocks[("MAP", "test")]["dataset 500"]["random"]  # two repetitions: a std
    assert evaluated["stdout"].startswith(f"scored random on {evaluated['pools']}; with 1 ")


def test_the_api_returns_the_reports_numbers_in_tidy_frames(evaluated: dict[str, Any]) -> None:
    n_manifests = sum(1 for _ in evaluated["home"].rglob("manifest.json"))
    result = mdcr.evaluate("random", pools=evaluated["pools"], home=evaluated["home"])
    assert sum(1 for _ in evaluated["home"].rglob("manifest.json")) == n_manifests  # cached
    assert result.report_path == evaluated["report"] and result.retrievers == ("random",)
    summary, per_pool = result.summary, result.per_pool
    assert tuple(summary.columns) == SUMMARY_COLUMNS
    assert tuple(per_pool.columns) == PER_POOL_COLUMNS
    cells = _report_cells(evaluated["report"])
    # measures under the report's labels, as printed (the stored names are map@500, ...)
    assert set(summary["measure"]) == set(per_pool["measure"]) == {"MAP", "nDCG", "R@30"}
    assert len(summary) == len(cells)
    for r in summary.itertuples(index=False):
        if r.setup == "dataset":
            row = f"dataset {size_label(int(r.pool_size))}"
            assert pd.isna(r.field) and r.n == 2
        else:
            row = f"field 400 {field_abbreviation(str(r.field))}"
            assert r.n == (3 if r.field == "AVG" else 2)
        mean, std = cells[(r.measure, row, r.retriever, "")]
        assert r.mean == pytest.approx(mean * 100, rel=1e-12)  # percent, as printed
        assert (math.isnan(std) and math.isnan(r.std)) or r.std == pytest.approx(std * 100)
    # per_pool: the pools' means (percent); over the repetitions they give the summary
    assert set(per_pool["retriever"]) == {"bm25", "random"} and set(per_pool["split"]) == {"test"}
    keys = ["retriever", "setup", "split", "field", "pool_size", "measure"]
    again = (
        per_pool.groupby(keys, dropna=False)["value"]
        .agg(mean="mean", std=lambda v: v.std(ddof=1), n="size")
        .reset_index()
    )
    mine = summary[summary["retriever"].isin(["bm25", "random"]) & (summary["field"] != "AVG")]
    merged = mine.merge(again, on=keys, suffixes=("", "_again"), validate="one_to_one")
    assert len(merged) == len(mine) == len(again)
    assert (merged["mean"] - merged["mean_again"]).abs().max() < 1e-9
    assert (merged["std"] - merged["std_again"]).abs().max() < 1e-9
    assert (merged["n"] == merged["n_again"]).all()
