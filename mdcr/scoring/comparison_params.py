"""The parameters of paired comparisons and intervals, declared once and shared (keyword-only
mixins, listed after a config's own fields): the significance tests of the report and of
benchmark-score (:class:`PairedTestParams`), and the report's bootstrap intervals, its
baseline and tied groups (:class:`IntervalParams`). All are parameters: each can change
what a report says, so each is hashed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mdcr.core.config import param
from mdcr.core.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class PairedTestParams:
    """Paired significance tests between retrievers and their correction."""

    stat_tests: tuple[str, ...] = param(
        ("fisher", "student"),
        help="paired tests between retrievers: fisher (randomization), student (t-test); "
        "the first marks tables and decides tied groups",
    )
    correction: Literal["holm", "bonferroni"] = param(
        "holm", help="multiple-comparison correction over each table's comparisons"
    )
    alpha: float = param(0.05, help="significance level after correction")
    permutations: int = param(10000, help="permutations of the Fisher randomization test")
    seed: int = param(42, help="seed of the randomization test's permutations and of the bootstrap")

    def validate_paired_tests(self, where: str) -> None:
        from mdcr.scoring.significance import STAT_TESTS

        for t in self.stat_tests:
            if t not in STAT_TESTS:
                raise ConfigError(
                    f"{where}.stat_tests: {t!r} is not valid; valid: {', '.join(STAT_TESTS)}"
                )
        if not self.stat_tests:
            raise ConfigError(f"{where}.stat_tests: empty; valid: fisher, student")
        if not 0 < self.alpha < 1:
            raise ConfigError(f"{where}.alpha: must be between 0 and 1, got {self.alpha}")
        if self.permutations < 100:
            raise ConfigError(f"{where}.permutations: must be >= 100, got {self.permutations}")


@dataclass(frozen=True, kw_only=True)
class IntervalParams:
    """95% bootstrap intervals over queries, the baseline differences are taken against."""

    resamples: int = param(2000, help="bootstrap resamples of each 95% interval")
    interval_method: Literal["bca", "percentile"] = param(
        "bca", help="bootstrap interval: bca (bias-corrected and accelerated) or percentile"
    )
    baseline: str = param(
        "bm25",
        help="the retriever every other is compared with (difference and its interval); "
        "absent from the report: no difference tables",
    )

    def validate_intervals(self, where: str) -> None:
        if self.resamples < 100:
            raise ConfigError(f"{where}.resamples: must be >= 100, got {self.resamples}")
