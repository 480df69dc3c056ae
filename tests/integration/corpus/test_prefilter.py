"""Prefilter: rule counts on real S2ORC records, citation edges, malformed input, determinism.

Expected values are computed here with plain ``json`` parsing, independently of the SQL
under test.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.stage import StageContext
from mdcr.corpus import jsonl
from mdcr.corpus.formats import s2orc
from mdcr.corpus.prefilter import output as prefilter_output
from mdcr.corpus.prefilter.stage import SPEC, PrefilterConfig, prefilter_corpus

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "s2orc_sample" / "metadata_sample.jsonl"
DIRECTIONS = ("total", "either", "in", "out", "both")


# --------------------------------------------------------------------------- helpers


def load_sample() -> list[dict[str, Any]]:
    with SAMPLE.open() as f:
        return [json.loads(line) for line in f]


def rules(rec: dict[str, Any], direction: str, k: int = 3, min_abs: int = 30) -> list[bool]:
    """The four rules, written independently of the SQL: year, title, abstract, citations."""
    n_in = len(set(rec.get("inbound_citations") or []))
    n_out = len(set(rec.get("outbound_citations") or []))
    cit = {
        "total": n_in + n_out >= k,
        "either": n_in >= k or n_out >= k,
        "in": n_in >= k,
        "out": n_out >= k,
        "both": n_in >= k and n_out >= k,
    }[direction]
    title = rec.get("title")
    return [
        rec.get("year") is not None,
        title is not None and title.strip() != "",
        len(rec.get("abstract") or "") >= min_abs,
        cit,
    ]


def expected_funnel(records: list[dict[str, Any]], direction: str) -> dict[str, Any]:
    names = ("year", "title", "abstract", "citations")
    removed = dict.fromkeys(names, 0)
    alone = dict.fromkeys(names, 0)
    survivors = set()
    for rec in records:
        ok = rules(rec, direction)
        for name, passed in zip(names, ok, strict=True):
            alone[name] += not passed
        first_fail = next((n for n, passed in zip(names, ok, strict=True) if not passed), None)
        if first_fail is None:
            survivors.add(rec["paper_id"])
        else:
            removed[first_fail] += 1
    return {"removed": removed, "alone": alone, "survivors": survivors}


def write_jsonl(
    path: Path, lines: Sequence[bytes | str | dict[str, Any]], gz: bool = False
) -> Path:
    raw = b"".join(
        (
            line
            if isinstance(line, bytes)
            else (line if isinstance(line, str) else json.dumps(line)).encode()
        )
        + b"\n"
        for line in lines
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


def rec(pid: Any, *, out: Any = None, inb: Any = None, **kw: Any) -> dict[str, Any]:
    """A record that passes the text rules; its citations are what the test gives."""
    base: dict[str, Any] = {
        "paper_id": pid,
        "title": f"Title of {pid}",
        "abstract": f"An abstract that is long enough to pass, about paper {pid}.",
        "year": 2000,
        "mag_field_of_study": ["Medicine"],
        "outbound_citations": out or [],
        "inbound_citations": inb or [],
    }
    base.update(kw)
    return base


def run(folder: Path, out: Path, **cfg: Any) -> Any:
    return prefilter_corpus(folder, out, PrefilterConfig(input=str(folder), **cfg))


def read(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- real sample


@pytest.fixture(scope="module")
def sample_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("sample")
    plain = base / "plain"
    plain.mkdir()
    shutil.copy(SAMPLE, plain / "metadata_sample.jsonl")
    gz = base / "gz"
    gz.mkdir()
    (gz / "metadata_0.jsonl.gz").write_bytes(gzip.compress(SAMPLE.read_bytes()))
    return {"plain": plain, "gz": gz}


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("kind", ["plain", "gz"])
def test_sample_counts_match_independent_parse(
    sample_dirs: dict[str, Path], tmp_path: Path, kind: str, direction: str
) -> None:
    records = load_sample()
    want = expected_funnel(records, direction)
    res = run(sample_dirs[kind], tmp_path, citation_direction=direction)
    f = res.funnel
    assert f["records_read"] == 1000
    assert f["malformed_skipped"] == 0
    assert f["duplicates_dropped"] == 0
    assert f["unique_papers"] == 1000
    assert f["removed_by_rule"] == want["removed"]
    assert f["fails_alone"] == want["alone"]
    assert f["survivors"] == len(want["survivors"])
    papers = read(tmp_path / "papers.parquet")
    assert {p["paper_id"] for p in papers} == want["survivors"]
    assert json.loads((tmp_path / "funnel.json").read_text()) == f


def test_sample_headline_numbers(sample_dirs: dict[str, Path], tmp_path: Path) -> None:
    # The figures quoted in the module docstring (why "total" is the default).
    got = {
        d: run(sample_dirs["gz"], tmp_path / d, citation_direction=d).n_papers for d in DIRECTIONS
    }
    assert got == {"total": 183, "either": 179, "in": 117, "out": 106, "both": 44}


def test_sample_papers_hold_the_source_values(sample_dirs: dict[str, Path], tmp_path: Path) -> None:
    by_id = {r["paper_id"]: r for r in load_sample()}
    run(sample_dirs["plain"], tmp_path)
    papers = read(tmp_path / "papers.parquet")
    # File order: the survivors in the order of the sample file.
    line_of = {r["paper_id"]: i for i, r in enumerate(load_sample())}
    order = [line_of[p["paper_id"]] for p in papers]
    assert order == sorted(order)
    assert list(papers[0]) == ["paper_id", "title", "abstract", "year", "fields", "n_out", "n_in"]
    for p in papers:
        src = by_id[p["paper_id"]]
        assert p["title"] == src["title"]
        assert p["abstract"] == src["abstract"]
        assert p["year"] == src["year"]
        assert p["fields"] == (src["mag_field_of_study"] or [])
    # Edges inside the prefiltered sample, computed independently.
    kept = {p["paper_id"] for p in papers}
    edges = {
        (a, b) for a in kept for b in set(by_id[a]["outbound_citations"]) if b in kept and b != a
    }
    cites = read(tmp_path / "citations.parquet")
    assert {(c["citing_id"], c["cited_id"]) for c in cites} == edges
    for p in papers:
        assert p["n_out"] == sum(1 for a, _ in edges if a == p["paper_id"])
        assert p["n_in"] == sum(1 for _, b in edges if b == p["paper_id"])


def test_stage_run_declares_outputs_and_records_funnel(
    sample_dirs: dict[str, Path], tmp_path: Path
) -> None:
    ctx = StageContext(out=tmp_path, inputs={"input": [sample_dirs["gz"]]}, quiet=True)
    SPEC.run(PrefilterConfig(input=str(sample_dirs["gz"])), ctx)
    assert ctx.outputs == {"papers.parquet": 183, "citations.parquet": 0, "funnel.json": None}
    assert ctx.info["funnel"]["survivors"] == 183
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "citations.parquet",
        "funnel.json",
        "papers.parquet",
    ]  # the spill folder is gone


# --------------------------------------------------------------------------- rules in detail


def test_title_whitespace_matches_python_isspace() -> None:
    import duckdb

    con = duckdb.connect()
    rows = con.execute(
        "SELECT i FROM (SELECT range AS i FROM range(0, 55296) "
        "UNION ALL SELECT range FROM range(57344, 1114112)) "
        f"WHERE regexp_full_match(chr(i::INTEGER), '{jsonl.WHITESPACE_CLASS}')"
    ).fetchall()
    assert {r[0] for r in rows} == {i for i in range(0x110000) if chr(i).isspace()}


def test_text_rules_on_edge_cases(tmp_path: Path) -> None:
    cites = {"outbound_citations": ["x1", "x2", "x3"]}
    lines = [
        rec("blank", title="\u3000\u00a0 \t", **cites),  # only whitespace: removed
        rec("empty", title="", **cites),
        rec("null-title", title=None, **cites),
        rec("lead-space", title="  Starts with spaces", **cites),  # kept
        rec("unicode-start", title="\u00c9tude", **cites),  # kept (non-ASCII first char)
        rec("escaped-start", title="\u2028x", **cites),  # line separator, then x: kept
        rec("abs-30", abstract="é" * 30, **cites),  # 30 code points: kept
        rec("abs-29", abstract="é" * 29, **cites),
        rec("abs-emoji", abstract="\U0001f600" * 30, **cites),  # 30 code points: kept
        rec("abs-null", abstract=None, **cites),
        rec("no-year", year=None, **cites),
        rec("year-0", year=0, **cites),  # not a publication year: malformed
        rec("year-1000", year=1000, **cites),  # kept
        rec("year-2100", year=2100, **cites),  # kept
    ]
    folder = tmp_path / "in"
    write_jsonl(folder / "metadata_0.jsonl", lines)  # json.dumps escapes non-ASCII
    res = run(folder, tmp_path / "out")
    kept = {p["paper_id"] for p in read(tmp_path / "out" / "papers.parquet")}
    texts = {"lead-space", "unicode-start", "escaped-start", "abs-30", "abs-emoji"}
    assert kept == texts | {"year-1000", "year-2100"}
    assert res.funnel["removed_by_rule"] == {"year": 1, "title": 3, "abstract": 2, "citations": 0}
    assert res.funnel["malformed_by_reason"] == {"year is not a publication year (1000-2100)": 1}


@pytest.mark.parametrize("k", [3, 8])
def test_citation_counts_are_distinct_ids(tmp_path: Path, k: int) -> None:
    lines = [
        rec("dup-only", out=["a"] * 10),  # 1 distinct
        rec("dup-head", out=["a", "a", "a"] + [f"b{i}" for i in range(k - 1)]),  # k distinct
        rec("dup-short", out=["a", "b"] * 5),  # 2 distinct
        rec("split", out=["a"] * (k - 1), inb=["a", "z"]),  # 1 + 2 distinct
        rec("exact", out=[f"c{i}" for i in range(k)]),
        rec("one-less", out=[f"c{i}" for i in range(k - 1)] + ["c0"]),
    ]
    folder = tmp_path / "in"
    write_jsonl(folder / "metadata_0.jsonl", lines)
    for direction in DIRECTIONS:
        want = {r["paper_id"] for r in lines if all(rules(r, direction, k=k))}
        if not want:  # no paper passes: an error that shows the funnel
            with pytest.raises(InputDataError, match=f"citations {len(lines)}\\)"):
                run(folder, tmp_path / direction, citation_direction=direction, min_citations=k)
            continue
        res = run(folder, tmp_path / direction, citation_direction=direction, min_citations=k)
        got = {p["paper_id"] for p in read(tmp_path / direction / "papers.parquet")}
        assert got == want, direction
        assert res.funnel["fails_alone"]["citations"] == sum(
            not rules(r, direction, k=k)[3] for r in lines
        )


# --------------------------------------------------------------------------- citation edges


def test_citations_keep_only_edges_between_survivors(tmp_path: Path) -> None:
    lines = [
        # A cites B twice, C, itself, a paper that fails a rule, and an unknown id.
        rec("A", out=["B", "B", "C", "A", "F", "unknown"], inb=["x"]),
        rec("B", out=["C"], inb=["A", "y", "z"]),
        rec("C", out=["A"], inb=["A", "B", "q"]),
        rec("D", out=["u1", "u2", "u3"]),  # survives, no edge inside
        rec("F", year=None, out=["A", "B", "C"]),  # fails the year rule
        rec("G", out=["A", "B"]),  # fails citations (2 < 3): its edges are gone too
    ]
    folder = tmp_path / "in"
    write_jsonl(folder / "metadata_0.jsonl.gz", lines, gz=True)
    res = run(folder, tmp_path / "out")
    cites = read(tmp_path / "out" / "citations.parquet")
    pairs = [(c["citing_id"], c["cited_id"]) for c in cites]
    assert pairs == [("A", "B"), ("A", "C"), ("B", "C"), ("C", "A")]  # file order, distinct
    papers = {p["paper_id"]: p for p in read(tmp_path / "out" / "papers.parquet")}
    assert sorted(papers) == ["A", "B", "C", "D"]
    assert {k: (p["n_out"], p["n_in"]) for k, p in papers.items()} == {
        "A": (2, 1),
        "B": (1, 1),
        "C": (1, 2),
        "D": (0, 0),
    }
    assert res.n_citations == 4
    assert res.funnel["citation_edges"] == 4


# --------------------------------------------------------------------------- malformed input


GOOD = rec("ok1", out=["a", "b", "c"])


def malformed_lines() -> list[tuple[bytes, str]]:
    """(line, expected reason) for each kind of malformed line."""

    def enc(d: dict[str, Any]) -> bytes:
        return json.dumps(d).encode()

    return [
        (b'{"paper_id": "t1", "title": "x"', "invalid JSON"),
        (enc(rec("t2", year="abc")), "year is not an integer or null"),
        (enc(rec("t3", year=[1])), "year is not an integer or null"),
        (enc(rec("t4", year=2001.5)), "year is not an integer or null"),
        (enc(rec("t5", year="2001")), "year is not an integer or null"),
        (enc(rec("t6", title=123)), "title is not a string or null"),
        (enc(rec("t7", abstract={"a": 1})), "abstract is not a string or null"),
        (enc(rec("t8", out="xyz")), "outbound_citations is not a list of strings or null"),
        (enc(rec("t9", out=[1, 2, 3])), "outbound_citations is not a list of strings or null"),
        (enc(rec("t10", inb=["a", None])), "inbound_citations is not a list of strings or null"),
        (
            enc(rec("t11", mag_field_of_study="Medicine")),
            "mag_field_of_study is not a list of strings or null",
        ),
        (enc(rec("t12")).replace(b"Title of t12", b"Caf\xe9"), "invalid UTF-8"),
        (enc(rec(13)), "paper_id is not a string"),
        (b'{"title": "no id"}', "paper_id is missing"),
        (b"[1, 2]", "not a JSON object"),
        (enc(rec("t16", year=99999999999999999999)), "year is out of the 64-bit integer range"),
    ]


def test_malformed_lines_are_counted_and_reported(tmp_path: Path) -> None:
    bad = malformed_lines()
    lines: list[bytes | dict[str, Any]] = [GOOD]
    for line, _ in bad:
        lines += [line, b"   "]  # whitespace-only lines are not records
    folder = tmp_path / "in"
    path = write_jsonl(folder / "metadata_0.jsonl.gz", lines, gz=True)
    res = run(folder, tmp_path / "out", max_reported_errors=100)
    f = res.funnel
    assert f["records_read"] == 1 + len(bad)
    assert f["malformed_skipped"] == len(bad)
    assert f["survivors"] == 1
    want = [f"{path}:{2 + 2 * i}: {reason}" for i, (_, reason) in enumerate(bad)]
    assert f["malformed_examples"] == want
    assert sum(f["malformed_by_reason"].values()) == len(bad)


def test_report_limit_and_truncated_gzip(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    write_jsonl(folder / "metadata_0.jsonl", [GOOD, b"{bad", b"{bad", b"{bad"])
    full = gzip.compress(b"".join(json.dumps(rec(f"g{i}")).encode() + b"\n" for i in range(5000)))
    (folder / "metadata_1.jsonl.gz").write_bytes(full[: len(full) // 2])
    res = run(folder, tmp_path / "out", max_reported_errors=2)
    f = res.funnel
    # The readable complete lines of the truncated file are kept.
    data = zlib.decompressobj(31).decompress(full[: len(full) // 2])
    complete = data.count(b"\n")
    assert 0 < complete < 5000
    assert f["records_read"] == 1 + 3 + complete + 1
    assert f["malformed_skipped"] == 4
    assert f["malformed_by_reason"][jsonl.TRUNCATED] == 1
    assert f["malformed_by_reason"][s2orc.UNREADABLE] == 3
    assert f["malformed_examples"] == [
        f"{folder / 'metadata_0.jsonl'}:2: invalid JSON",
        f"{folder / 'metadata_0.jsonl'}:3: invalid JSON",
    ]
    assert f["unique_papers"] == 1 + complete
    # All examples: the truncation is reported on the line after the last complete one.
    res = run(folder, tmp_path / "out2", max_reported_errors=10)
    assert res.funnel["malformed_examples"][-1] == (
        f"{folder / 'metadata_1.jsonl.gz'}:{complete + 1}: {jsonl.TRUNCATED}"
    )


def test_clean_shards_take_the_fast_read_and_bad_ones_fall_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, bool]] = []
    real = jsonl.shard_sql

    def spy(schema: jsonl.RecordSchema, path: Path, *, skip_bad_lines: bool = True) -> str:
        calls.append((Path(path).name, skip_bad_lines))
        return real(schema, path, skip_bad_lines=skip_bad_lines)

    monkeypatch.setattr(jsonl, "shard_sql", spy)
    monkeypatch.setenv("MDCR_THREADS", "1")
    good = [rec(f"g{i}", out=["a", "b", "c"]) for i in range(50)]
    folder = tmp_path / "in"
    write_jsonl(folder / "metadata_0.jsonl.gz", good, gz=True)
    write_jsonl(folder / "metadata_1.jsonl.gz", [rec("x", out=["a", "b", "c"]), b"{bad"], gz=True)
    full = gzip.compress(b"".join(json.dumps(rec(f"t{i}")).encode() + b"\n" for i in range(3000)))
    (folder / "metadata_2.jsonl.gz").write_bytes(full[: len(full) // 2])
    res = run(folder, tmp_path / "out")
    assert calls == [
        ("metadata_0.jsonl.gz", False),  # clean: read once, error skipping off
        ("metadata_1.jsonl.gz", False),  # an unreadable line: read again, skipping it
        ("metadata_1.jsonl.gz", True),
        ("metadata_2.jsonl.gz", False),  # truncated: both reads fail, the copy is read
        ("metadata_2.jsonl.gz", True),
        ("recovered_metadata_2.jsonl", True),
    ]
    assert res.funnel["malformed_by_reason"][s2orc.UNREADABLE] == 1
    assert res.funnel["malformed_by_reason"][jsonl.TRUNCATED] == 1
    assert res.n_papers == 51


def test_strict_stops_at_the_first_malformed_line(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    write_jsonl(folder / "metadata_0.jsonl", [GOOD, rec("x")])
    write_jsonl(folder / "metadata_1.jsonl", [GOOD, GOOD, rec("y", title=5), b"{bad"])
    with pytest.raises(InputDataError) as err:
        run(folder, tmp_path / "out", strict=True)
    msg = str(err.value)
    assert msg == (
        f"{folder / 'metadata_1.jsonl'}:3: title is not a string or null; "
        "fix the line or run without --strict"
    )
    assert "\n" not in msg
    # Without --strict the same input runs.
    assert run(folder, tmp_path / "out2").funnel["malformed_skipped"] == 2


def test_duplicates_keep_the_first_record(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    cites = {"out": ["a", "b", "c"]}
    # File order is natural: metadata_2 comes before metadata_10.
    write_jsonl(
        folder / "metadata_10.jsonl",
        [rec("P", title="P from file 10", **cites), rec("Q", title="Q from 10", **cites)],
    )
    write_jsonl(
        folder / "metadata_2.jsonl.gz",
        [
            rec("R", title="R first", year=None, **cites),  # the first R fails a rule
            rec("P", title="P from file 2", **cites),
            rec("S", title="S first", **cites),
            rec("R", title="R second", **cites),
            rec("S", title="S second", **cites),
        ],
        gz=True,
    )
    res = run(folder, tmp_path / "out")
    f = res.funnel
    assert f["records_read"] == 7
    assert f["duplicates_dropped"] == 3
    assert sorted(f["duplicate_examples"]) == ["P", "R", "S"]
    assert f["unique_papers"] == 4
    titles = {p["paper_id"]: p["title"] for p in read(tmp_path / "out" / "papers.parquet")}
    assert titles == {"P": "P from file 2", "Q": "Q from 10", "S": "S first"}
    assert f["removed_by_rule"]["year"] == 1  # the first R


def test_folder_without_shards_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing here")
    with pytest.raises(InputDataError) as err:
        run(tmp_path, tmp_path / "out")
    msg = str(err.value)
    assert "\n" not in msg
    assert str(tmp_path) in msg
    assert "metadata_*.jsonl.gz" in msg


def test_fallback_to_any_jsonl_and_natural_order(tmp_path: Path) -> None:
    for name in ["b.jsonl", "a10.jsonl.gz", "a9.jsonl", ".hidden.jsonl", "x.json"]:
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in s2orc.find_shards(tmp_path)] == ["a9.jsonl", "a10.jsonl.gz", "b.jsonl"]
    (tmp_path / "metadata_1.jsonl").write_bytes(b"")
    assert [p.name for p in s2orc.find_shards(tmp_path)] == ["metadata_1.jsonl"]


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="min_citations"):
        PrefilterConfig(input="x", min_citations=-1).validate()


# --------------------------------------------------------------------------- determinism


def test_output_bytes_do_not_depend_on_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random

    rnd = random.Random(7)
    ids = [str(1000 + i) for i in range(6000)]
    folder = tmp_path / "in"
    for shard in range(4):
        lines = []
        for pid in ids[shard::4]:
            out = rnd.sample(ids, rnd.randint(0, 12))
            lines.append(rec(pid, out=out, inb=rnd.sample(ids, rnd.randint(0, 3))))
        write_jsonl(folder / f"metadata_{shard}.jsonl.gz", lines, gz=True)
    # Small row groups and edge batches, so that several of each are written and read.
    monkeypatch.setattr(prefilter_output, "ROW_GROUP", 997)
    monkeypatch.setattr(prefilter_output, "EDGE_BATCH", 4096)
    digests = []
    for threads in ("1", "2"):
        monkeypatch.setenv("MDCR_THREADS", threads)
        dest = tmp_path / f"out{threads}"
        res = run(folder, dest)
        names = ("papers.parquet", "citations.parquet", "funnel.json")
        digests.append({n: sha(dest / n) for n in names})
    assert digests[0] == digests[1]
    assert res.n_papers > 1000 and res.n_citations > 10_000


def test_papers_and_edges_are_in_file_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random

    rnd = random.Random(3)
    ids = [f"p{i:05d}" for i in range(3000)]
    rnd.shuffle(ids)  # file order is not paper_id order
    folder = tmp_path / "in"
    records: list[dict[str, Any]] = []
    start = 0
    # Shards of unequal size: later small shards finish before the big first one.
    for shard, size in enumerate([2000, 100, 700, 200]):
        lines = []
        for pid in ids[start : start + size]:
            r = rec(pid, out=rnd.sample(ids, rnd.randint(0, 8)), inb=rnd.sample(ids, 2))
            if rnd.random() < 0.2:
                r["abstract"] = None
            lines.append(r)
        start += size
        records += lines
        write_jsonl(folder / f"metadata_{shard}.jsonl.gz", lines, gz=True)
    monkeypatch.setattr(prefilter_output, "ROW_GROUP", 333)
    monkeypatch.setenv("MDCR_THREADS", "3")
    run(folder, tmp_path / "out")
    want = [r["paper_id"] for r in records if all(rules(r, "total"))]
    papers = read(tmp_path / "out" / "papers.parquet")
    assert [p["paper_id"] for p in papers] == want
    pos = {pid: i for i, pid in enumerate(want)}
    edges = sorted(
        {
            (pos[r["paper_id"]], pos[c])
            for r in records
            if r["paper_id"] in pos
            for c in r["outbound_citations"]
            if c in pos and c != r["paper_id"]
        }
    )
    cites = read(tmp_path / "out" / "citations.parquet")
    assert [(pos[c["citing_id"]], pos[c["cited_id"]]) for c in cites] == edges
    assert len(edges) > 5000
    n_out = [sum(1 for a, _ in edges if a == i) for i in range(len(want))]
    n_in = [sum(1 for _, b in edges if b == i) for i in range(len(want))]
    assert [p["n_out"] for p in papers] == n_out
    assert [p["n_in"] for p in papers] == n_in


def test_bad_thread_setting_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDCR_THREADS", "many")
    write_jsonl(tmp_path / "in" / "metadata_0.jsonl", [GOOD])
    with pytest.raises(ConfigError, match="MDCR_THREADS"):
        run(tmp_path / "in", tmp_path / "out")


def test_scan_and_reread_agree_on_odd_lines(tmp_path: Path) -> None:
    # The scan only counts unreadable lines; the re-read names them. Both must agree on
    # which lines are malformed, whatever DuckDB's JSON reader accepts at the margins.
    lines = [
        b'\xef\xbb\xbf{"paper_id": "bom"}',
        b'{"paper_id": "tc", "year": 1,}',
        b'{"paper_id": "nan", "year": NaN}',
        b'{"paper_id": "a"}{"b": 1}',
        b'{"paper_id":\r"cr"}',
        b'{"paper_id": "cm"} // comment',
        b'{"paper_id": "dk", "paper_id": 5}',
        b'{"paper_id": "sur", "title": "\\ud800"}',
        b"{'paper_id': 'single quotes'}",
        b'\t{"paper_id": "lead-tab"}',
        b'{"paper_id": "huge", "year": 1e400}',
        b'{"paper_id": "zero", "year": 0123}',
        b'{"paper_id": "ctl", "title": "a\tb"}',
        b'{"paper_id": "ok"}',
        json.dumps(rec("passes", out=["x1", "x2", "x3"])).encode(),  # a corpus, not an error
    ]
    folder = tmp_path / "in"
    write_jsonl(folder / "metadata_0.jsonl", lines)
    f = run(folder, tmp_path / "out", max_reported_errors=100).funnel
    assert f["records_read"] == len(lines)
    assert f["malformed_skipped"] == len(f["malformed_examples"]) > 5
    bad = {int(e.split(":")[-2]) for e in f["malformed_examples"]}
    assert {3, 4, 9, 13} <= bad  # NaN year, two objects, single quotes, raw tab
    assert not {1, 10, 14} & bad  # a leading byte-order mark or whitespace is fine
    assert f["file_problems"] == []  # a leading byte-order mark is read without it


def test_bad_memory_setting_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDCR_MEMORY_LIMIT", "lots")
    write_jsonl(tmp_path / "in" / "metadata_0.jsonl", [GOOD])
    with pytest.raises(ConfigError, match="MDCR_MEMORY_LIMIT"):
        run(tmp_path / "in", tmp_path / "out")


def test_overlong_line_is_malformed_and_the_rest_is_read(tmp_path: Path) -> None:
    # DuckDB fails a whole file on a line over ~32 MiB; the file is then read from a copy.
    long_rec = rec("long", title="a" * (jsonl.MAX_LINE_BYTES + 2048))
    folder = tmp_path / "in"
    path = write_jsonl(folder / "metadata_0.jsonl.gz", [GOOD, long_rec, rec("after")], gz=True)
    f = run(folder, tmp_path / "out").funnel
    assert f["records_read"] == 3
    assert f["malformed_skipped"] == 1
    assert f["malformed_by_reason"] == {jsonl.TOO_LONG: 1}
    assert f["malformed_examples"] == [f"{path}:2: {jsonl.TOO_LONG}"]
    assert f["unique_papers"] == 2


def test_empty_and_crlf_shards(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "metadata_0.jsonl.gz").write_bytes(b"")
    (folder / "metadata_1.jsonl").write_bytes(b"")
    (folder / "metadata_2.jsonl.gz").write_bytes(gzip.compress(b""))
    crlf = b"".join(
        json.dumps(rec(f"w{i}", out=["a", "b", "c"])).encode() + b"\r\n" for i in range(3)
    )
    (folder / "metadata_3.jsonl").write_bytes(crlf + b"\r\n" + b'{"paper_id": 1}\r\n')
    f = run(folder, tmp_path / "out", max_reported_errors=10).funnel
    assert f["records_read"] == 4
    assert f["survivors"] == 3
    assert f["malformed_examples"] == [f"{folder / 'metadata_3.jsonl'}:5: paper_id is not a string"]
    # 0-byte files are whole-file findings; a gzip stream of no lines is just empty.
    assert f["file_problems"] == [
        f"{folder / name}: is empty (0 bytes)"
        for name in ("metadata_0.jsonl.gz", "metadata_1.jsonl")
    ]


def test_prefetch_keeps_order_raises_errors_and_stops_early() -> None:
    import threading

    done = prefilter_output.Prefetch(iter(range(50)), depth=2)
    assert list(done) == list(range(50))
    done.close()

    def failing() -> Any:
        yield 1
        raise ValueError("engine failed")

    got = []
    failed = prefilter_output.Prefetch(failing(), depth=2)
    with pytest.raises(ValueError, match="engine failed"):
        for item in failed:
            got.append(item)
    failed.close()
    assert got == [1]

    before = threading.active_count()
    rest = prefilter_output.Prefetch(iter(range(10**6)), depth=2)
    assert next(iter(rest)) == 0
    rest.close()  # the helper thread stops instead of producing the rest
    assert threading.active_count() == before


def test_prefetch_starts_before_the_first_item_is_asked_for() -> None:
    # write_outputs fetches the first papers while the edges are computed: the helper
    # works from the moment the Prefetch is made, and close() stops it even if no item
    # was ever taken.
    import threading

    started = threading.Event()

    def items() -> Any:
        started.set()
        yield from range(10**6)

    before = threading.active_count()
    ahead = prefilter_output.Prefetch(items(), depth=2)
    assert started.wait(timeout=10)
    ahead.close()
    assert threading.active_count() == before
