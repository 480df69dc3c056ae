"""Format round trips: release JSON <-> internal <-> HF datasets, data JSONL, scores files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from mdcr.benchmark.formats import (
    export_hf,
    find_release_files,
    load_hf,
    read_papers_jsonl,
    read_release_json,
    read_scores,
    scores_for,
    sort_benchmark,
    to_release_json,
    write_papers_jsonl,
    write_release_json,
    write_scores,
)
from mdcr.core.errors import InputDataError
from mdcr.scoring.mdcr_tables import type_order

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "mdcr_format_fixture"


def test_release_json_round_trip(tmp_path: Path) -> None:
    bench = read_release_json(FIXTURE / "mdcr_test.json")
    assert set(bench["split"]) == {"test"}
    assert bench.groupby(["field", "query_id"]).ngroups == 7
    write_release_json(bench, tmp_path / "mdcr_test.json")
    again = read_release_json(tmp_path / "mdcr_test.json")
    pd.testing.assert_frame_equal(sort_benchmark(bench), sort_benchmark(again))
    # The written file is the release's nested dict; the only changes are the duplicates
    # the fixture lists on purpose (3041 in 'random' and 3018 in 'graph' are dropped).
    original = json.loads((FIXTURE / "mdcr_test.json").read_text())
    written = json.loads((tmp_path / "mdcr_test.json").read_text())
    assert written.keys() == original.keys()
    for f, queries in original.items():
        for q, lists in queries.items():
            for t, ids in lists.items():
                kept = [i for i in ids if not (q == "1005" and t == "random" and i == "3041")]
                kept = [i for i in kept if not (q == "1004" and t == "graph" and i == "3018")]
                assert sorted(written[f][q].get(t, [])) == sorted(kept)


def test_release_json_to_hf_and_back(tmp_path: Path) -> None:
    bench = read_release_json(FIXTURE / "mdcr_test.json")
    papers = read_papers_jsonl(FIXTURE / "mdcr_test_data.jsonl")
    files = export_hf(bench, papers, tmp_path / "hf")
    assert any(p.name == "dataset_dict.json" for p in files)
    hf_bench, hf_papers = load_hf(tmp_path / "hf")
    pd.testing.assert_frame_equal(sort_benchmark(bench), hf_bench)
    ids = set(bench["paper_id"]) | set(bench["query_id"])
    assert set(hf_papers["paper_id"]) == ids  # only the benchmark's papers are exported
    merged = hf_papers.merge(papers, on="paper_id", suffixes=("", "_src"))
    assert (merged["title"] == merged["title_src"]).all()
    # Back to the release form: identical to the direct conversion.
    assert to_release_json(hf_bench) == to_release_json(bench)


def test_hf_dataset_has_a_field_column_and_a_list_per_type(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    bench = read_release_json(FIXTURE / "mdcr_test.json")
    papers = read_papers_jsonl(FIXTURE / "mdcr_test_data.jsonl")
    export_hf(bench, papers, tmp_path / "hf")
    dd = datasets.load_from_disk(str(tmp_path / "hf" / "queries"))
    ds = dd["test"]
    assert ds.column_names == ["field", "query_id", *type_order(bench["candidate_type"].unique())]
    row = ds.filter(lambda r: r["query_id"] == "1003")[0]
    assert row["field"] == "Computer Science"
    assert row["true"] == ["3013", "3014", "3015", "3016", "3017"]
    assert len(row["bm25"]) == 2


def test_papers_jsonl_round_trip(tmp_path: Path) -> None:
    papers = read_papers_jsonl(FIXTURE / "mdcr_test_data.jsonl")
    assert len(papers) == 106 and not papers["paper_id"].duplicated().any()
    n = write_papers_jsonl(papers, tmp_path / "d.jsonl")
    assert n == 106
    pd.testing.assert_frame_equal(
        papers.sort_values("paper_id").reset_index(drop=True),
        read_papers_jsonl(tmp_path / "d.jsonl"),
    )
    (tmp_path / "bad.jsonl").write_text(
        '{"paper_id": "1", "title": "a", "abstract": "x"}\n'
        '{"paper_id": "1", "title": "b", "abstract": "x"}\n'
    )
    with pytest.raises(InputDataError, match="appears twice with different texts"):
        read_papers_jsonl(tmp_path / "bad.jsonl")


def test_scores_file_round_trip_and_lookup(tmp_path: Path) -> None:
    bench = read_release_json(FIXTURE / "mdcr_test.json")
    pairs = bench[["query_id", "paper_id"]].drop_duplicates()
    scores = pairs.assign(score=[i / 7 for i in range(len(pairs))])
    n = write_scores(scores, tmp_path / "s.json")
    assert n == len(pairs)
    read = read_scores(tmp_path / "s.json")
    assert read == {f"{q}_{p}": s for q, p, s in scores.itertuples(index=False)}
    looked = scores_for(bench, read, "s")
    assert len(looked) == len(bench)
    del read["1001_2001"]
    with pytest.raises(
        InputDataError, match=r"1 of \d+ query-candidate pairs have no score \(e.g. .1001_2001.\)"
    ):
        scores_for(bench, read, "s")


def test_malformed_release_files_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "mdcr_val.json"
    bad.write_text('{"Art": {"q1": {"true": "p1"}}}')
    with pytest.raises(InputDataError, match="'true' must be a list"):
        read_release_json(bad)
    other = tmp_path / "benchmark.json"
    other.write_text("{}")
    with pytest.raises(InputDataError, match="cannot tell the split"):
        read_release_json(other)
    assert set(find_release_files(FIXTURE)) == {"test"}
    js, data = find_release_files(FIXTURE)["test"]
    assert js.name == "mdcr_test.json" and data is not None


@pytest.mark.parametrize("text", ["{}", '{"Art": {}}', '{"Art": {"q1": {"true": []}}}'])
def test_an_empty_official_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    import mdcr
    from mdcr.cli import main

    bench = tmp_path / "mdcr_test.json"
    bench.write_text(text)
    (tmp_path / "mdcr_test_data.jsonl").write_text((FIXTURE / "mdcr_test_data.jsonl").read_text())
    line = (
        f"{bench}: lists no query and no candidate (an empty benchmark); give the official "
        'file, {field: {query_id: {"bm25": [ids], ..., "true": [ids]}}}'
    )
    for given in (bench, tmp_path):  # the file, or the folder that holds it
        argv = ["evaluate", "--encoder", "random", "--benchmark", str(given), "-q"]
        assert main([*argv, "--home", str(tmp_path / "home")]) == 2
        assert capsys.readouterr().err == f"mdcr: error: {line}\n"
    with pytest.raises(InputDataError) as info:
        mdcr.evaluate("random", benchmark=bench, home=tmp_path / "home")
    assert str(info.value) == line


def test_an_empty_benchmark_output_is_one_line(tmp_path: Path) -> None:
    from mdcr.benchmark.formats import BENCHMARK_COLUMNS, read_benchmark

    empty = pd.DataFrame({c: pd.Series([], dtype=str) for c in BENCHMARK_COLUMNS})
    empty.to_parquet(tmp_path / "benchmark.parquet")
    with pytest.raises(InputDataError, match=r"holds an empty benchmark \(no query\); remove"):
        read_benchmark(tmp_path)
