"""The config of the ``synth`` stage: the size, the seed and the knobs of the synthetic
corpus (:mod:`mdcr.corpus.synth.stage` writes it, :mod:`mdcr.corpus.synth.graph` draws its
latent structure and citations)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from mdcr.core.config import param
from mdcr.core.errors import ConfigError


@dataclass(frozen=True)
class SynthConfig:
    """Config of the `synth` stage: size, seed and the knobs of the synthetic corpus."""

    n_papers: int = param(20_000, help="number of papers (records) to generate")
    n_shards: int = param(4, help="number of shards (files per dataset)")
    format: Literal["s2orc", "s2ag"] = param(
        "s2orc",
        help="layout: s2orc (metadata_{i}.jsonl.gz) or s2ag (papers/, abstracts/, citations/)",
    )
    seed: int = param(0, help="random seed; the same config gives byte-identical shards")
    first_year: int = param(1970, help="earliest publication year")
    last_year: int = param(2020, help="latest publication year (covered in part, as S2ORC)")
    growth: float = param(0.06, help="yearly growth rate of the number of papers")
    last_year_coverage: float = param(0.5, help="share of the last year covered")
    null_year_share: float = param(0.015, help="share of records with a null year")
    empty_title_share: float = param(0.01, help="share of records with an empty title")
    no_abstract_share: float = param(0.40, help="share of records with a null abstract")
    short_abstract_share: float = param(0.03, help="share with an abstract under 30 chars")
    no_refs_share: float = param(0.5, help="share of records without outbound citations")
    refs_recent: float = param(
        40.0, help="mean outbound citations of a citing paper published in 2019 or later"
    )
    refs_decay: float = param(0.025, help="yearly decay of the mean reference count")
    no_field_share: float = param(0.045, help="share with a null mag_field_of_study")
    two_field_share: float = param(0.08, help="share of records with two MAG fields")
    p_niche: float = param(0.45, help="probability that a reference is in the niche")
    p_topic: float = param(0.30, help="probability that a reference is in the topic")
    p_field: float = param(0.15, help="probability that a reference is in the field")
    niche_size: int = param(150, help="mean papers per niche (a community inside a topic)")
    fitness_alpha: float = param(1.6, help="Pareto tail exponent of citation attractiveness")
    fitness_sigma: float = param(1.0, help="log-normal spread of citation attractiveness")
    recency: float = param(0.05, help="yearly decay of attractiveness with age")
    abstract_sentences: float = param(9.0, help="median number of sentences per abstract")

    def validate(self) -> None:
        if self.n_papers < 10:
            raise ConfigError(f"synth.n_papers: {self.n_papers} is too small; use at least 10")
        if self.n_papers >= 2**31 - 1:
            raise ConfigError(f"synth.n_papers: {self.n_papers} is too large; use < 2**31")
        if not 1 <= self.n_shards <= self.n_papers:
            raise ConfigError(f"synth.n_shards: {self.n_shards} must be between 1 and n_papers")
        if self.seed < 0:
            raise ConfigError(f"synth.seed: {self.seed} must be a non-negative integer")
        if not 1800 <= self.first_year < self.last_year <= 2100:
            raise ConfigError(
                f"synth.first_year/last_year: {self.first_year}..{self.last_year} is not a "
                "valid range; use e.g. 1970..2020"
            )
        for name in (
            "null_year_share",
            "empty_title_share",
            "no_abstract_share",
            "short_abstract_share",
            "no_refs_share",
            "no_field_share",
            "two_field_share",
            "p_niche",
            "p_topic",
            "p_field",
            "last_year_coverage",
        ):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"synth.{name}: {value} must be between 0 and 1")
        if self.no_abstract_share + self.short_abstract_share > 0.95:
            raise ConfigError("synth.no_abstract_share + short_abstract_share must be at most 0.95")
        if self.p_niche + self.p_topic + self.p_field > 1.0:
            raise ConfigError("synth.p_niche + p_topic + p_field must be at most 1")
        if self.no_refs_share >= 1.0 and self.refs_recent > 0:
            raise ConfigError("synth.no_refs_share must be below 1")
        for name in ("refs_recent", "fitness_alpha", "abstract_sentences"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"synth.{name}: {getattr(self, name)} must be positive")
        for name in ("growth", "refs_decay", "recency", "fitness_sigma"):
            if getattr(self, name) < 0:
                raise ConfigError(f"synth.{name}: {getattr(self, name)} must be >= 0")
        if self.niche_size < 1:
            raise ConfigError(f"synth.niche_size: {self.niche_size} must be at least 1")


_PARAM_NAMES = tuple(f.name for f in fields(SynthConfig))


def make_config(n_papers: int, n_shards: int, seed: int, knobs: dict[str, Any]) -> SynthConfig:
    unknown = sorted(set(knobs) - set(_PARAM_NAMES))
    if unknown:
        raise ConfigError(
            f"synth: unknown knob '{unknown[0]}'; valid knobs: {', '.join(_PARAM_NAMES[3:])}"
        )
    """A validated config from the size, the seed and keyword knobs (one-line errors)."""
    cfg = SynthConfig(n_papers=n_papers, n_shards=n_shards, seed=seed, **knobs)
    cfg.validate()
    return cfg
