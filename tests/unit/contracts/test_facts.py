"""Manifest facts: typed fields recorded under their names, and Store.find's keys checked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from mdcr.contracts.facts import (
    FACTS,
    EncodeInfo,
    Facts,
    RankInfo,
    RunInfo,
    ScoreInfo,
    facts_of_stage,
)
from mdcr.contracts.outputs import rank_info, score_info, scores_on_pools
from mdcr.core.errors import ConfigError, ManifestMismatchError
from mdcr.core.manifests import open_output, write_manifest
from mdcr.core.store import Store

RUNS = (
    {"retriever": "a", "path": "/x/a", "fingerprint": "f1", "builtin_entry": None},
    {"retriever": "b", "path": "/x/b", "fingerprint": "f2", "builtin_entry": {"builtin": "bm25"}},
)


def _output(home: Path, stage: str, fp: str, info: dict, started: str = "") -> Path:
    """A finished output folder as a stage leaves it (only what the readers look at)."""
    folder = home / stage / fp
    folder.mkdir(parents=True)
    manifest = {
        "stage": stage,
        "fingerprint": fp,
        "info": info,
        "timings": {"started": started},
        "complete": True,
    }
    write_manifest(folder, manifest)
    return folder


def test_facts_are_recorded_under_their_names() -> None:
    """Each fact under its field's name, tuples as lists, and read back as it was."""
    score = ScoreInfo("p1", 100, 10, RUNS)
    assert score.as_record() == {
        "pools_fingerprint": "p1",
        "depth": 100,
        "recall_k": 10,
        "runs": [dict(r) for r in RUNS],
    }
    run = RunInfo("specter", "p1", {"builtin": "specter"})
    assert run.as_record() == {
        "retriever": "specter",
        "pools_fingerprint": "p1",
        "builtin_entry": {"builtin": "specter"},
    }
    rank = RankInfo("bm25", "bm25", "b1", ("test", "valid"), "k1 0.9, b 0.4", None)
    assert rank.as_record()["splits"] == ["test", "valid"]
    assert set(rank.as_record()) == {
        "retriever",
        "method",
        "benchmark_fingerprint",
        "splits",
        "detail",
        "builtin_entry",
    }
    assert EncodeInfo("k", None).as_record() == {"encoder_key": "k", "builtin_entry": None}
    for facts in (score, run, rank):
        assert type(facts).from_record(facts.as_record(), "here") == facts


def test_every_fact_is_required(tmp_path: Path) -> None:
    """A manifest lacking a fact (an edited one) is a one-line error, never a default."""
    cut = _output(tmp_path, "score", "s0", {"pools_fingerprint": "p1"})
    with pytest.raises(ManifestMismatchError, match="records no 'depth'; re-run the step"):
        score_info(cut)
    rank = _output(tmp_path, "benchmark-rank", "r0", {"retriever": "x", "method": "scores"})
    with pytest.raises(ManifestMismatchError, match="records no 'benchmark_fingerprint'"):
        rank_info(rank)


def test_find_matches_typed_facts_by_their_manifest_keys(tmp_path: Path) -> None:
    store = Store(tmp_path)
    old = _output(tmp_path, "score", "s1", ScoreInfo("p1", 500, 30, RUNS).as_record(), "1")
    _output(tmp_path, "score", "s2", ScoreInfo("p2", 500, 30, RUNS[:1]).as_record(), "2")
    new = _output(tmp_path, "score", "s3", ScoreInfo("p1", 100, 30, RUNS[1:]).as_record(), "3")
    assert [o.path for o in store.find("score", ScoreInfo, pools_fingerprint="p1")] == [old, new]
    assert [o.path for o in store.find("score", ScoreInfo, runs=RUNS)] == [old]
    assert [o.path for o in store.find("score", ScoreInfo, pools_fingerprint="p1", depth=100)] == [
        new
    ]
    assert [p for _, p, _ in scores_on_pools(store, "p1")] == [old, new]
    out = open_output(new)
    assert out is not None and ScoreInfo.of(out).runs == RUNS[1:]


def test_find_rejects_a_misspelled_key_in_one_line(tmp_path: Path) -> None:
    store = Store(tmp_path)
    _output(tmp_path, "score", "s1", ScoreInfo("p1", 500, 30, RUNS).as_record())
    with pytest.raises(ConfigError) as err:
        store.find("score", ScoreInfo, pool_fingerprint="p1")  # pools_fingerprint, misspelled
    message = str(err.value)
    assert "\n" not in message
    assert "unknown fact 'pool_fingerprint'" in message
    assert "valid: pools_fingerprint, depth, recall_k, runs" in message
    with pytest.raises(ConfigError, match="the report stage records no facts"):
        store.find("report", RunInfo, retriever="a")
    with pytest.raises(ConfigError, match="the search stage records RunInfo; ScoreInfo is rec"):
        store.find("search", ScoreInfo, pools_fingerprint="p1")
    with pytest.raises(ConfigError, match="pass the facts class the report stage records"):
        store.find("report", retriever="a")  # the store knows no facts of its own
    assert store.find("report") == []  # no keys: every output of the stage


def test_each_stage_records_one_facts_class() -> None:
    assert facts_of_stage("search") is RunInfo and facts_of_stage("bm25") is RunInfo
    assert facts_of_stage("benchmark-rank") is RankInfo
    assert facts_of_stage("score") is ScoreInfo and facts_of_stage("encode") is EncodeInfo
    assert facts_of_stage("report") is None


def test_a_facts_class_counts_once_registered(tmp_path: Path) -> None:
    """Defining a facts class registers nothing (no subclass hook): the registration on its
    definition puts it in FACTS, and Store.find then matches the stage's outputs by it."""
    assert "__init_subclass__" not in vars(Facts)

    @dataclass(frozen=True)
    class ToyInfo(Facts):
        stages: ClassVar[tuple[str, ...]] = ("toy-stage",)
        flavour: str

    assert facts_of_stage("toy-stage") is None  # defined, not registered
    store = Store(tmp_path)
    unregistered = r"records no facts; ToyInfo is recorded by no stage \(register it"
    with pytest.raises(ConfigError, match=unregistered):
        store.find("toy-stage", ToyInfo, flavour="sour")
    try:
        assert FACTS.register(ToyInfo) is ToyInfo
        assert facts_of_stage("toy-stage") is ToyInfo and FACTS.get("toy-stage") is ToyInfo
        assert FACTS.register(ToyInfo) is ToyInfo  # the same class again: a no-op
        _output(tmp_path, "toy-stage", "t1", {"flavour": "sour"})
        _output(tmp_path, "toy-stage", "t2", {"flavour": "sweet"})
        assert [o.fingerprint for o in store.find("toy-stage", ToyInfo, flavour="sour")] == ["t1"]

        @dataclass(frozen=True)
        class OtherInfo(Facts):
            stages: ClassVar[tuple[str, ...]] = ("other-stage", "toy-stage")

        with pytest.raises(ConfigError, match="stage 'toy-stage' records ToyInfo already"):
            FACTS.register(OtherInfo)
        assert facts_of_stage("other-stage") is None  # refused whole, not half
    finally:
        FACTS.unregister("toy-stage")
    assert facts_of_stage("toy-stage") is None
