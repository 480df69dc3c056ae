"""Stage report: files, rows, significance families, chance rows, the paper comparison, and
robustness to what is present (one retriever, field-level only, no random)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mdcr.core.config import from_mapping
from mdcr.core.errors import InputDataError
from mdcr.scoring.aggregate import CHANCE_ROW
from tests.unit.scoring.conftest import Built, make_runs, run_report, run_score
from tests.unit.scoring.fakes import POOLS, FakePoolsConfig


def _csv(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text())))


@pytest.fixture(scope="module")
def report(built: Built) -> Path:
    return run_report(built.store, [built.score])


def test_report_files_and_rows(built: Built, report: Path) -> None:
    md = (report / "report.md").read_text()
    for name in ("dataset_test", "field_test_map", "field_test_ndcg", "field_test_recall"):
        assert (report / "tables" / f"{name}.csv").is_file()
        tex = (report / "tables" / f"{name}.tex").read_text()
        assert "\\toprule" in tex and "\\bottomrule" in tex
    for stem in (
        "pool_size_test",
        "fields_test_map",
        "per_query_map_dataset_test",
        "per_query_map_field_test",
    ):
        for ext in ("png", "svg"):
            assert (report / "plots" / f"{stem}.{ext}").stat().st_size > 1000
        assert f"](plots/{stem}.png)" in md
    # every retriever and the chance floor in the dataset table, in the paper's order
    rows = [r[0] for r in _csv(report / "tables" / "dataset_test.csv")[1:]]
    assert rows == ["bm25", "specter", "random", CHANCE_ROW]  # partial has no dataset pools
    field_rows = [r[0] for r in _csv(report / "tables" / "field_test_map.csv")[1:]]
    assert field_rows == ["bm25", "specter", "partial", "random", CHANCE_ROW]
    for r in ("| bm25 |", "| specter |", "| partial |", "| random |", f"| {CHANCE_ROW} |"):
        assert r in md
    # manifest fingerprints of the inputs
    score_fp = json.loads((built.score / "manifest.json").read_text())["fingerprint"]
    assert score_fp in md and built.pools.name in md
    for run in built.runs.values():
        assert run.name in md
    assert "No comparable setup" in md  # bm25/specter are paper models, sizes 300/600 aren't


def test_table_values_are_the_aggregates(built: Built, report: Path) -> None:
    pp = pd.read_parquet(built.score / "per_pool.parquet")
    sub = pp[
        (pp["retriever"] == "bm25")
        & (pp["setup"] == "dataset")
        & (pp["size"] == 600)
        & (pp["metric"] == "map@500")
    ]["value"]
    rows = _csv(report / "tables" / "dataset_test.csv")
    header, bm25 = rows[0], rows[1]
    assert float(bm25[header.index("600 MAP")]) == pytest.approx(sub.mean(), abs=1e-12)
    assert float(bm25[header.index("600 MAP std")]) == pytest.approx(sub.std(ddof=1), abs=1e-12)
    # field AVG: macro average of the two fields' means over reps
    f = pp[
        (pp["retriever"] == "specter") & (pp["setup"] == "field") & (pp["metric"] == "recall@30")
    ]
    avg = f.groupby("field")["value"].mean().mean()
    frows = _csv(report / "tables" / "field_test_recall.csv")
    spec = next(r for r in frows if r[0] == "specter")
    assert float(spec[frows[0].index("AVG")]) == pytest.approx(avg, abs=1e-12)
    chance = pd.read_parquet(built.score / "chance.parquet")
    c = chance[
        (chance["setup"] == "dataset") & (chance["size"] == 300) & (chance["metric"] == "map@500")
    ]["value"].mean()
    crow = next(r for r in rows if r[0] == CHANCE_ROW)
    assert float(crow[header.index("300 MAP")]) == pytest.approx(c, abs=1e-12)


def test_significance_families_and_summary(report: Path) -> None:
    sig = pd.read_parquet(report / "significance.parquet")
    ds = sig[sig["table"] == "dataset_test"]
    # 3 retrievers -> 3 pairs; 2 sizes x 3 metrics; 2 tests
    assert len(ds) == 3 * 6 * 2
    fm = sig[sig["table"] == "field_test_map"]
    assert len(fm) == 6 * 3 * 2  # 4 retrievers -> 6 pairs; 2 fields + AVG; 2 tests
    assert set(sig["correction"]) == {"holm"}
    for (_table, _test), g in sig.groupby(["table", "test"]):
        from mdcr.scoring.significance import holm

        assert g["p_adjusted"].to_numpy() == pytest.approx(holm(g["p_value"].to_numpy()))
    assert ((sig["diff"] > 0) == (sig["direction"] == ">")).all()
    md = (report / "report.md").read_text()
    k = int(ds[ds["test"] == "fisher"]["significant"].sum())
    assert f"Fisher randomization test: {k} of 18 comparisons significant" in md
    # letters follow the report's retriever order: a bm25, b specter, c partial, d random
    assert "a = bm25, b = specter, c = partial, d = random" in md
    # bm25 beats random on MAP at both sizes: its cells carry random's letter
    rows = _csv(report / "tables" / "dataset_test.csv")
    sig_cols = [i for i, h in enumerate(rows[0]) if h.endswith("MAP sig")]
    assert len(sig_cols) == 2 and all("d" in rows[1][i] for i in sig_cols)


def _paper_sized_pools(built: Built) -> Path:
    """Pools that declare two of the paper's dataset-level sizes (200k, 500k), no fields."""
    return built.store.execute(
        POOLS,
        from_mapping(FakePoolsConfig, {"declared_sizes": [200000, 500000], "fields": []}, "p"),
        {},
        quiet=True,
    ).path


def test_paper_comparison_when_setup_matches(built: Built) -> None:
    pools = _paper_sized_pools(built)
    runs = make_runs(
        built.store,
        pools,
        {
            "bm25": {"skill": 2.5, "builtin": True},
            "scincl": {"skill": 2.0, "builtin": True},
            "specter": {"skill": 1.0, "builtin": True},
        },
    )
    score = run_score(built.store, pools, list(runs.values()))
    out = run_report(built.store, [score], permutations=1000)
    md = (out / "report.md").read_text()
    assert "Partial comparison" in md and "scibert" in md
    cells = _csv(out / "tables" / "paper_comparison.csv")
    assert len(cells) - 1 == 3 * 2 * 3  # models x sizes x metrics
    row = next(r for r in cells if r[0] == "table1 200k MAP BM25")
    assert float(row[2]) == 40.4
    assert float(row[3]) == pytest.approx(float(row[1]) - 40.4)
    rho = _csv(out / "tables" / "paper_rank_correlation.csv")
    assert len(rho) - 1 == 6 and all("(n=3)" in r[0] for r in rho[1:])
    assert not (out / "tables" / "field_test_map.csv").exists()  # no field-level pools


def test_a_retriever_only_named_like_a_paper_model_is_not_compared(built: Built) -> None:
    """Runs named ``specter`` and ``scincl`` that are not those built-in entries (a py:
    encoder, an hf: model, a model object) get no paper row, even in the paper's setup."""
    pools = _paper_sized_pools(built)
    runs = make_runs(
        built.store,
        pools,
        {
            "bm25": {"skill": 2.5, "builtin": True},
            "scincl": {"skill": 2.0},
            "specter": {"skill": 1.0},
        },
    )
    out = run_report(built.store, [run_score(built.store, pools, list(runs.values()))])
    md = (out / "report.md").read_text()
    cells = _csv(out / "tables" / "paper_comparison.csv")
    assert {r[0].split()[-1] for r in cells[1:]} == {"BM25"} and len(cells) - 1 == 2 * 3
    assert "Not compared with the paper" in md
    assert "`specter` (not a built-in entry); `scincl` (not a built-in entry)." in md
    assert "| specter | not a built-in entry |" in md and "| bm25 | built-in `bm25` |" in md
    ids = json.loads((out / "manifest.json").read_text())["info"]["builtin_entries"]
    assert ids["specter"] is None and ids["bm25"]["builtin"] == "bm25"


def test_single_retriever_field_only_no_random(built: Built) -> None:
    score = run_score(built.store, built.pools, [built.runs["partial"]], names=["solo"])
    out = run_report(built.store, [score])
    md = (out / "report.md").read_text()
    assert "Dataset-level" not in md and "Field-level MAP" in md
    assert "no comparisons (fewer than two retrievers)" in md
    assert "No `random` retriever was scored" in md
    assert "No paper models in this report" in md
    assert not (out / "significance.parquet").exists()
    rows = [r[0] for r in _csv(out / "tables" / "field_test_map.csv")[1:]]
    assert rows == ["solo", CHANCE_ROW]


def test_merging_score_outputs(built: Built) -> None:
    a = run_score(built.store, built.pools, [built.runs["bm25"]])
    b = run_score(built.store, built.pools, [built.runs["random"]])
    out = run_report(
        built.store, [a, b], stat_tests=["student"], correction="bonferroni", chance_rows=False
    )
    rows = [r[0] for r in _csv(out / "tables" / "dataset_test.csv")[1:]]
    assert rows == ["bm25", "random"]
    sig = pd.read_parquet(out / "significance.parquet")
    assert set(sig["test"]) == {"student"} and set(sig["correction"]) == {"bonferroni"}
    with pytest.raises(InputDataError, match="scored twice"):
        run_report(built.store, [a, built.score])
    with pytest.raises(InputDataError, match="no scored pools in val"):
        run_report(built.store, [a], splits=["val"])
    assert not math.isnan(sig["p_value"].iloc[0])


def _values(report: Path) -> dict[str, dict[str, float]]:
    """Each row's numbers in the dataset table by column: every cell but the significance
    marks, the tied flags and the empty ones (chance has no std)."""
    header, *rows = _csv(report / "tables" / "dataset_test.csv")
    numeric = [i for i, c in enumerate(header) if i and not c.endswith((" sig", " tied"))]
    return {r[0]: {header[i]: float(r[i]) for i in numeric if r[i]} for r in rows}


def test_a_retriever_scored_again_is_taken_from_the_last_output(built: Built) -> None:
    """With repeated_retrievers = "last", a retriever in two score outputs comes from the
    later one, the earlier output's other retrievers stay, and the inputs say so."""
    again = run_score(built.store, built.pools, [built.runs["random"]], names=["bm25"])
    out = run_report(built.store, [built.score, again], repeated_retrievers="last")
    table, first = _values(out), _values(run_report(built.store, [built.score]))
    assert list(table) == ["bm25", "specter", "random", CHANCE_ROW]
    # Two pool sizes x (MAP, nDCG, R@30) x (mean, std) for every retriever.
    assert all(len(row) == 12 for name, row in table.items() if name != CHANCE_ROW)
    assert table["bm25"] == first["random"] != first["bm25"]  # the later bm25: random's run
    assert table["specter"] == first["specter"] and table["random"] == first["random"]
    md = (out / "report.md").read_text()
    assert f"`bm25` from `{built.score}`" in md
    with pytest.raises(InputDataError, match="scored twice"):
        run_report(built.store, [built.score, again])  # the default: an error


def test_report_is_byte_identical_when_rebuilt(built: Built, report: Path, tmp_path: Path) -> None:
    from mdcr.core.store import Store

    again = run_report(Store(tmp_path), [built.score])
    first = json.loads((report / "manifest.json").read_text())["outputs"]
    second = json.loads((again / "manifest.json").read_text())["outputs"]
    assert first.keys() == second.keys() and len(first) > 20
    assert {k: v["sha256"] for k, v in first.items()} == {k: v["sha256"] for k, v in second.items()}


def test_paper_section_field_level(tmp_path: Path) -> None:
    from mdcr.contracts.paper import FIELD_ABBREVIATIONS
    from mdcr.scoring.published import paper_values
    from mdcr.scoring.report_context import Context, SectionOptions
    from mdcr.scoring.report_sections import paper_section

    paper = paper_values()
    t2 = paper[(paper["table"] == "table2") & (paper["column"] != "AVG")]
    abbr = {v: k for k, v in FIELD_ABBREVIATIONS.items()}
    ids = {"BM25": "bm25", "Specter": "specter", "SciNCL": "scincl"}
    t2 = t2[t2["model"].isin(ids)]
    agg = pd.DataFrame(
        {
            "retriever": t2["model"].map(ids),
            "setup": "field",
            "split": "test",
            "field": t2["column"].map(abbr),
            "size": 100000,
            "metric": "map@500",
            "mean": t2["value"] / 100 - 0.01,
            "std": 0.0,
            "n_reps": 3,
        }
    )
    c = Context(SectionOptions(), ["bm25", "specter", "scincl"], {}, ["map@500"], tmp_path)
    c.entries = {r: {"builtin": r, "model": {}, "options": {}} for r in c.retrievers}
    s = paper_section(c, agg)
    full = c.file_tables[0]
    assert len(full.rows) == 3 * 20  # 19 fields + AVG per model
    delta = full.cells[("table2 Bio MAP BM25", ("", "Δ"))].mean
    assert delta == pytest.approx(-1.0)
    rho = s.tables[1]
    assert len(rho.rows) == 20
    assert all(c.mean == pytest.approx(1.0) for c in rho.cells.values())
    assert any("Partial comparison" in line for line in s.body + s.intro)


def test_a_ci_companion_cell_is_the_bootstrap_of_the_per_query_values(
    built: Built, report: Path
) -> None:
    """``dataset_test_ci``: the repetitions score the same queries, so bm25's MAP at size
    600 is scipy's bootstrap of each query's mean over the repetitions (the query is the
    unit, as the paired tests pair it); specter − bm25 is the same on the per-query
    differences."""
    import scipy.stats as st

    pq = pd.read_parquet(built.score / "per_query.parquet")
    pp = pd.read_parquet(built.score / "per_pool.parquet")[["pool_id", "setup", "size", "rep"]]
    pq = pq.merge(pp.drop_duplicates("pool_id"), on="pool_id")
    pq = pq[(pq["setup"] == "dataset") & (pq["size"] == 600) & (pq["metric"] == "map@500")]
    assert pq.groupby("rep")["query_id"].agg(frozenset).nunique() == 1  # shared queries

    def per_query(retriever: str) -> pd.Series:
        part = pq[pq["retriever"] == retriever]
        return part.groupby("query_id", sort=True)["value"].mean()

    def scipy_ci(values: pd.Series) -> tuple[float, float]:
        ci = st.bootstrap(
            (values.to_numpy(),),
            np.mean,
            n_resamples=2000,
            method="BCa",
            rng=np.random.default_rng(42),
        ).confidence_interval
        return float(ci.low), float(ci.high)

    rows = {r[0]: r for r in _csv(report / "tables" / "dataset_test_ci.csv")}
    header = rows["Retriever"]
    cols = [header.index(f"600 MAP{x}") for x in ("", " ci_low", " ci_high")]
    for name, values in (
        ("bm25", per_query("bm25")),
        ("specter − bm25", per_query("specter") - per_query("bm25")),
    ):
        low, high = scipy_ci(values)
        got = [float(rows[name][i]) for i in cols]
        assert got == pytest.approx([values.mean(), low, high], rel=1e-12, abs=1e-15)
        assert low < values.mean() < high
    frame = pd.read_parquet(report / "intervals.parquet")
    assert frame["tied"].dropna().isin([True, False]).all()
    means = frame[frame["kind"] == "mean"]
    assert set(means["tie_group"]) <= {"best", "tied", "separated", "unresolved"}
    shared = means[(means["table"] == "dataset_test") & (means["metric"] == "map@500")]
    assert set(shared["n_queries"]) == {len(per_query("bm25"))}  # queries, not values
