"""``mdcr evaluate``'s request, typed, and the pieces both of its pipelines are made of.

``mdcr evaluate`` scores encoders in one command by building a pipeline in code and
handing it to the same runner as ``mdcr run`` (:func:`mdcr.core.pipeline.run_pipeline`), so
every step is a cached stage output and reuse comes from fingerprints alone. On a
benchmark the pipeline is built by :mod:`mdcr.evaluation.benchmark`, on pools by
:mod:`mdcr.evaluation.pools`; :func:`mdcr.evaluation.run.run_request` picks the one a
request asks for, and :mod:`mdcr.evaluation.result` holds what they found.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.core.errors import ConfigError
from mdcr.core.hints import flag
from mdcr.evaluation.arguments import arg

if TYPE_CHECKING:
    from mdcr.contracts.facts import BenchmarkOrigin
    from mdcr.core.pipeline import Step

BM25 = "bm25"


def typed_arguments(req: EvaluateRequest, syntax: str) -> dict[str, Any]:
    """What :func:`mdcr.core.hints.typed_in` needs to name ``mdcr evaluate``'s arguments
    (as typed in ``syntax``) in errors raised while its pipeline runs: the stages' keys it
    sets, the folders it was given."""
    splits = arg("split", syntax)
    arguments = {
        f"{stage}.splits": splits
        for stage in ("report", "benchmark-import", "benchmark-rank", "benchmark-score")
    }
    given = {"benchmark": req.benchmark, "pools": req.pools}
    paths = {
        path: f"{arg(name, syntax)} '{path}'" for name, path in given.items() if path is not None
    }
    return {"arguments": arguments, "paths": paths}


@dataclass(frozen=True)
class EvaluateRequest:
    """What ``mdcr evaluate`` was asked to do (its command-line options, typed)."""

    encoders: tuple[str, ...] = ()  # SPEC or NAME=SPEC (mdcr.encoders.naming)
    benchmark: Path | None = None
    pools: Path | None = None
    corpus: Path | None = None
    scores: Path | None = None
    name: str = ""
    splits: tuple[str, ...] = ()
    ties: str = "trec_eval"
    by_type: bool = True
    k1: float | None = None
    b: float | None = None
    bm25_params: Path | None = None
    encode_set: tuple[str, ...] = ()  # [NAME.]KEY=VALUE options of the encode stage
    device: str | None = None
    # Engine settings for every step that scales out (executor, ray_address, ray_workers).
    engine: dict[str, Any] = dataclasses.field(default_factory=dict)

    def named(self) -> list[tuple[str, str]]:
        """(name, spec) per ``--encoder`` (:func:`mdcr.encoders.naming.name_retrievers`)."""
        from mdcr.encoders.naming import name_retrievers, split_named

        items = list(self.encoders)
        if self.name and self.scores is None:  # --name names the one encoder
            if len(items) != 1 or split_named(items[0])[0]:
                raise ConfigError(
                    "--name names a --scores file or a single --encoder; name encoders with "
                    "--encoder NAME=SPEC"
                )
            items = [f"{self.name}={items[0]}"]
        return name_retrievers(items)

    def check(self) -> None:
        """One-line errors for requests that cannot work, before anything runs."""
        from mdcr.encoders.registry import lookup

        if self.pools is not None:
            if self.benchmark is not None or self.scores is not None:
                raise ConfigError(
                    f"evaluate: {arg('pools')} cannot be combined with "
                    f"{flag('--benchmark or --scores', 'benchmark=')}"
                )
            if not self.encoders:
                raise ConfigError(f"evaluate: give {arg('encoder')} SPEC with {arg('pools')}")
        else:
            if self.benchmark is None:
                raise ConfigError(f"evaluate: give {arg('benchmark')} (or {arg('pools')})")
            if not self.encoders and self.scores is None:
                raise ConfigError("evaluate: give --encoder SPEC (repeatable) or --scores FILE")
        named = self.named()
        for _, spec in named:
            if spec.startswith("fuse:"):
                from mdcr.evaluation.fused import fused_parts

                fused_parts(spec)  # well formed; its names are found when the steps are built
                continue
            if spec == BM25:
                continue
            try:
                lookup(spec)
            except ConfigError as exc:  # here bm25 is an encoder spec too
                raise ConfigError(
                    str(exc).replace("valid encoders: ", f"valid encoders: {BM25}, ")
                ) from None
        if self.scores is not None and not self.scores.is_file():
            raise ConfigError(
                f"--scores: '{self.scores}' is not a file; give a scores JSON file "
                '({"<qid>_<cid>": score}, as the original evaluate.py reads)'
            )
        for item in self.encode_set:
            if "=" not in item:
                raise ConfigError(
                    f"{arg('encode-set')} '{item}': expected KEY=VALUE or NAME.KEY=VALUE, e.g. "
                    "max_length=128 (`mdcr encode --help` lists the keys)"
                )
            name, _ = encode_set_target(item, [n for n, _ in named])
            if name and dict(named).get(name) == BM25:
                raise ConfigError(
                    f"{arg('encode-set')} '{item}': '{name}' is bm25, which encodes nothing"
                )
            if not any(spec != BM25 and not spec.startswith("fuse:") for _, spec in named):
                what = "bm25 encodes" if named else "a --scores file encodes"
                raise ConfigError(
                    f"{arg('encode-set')} '{item}': no {arg('encoder')} here encodes papers "
                    f"({what} nothing), so it would be ignored; leave it out"
                )
        if self.bm25_params is not None and (self.k1 is not None or self.b is not None):
            raise ConfigError("evaluate: give either --bm25-params or --k1/--b, not both")


@dataclass(frozen=True)
class Evaluated:
    """What an evaluation made: the final output and the ranks or runs per retriever."""

    result: Path  # the benchmark-score or report output
    retrievers: tuple[tuple[str, Path], ...]  # (retriever name, rank or run output)
    origin: BenchmarkOrigin | None = None  # benchmark mode: where its files come from
    pools: Path | None = None  # pools mode: the pools scored on
    earlier_scores: int = 0  # pools mode: earlier score outputs in the report
    scores: tuple[Path, ...] = ()  # pools mode: the score output of this evaluation


def step(step_id: str, stage: str, values: dict[str, Any]) -> Step:
    """A pipeline step of ``stage`` with its config from ``values`` (checked)."""
    from mdcr.core.config import from_mapping
    from mdcr.core.pipeline import Step
    from mdcr.core.stage import get_stage

    spec = get_stage(stage)
    return Step(step_id, spec, from_mapping(spec.config, values, f"evaluate:{step_id}"))


def encode_set_target(item: str, names: list[str]) -> tuple[str, str]:
    """(retriever name, KEY=VALUE) of an ``--encode-set`` item: ``NAME.KEY=VALUE`` sets
    one retriever's option (the longest name that fits), a plain ``KEY=VALUE`` all's."""
    head = item.split("=", 1)[0]
    fits = [n for n in names if head.startswith(n + ".")]
    if not fits:
        if "." in head:
            raise ConfigError(
                f"{arg('encode-set')} '{item}': no retriever named '{head.rsplit('.', 1)[0]}'; "
                f"names: {', '.join(names)}"
            )
        return "", item
    name = max(fits, key=len)
    return name, item[len(name) + 1 :]


def encode_options(req: EvaluateRequest, name: str = "") -> dict[str, Any]:
    """The encode stage's options from ``--encode-set`` (those for all, then those for
    retriever ``name``) and ``--device``, as typed values."""
    from mdcr.core.config import parse_values
    from mdcr.core.pipeline import parse_overrides
    from mdcr.encoders.stage import EncodeConfig

    names = [n for n, _ in req.named()]
    common, own = [], []
    for item in req.encode_set:
        target, setting = encode_set_target(item, names)
        if not target:
            common.append(setting)
        elif target == name:
            own.append(setting)
    text = parse_overrides([f"encode.{s}" for s in [*common, *own]]).get("encode", {})
    if req.device:
        text["device"] = req.device
    for reserved in ("corpus", "targets", "encoder"):
        if reserved in text:
            raise ConfigError(
                f"{arg('encode-set')} {reserved}: set by evaluate itself; leave it out"
            )
    return parse_values(EncodeConfig, text, arg("encode-set"))


def bm25_values(req: EvaluateRequest) -> dict[str, Any]:
    """The BM25 options of a request: its parameters file, or k1 and b given."""
    if req.bm25_params is not None:
        return {"params" if req.pools else "bm25_params": str(req.bm25_params)}
    out: dict[str, Any] = {}
    if req.k1 is not None:
        out["k1"] = req.k1
    if req.b is not None:
        out["b"] = req.b
    return out


def safe_id(spec: str) -> str:
    """``spec`` as a step id: every character but letters and digits as ``_``."""
    return "".join(c if c.isalnum() else "_" for c in spec)
