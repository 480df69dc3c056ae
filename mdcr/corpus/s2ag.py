"""The Semantic Scholar Academic Graph (S2AG) bulk datasets: layout and record checks.

A release, as mdcr reads it, is a folder holding three dataset folders, each of
``*.jsonl.gz`` (or ``*.jsonl``, or ``*.gz`` as downloaded) files of one JSON object per
line, joined by ``corpusid``:

- ``papers/``: ``corpusid``, ``title``, ``year`` (integer or null) and
  ``s2fieldsofstudy`` (null or a list of ``{"category": str, "source": str}``, the source
  being "external" (MAG-derived) or "s2-fos-model");
- ``abstracts/``: ``corpusid`` and ``abstract`` (a paper without an abstract has no
  record);
- ``citations/``: one edge per line, ``citingcorpusid`` and ``citedcorpusid`` (either
  may be null: an unresolved reference).

Ids may be JSON numbers or strings of digits; they are read as 64-bit integers and
written as strings. A line is *malformed* when it is not a JSON object or a key has the
wrong type: a ``corpusid`` missing, empty, or not a non-negative integer (a number, or a
string of digits without leading zeros); a citation id that is neither null nor such an
id; ``title`` / ``abstract`` neither a string nor null; ``year`` neither null nor an
integer from 1000 to 2100; ``s2fieldsofstudy`` not null nor a list of objects with a string
``category`` (and a string or null ``source``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mdcr.core.errors import InputDataError
from mdcr.corpus import jsonl

DATASETS = ("papers", "abstracts", "citations")
PATTERNS = ("*.jsonl.gz", "*.jsonl", "*.gz")
_ID_RE = '(0|[1-9][0-9]*)|"(0|[1-9][0-9]*)"'


@dataclass(frozen=True)
class Release:
    """The files of an S2AG release folder, per dataset, in natural order."""

    folder: Path
    papers: tuple[Path, ...]
    abstracts: tuple[Path, ...]
    citations: tuple[Path, ...]

    @property
    def files(self) -> tuple[Path, ...]:
        return self.papers + self.abstracts + self.citations


def is_release(folder: Path) -> bool:
    """Whether ``folder`` looks like an S2AG release (holds one of the dataset folders)."""
    return any((Path(folder) / name).is_dir() for name in DATASETS)


def find_release(folder: Path) -> Release:
    """The dataset files of a release folder; a missing or empty dataset is a one-line error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputDataError(
            f"S2AG input '{folder}' is not a folder; pass the folder that holds papers/, "
            "abstracts/ and citations/"
        )
    found: dict[str, tuple[Path, ...]] = {}
    for name in DATASETS:
        sub = folder / name
        if not sub.is_dir():
            raise InputDataError(
                f"S2AG input '{folder}' has no {name}/ folder; a release needs papers/, "
                "abstracts/ and citations/, each a folder of *.jsonl.gz files (see the "
                "README on downloading S2AG)"
            )
        files = jsonl.find_files(sub, PATTERNS)
        if not files:
            raise InputDataError(f"no {name} files in '{sub}': expected *.jsonl.gz or *.jsonl")
        found[name] = tuple(files)
    return Release(folder, found["papers"], found["abstracts"], found["citations"])


def id_value(col: str) -> str:
    """SQL: the BIGINT id held by a checked raw-JSON id column (number or digit string)."""
    return f"TRY_CAST(trim({col}, '\"') AS BIGINT)"


def _id_checks(key: str, col: str, *, nullable: bool) -> list[str]:
    if nullable:
        guard = f"NOT {jsonl.is_null(col)} AND "
        head = []
    else:
        guard = ""
        head = [f"WHEN {jsonl.is_null(col)} THEN '{key} is missing'"]
    return [
        *head,
        f"WHEN {guard}{col} = '\"\"' THEN '{key} is empty'",
        f"WHEN {guard}NOT regexp_full_match({col}, '{_ID_RE}') "
        f"THEN '{key} is not an integer id (a number or a string of digits)'",
        f"WHEN {guard}{id_value(col)} IS NULL THEN '{key} is out of the 64-bit integer range'",
    ]


_FOS_OK = (
    "coalesce(list_bool_and(list_transform(from_json(_fos, '[\"JSON\"]'), lambda x: "
    "json_type(x) = 'OBJECT' AND coalesce(json_type(x, '$.category'), '') = 'VARCHAR' "
    "AND coalesce(json_type(x, '$.source'), 'NULL') IN ('VARCHAR', 'NULL'))), true)"
)

PAPERS = jsonl.RecordSchema(
    name="S2AG papers",
    keys=("corpusid", "title", "year", "s2fieldsofstudy"),
    columns=("_cid", "_ti", "_yr", "_fos"),
    checks=(
        *_id_checks("corpusid", "_cid", nullable=False),
        jsonl.string_check("title", "_ti"),
        *jsonl.year_checks("_yr"),
        f"WHEN NOT {jsonl.is_null('_fos')} AND NOT (starts_with(_fos, '[') AND {_FOS_OK}) "
        "THEN 's2fieldsofstudy is not a list of {category, source} objects or null'",
    ),
)

ABSTRACTS = jsonl.RecordSchema(
    name="S2AG abstracts",
    keys=("corpusid", "abstract"),
    columns=("_cid", "_ab"),
    checks=(
        *_id_checks("corpusid", "_cid", nullable=False),
        jsonl.string_check("abstract", "_ab"),
    ),
)

CITATIONS = jsonl.RecordSchema(
    name="S2AG citations",
    keys=("citingcorpusid", "citedcorpusid"),
    columns=("_citing", "_cited"),
    checks=(
        *_id_checks("citingcorpusid", "_citing", nullable=True),
        *_id_checks("citedcorpusid", "_cited", nullable=True),
    ),
)


def categories_sql(col: str, sources: tuple[str, ...]) -> str:
    """SQL: the categories of a checked ``s2fieldsofstudy`` column whose source is one of
    ``sources``, in file order (repeats kept: see :func:`distinct_in_order`).
    """
    wanted = ", ".join(jsonl.sql_str(s) for s in sources)
    return (
        f"CASE WHEN {jsonl.is_null(col)} THEN []::VARCHAR[] ELSE "
        f"list_transform(list_filter(from_json({col}, "
        '\'[{"category": "VARCHAR", "source": "VARCHAR"}]\'), '
        f"lambda x: x.source IN ({wanted})), lambda x: x.category) END"
    )


def distinct_in_order(col: str) -> str:
    """SQL: a list column with repeats dropped, first occurrences kept in order (a
    category often comes from both sources)."""
    return f"list_filter({col}, lambda x, i: list_position({col}, x) = i)"
