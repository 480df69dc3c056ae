"""The facts a stage records in its manifest for later stages, typed and declared once.

A facts class is a frozen dataclass whose fields are the facts, each recorded under its
own name, and the class names the stages that record it (``stages``). Each class is
registered once, by ``@FACTS.register`` on its definition, into :data:`FACTS` (a
:class:`mdcr.core.registry.Registry` keyed by stage: a stage records one facts class at
most; :func:`facts_of_stage` looks it up). :meth:`Facts.record` writes the facts into a
running stage's manifest (``info``), :meth:`Facts.of` reads them back from a finished
output (a fact missing from it is a one-line error), and
:meth:`mdcr.core.store.Store.find` takes the field names as the only keys it matches on.

| facts | recorded by | keys |
|---|---|---|
| :class:`RunInfo` | search, bm25, fuse | retriever, pools_fingerprint, builtin_entry |
| :class:`RankInfo` | benchmark-rank, | retriever, method, benchmark_fingerprint, splits, detail, |
| | benchmark-fuse | builtin_entry |
| :class:`ScoreInfo` | score | pools_fingerprint, depth, recall_k, runs |
| :class:`EncodeInfo` | encode | encoder_key, builtin_entry |

:class:`BenchmarkOrigin` is the value benchmark-import records as ``origin``.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self

from mdcr.core.errors import ConfigError, ManifestMismatchError
from mdcr.core.registry import Registry

if TYPE_CHECKING:
    from mdcr.core.manifests import Output
    from mdcr.core.stage import StageContext

# Which built-in entry encoded or ranked (mdcr.retrievers.builtin_entry): a run's name
# never says.
BUILTIN_ENTRY = "builtin_entry"


def _to_record(value: Any) -> Any:
    """A value as the manifest records it (tuples as lists)."""
    return [_to_record(v) for v in value] if isinstance(value, tuple) else value


def _from_record(hint: Any, value: Any) -> Any:
    """A recorded value as the field's declared type: ``str``, ``int``, ``tuple[...]``;
    anything else (a mapping, None) as recorded."""
    if hint is str:
        return str(value)
    if hint is int:
        return int(value)
    if typing.get_origin(hint) is tuple:
        return tuple(value)
    return value


class Facts:
    """Base of the facts classes (a frozen dataclass, one field per fact). ``stages``:
    the stages that record them; a stage records one facts class at most."""

    stages: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def names(cls) -> list[str]:
        """The facts' names (their manifest keys), in declaration order."""
        return [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]

    def as_record(self) -> dict[str, Any]:
        """The facts as the manifest's ``info`` holds them."""
        return {key: _to_record(getattr(self, key)) for key in self.names()}

    def record(self, ctx: StageContext) -> None:
        """Record the facts in the running stage's manifest."""
        for key, value in self.as_record().items():
            ctx.record(key, value)

    @classmethod
    def from_record(cls, info: Mapping[str, Any], where: str) -> Self:
        """The facts in a manifest's ``info`` (``where``: the folder, for the error)."""
        hints = typing.get_type_hints(cls)
        missing = [key for key in cls.names() if key not in info]
        if missing:
            raise ManifestMismatchError(
                f"'{where}': its manifest records no '{missing[0]}'; re-run the step that made it"
            )
        return cls(**{key: _from_record(hints[key], info[key]) for key in cls.names()})

    @classmethod
    def match_record(cls, stage: str, given: Mapping[str, Any]) -> dict[str, Any]:
        """What :meth:`mdcr.core.store.Store.find` matches in a ``stage`` output's
        manifest for the given fields (checked: the stage records these facts, each
        field is one of theirs)."""
        return _finds_by(cls, stage, given)

    @classmethod
    def of(cls, out: Output) -> Self:
        """The facts a finished output recorded."""
        return cls.from_record(out.info_record, str(out.path))


def _check_facts(cls: type[Facts]) -> None:
    """A facts class names the stages that record it, and a stage records one class."""
    if not cls.stages:
        raise ConfigError(f"{cls.__name__}: a facts class names the stages that record it")
    for stage in cls.stages:
        held = FACTS.items().get(stage)
        if held is not None and held is not cls:
            raise ConfigError(
                f"stage '{stage}' records {held.__name__} already; "
                f"{cls.__name__} cannot be registered for it"
            )


# The stages whose outputs record facts, and the class each records: ``@FACTS.register`` on
# each class, filed under each of its ``stages`` (others by the modules of the entry-point
# group mdcr.facts).
FACTS: Registry[type[Facts]] = Registry(
    "facts of stage", key=lambda cls: cls.stages, group="mdcr.facts", check=_check_facts
)


def facts_of_stage(stage: str) -> type[Facts] | None:
    """The facts class ``stage`` records (None: it records none to find outputs by)."""
    return FACTS.items().get(stage)


def _finds_by(cls: type[Facts], stage: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest values ``Store.find(stage, cls, **given)`` matches: the given fields by
    their manifest keys, each value as recorded. A stage that records other facts, or an
    unknown field, is a one-line error naming the valid ones."""
    recorded = facts_of_stage(stage)
    if recorded is not cls:
        which = f"records {recorded.__name__}" if recorded else "records no facts"
        registered = [s for s in cls.stages if facts_of_stage(s) is cls]
        by = ", ".join(registered) or "no stage (register it with @FACTS.register)"
        raise ConfigError(
            f"Store.find('{stage}', {cls.__name__}): the {stage} stage {which}; "
            f"{cls.__name__} is recorded by {by}"
        )
    keys = cls.names()
    unknown = [k for k in given if k not in keys]
    if unknown:
        raise ConfigError(
            f"Store.find('{stage}'): unknown fact '{unknown[0]}'; valid: {', '.join(keys)}"
        )
    return {k: _to_record(v) for k, v in given.items()}


# -- the facts ---------------------------------------------------------------------------


@FACTS.register
@dataclass(frozen=True)
class RunInfo(Facts):
    """What a run-making stage (search, bm25, fuse) records: who ranked, on which pools,
    and the built-in entry it is (None: not a built-in entry)."""

    stages: ClassVar[tuple[str, ...]] = ("search", "bm25", "fuse")

    retriever: str
    pools_fingerprint: str
    builtin_entry: Mapping[str, Any] | None


@FACTS.register
@dataclass(frozen=True)
class RankInfo(Facts):
    """What benchmark-rank records: who scored the pairs, how, on which benchmark."""

    stages: ClassVar[tuple[str, ...]] = ("benchmark-rank", "benchmark-fuse")

    retriever: str
    method: str
    benchmark_fingerprint: str
    splits: tuple[str, ...]
    detail: str  # "metric cos", "k1 0.9, b 0.4", "scores file x.json"
    builtin_entry: Mapping[str, Any] | None


@FACTS.register
@dataclass(frozen=True)
class ScoreInfo(Facts):
    """What score records: the pools it scored on, its cut-offs and the runs it scored."""

    stages: ClassVar[tuple[str, ...]] = ("score",)

    pools_fingerprint: str
    depth: int
    recall_k: int
    # Each run: retriever, path, fingerprint, builtin_entry, counts.
    runs: tuple[dict[str, Any], ...]

    @property
    def retrievers(self) -> set[str]:
        return {str(r.get("retriever")) for r in self.runs}


@FACTS.register
@dataclass(frozen=True)
class EncodeInfo(Facts):
    """What encode records: its encoder key, to be found again (the encode fingerprint
    without its inputs; :func:`mdcr.encoders.stage.encoder_key`; outputs of one key hold
    the same vector for one text), and the built-in entry it is (None: not one)."""

    stages: ClassVar[tuple[str, ...]] = ("encode",)

    encoder_key: str
    builtin_entry: Mapping[str, Any] | None


# What a benchmark's files are. benchmark-import records it as "origin" (decided by
# mdcr.benchmark.release from provenance records, and hashed into the import's identity);
# a benchmark build is built. Only an official benchmark stands beside published numbers.
OFFICIAL, DECLARED, MDCR_FORMAT, BUILT = "official", "declared", "mdcr-format", "built"
ORIGIN_LABELS = {
    OFFICIAL: "official",
    DECLARED: "official (declared by the user)",
    MDCR_FORMAT: "an MDCR-format benchmark",
    BUILT: "a benchmark built by mdcr",
}


@dataclass(frozen=True)
class BenchmarkOrigin:
    """Where a benchmark's files come from: ``kind`` (official, declared, mdcr-format,
    built) and a one-line ``detail`` (the files' record, or why they are not official)."""

    kind: str
    detail: str = ""

    @property
    def official(self) -> bool:
        """The official release, proven by provenance (downloaded, or declared by the user)."""
        return self.kind in (OFFICIAL, DECLARED)

    @property
    def label(self) -> str:
        """``official``, ``official (declared by the user)``, ``an MDCR-format benchmark``
        or ``a benchmark built by mdcr``."""
        return ORIGIN_LABELS[self.kind]

    def files(self, split: str) -> str:
        """The benchmark's files as a phrase: ``the official MDCR test files``, ``the
        official (declared by the user) MDCR test files``."""
        if self.official:
            return f"the {self.label} MDCR {split} files"
        return f"{self.label} (its {split} split)"

    def line(self) -> str:
        """One line for printouts and reports: what the benchmark is, and why."""
        if self.kind == OFFICIAL:
            what = "the official MDCR release"
        elif self.kind == DECLARED:
            what = f"the MDCR release, {self.label}"
        else:
            what = f"{self.label}, not the official MDCR release"
        return f"Benchmark: {what}" + (f"; {self.detail}" if self.detail else "") + "."

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "detail": self.detail}
