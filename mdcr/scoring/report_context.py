"""The context a report's sections are drawn in: the options (paired tests, baseline),
the retrievers, measures and output folder, and what the sections collect on the way
(comparisons, file-only tables, intervals). The pools report
(:mod:`mdcr.scoring.report_sections`) and a benchmark's report
(:mod:`mdcr.scoring.mdcr_report`: benchmark-score's, and the pools report's MDCR section)
each draw their sections in one.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.scoring.intervals import IntervalOptions

if TYPE_CHECKING:
    import pandas as pd

    from mdcr.scoring.tables import Table


def letters_for(retrievers: list[str]) -> dict[str, str]:
    abc = string.ascii_lowercase
    return {r: abc[i] if i < len(abc) else f"r{i + 1}" for i, r in enumerate(retrievers)}


@dataclass(frozen=True)
class SectionOptions:
    """The report options the sections follow (from the report stage's config)."""

    stat_tests: tuple[str, ...] = ("fisher", "student")
    correction: str = "holm"
    alpha: float = 0.05
    permutations: int = 10000
    seed: int = 42
    chance_rows: bool = True
    baseline: str = "bm25"

    @classmethod
    def of(cls, cfg: Any, *, chance_rows: bool = True) -> SectionOptions:
        """The options of a stage config with the paired-test and interval parameters
        (:mod:`mdcr.scoring.comparison_params`): the report's or benchmark-score's."""
        return cls(
            tuple(cfg.stat_tests),
            cfg.correction,
            cfg.alpha,
            cfg.permutations,
            cfg.seed,
            chance_rows,
            cfg.baseline,
        )


@dataclass
class Context:
    """What every section builder needs: the options, retrievers, metrics and the output."""

    cfg: SectionOptions
    retrievers: list[str]
    letters: dict[str, str]
    metrics: list[str]
    out: Path
    # Every section's pairwise comparisons, for significance.parquet and the CSV.
    significance: list[pd.DataFrame] = field(default_factory=list)
    # Tables only written under tables/ (full versions of tables shown in part).
    file_tables: list[Table] = field(default_factory=list)
    # Each retriever's built-in entry (mdcr.retrievers.builtin_entry); None: not one.
    entries: dict[str, Any] = field(default_factory=dict)
    # Per-query values with their pools' keys (intervals), how intervals are drawn, and
    # every table's intervals (mdcr.scoring.table_intervals), for intervals.parquet.
    values: pd.DataFrame | None = None
    interval_options: IntervalOptions = field(default_factory=IntervalOptions)
    intervals: list[pd.DataFrame] = field(default_factory=list)

    def rel(self, paths: list[Path]) -> list[str]:
        return [p.relative_to(self.out).as_posix() for p in paths]
