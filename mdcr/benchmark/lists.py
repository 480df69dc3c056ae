"""The candidate list of one MDCR query while it is built, and the seeded sampling rules.

Every sample orders its candidates by ``md5("<derived seed>:" + paper_id)``
(:mod:`mdcr.pools.seeds`), the seed derived from (seed, "benchmark", split, field, query_id,
type); a paper an earlier type already took is skipped by a later type, which takes the
next paper in its own order instead (counted per type).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass

STAGE = "benchmark"


@dataclass
class QueryList:
    """One query's candidate list under construction."""

    split: str
    field: str
    query_id: str
    year: int
    chosen: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    taken: set[str] = dataclasses.field(default_factory=set)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.split, self.field, self.query_id)


def type_seed(seed: int, q: QueryList, ctype: str) -> int:
    from mdcr.pools.seeds import derive_seed

    return derive_seed(seed, STAGE, q.split, q.field, q.query_id, ctype)


def hash_order(ids: list[str], derived: int) -> list[str]:
    """``ids`` ordered by their seeded sampling key (ties, never seen with md5, by id)."""
    from mdcr.pools.seeds import sample_key

    return sorted(set(ids), key=lambda p: (sample_key(derived, p), p))


def take(
    q: QueryList,
    ctype: str,
    ordered: list[str],
    n: int,
    exclude: set[str],
    skipped: Counter[str],
) -> int:
    """Add the first ``n`` papers of ``ordered`` that are neither excluded nor taken."""
    got = q.chosen.setdefault(ctype, [])
    for pid in ordered:
        if len(got) >= n:
            break
        if pid in exclude or pid == q.query_id:
            continue
        if pid in q.taken:
            skipped[ctype] += 1
            continue
        got.append(pid)
        q.taken.add(pid)
    return len(got)
