"""Shared fixtures: the ranx warm-up (from tests/integration/measures), and fake pools, runs and
a score output built once through the real store."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mdcr.core.config import from_mapping
from mdcr.core.store import Store
from tests.integration.measures.conftest import warm_up_ranx


@pytest.fixture(scope="session")
def ranx_ready() -> None:
    warm_up_ranx()


@dataclass
class Built:
    """Fake pools, runs and one score output in a store shared by the stage tests."""

    store: Store
    pools: Path
    runs: dict[str, Path]
    score: Path


def make_runs(store: Store, pools: Path, specs: dict[str, dict[str, Any]]) -> dict[str, Path]:
    from tests.integration.scoring.fakes import SEARCH, FakeSearchConfig

    out = {}
    for name, params in specs.items():
        cfg = from_mapping(FakeSearchConfig, {"pools": "x", "retriever": name, **params}, "s")
        out[name] = store.execute(SEARCH, cfg, {"pools": [pools]}, quiet=True).path
    return out


def run_score(store: Store, pools: Path, runs: list[Path], **params: Any) -> Path:
    from mdcr.scoring.score import SPEC, ScoreConfig

    cfg = from_mapping(ScoreConfig, {"pools": "x", "runs": ["x"], **params}, "score")
    return store.execute(SPEC, cfg, {"pools": [pools], "runs": runs}, quiet=True).path


def run_report(store: Store, scores: list[Path], **params: Any) -> Path:
    from mdcr.scoring.report import SPEC, ReportConfig

    cfg = from_mapping(ReportConfig, {"scores": ["x"], **params}, "report")
    return store.execute(SPEC, cfg, {"scores": scores}, quiet=True).path


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory, ranx_ready: None) -> Built:
    from tests.integration.scoring.fakes import POOLS, FakePoolsConfig

    store = Store(tmp_path_factory.mktemp("eval_home"))
    pools = store.execute(POOLS, from_mapping(FakePoolsConfig, {}, "p"), {}, quiet=True).path
    runs = make_runs(
        store,
        pools,
        {
            "bm25": {"skill": 2.5, "builtin": True},
            "specter": {"skill": 1.5, "builtin": True},
            "random": {"skill": 0.0, "builtin": True},
            "partial": {"skill": 2.0, "setups": ["field"], "drop_queries": 2},
        },
    )
    score = run_score(store, pools, list(runs.values()))
    return Built(store, pools, runs, score)
