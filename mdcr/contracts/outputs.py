"""Finished outputs found and read: the facts of one output, the outputs of a store that
recorded given facts, and the inputs an output was made from, found again.

A stage reads another stage's manifest only through here (typed by :mod:`mdcr.contracts.facts`),
never by string keys of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mdcr.contracts.artifacts import BENCHMARK, Contract
from mdcr.contracts.facts import (
    BUILT,
    MDCR_FORMAT,
    ORIGIN_LABELS,
    BenchmarkOrigin,
    EncodeInfo,
    RankInfo,
    RunInfo,
    ScoreInfo,
)
from mdcr.core.errors import InputDataError, ManifestMismatchError
from mdcr.core.fingerprints import artifact_fingerprint
from mdcr.core.manifests import open_output

if TYPE_CHECKING:
    from mdcr.core.store import Store


def stage_of(folder: Path) -> str | None:
    """The stage that made ``folder`` (None when no stage did)."""
    out = open_output(folder)
    return out.stage if out is not None else None


def writes(folder: Path, contract: Contract) -> bool:
    """Whether ``folder`` is the output of a stage that declares ``contract``'s artifact
    among what it writes (``StageSpec.writes``); False for a folder no registered stage
    made."""
    from mdcr.core.stage import STAGES

    stage = stage_of(folder)
    if stage is None or stage not in STAGES:
        return False
    return any(c is contract for c in STAGES.get(stage).writes)


def run_info(folder: Path) -> RunInfo | None:
    """The run info of a search or bm25 output (None for a folder no stage made)."""
    out = open_output(folder)
    if out is None or out.info("retriever") is None:
        return None
    return RunInfo.of(out)


def check_run_pools(run: Path, pools: Path) -> None:
    """A run searched on other pools would be scored against the wrong qrels: refuse it."""
    info = run_info(run)
    if info is None or not info.pools_fingerprint or open_output(pools) is None:
        return
    actual = artifact_fingerprint(pools)
    if info.pools_fingerprint != actual:
        raise ManifestMismatchError(
            f"run '{run}' ({info.retriever}) was built from pools {info.pools_fingerprint}, not "
            f"the given pools {actual}; pass the pools the run was searched on"
        )


def rank_info(folder: Path) -> RankInfo:
    """The rank info of a benchmark-rank (or benchmark-fuse) output."""
    out = open_output(folder)
    if out is None or out.stage not in ("benchmark-rank", "benchmark-fuse"):
        raise InputDataError(f"'{folder}' is not a benchmark-rank output; rank the benchmark first")
    return RankInfo.of(out)


def score_info(folder: Path) -> tuple[str, ScoreInfo] | None:
    """(fingerprint, info) of a score output; None for a folder no stage made."""
    out = open_output(folder)
    if out is None:
        return None
    return out.fingerprint, ScoreInfo.of(out)


def scores_on_pools(store: Store, pools_fingerprint: str) -> list[tuple[str, Path, ScoreInfo]]:
    """Every finished score output on these pools: (started, folder, info), oldest first."""
    found = []
    for out in store.find("score", ScoreInfo, pools_fingerprint=pools_fingerprint):
        started = str(out.manifest.get("timings", {}).get("started", ""))
        found.append((started, out.path, ScoreInfo.of(out)))
    return sorted(found, key=lambda x: (x[0], str(x[1])))


def encode_outputs(store: Store, encoder_key: str) -> list[Path]:
    """Finished encode outputs whose vectors come from the same encoder (key)."""
    return [out.path for out in store.find("encode", EncodeInfo, encoder_key=encoder_key)]


def benchmark_origin(folder: Path) -> BenchmarkOrigin:
    """The origin of a benchmark or benchmark-import output (the import records it); any
    other folder is an MDCR-format benchmark."""
    out = open_output(folder)
    if out is None or not writes(folder, BENCHMARK):
        return BenchmarkOrigin(MDCR_FORMAT, "not made by the benchmark or import stage")
    if out.stage == "benchmark":
        return BenchmarkOrigin(BUILT, "built from a corpus by the benchmark stage")
    rec = out.info("origin")
    if not isinstance(rec, dict) or rec.get("kind") not in ORIGIN_LABELS:
        raise ManifestMismatchError(
            f"'{folder}': its manifest records no valid 'origin'; re-run the import that made it"
        )
    return BenchmarkOrigin(str(rec["kind"]), str(rec["detail"]))


def input_paths(folder: Path, name: str) -> list[Path]:
    """The paths a finished output was made from, for one of its inputs.

    A manifest records each input's path as it was given (often relative to the folder
    the run started in) and its fingerprint. Each is found again as the same stage folder
    in the store holding ``folder`` (``<home>/<stage>/<fingerprint>``), else at the path
    recorded; either must still have the recorded fingerprint. An input found nowhere is
    returned as recorded (the caller says it does not exist); one whose fingerprint
    changed is an error.
    """
    out = open_output(folder)
    if out is None:
        return []
    home = folder.resolve().parent.parent
    found = []
    for entry in out.manifest.get("inputs", {}).get(name, []):
        recorded = Path(entry["path"])
        candidates = [home / recorded.parent.name / recorded.name, recorded]
        existing = [c for c in candidates if c.exists()]
        same = [c for c in existing if artifact_fingerprint(c) == entry["fingerprint"]]
        if existing and not same:
            raise ManifestMismatchError(
                f"'{folder}' was made from {name} '{recorded}' (fingerprint "
                f"{entry['fingerprint']}), which has changed since; re-run that step or "
                f"give the {name} explicitly"
            )
        found.append(same[0] if same else recorded)
    return found
