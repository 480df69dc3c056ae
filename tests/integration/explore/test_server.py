"""Every page of ``mdcr explore`` and its JSON, over real HTTP, against the store's own
files: per-query values equal ``export --per-query``'s rows, each top k equals the run
(``runs.parquet``, or MDCR's pair scores in the original scorer's order), positives equal
the qrels, τ_h equals scipy's on the two runs; bad requests get a one-line 404."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from mdcr.explore.app import Server, serving
from mdcr.explore.static import NoLinks
from tests.integration.explore.conftest import DemoLike, _cli

pytestmark = pytest.mark.slow  # the session's demo-like store (about 15 s)


@pytest.fixture(scope="module")
def server(demo_like: DemoLike) -> Iterator[Server]:
    with serving(demo_like.explorer) as running:
        yield running


def _get(server: Server, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(server.url + path.lstrip("/"), timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _json(server: Server, path: str) -> Any:
    status, body = _get(server, path)
    assert status == 200, body
    return json.loads(body)


@pytest.fixture(scope="module")
def exported(demo_like: DemoLike, tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("per_query")
    _cli("export", "--per-query", "--run", str(demo_like.report), "--out", str(out))
    return pd.read_parquet(out / "per_query.parquet")


def test_the_queries_json_of_every_setup_equals_export_per_query(
    server: Server, demo_like: DemoLike, exported: pd.DataFrame
) -> None:
    setups = _json(server, "/api/overview")["setups"]
    assert [s["key"] for s in setups] == [
        "dataset-test-800", "dataset-val-800", "field-test-300", "field-val-300", "mdcr-test",
    ]  # fmt: skip
    checked = 0
    for s in setups:
        for metric in s["metrics"]:
            page = _json(server, f"/api/queries/{s['key']}?metric={metric}")
            rows = page["rows"]
            want = exported[(exported["metric"] == metric)]
            want = want[want["pool_id"].isin({r["pool_id"] for r in rows})]
            assert len(rows) == want[["pool_id", "query_id"]].drop_duplicates().shape[0] > 0
            assert page["total"] == len(rows)
            values = {
                (r.pool_id, r.query_id, r.retriever): r.value for r in want.itertuples(index=False)
            }
            for row in rows:
                for name, value in row["values"].items():
                    assert value == values[(row["pool_id"], row["query_id"], name)]
                    checked += 1
                base = row["values"][page["state"]["baseline"]]
                for name, diff in row["diffs"].items():
                    assert diff == pytest.approx(row["values"][name] - base, abs=1e-15)
                here = (want["pool_id"] == row["pool_id"]) & (want["query_id"] == row["query_id"])
                first = want[here].iloc[0]
                assert row["positives"] == first["n_positives"] and row["title"] == first["title"]
                assert row["year"] == (None if pd.isna(first["year"]) else first["year"])
    assert checked == len(exported)


_RUNS: dict[Path, dict[tuple[str, str], list[str]]] = {}


def _run_top(run: Path, pool_id: str, query_id: str) -> list[str]:
    """The run's ranking of one query, from runs.parquet (read once per run)."""
    if run not in _RUNS:
        frame = pd.read_parquet(run / "runs.parquet").sort_values(["pool_id", "query_id", "rank"])
        keys = zip(frame["pool_id"].astype(str), frame["query_id"], frame["paper_id"], strict=True)
        lists: dict[tuple[str, str], list[str]] = {}
        for pool, query, paper in keys:
            lists.setdefault((pool, str(query)), []).append(str(paper))
        _RUNS[run] = lists
    return _RUNS[run].get((pool_id, query_id), [])


def test_each_query_json_holds_the_runs_top_k_the_qrels_positives_and_their_ranks(
    server: Server, demo_like: DemoLike
) -> None:
    qrels = pd.read_parquet(demo_like.pools / "qrels.parquet").astype({"pool_id": str})
    units = demo_like.explorer.result.units
    pools_units = units[units["setup"] != "mdcr"]
    assert len(pools_units) > 50
    marked = 0
    for unit in pools_units.itertuples(index=False):
        q = urllib.parse.urlencode({"pool": unit.pool_id, "q": unit.query_id, "k": 20})
        page = _json(server, f"/api/query?{q}")
        positives = qrels[
            (qrels["pool_id"] == unit.pool_id)
            & (qrels["query_id"] == unit.query_id)
            & (qrels["relevance"] >= 1)
        ]["paper_id"]
        assert sorted(p["paper_id"] for p in page["positives"]) == sorted(positives)
        assert page["n_positives"] == len(positives)
        for column in page["columns"]:
            ranked = _run_top(demo_like.runs[column["retriever"]], unit.pool_id, unit.query_id)
            assert [i["paper_id"] for i in column["items"]] == ranked[:20]
            assert [i["rank"] for i in column["items"]] == list(range(1, len(ranked[:20]) + 1))
            assert column["depth"] == len(ranked)
            for item in column["items"]:
                assert item["positive"] == (item["paper_id"] in set(positives))
                marked += item["positive"]
            for p in page["positives"]:
                rank = p["ranks"][column["retriever"]]
                want = ranked.index(p["paper_id"]) + 1 if p["paper_id"] in ranked else None
                assert rank == want
    assert marked > 100  # the skilled runs put cited papers on top


def test_an_mdcr_query_ranks_its_candidates_as_the_original_scorer_does(
    server: Server, demo_like: DemoLike
) -> None:
    bench = pd.read_parquet(demo_like.benchmark / "benchmark.parquet")
    units = demo_like.explorer.result.units
    for unit in units[units["setup"] == "mdcr"].itertuples(index=False):
        q = urllib.parse.urlencode({"pool": unit.pool_id, "q": unit.query_id, "k": 500})
        page = _json(server, f"/api/query?{q}")
        mine = bench[(bench["query_id"] == unit.query_id) & (bench["field"] == unit.field)]
        true = sorted(mine.loc[mine["candidate_type"] == "true", "paper_id"])
        assert sorted(p["paper_id"] for p in page["positives"]) == true
        for column in page["columns"]:
            scores = pd.read_parquet(demo_like.ranks[column["retriever"]] / "scores.parquet")
            scores = scores[(scores["query_id"] == unit.query_id) & (scores["field"] == unit.field)]
            # trec_eval's order: score descending, then paper id descending
            order = sorted(zip(scores["score"], scores["paper_id"], strict=True), reverse=True)
            assert [i["paper_id"] for i in column["items"]] == [p for _, p in order]
            assert len(column["items"]) == len(mine)  # every candidate is ranked


def test_tau_on_the_queries_page_equals_scipy_on_the_two_runs(
    server: Server, demo_like: DemoLike
) -> None:
    from scipy.stats import weightedtau

    from mdcr.explore.contrast import list_values

    for k in (10, 50):  # within the copies' top 10, and beyond (read query by query)
        page = _json(server, f"/api/queries/dataset-test-800?baseline=bm25&versus=minilm&k={k}")
        assert page["state"]["k"] == k and page["rows"]
        for row in page["rows"]:
            a = _run_top(demo_like.runs["bm25"], row["pool_id"], row["query_id"])[:k]
            b = _run_top(demo_like.runs["minilm"], row["pool_id"], row["query_id"])[:k]
            _, x, y = list_values(a, b)
            assert row["tau"] == pytest.approx(weightedtau(x, y).statistic, abs=1e-12)
    by_tau = _json(server, "/api/queries/dataset-test-800?versus=minilm&sort=tau&order=asc")
    taus = [r["tau"] for r in by_tau["rows"]]
    assert taus == sorted(taus)


def test_sorting_filtering_and_paging_of_the_queries_page(
    server: Server, exported: pd.DataFrame
) -> None:
    page = _json(server, "/api/queries/field-test-300?sort=diff:minilm&order=desc")
    diffs = [r["diffs"]["minilm"] for r in page["rows"]]
    assert diffs == sorted(diffs, reverse=True)
    field = page["rows"][0]["field"]
    only = _json(server, f"/api/queries/field-test-300?field={urllib.parse.quote(field)}")
    assert only["rows"] and {r["field"] for r in only["rows"]} == {field}
    few = _json(server, "/api/queries/field-test-300?pos_min=3&pos_max=6")
    assert all(3 <= r["positives"] <= 6 for r in few["rows"])
    want = exported[(exported["pool_id"].str.startswith("field/test/"))]
    units = want.drop_duplicates(["pool_id", "query_id"])
    assert len(few["rows"]) == int(units["n_positives"].between(3, 6).sum())
    status, html = _get(server, "/queries/field-test-300?sort=year&order=asc")
    assert status == 200 and 'data-key="year"' in html and "▲" in html


def test_the_overview_shows_the_reports_tables_each_cell_linked_to_its_queries(
    server: Server, demo_like: DemoLike
) -> None:
    from mdcr.scoring.document import read_report

    report = read_report(demo_like.report)
    page = _json(server, "/api/overview")
    shown = {t["name"]: t for s in _sections(page["sections"]) for t in s["tables"]}
    made = {t.name: t for s in _sections_of(report.sections) for t in s.tables}
    assert set(shown) == set(made) and "dataset_test" in shown and "mdcr_test_map_ci" in shown
    linked = 0
    for name, table in made.items():
        for row, r in zip(table.rows, shown[name]["rows"], strict=True):
            for col, cell in zip(table.columns, r["cells"], strict=True):
                assert cell["text"] == table.text(row, col)  # as the report prints it
                if cell["href"]:
                    linked += 1
                    status, _ = _get(server, cell["href"])
                    assert status == 200, cell["href"]
    assert linked > 50
    # A cell's intervals row, every column of intervals.parquet included.
    intervals = pd.read_parquet(demo_like.report / "intervals.parquet")
    cell = shown["dataset_test_ci"]["rows"][0]["cells"][0]
    assert cell["interval"] is not None and set(cell["interval"]) == set(intervals.columns)
    assert cell["interval"]["estimate"] == cell["value"]


def _sections(sections: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for s in sections:
        yield s
        yield from _sections(s["subsections"])


def _sections_of(sections: list[Any]) -> Iterator[Any]:
    for s in sections:
        yield s
        yield from _sections_of(s.subsections)


def test_the_scatter_json_holds_each_querys_stored_values(
    server: Server, exported: pd.DataFrame
) -> None:
    page = _json(server, "/api/scatter/dataset-test-800?a=bm25&b=random&metric=ndcg@500")
    want = exported[(exported["pool_id"].str.startswith("dataset/test/800/"))]
    want = want[want["metric"] == "ndcg@500"].set_index(["pool_id", "query_id", "retriever"])
    assert len(page["points"]) == len(want) // 3
    for p in page["points"]:
        assert p["x"] == want.loc[(p["pool_id"], p["query_id"], "bm25"), "value"]
        assert p["y"] == want.loc[(p["pool_id"], p["query_id"], "random"), "value"]
    assert page["above"] + page["below"] + page["equal"] == len(page["points"])
    status, html = _get(server, "/scatter/dataset-test-800?a=bm25&b=random")
    assert status == 200 and html.count("<circle") == len(page["points"])


def test_html_pages_render_what_their_json_holds(server: Server, demo_like: DemoLike) -> None:
    status, html = _get(server, "/")
    assert status == 200 and "<h1>mdcr evaluation report</h1>" in html
    status, html = _get(server, "/queries/dataset-test-800")
    assert status == 200 and html.count('<td class="title"') == 12  # 6 queries x 2 reps
    unit = demo_like.explorer.result.units.iloc[0]
    q = urllib.parse.urlencode({"pool": unit["pool_id"], "q": unit["query_id"]})
    page = _json(server, f"/api/query?{q}")
    status, html = _get(server, f"/query?{q}")
    assert status == 200
    assert html.count('<li class="pos"') == sum(
        i["positive"] for c in page["columns"] for i in c["items"]
    )
    assert len(re.findall(r"not in the top \d+", html)) == sum(
        v is None for p in page["positives"] for v in p["ranks"].values()
    )
    others = [o for o in page["occurrences"] if not o["current"]]
    assert len(others) == 1  # its other repetition (one pool size)
    assert _get(server, others[0]["href"])[0] == 200


@pytest.mark.parametrize(
    "path, words",
    [
        ("/queries/nope", "no setup 'nope'"),
        ("/api/queries/nope", "no setup 'nope'"),
        ("/queries/dataset-test-800?baseline=bm99", "no baseline 'bm99'"),
        ("/queries/dataset-test-800?metric=p@10", "no metric 'p@10'"),
        ("/queries/dataset-test-800?sort=../x", "no sort '../x'"),
        ("/queries/dataset-test-800?page=99", "page 99 is not between 1 and 1"),
        ("/query?pool=dataset/test/800/r0&q=nope", "no query 'nope'"),
        ("/query?q=x", "a query page needs"),
        ("/query?pool=dataset/test/800/r0&q=x&k=0", "from 1 to 500"),
        ("/scatter/dataset-test-800?a=x", "no a 'x'"),
        ("/../../etc/passwd", "no page"),
        ("/static/base.html", "no page"),
        ("/templates/base.html", "no page"),
        ("/api/query/../../manifest.json", "no page"),
    ],
)
def test_bad_requests_get_a_one_line_404_never_a_traceback(
    server: Server, path: str, words: str
) -> None:
    status, body = _get(server, path)
    assert status == 404, body
    assert "Traceback" not in body and 'File "' not in body
    if path.startswith("/api/"):
        assert words in json.loads(body)["error"]
    else:
        message = re.search(r'<p class="error" id="message">(.*?)</p>', body, re.S)
        assert message is not None and words in message.group(1).replace("&#39;", "'")
        assert "\n" not in message.group(1)


def test_the_server_is_read_only(server: Server) -> None:
    for method in ("POST", "PUT", "DELETE"):
        request = urllib.request.Request(server.url, data=b"x", method=method)
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=10)
        assert caught.value.code == 405
        assert "read-only" in caught.value.read().decode()


@pytest.mark.parametrize("k", [3, 10, 20])
def test_every_way_to_the_rank_correlation_gives_the_same_values(
    server: Server, demo_like: DemoLike, monkeypatch: pytest.MonkeyPatch, k: int
) -> None:
    """A page's rows only (the default), every row of a setup (sorted by it, the JSON), and
    the top k read from the copies' top 10, query by query or by a scan of the run."""
    import mdcr.explore.reads as reads

    explorer = demo_like.explorer
    for key in explorer.result.setups:
        every = _json(server, f"/api/queries/{key}?k={k}")
        taus = {(r["pool_id"], r["query_id"]): r["tau"] for r in every["rows"]}
        assert any(t is not None for t in taus.values())
        explorer._contrasts.clear()  # each page's rows only, from here
        shown = 0
        for page in range(1, every["total"] // 100 + 2):
            rows = explorer.queries(key, {"k": str(k), "page": str(page)}, NoLinks())["rows"]
            for row in rows:
                want = taus[(row["pool_id"], row["query_id"])]
                assert row["tau"] == want or (row["tau"] is None and want is None)
                shown += 1
        assert shown == every["total"] and not explorer._contrasts
        setup = explorer.result.setups[key]
        units = explorer.result.setup_units(key)
        state = every["state"]
        monkeypatch.setattr(reads, "PER_UNIT_TOP", 0)  # one scan of the run
        scanned = explorer.contrast(setup, state["baseline"], state["versus"], k, units[::-1])
        monkeypatch.undo()
        rows = explorer.result.units.iloc[units[::-1]]
        for pool, query, tau in zip(rows["pool_id"], rows["query_id"], scanned, strict=True):
            want = taus[(pool, query)]
            assert (np.isnan(tau) and want is None) or tau == pytest.approx(want, abs=1e-15)


@pytest.mark.parametrize("copies", ["rows apart", "not made yet"])
def test_what_the_copies_do_not_hold_is_read_from_the_files(
    demo_like: DemoLike, monkeypatch: pytest.MonkeyPatch, copies: str
) -> None:
    from mdcr.explore.copies import SCATTERED

    explorer = demo_like.explorer
    reader = explorer.reader
    setup = explorer.result.setups["dataset-test-800"]
    units = explorer.result.setup_units(setup.key)[:5]
    copied = {int(u): reader.rankings(setup, int(u)) for u in units}
    positives = {int(u): reader.positives(setup, int(u)) for u in units}
    tops = reader.top_lists(setup, "minilm", 20, units)
    tops_10 = reader.top_lists(setup, "minilm", 10, units)
    if copies == "not made yet":
        monkeypatch.setattr(reader, "_runs", {})
        monkeypatch.setattr(reader, "_qrels", None)
    for copy in [*reader._runs.values(), reader._qrels] if copies == "rows apart" else []:
        assert copy is not None
        first = copy.first.copy()
        first[units] = SCATTERED
        monkeypatch.setattr(copy, "first", first)
    for unit, rankings in copied.items():
        assert reader.rankings(setup, unit) == rankings
        assert all(r is not None and r.depth > 0 for r in rankings.values())
        assert reader.positives(setup, unit) == positives[unit] != []
    for k, before in ((20, tops), (10, tops_10)):
        again = reader.top_lists(setup, "minilm", k, units)
        assert before is not None and again is not None
        order, again_order = np.argsort(before.slots), np.argsort(again.slots)
        assert np.array_equal(again.slots[again_order], before.slots[order])
        assert again.ids.take(again_order).equals(before.ids.take(order))
        assert np.array_equal(again.ranked, before.ranked)


def test_a_copy_failing_in_the_background_leaves_the_pages_reading_the_files(
    demo_like: DemoLike, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mdcr.explore.copies import SessionFiles
    from mdcr.explore.pages import Explorer
    from mdcr.explore.reads import Reader

    def disk_full(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    result = demo_like.explorer.result
    files = SessionFiles()
    monkeypatch.setattr(files, "run", disk_full)
    reader = Reader(result, files)
    try:
        reader.wait_for_copies()
        assert reader._runs == {} and reader._qrels is not None  # the qrels were copied first
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [
            "mdcr: explore reads the runs from their files ([Errno 28] No space left on device)"
        ]
        with serving(Explorer(result, reader)) as failing, serving(demo_like.explorer) as ok:
            units = result.setup_units("dataset-test-800")[:3]
            for row in result.units.iloc[units].itertuples():
                path = f"/api/query?pool={row.pool_id}&q={row.query_id}&k=20"
                assert _json(failing, path) == _json(ok, path)
    finally:
        reader.close()
        files.close()


def test_an_error_while_a_page_is_made_is_a_one_line_500_never_a_hang(
    demo_like: DemoLike, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mdcr.explore.copies import SessionFiles
    from mdcr.explore.pages import Explorer
    from mdcr.explore.reads import Reader

    result = demo_like.explorer.result
    files = SessionFiles()
    reader = Reader(result, files)
    try:
        reader.wait_for_copies()
        temp = Path(reader._rows("SELECT current_setting('temp_directory')", [])[0][0])
        assert temp.parent.name.startswith("mdcr-explore-")  # DuckDB spills into the session's
        row = result.units.iloc[int(result.setup_units("dataset-test-800")[0])]
        with serving(Explorer(result, reader)) as server:
            files.close()  # the session's copies are gone under a running server
            for path in (f"/query?pool={row.pool_id}&q={row.query_id}",
                         f"/api/query?pool={row.pool_id}&q={row.query_id}"):  # fmt: skip
                status, body = _get(server, path)  # _get waits 30 s at most
                assert status == 500, body
                assert "Traceback" not in body and 'File "' not in body
                if path.startswith("/api/"):
                    assert json.loads(body)["error"].startswith("the page could not be made")
                else:
                    message = re.search(r'<p class="error" id="message">(.*?)</p>', body, re.S)
                    assert message is not None and "\n" not in message.group(1)
        assert not temp.exists()
    finally:
        reader.close()
