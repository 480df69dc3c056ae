"""The fuse stage: ranx's fusion of runs of the same pools, through the real store.

Checked against ranx itself (``ranx.fuse`` on the same runs gives the same scores), the
run contract (ties, top k), the fingerprint (method and inputs move it, settings do not
exist), and the tuning's data: weights tuned on validation never depend on test qrels.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from mdcr.core.config import from_mapping
from mdcr.core.stage import StageContext
from mdcr.core.store import Store
from mdcr.index.fusion import SPEC, FuseConfig
from tests.integration.scoring.conftest import make_runs


@pytest.fixture(scope="module")
def two_splits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from tests.integration.measures.conftest import warm_up_ranx
    from tests.integration.scoring.fakes import POOLS, FakePoolsConfig

    warm_up_ranx()

    store = Store(tmp_path_factory.mktemp("fuse_home"))
    cfg = from_mapping(
        FakePoolsConfig, {"splits": ["val", "test"], "dataset_sizes": [300], "reps": 1}, "p"
    )
    pools = store.execute(POOLS, cfg, {}, quiet=True).path
    runs = make_runs(
        store,
        pools,
        {
            "bm25": {"skill": 1.5},
            "minilm": {"skill": 1.0, "drop_queries": 1, "k": 40},
            "random": {"skill": 0.0, "setups": ["field"]},
        },
    )
    return {"store": store, "pools": pools, "runs": runs}


def fuse(store: Store, runs: list[Path], **params: Any) -> Path:
    cfg = from_mapping(FuseConfig, {"runs": ["x"], **params}, "fuse")
    return store.execute(SPEC, cfg, {"runs": runs}, quiet=True).path


def nested(frame: pd.DataFrame, column: str) -> dict[str, dict[str, Any]]:
    """{q: {paper_id: value}} of a frame with columns q, paper_id and ``column``."""
    out: dict[str, dict[str, Any]] = {}
    for q, p, v in zip(frame["q"], frame["paper_id"], frame[column], strict=True):
        out.setdefault(str(q), {})[str(p)] = v
    return out


def ranx_fused(runs: list[Path], norm: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """ranx.fuse on the runs' rows of the queries every run holds, keyed pool|query."""
    from ranx import Run, fuse

    frames = []
    for folder in runs:
        df = pd.read_parquet(folder / "runs.parquet")
        df["q"] = df["pool_id"] + "|" + df["query_id"]
        frames.append(df)
    common = set.intersection(*(set(f["q"]) for f in frames))
    ranx_runs = [Run(nested(f[f["q"].isin(common)], "score")) for f in frames]
    return fuse(ranx_runs, norm=norm, method=method, params=params).to_dict()


@pytest.mark.parametrize(
    ("method", "norm", "ranx_method", "ranx_norm", "params"),
    [
        ("rrf", "min-max", "rrf", "min-max", {"k": 60}),
        ("combsum", "min-max", "sum", "min-max", {}),
        ("combmnz", "zscore", "mnz", "zmuv", {}),
        ("wsum", "zscore", "wsum", "zmuv", {"weights": [0.7, 0.3]}),
    ],
)
def test_fused_run_is_ranx_fuse(
    two_splits: dict[str, Any],
    method: str,
    norm: str,
    ranx_method: str,
    ranx_norm: str,
    params: dict[str, Any],
) -> None:
    runs = [two_splits["runs"]["bm25"], two_splits["runs"]["minilm"]]
    given = {"weights": params["weights"]} if "weights" in params else {}
    out = fuse(two_splits["store"], runs, method=method, norm=norm, k=1000, **given)
    fused = pd.read_parquet(out / "runs.parquet")
    expected = ranx_fused(runs, ranx_norm, ranx_method, params)
    fused["q"] = fused["pool_id"] + "|" + fused["query_id"]
    common = fused[fused["q"].isin(expected)]
    assert common["q"].nunique() == len(expected) > 0
    for q, group in common.groupby("q"):
        assert dict(zip(group["paper_id"], group["score"], strict=True)) == expected[q]
        # the run contract: ranks 1..n by (score desc, paper_id asc)
        order = group.sort_values(["score", "paper_id"], ascending=[False, True])
        assert order["rank"].tolist() == list(range(1, len(group) + 1))
    # queries minilm dropped are fused from bm25 alone: every bm25 query is in the fused run
    bm25 = pd.read_parquet(runs[0] / "runs.parquet")
    assert set(zip(bm25["pool_id"], bm25["query_id"], strict=True)) == set(
        zip(fused["pool_id"], fused["query_id"], strict=True)
    )


def test_top_k_and_name(two_splits: dict[str, Any]) -> None:
    from mdcr.contracts.outputs import run_info

    runs = [two_splits["runs"]["bm25"], two_splits["runs"]["minilm"]]
    out = fuse(two_splits["store"], runs, k=7)
    fused = pd.read_parquet(out / "runs.parquet")
    assert fused.groupby(["pool_id", "query_id"]).size().max() == 7
    assert run_info(out).retriever == "bm25+minilm"  # type: ignore[union-attr]


def test_only_pools_every_run_covers(two_splits: dict[str, Any]) -> None:
    runs = [two_splits["runs"]["bm25"], two_splits["runs"]["random"]]
    fused = pd.read_parquet(fuse(two_splits["store"], runs) / "runs.parquet")
    random = pd.read_parquet(runs[1] / "runs.parquet")
    assert set(fused["pool_id"]) == set(random["pool_id"])
    assert all(p.startswith("field/") for p in fused["pool_id"])


def test_fingerprint_moves_with_method_and_inputs(two_splits: dict[str, Any]) -> None:
    store, r = two_splits["store"], two_splits["runs"]
    base = fuse(store, [r["bm25"], r["minilm"]])
    assert fuse(store, [r["bm25"], r["minilm"]]) == base  # the same: reused
    others = {
        fuse(store, [r["bm25"], r["minilm"]], method="combsum"),
        fuse(store, [r["bm25"], r["minilm"]], norm="zscore"),
        fuse(store, [r["bm25"], r["minilm"]], method="wsum", weights=[0.5, 0.5]),
        fuse(store, [r["bm25"], r["random"]]),
    }
    assert base not in others and len(others) == 4


def _run_directly(runs: list[Path], out: Path, **params: Any) -> dict[str, Any]:
    """The stage function itself on ``runs`` (no store checks), its manifest facts back."""
    from mdcr.index.fusion import run_fuse

    out.mkdir()
    cfg = from_mapping(FuseConfig, {"runs": ["x"], **params}, "fuse")
    ctx = StageContext(out=out, inputs={"runs": runs}, quiet=True)
    run_fuse(cfg, ctx)
    return ctx.info


def test_tuned_weights_never_read_test_qrels(
    two_splits: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tuning reads the validation pools' qrels only: with every test judgement removed
    from the pools' qrels file, the tuned weights and the fused run are the same."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import mdcr.index.fusion as fusion

    runs = [two_splits["runs"]["bm25"], two_splits["runs"]["minilm"]]
    pools = two_splits["pools"]
    seen: list[set[str]] = []
    real = fusion.validation_qrels

    def spy(pools_dir: Path, pool_ids: list[str]) -> pd.DataFrame:
        frame = real(pools_dir, pool_ids)
        seen.append(set(frame["pool_id"]))
        return frame

    monkeypatch.setattr(fusion, "validation_qrels", spy)
    full = _run_directly(runs, tmp_path / "full", method="wsum")
    assert seen and all(p.startswith("dataset/val/") or "/val/" in p for p in seen[0])
    assert "tuned on" in full["weights"]["how"]

    # The pools again, their test judgements gone (a copy; the run's pools point to it).
    qrels = pd.read_parquet(pools / "qrels.parquet")
    val_only = qrels[qrels["pool_id"].str.contains("/val/")]
    assert 0 < len(val_only) < len(qrels)
    copy = tmp_path / "pools_without_test"
    shutil.copytree(pools, copy, ignore=shutil.ignore_patterns("manifest.json"))
    pq.write_table(pa.Table.from_pandas(val_only, preserve_index=False), copy / "qrels.parquet")
    monkeypatch.setattr(fusion, "_pools_of", lambda runs: copy)
    without = _run_directly(runs, tmp_path / "without", method="wsum")
    assert without["weights"] == full["weights"]
    a = pd.read_parquet(tmp_path / "full" / "runs.parquet")
    b = pd.read_parquet(tmp_path / "without" / "runs.parquet")
    pd.testing.assert_frame_equal(a, b)


def test_tuned_weights_are_ranx_optimize_fusion(two_splits: dict[str, Any], tmp_path: Path) -> None:
    """The recorded weights are ranx.optimize_fusion's on the validation runs and qrels."""
    from ranx import Qrels, Run, optimize_fusion

    runs = [two_splits["runs"]["bm25"], two_splits["runs"]["minilm"]]
    info = _run_directly(runs, tmp_path / "out", method="wsum", norm="min-max")
    qrels = pd.read_parquet(two_splits["pools"] / "qrels.parquet")
    qrels = qrels[qrels["pool_id"].str.contains("/val/")].copy()
    qrels["q"] = qrels["pool_id"] + "|" + qrels["query_id"]
    frames = []
    for folder in runs:
        df = pd.read_parquet(folder / "runs.parquet")
        df = df[df["pool_id"].str.contains("/val/")].copy()
        df["q"] = df["pool_id"] + "|" + df["query_id"]
        frames.append(df)
    keys = set(qrels["q"]) & set(frames[0]["q"]) & set(frames[1]["q"])
    best = optimize_fusion(
        Qrels(nested(qrels[qrels["q"].isin(keys)], "relevance")),
        [Run(nested(f[f["q"].isin(keys)], "score")) for f in frames],
        norm="min-max",
        method="wsum",
        metric="map@500",
        show_progress=False,
    )
    assert info["weights"]["values"] == [float(w) for w in best["weights"]]
    assert info["weights"]["how"].startswith(f"tuned on {len(keys)} validation queries")


def test_bad_input_is_one_line(two_splits: dict[str, Any]) -> None:
    from mdcr.core.errors import ConfigError

    with pytest.raises(ConfigError, match="fusion takes two or more"):
        fuse(two_splits["store"], [two_splits["runs"]["bm25"]])
    with pytest.raises(ConfigError, match="only method 'wsum' takes weights"):
        from_mapping(FuseConfig, {"runs": ["x"], "weights": [1.0, 2.0]}, "fuse")
