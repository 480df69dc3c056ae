"""``--encoder fuse:[METHOD:]A+B``: a fused retriever in ``mdcr evaluate``.

A fuse spec names two or more retrievers joined by ``+`` (``fuse:bm25+minilm``,
``fuse:wsum:bm25+specter``; the method defaults to rrf). Each name is a retriever of the
same request (``--encoder``), else one scored earlier on the same pools (its newest run)
or ranked earlier on the same benchmark (its newest rank output). The fused retriever is
a ``fuse`` step on pools and a ``benchmark-fuse`` step on a benchmark
(:mod:`mdcr.index.fusion`, :mod:`mdcr.benchmark.fusion`), named ``A+B`` unless named.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.core.errors import ConfigError
from mdcr.evaluation.arguments import arg

if TYPE_CHECKING:
    from mdcr.core.store import Store

FUSE = "fuse:"


def is_fused(spec: str) -> bool:
    return spec.startswith(FUSE)


def fused_parts(spec: str) -> tuple[str, list[str]]:
    """(method, retriever names) of a fuse spec; a one-line error for a malformed one."""
    from mdcr.index.fusion import METHODS

    body = spec.removeprefix(FUSE)
    method = "rrf"
    head, sep, rest = body.partition(":")
    # A method comes before the first ':' and holds no '+'; otherwise the ':' belongs to
    # a retriever's name (a py: encoder is named module:attr).
    if sep and "+" not in head:
        if head not in METHODS:
            raise ConfigError(
                f"{arg('encoder')} {spec}: unknown fusion method '{head}'; valid: "
                f"{', '.join(METHODS)} (a name with ':' in it goes after the method: "
                "fuse:rrf:NAME+...)"
            )
        method, body = head, rest
    names = [n for n in body.split("+") if n]
    if len(names) < 2 or len(set(names)) != len(names):
        raise ConfigError(
            f"{arg('encoder')} {spec}: name two or more different retrievers joined by '+', "
            "e.g. fuse:bm25+minilm"
        )
    return method, names


def default_fused_name(spec: str) -> str:
    """A fuse spec's retriever name when none is given: its names joined by ``+``."""
    return "+".join(fused_parts(spec)[1])


def fused_inputs(
    spec: str, made: dict[str, str], earlier: dict[str, Path], where: str
) -> tuple[str, list[str]]:
    """(method, input references) of a fuse spec: ``@step`` for a retriever of this
    request (``made``), the folder of one found earlier (``earlier``)."""
    method, names = fused_parts(spec)
    refs = []
    for name in names:
        if name in made:
            refs.append(made[name])
        elif name in earlier:
            refs.append(str(earlier[name]))
        else:
            have = sorted({*made, *earlier})
            raise ConfigError(
                f"{arg('encoder')} {spec}: no retriever '{name}' in this evaluation or scored "
                f"earlier on {where}; known: {', '.join(have) or 'none'}"
            )
    return method, refs


def earlier_pool_runs(store: Store, pools: Path) -> dict[str, Path]:
    """Each retriever scored earlier on ``pools``: its newest run folder still there."""
    from mdcr.contracts.outputs import scores_on_pools
    from mdcr.core.fingerprints import artifact_fingerprint

    found: dict[str, Path] = {}
    for _, _, info in scores_on_pools(store, artifact_fingerprint(pools)):  # oldest first
        for run in info.runs:
            path = Path(str(run.get("path", "")))
            if path.is_dir() and artifact_fingerprint(path) == run.get("fingerprint"):
                found[str(run.get("retriever"))] = path
    return found


def earlier_ranks(store: Store, benchmark: Path) -> dict[str, Path]:
    """Each retriever ranked earlier on ``benchmark``: its newest rank (or fuse) output."""
    from mdcr.contracts.facts import RankInfo
    from mdcr.core.fingerprints import artifact_fingerprint

    fp = artifact_fingerprint(benchmark)
    dated: list[tuple[str, str, Path]] = []
    for stage in ("benchmark-rank", "benchmark-fuse"):
        for out in store.find(stage, RankInfo, benchmark_fingerprint=fp):
            started = str(out.manifest.get("timings", {}).get("started", ""))
            dated.append((started, RankInfo.of(out).retriever, out.path))
    return {name: path for _, name, path in sorted(dated, key=lambda d: (d[0], str(d[2])))}


def fused_steps(
    named: list[tuple[str, str]],
    ids: dict[str, str],
    earlier: dict[str, Path],
    where: str,
    stage: str,
) -> list[tuple[str, str, dict[str, Any]]]:
    """(step id, stage, values) of the fuse (``stage``: fuse or benchmark-fuse) step of
    each fuse spec in ``named`` ((name, spec) per retriever), its step id ``ids[name]``;
    the other retrievers' steps are ``ids`` too."""
    made = {n: f"@{ids[n]}" for n, spec in named if not is_fused(spec)}
    key = "runs" if stage == "fuse" else "ranks"
    out = []
    for name, spec in named:
        if is_fused(spec):
            method, refs = fused_inputs(spec, made, earlier, where)
            values = {key: refs, "method": method, "retriever": name}
            out.append((ids[name], stage, values))
    return out
