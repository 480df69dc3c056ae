"""Bad input, for both layouts (S2ORC shards and an S2AG release), tried as a new user would.

Each case is a counted, reported finding (fatal under ``strict``); an input without a
usable record is an error naming it; nothing is silently accepted or dropped.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from mdcr.cli import main
from mdcr.core.errors import InputDataError
from mdcr.corpus import jsonl
from mdcr.corpus.prefilter.stage import PrefilterConfig, prefilter_corpus

LAYOUTS = ("s2orc", "s2ag")
ABSTRACT = "An abstract that is long enough to pass the thirty character rule."
IDS = (1, 2, 3, 4)


def record(layout: str, cid: int, **kw: Any) -> dict[str, Any]:
    """A record of the primary dataset that passes the text rules."""
    if layout == "s2orc":
        others = [str(i) for i in IDS if i != cid]
        rec = {
            "paper_id": str(cid),
            "title": f"Title {cid}",
            "abstract": ABSTRACT,
            "year": 2001,
            "mag_field_of_study": ["Biology"],
            "outbound_citations": others,
            "inbound_citations": [],
        }
    else:
        rec = {"corpusid": cid, "title": f"Title {cid}", "year": 2001, "s2fieldsofstudy": None}
    rec.update(kw)
    return rec


def lines(records: list[Any]) -> bytes:
    return b"".join(
        (r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in records
    )


def make_input(layout: str, folder: Path, files: dict[str, bytes | None]) -> Path:
    """An input whose primary dataset (S2ORC shards, or S2AG papers/) holds ``files``
    (name -> bytes; None makes a folder of that name); the S2AG abstracts and citations
    are valid."""
    shards = folder if layout == "s2orc" else folder / "papers"
    shards.mkdir(parents=True)
    for name, data in files.items():
        if data is None:
            (shards / name).mkdir()
        else:
            (shards / name).write_bytes(data)
    if layout == "s2ag":
        (folder / "abstracts").mkdir()
        abstracts = [{"corpusid": i, "abstract": ABSTRACT} for i in IDS]
        (folder / "abstracts" / "a-0.jsonl.gz").write_bytes(gzip.compress(lines(abstracts)))
        (folder / "citations").mkdir()
        edges = [{"citingcorpusid": i, "citedcorpusid": j} for i in IDS for j in IDS if i != j]
        (folder / "citations" / "c-0.jsonl.gz").write_bytes(gzip.compress(lines(edges)))
    return folder


def name(layout: str, i: int) -> str:
    return f"metadata_{i}.jsonl" if layout == "s2orc" else f"papers-{i}.jsonl"


def shard_dir(layout: str, folder: Path) -> Path:
    return folder if layout == "s2orc" else folder / "papers"


def run(folder: Path, out: Path, **cfg: Any) -> Any:
    return prefilter_corpus(folder, out, PrefilterConfig(input=str(folder), **cfg))


def good(layout: str) -> bytes:
    return lines([record(layout, i) for i in IDS])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    ("what", "data", "problem"),
    [
        ("empty", b"", "is empty (0 bytes)"),
        ("folder", None, "is a folder, not a shard file"),
        ("not gzip", b'{"a": 1}\n', "is not gzip data, though its name ends in .gz"),
        # mtime=0: the same bytes, so the same test ids, in every collecting process
        (
            "gzip as plain",
            gzip.compress(b'{"a": 1}\n', mtime=0),
            "holds gzip data, though its name",
        ),
    ],
)
def test_whole_file_problems_are_reported_and_fatal_under_strict(
    tmp_path: Path, layout: str, what: str, data: bytes | None, problem: str
) -> None:
    bad = name(layout, 1) + (".gz" if what in ("empty", "not gzip", "folder") else "")
    folder = make_input(layout, tmp_path / "in", {name(layout, 0): good(layout), bad: data})
    bad_path = shard_dir(layout, folder) / bad
    f = run(folder, tmp_path / "out").funnel
    assert len(f["file_problems"]) == 1
    assert f["file_problems"][0].startswith(f"{bad_path}: {problem}")
    assert f["malformed_skipped"] == 0  # a whole-file problem, not a malformed line
    assert f["records_read"] == len(IDS) and f["survivors"] == len(IDS)
    with pytest.raises(InputDataError) as err:
        run(folder, tmp_path / "strict", strict=True)
    assert str(err.value).startswith(f"{bad_path}: {problem}")
    assert str(err.value).endswith("fix the file or run without --strict")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_only_a_zero_byte_shard_is_an_error_naming_the_input(
    tmp_path: Path, layout: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = make_input(layout, tmp_path / "in", {name(layout, 0) + ".gz": b""})
    where = str(shard_dir(layout, folder))
    with pytest.raises(InputDataError) as err:
        run(folder, tmp_path / "out")
    assert f"no usable record in '{where}'" in str(err.value)
    assert "is empty (0 bytes)" in str(err.value)
    # On the command line: a one-line error and a failing exit code, no traceback.
    code = main(["prefilter", "--input", str(folder), "--home", str(tmp_path / "home")])
    err_text = capsys.readouterr().err.strip()
    assert code != 0
    assert "no usable record" in err_text and "Traceback" not in err_text


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_file_of_only_malformed_lines_is_an_error(tmp_path: Path, layout: str) -> None:
    folder = make_input(layout, tmp_path / "in", {name(layout, 0): b"{bad\n[1]\n"})
    with pytest.raises(InputDataError, match=r"2 record\(s\) of which 2 malformed"):
        run(folder, tmp_path / "out")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_byte_order_mark_keeps_the_first_line(tmp_path: Path, layout: str) -> None:
    data = jsonl.BOM + good(layout)
    folder = make_input(
        layout,
        tmp_path / "in",
        {name(layout, 0): data, name(layout, 1) + ".gz": gzip.compress(data)},
    )
    f = run(folder, tmp_path / "out").funnel
    assert f["records_read"] == 2 * len(IDS)
    assert f["malformed_skipped"] == 0
    assert f["duplicates_dropped"] == len(IDS)
    assert f["file_problems"] == []
    # Accepted as every reader of mdcr accepts it (utf-8-sig): --strict reads it too.
    one = make_input(layout, tmp_path / "one", {name(layout, 0) + ".gz": gzip.compress(data)})
    strict = run(one, tmp_path / "strict", strict=True).funnel
    assert strict["records_read"] == len(IDS) and strict["file_problems"] == []


@pytest.mark.parametrize("layout", LAYOUTS)
def test_empty_id_and_negative_year_are_malformed(tmp_path: Path, layout: str) -> None:
    key = "paper_id" if layout == "s2orc" else "corpusid"
    recs = [record(layout, i) for i in IDS]
    recs.append(record(layout, 7, year=-1990))
    recs.append({**record(layout, 8), key: ""})
    folder = make_input(layout, tmp_path / "in", {name(layout, 0): lines(recs)})
    f = run(folder, tmp_path / "out", max_reported_errors=10).funnel
    reasons = {k.removeprefix("papers: "): v for k, v in f["malformed_by_reason"].items()}
    assert reasons == {"year is negative": 1, f"{key} is empty": 1}
    assert f["survivors"] == len(IDS)
    assert [e.rsplit(":", 2)[1:] for e in f["malformed_examples"]] == [
        ["5", " year is negative"],
        ["6", f" {key} is empty"],
    ]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_implausible_years_and_blank_ids_are_malformed(tmp_path: Path, layout: str) -> None:
    key = "paper_id" if layout == "s2orc" else "corpusid"
    recs = [record(layout, i) for i in IDS]
    recs += [record(layout, 10, year=y) for y in (0, 99999, 999, 2101)]
    recs += [record(layout, 20, year=1000), record(layout, 21, year=2100)]  # the bounds: kept
    recs += [{**record(layout, 30), key: blank} for blank in (" ", "\t\u3000", "\u00a0")]
    folder = make_input(layout, tmp_path / "in", {name(layout, 0): lines(recs)})
    f = run(folder, tmp_path / "out", max_reported_errors=10).funnel
    reasons = {k.removeprefix("papers: "): v for k, v in f["malformed_by_reason"].items()}
    blank = "paper_id is only whitespace" if layout == "s2orc" else f"{key} {NOT_AN_ID}"
    assert reasons == {"year is not a publication year (1000-2100)": 4, blank: 3}
    assert f["malformed_skipped"] == f["malformed_lines"] == 7
    lines_named = [int(e.rsplit(":", 2)[1]) for e in f["malformed_examples"]]
    assert lines_named == [5, 6, 7, 8, 11, 12, 13]  # lines 9 and 10 hold the bounds
    assert f["unique_papers"] == len(IDS) + 2
    with pytest.raises(InputDataError, match=r":5: year is not a publication year"):
        run(folder, tmp_path / "strict", strict=True)


NOT_AN_ID = "is not an integer id (a number or a string of digits)"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_strict_stops_at_duplicate_ids(tmp_path: Path, layout: str) -> None:
    recs = [record(layout, i) for i in IDS] + [record(layout, 2), record(layout, 3)]
    folder = make_input(layout, tmp_path / "in", {name(layout, 0): lines(recs)})
    f = run(folder, tmp_path / "out").funnel
    assert f["duplicates_dropped"] == 2 and f["survivors"] == len(IDS)
    key = "paper_id" if layout == "s2orc" else "corpusid"
    with pytest.raises(InputDataError) as err:
        run(folder, tmp_path / "strict", strict=True)
    msg = str(err.value)
    assert msg.startswith(f"2 duplicate {key} record(s) in '{shard_dir(layout, folder)}'")
    assert f"(e.g. {key} 2, 3)" in msg and msg.endswith("run without --strict")


def test_strict_stops_at_duplicate_s2ag_abstracts(tmp_path: Path) -> None:
    folder = make_input("s2ag", tmp_path / "in", {name("s2ag", 0): good("s2ag")})
    extra = {"corpusid": 4, "abstract": ABSTRACT + " Again."}
    with gzip.open(folder / "abstracts" / "a-0.jsonl.gz", "ab") as f:
        f.write(lines([extra]))
    assert run(folder, tmp_path / "out").funnel["s2ag"]["abstracts"]["duplicates_dropped"] == 1
    with pytest.raises(InputDataError, match=r"^1 duplicate corpusid record\(s\) in '.*abstracts'"):
        run(folder, tmp_path / "strict", strict=True)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_no_record_passing_the_rules_is_an_error_showing_the_funnel(
    tmp_path: Path, layout: str, capsys: pytest.CaptureFixture[str]
) -> None:
    recs = [record(layout, 1, year=None), record(layout, 2, title=" "), record(layout, 3)]
    recs += [record(layout, 3), b"{bad"]
    folder = make_input(layout, tmp_path / "in", {name(layout, 0): lines(recs)})
    # S2ORC: paper 3 cites 3 papers; S2AG: its 3 edges each way. Four are needed.
    with pytest.raises(InputDataError) as err:
        run(folder, tmp_path / "out", min_citations=4 if layout == "s2orc" else 7)
    msg = str(err.value)
    assert msg.startswith(f"no paper in '{folder}' passes the prefilter rules (5 records read, ")
    assert (
        "1 malformed, 1 duplicate, removed by rule: year 1, title 1, abstract 0, citations 1)"
        in msg
    )
    assert "\n" not in msg and not (tmp_path / "out" / "papers.parquet").exists()
    code = main(
        [
            "prefilter",
            "--input",
            str(folder),
            "--home",
            str(tmp_path / "home"),
            "--min-citations",
            "9",
        ]
    )
    err_text = capsys.readouterr().err.strip()
    assert code != 0 and "passes the prefilter rules" in err_text and "Traceback" not in err_text
    assert not list((tmp_path / "home" / "prefilter").glob("[!.]*"))  # no output made
