"""Input formats: the registry's rules, and a new format added as one entry.

The new format here ("inline") is a folder holding one ``papers.jsonl``: one paper per
line with its outbound citations inline (``cites``), no inbound lists. Its scan turns that
file into the tables the shared steps read (a paper's inbound ids: the records that cite
it); the same records written in the S2ORC layout (inbound lists derived the same way, by
the test) must give the same outputs and funnel.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from mdcr.core.config import from_mapping
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.stage import StageContext
from mdcr.corpus import jsonl
from mdcr.corpus.formats import registry as formats
from mdcr.corpus.formats.registry import FORMATS, InputFormat, Scanned
from mdcr.corpus.prefilter.output import SEQ_SHIFT
from mdcr.corpus.prefilter.rules import abstract_rule_sql, citation_rule_sql, title_rule_sql
from mdcr.corpus.prefilter.scan import (
    Dataset,
    drop_duplicates,
    scan_usable,
    stop_on_duplicates,
    summarize_malformed,
)
from mdcr.corpus.prefilter.stage import SPEC, PrefilterConfig, plan_prefilter, prefilter_corpus
from mdcr.corpus.synth.stage import write_shards

ABSTRACT = "An abstract that is long enough to pass the thirty character rule."

# --------------------------------------------------------------------------- the new format

INLINE_FILE = "papers.jsonl"
INLINE_SCHEMA = jsonl.RecordSchema(
    name="inline papers",
    keys=("id", "title", "abstract", "year", "fields", "cites"),
    columns=("_pid", "_ti", "_ab", "_yr", "_mf", "_out"),
    checks=(
        "WHEN _pid IS NULL OR NOT starts_with(_pid, '\"') OR _pid = '\"\"' "
        "THEN 'id is not a non-empty string'",
        jsonl.string_check("title", "_ti"),
        jsonl.string_check("abstract", "_ab"),
        *jsonl.year_checks("_yr"),
        *(
            f"WHEN NOT ({jsonl.is_null(c)} OR {c} = '[]') AND NOT regexp_full_match({c}, "
            f"'{jsonl.STRING_LIST_RE}') THEN '{k} is not a list of strings or null'"
            for k, c in (("fields", "_mf"), ("cites", "_out"))
        ),
    ),
)
INLINE_DDL = """CREATE TABLE inline_raw (seq BIGINT, reason VARCHAR, paper_id VARCHAR,
  _ti VARCHAR, _ab VARCHAR, _yr VARCHAR, fields VARCHAR[], outbound VARCHAR[])"""


def inline_rows_sql(source: str, file_idx: int) -> str:
    valid = "CASE WHEN reason IS NULL THEN"
    return f"""
WITH _r AS (SELECT *, {INLINE_SCHEMA.reason_sql()} AS reason FROM {source})
SELECT ({file_idx}::BIGINT << {SEQ_SHIFT}) + rn AS seq, reason,
  {valid} {jsonl.string_value("_pid")} END AS paper_id, _ti, _ab, _yr,
  {valid} {jsonl.string_list("_mf")} END AS fields,
  {valid} {jsonl.string_list("_out")} END AS outbound
FROM _r"""


def inline_files(folder: Path) -> list[Path]:
    path = Path(folder) / INLINE_FILE
    if not path.is_file():
        raise InputDataError(f"no {INLINE_FILE} in '{folder}'")
    return [path]


def scan_inline(
    con: Any,
    cfg: PrefilterConfig,
    folder: Path,
    temp_dir: Path,
    threads: int,
    progress: Callable[[int], Any] | None,
) -> Scanned:
    """The file into ``recs`` (every record, its flags, its texts), in file order."""
    files = tuple(inline_files(folder))
    ds = Dataset("papers", INLINE_SCHEMA, files, "inline_raw", INLINE_DDL, inline_rows_sql)
    result, read = scan_usable(
        con, ds, temp_dir, threads, strict=cfg.strict, progress=progress, where=str(folder)
    )
    reasons, reported = summarize_malformed(con, [result], cfg.max_reported_errors)
    duplicates = drop_duplicates(con, "inline_raw", "paper_id")
    stop_on_duplicates(duplicates, "id", str(folder), cfg.strict)
    con.execute(
        f"""CREATE TABLE recs AS
        WITH _in AS (
          SELECT cited AS paper_id, list(citing) AS inbound FROM (
            SELECT paper_id AS citing, unnest(outbound) AS cited
            FROM inline_raw WHERE reason IS NULL) GROUP BY cited),
        _f AS (
          SELECT r.*, coalesce(i.inbound, []::VARCHAR[]) AS inbound FROM inline_raw r
          LEFT JOIN _in i ON r.reason IS NULL AND i.paper_id = r.paper_id)
        SELECT seq, reason, paper_id,
          NOT {jsonl.is_null("_yr")} AS ok_year, {title_rule_sql("_ti")} AS ok_title,
          {abstract_rule_sql(cfg, "_ab")} AS ok_abstract,
          {citation_rule_sql(cfg, "inbound", "outbound")} AS ok_cit,
          {jsonl.string_value("_ti")} AS title, {jsonl.string_value("_ab")} AS abstract,
          CASE WHEN reason IS NULL AND NOT {jsonl.is_null("_yr")} THEN _yr::BIGINT END AS year,
          fields, outbound
        FROM _f ORDER BY seq"""
    )
    return Scanned(
        scans=[result],
        records_read=read,
        records_valid=read - result.malformed,
        lines_read=read,
        malformed_lines=result.malformed,
        duplicates=duplicates,
        flags="recs",
        paper_files=len(files),
        reasons=reasons,
        reported=reported,
    )


INLINE = InputFormat(
    name="inline",
    label="a JSONL file of papers with inline citations",
    files=inline_files,
    scan=scan_inline,
    detect=lambda folder: (Path(folder) / INLINE_FILE).is_file(),
)


@pytest.fixture
def inline() -> Iterator[InputFormat]:
    """The inline format, registered for one test (the registry is restored after)."""
    before = dict(formats.input_formats())
    FORMATS.register(INLINE)
    try:
        yield INLINE
    finally:
        FORMATS.unregister(INLINE.name)
        assert formats.input_formats() == before


# ----------------------------------------------------------- the same records, two layouts


def write_both(folder: Path, records: list[dict[str, Any] | str]) -> tuple[Path, Path]:
    """``records`` (inline; a str is a raw line) as ``inline/papers.jsonl`` and as one S2ORC
    shard, each well-formed paper's inbound list the ids of the first records citing it."""
    first: dict[str, dict[str, Any]] = {}
    for r in records:
        if isinstance(r, dict):
            first.setdefault(r["id"], r)
    inbound: dict[str, list[str]] = {}
    for r in first.values():
        for cited in r.get("cites") or []:
            inbound.setdefault(cited, []).append(r["id"])
    inline_lines, s2orc_lines = [], []
    for r in records:
        if isinstance(r, str):
            inline_lines.append(r)
            s2orc_lines.append(r.replace('"id"', '"paper_id"'))
            continue
        inline_lines.append(json.dumps(r))
        s2orc_lines.append(
            json.dumps(
                {
                    "paper_id": r["id"],
                    "title": r.get("title"),
                    "abstract": r.get("abstract"),
                    "year": r.get("year"),
                    "mag_field_of_study": r.get("fields"),
                    "outbound_citations": r.get("cites") or [],
                    "inbound_citations": inbound.get(r["id"], []) if first[r["id"]] is r else [],
                }
            )
        )
    (folder / "inline").mkdir(parents=True)
    (folder / "inline" / INLINE_FILE).write_text("\n".join(inline_lines) + "\n")
    (folder / "s2orc").mkdir()
    (folder / "s2orc" / "metadata_0.jsonl").write_text("\n".join(s2orc_lines) + "\n")
    return folder / "inline", folder / "s2orc"


def paper(pid: str, cites: list[str], **kw: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": pid,
        "title": f"Title of {pid}",
        "abstract": ABSTRACT,
        "year": 2010,
        "fields": ["Medicine"],
        "cites": cites,
    }
    rec.update(kw)
    return rec


SAME_KEYS = (
    "records_read",
    "malformed_skipped",
    "malformed_by_reason",
    "duplicates_dropped",
    "unique_papers",
    "removed_by_rule",
    "fails_alone",
    "survivors",
    "citation_edges",
)


def run_stage(folder: Path, out: Path, **cfg: Any) -> StageContext:
    """The prefilter stage as a pipeline runs it: config checked, then run."""
    config = from_mapping(PrefilterConfig, {"input": str(folder), **cfg}, "prefilter")
    ctx = StageContext(out=out, inputs={"input": [folder]}, quiet=True)
    SPEC.run(config, ctx)
    return ctx


def test_a_new_format_is_one_entry_and_prefilters_like_s2orc(
    tmp_path: Path, inline: InputFormat
) -> None:
    records: list[dict[str, Any] | str] = [
        paper("a", ["b", "c", "d"]),  # out 3: kept
        paper("b", ["a", "c"]),  # out 2 + in 4 (a, d, e, f): kept
        paper("c", []),  # in 2 (a, b): removed by the citation rule
        paper("d", ["a", "b", "x"], abstract=None),  # removed by the abstract rule
        paper("e", ["a", "b", "x"], year=None),  # removed by the year rule
        paper("a", ["x"], title="A later copy"),  # a duplicate id: dropped
        '{"id": "m", "title": "T", "year": "2010"}',  # malformed: a string year
        paper("f", ["a", "b", "x"], title="  "),  # removed by the title rule
    ]
    inline_dir, s2orc_dir = write_both(tmp_path, records)
    assert formats.resolve_format("auto", inline_dir) is inline
    ctx = run_stage(inline_dir, tmp_path / "out-inline")
    base = run_stage(s2orc_dir, tmp_path / "out-s2orc", format="s2orc")
    funnel = ctx.info["funnel"]
    assert funnel["format"] == "inline" and base.info["funnel"]["format"] == "s2orc"
    assert funnel["records_read"] == 8 and funnel["malformed_skipped"] == 1
    assert funnel["duplicates_dropped"] == 1 and funnel["unique_papers"] == 6
    assert funnel["removed_by_rule"] == {"year": 1, "title": 1, "abstract": 1, "citations": 1}
    assert funnel["survivors"] == 2 and funnel["citation_edges"] == 2
    assert ctx.outputs == {"papers.parquet": 2, "citations.parquet": 2, "funnel.json": None}
    for key in SAME_KEYS:
        assert funnel[key] == base.info["funnel"][key], key
    for name in ("papers.parquet", "citations.parquet"):
        a = pq.read_table(tmp_path / "out-inline" / name)
        b = pq.read_table(tmp_path / "out-s2orc" / name)
        assert a.equals(b), name
    papers = pq.read_table(tmp_path / "out-inline" / "papers.parquet").to_pylist()
    assert [(p["paper_id"], p["n_out"], p["n_in"]) for p in papers] == [
        ("a", 1, 1),
        ("b", 1, 1),
    ]


def test_a_synthetic_corpus_gives_the_same_outputs_as_its_s2orc_layout(
    tmp_path: Path, inline: InputFormat
) -> None:
    write_shards(tmp_path / "synth", n_papers=2000, n_shards=2, seed=5)
    records: list[dict[str, Any] | str] = []
    for shard in sorted((tmp_path / "synth").glob("metadata_*.jsonl.gz")):
        for line in gzip.decompress(shard.read_bytes()).decode().splitlines():
            r = json.loads(line)
            records.append(
                paper(
                    r["paper_id"],
                    r["outbound_citations"],
                    title=r["title"],
                    abstract=r["abstract"],
                    year=r["year"],
                    fields=r["mag_field_of_study"],
                )
            )
    inline_dir, s2orc_dir = write_both(tmp_path, records)
    got = prefilter_corpus(inline_dir, tmp_path / "a", PrefilterConfig(input=str(inline_dir)))
    want = prefilter_corpus(s2orc_dir, tmp_path / "b", PrefilterConfig(input=str(s2orc_dir)))
    assert got.funnel["format"] == "inline" and want.funnel["format"] == "s2orc"
    assert got.n_papers == want.n_papers > 500 and got.n_citations == want.n_citations > 1000
    for key in SAME_KEYS:
        assert got.funnel[key] == want.funnel[key], key
    for name in ("papers.parquet", "citations.parquet"):
        assert pq.read_table(tmp_path / "a" / name).equals(pq.read_table(tmp_path / "b" / name))


def test_the_config_and_the_dry_run_take_their_values_from_the_registry(
    tmp_path: Path, inline: InputFormat
) -> None:
    cfg = from_mapping(PrefilterConfig, {"input": "x", "format": "inline"}, "prefilter")
    plan = plan_prefilter(cfg, {"input": [tmp_path]}, {})
    assert plan.text.startswith("read a JSONL file of papers with inline citations from x;")
    assert plan.work is not None and plan.work.rate == "prefilter"
    auto = plan_prefilter(PrefilterConfig(input="x"), {"input": [tmp_path]}, {})
    assert auto.text.startswith(
        "read S2ORC shards or an S2AG release or a JSONL file of papers with inline "
        "citations from x;"
    )


# --------------------------------------------------------------------------- the registry's rules


def test_an_unknown_format_is_a_one_line_error_listing_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as err:
        from_mapping(PrefilterConfig, {"input": "x", "format": "s2orcc"}, "prefilter")
    assert str(err.value) == (
        "prefilter.format: 's2orcc' is not valid; valid options: 'auto', 's2orc', 's2ag'"
    )
    with pytest.raises(ConfigError, match=r"valid options: 'auto', 's2orc', 's2ag'$"):
        prefilter_corpus(Path("x"), Path("y"), PrefilterConfig(input="x", format="s2orcc"))


def test_a_duplicate_name_a_reserved_name_and_a_second_default_are_refused() -> None:
    s2orc = formats.get_format("s2orc")
    assert FORMATS.register(s2orc) is s2orc  # the same entry again is a no-op
    with pytest.raises(ConfigError, match="input format 's2ag' is registered already"):
        FORMATS.register(InputFormat("s2ag", "x", inline_files, scan_inline, detect=bool))
    with pytest.raises(ConfigError, match="reserved"):
        FORMATS.register(InputFormat("auto", "x", inline_files, scan_inline, detect=bool))
    with pytest.raises(ConfigError, match="'s2orc' is already the default"):
        FORMATS.register(InputFormat("other", "x", inline_files, scan_inline))
    assert tuple(formats.input_formats()) == ("s2orc", "s2ag")


def test_a_folder_two_formats_recognise_is_a_one_line_error(
    tmp_path: Path, inline: InputFormat
) -> None:
    (tmp_path / "papers").mkdir()
    (tmp_path / INLINE_FILE).write_text("")
    with pytest.raises(InputDataError, match="looks like s2ag and inline at once; set"):
        formats.resolve_format("auto", tmp_path)
    assert formats.resolve_format("inline", tmp_path) is inline
    (tmp_path / INLINE_FILE).unlink()
    assert formats.resolve_format("auto", tmp_path).name == "s2ag"
    (tmp_path / "papers").rmdir()
    assert formats.resolve_format("auto", tmp_path).name == "s2orc"  # the default
