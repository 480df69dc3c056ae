"""The prefilter's config and the SQL of its four rules, shared by both input formats.

See :mod:`mdcr.corpus.prefilter.stage` for the rules and why they are what they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mdcr.contracts.paper import MIN_ABSTRACT_CHARS, MIN_CITATIONS
from mdcr.core.config import input_path, param
from mdcr.core.errors import ConfigError
from mdcr.corpus import jsonl
from mdcr.corpus.formats import registry as formats

RULES = ("year", "title", "abstract", "citations")


@dataclass(frozen=True)
class PrefilterConfig:
    """Config of the `prefilter` stage."""

    input: str = input_path(
        help="folder of S2ORC metadata shards (metadata_*.jsonl.gz), or of an S2AG release "
        "(papers/, abstracts/, citations/)"
    )
    format: str = param(
        "auto",
        help="input layout: a registered input format (s2orc, s2ag), or "
        "auto (s2ag when the input holds papers/, abstracts/ or citations/, else s2orc)",
    )
    field_sources: tuple[Literal["external", "s2-fos-model"], ...] = param(
        ("external",),
        help="S2AG s2fieldsofstudy sources that count: external (MAG-derived, the paper's "
        "fields; none after MAG's end in 2021) and/or s2-fos-model (S2's classifier)",
    )
    min_abstract_chars: int = param(
        MIN_ABSTRACT_CHARS, help="minimum abstract length in characters"
    )
    min_citations: int = param(MIN_CITATIONS, help="minimum number of distinct citations")
    citation_direction: Literal["total", "either", "in", "out", "both"] = param(
        "total",
        help="which citations count: total (in + out), either, in, out, or both lists",
    )
    strict: bool = param(
        False,
        help="stop at the first finding (a malformed line, a whole-file problem, a duplicate "
        "id) instead of skipping it",
    )
    max_reported_errors: int = param(5, help="how many malformed lines to name in the log")

    def validate(self) -> None:
        formats.check_format(self.format)
        if self.min_abstract_chars < 0:
            raise ConfigError(
                f"prefilter.min_abstract_chars: {self.min_abstract_chars} is negative; "
                "use 0 or more"
            )
        if self.min_citations < 0:
            raise ConfigError(
                f"prefilter.min_citations: {self.min_citations} is negative; use 0 or more"
            )
        if not self.field_sources:
            raise ConfigError("prefilter.field_sources: empty; name external, s2-fos-model or both")
        if self.max_reported_errors < 0:
            raise ConfigError(
                f"prefilter.max_reported_errors: {self.max_reported_errors} is negative; "
                "use 0 or more"
            )


# --------------------------------------------------------------------------- SQL


# Up to this threshold rule 4 first counts the distinct ids among the first k elements of
# each list with pairwise comparisons (cheap, no hash table); larger thresholds use
# list_unique on that prefix.
PAIRWISE_MAX = 6


def _prefix_distinct(lst: str, k: int) -> str:
    """SQL: the number of distinct elements among the first ``k`` of list ``lst``.

    It is at most min(distinct(lst), k), so reaching the threshold with it is exact.
    """
    if k > PAIRWISE_MAX:
        return f"coalesce(list_unique({lst}[1:{k}]), 0)"
    terms = []
    for i in range(1, k + 1):
        new = " AND ".join(
            [f"len({lst}) >= {i}"] + [f"{lst}[{i}] <> {lst}[{j}]" for j in range(1, i)]
        )
        terms.append(f"coalesce(({new})::INTEGER, 0)")
    return "(" + " + ".join(terms) + ")"


def citation_test(cfg: PrefilterConfig, n_in: str, n_out: str) -> str:
    """SQL: rule 4 on the distinct inbound and outbound counts ``n_in`` and ``n_out``."""
    k = cfg.min_citations
    return {
        "total": f"({n_in} + {n_out} >= {k})",
        "either": f"({n_in} >= {k} OR {n_out} >= {k})",
        "both": f"({n_in} >= {k} AND {n_out} >= {k})",
        "in": f"({n_in} >= {k})",
        "out": f"({n_out} >= {k})",
    }[cfg.citation_direction]


def citation_rule_sql(cfg: PrefilterConfig, cin: str, cout: str) -> str:
    """SQL for rule 4 on the inbound and outbound lists (exact distinct counts).

    Most records are decided cheaply: raw list lengths bound the distinct counts from
    above (too few elements: fail) and the distinct count of a short prefix bounds them
    from below (enough distinct ids already: pass). Only the rest (a list with repeated
    ids near its start) pays for ``list_unique`` over the whole list.
    """
    k = cfg.min_citations
    if k == 0:
        return "true"
    n_in, n_out = f"coalesce(len({cin}), 0)", f"coalesce(len({cout}), 0)"
    p_in, p_out = _prefix_distinct(cin, k), _prefix_distinct(cout, k)
    d_in, d_out = f"coalesce(list_unique({cin}), 0)", f"coalesce(list_unique({cout}), 0)"

    def test(a: str, b: str) -> str:
        return citation_test(cfg, a, b)

    return (
        f"CASE WHEN NOT {test(n_in, n_out)} THEN false WHEN {test(p_in, p_out)} THEN true "
        f"ELSE {test(d_in, d_out)} END"
    )


def title_rule_sql(col: str) -> str:
    """SQL: rule 2 on a raw-JSON title column (checked to be a string or null)."""
    return f"""CASE WHEN {col} IS NULL OR {col} = 'null' OR {col} = '""' THEN false
         WHEN ord({col}[2]) BETWEEN 33 AND 126 AND {col}[2] <> '\\' THEN true
         ELSE NOT regexp_full_match({jsonl.string_value(col)}, '{jsonl.WHITESPACE_CLASS}*') END"""


def abstract_rule_sql(cfg: PrefilterConfig, col: str) -> str:
    """SQL: rule 3 on a raw-JSON abstract column (checked to be a string or null).

    A JSON string of 12k bytes or more holds at least k characters (no character takes
    more than 12 bytes: a surrogate pair of two 6-byte \\u escapes), so only shorter
    ones are unescaped.
    """
    k = cfg.min_abstract_chars
    return f"""CASE WHEN {col} IS NULL OR {col} = 'null' THEN {k <= 0}
         WHEN strlen({col}) - 2 >= {12 * k} THEN true
         ELSE length({jsonl.string_value(col)}) >= {k} END"""
