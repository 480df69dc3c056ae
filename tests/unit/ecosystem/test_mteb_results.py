"""``mdcr export --format mteb-results`` of an output that scores several retrievers
writes every one of them (or the one ``--retriever`` names), each read back by MTEB's
``ResultCache`` with the numbers mdcr holds."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pandas as pd
import pytest

from mdcr.cli import main
from tests.unit.ecosystem.helpers import FIXTURE


def _cli(*args: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        assert main(list(args)) == 0
    return buf.getvalue()


def test_every_retriever_of_a_score_output_is_written(tmp_path: Path) -> None:
    pytest.importorskip("mteb")
    from mteb.cache import ResultCache

    home = tmp_path / "home"
    _cli(
        "evaluate",
        "--benchmark",
        str(FIXTURE),
        "--home",
        str(home),
        "-q",
        "--encoder",
        "random",
        "--encoder",
        "wide=random",
        "--encode-set",
        "wide.dim=64",
    )
    (score,) = [p for p in (home / "benchmark-score").iterdir() if not p.name.startswith(".")]
    out = tmp_path / "cache"
    _cli("export", "--format", "mteb-results", "--run", str(score), "--out", str(out))
    loaded = ResultCache(out).load_results(require_model_meta=True, include_remote=False)
    assert sorted(m.model_name for m in loaded.model_results) == ["random", "wide"]
    per_query = pd.read_parquet(score / "per_query.parquet")
    per_query = per_query[(per_query["subset"] == "all") & (per_query["metric"] == "map")]
    for model in loaded.model_results:
        for task in model.task_results:
            field = task.task_name.removeprefix("mdcr.").replace("_", " ")
            ours = per_query[
                (per_query["retriever"] == model.model_name)
                & (per_query["field"] == field)
                & (per_query["split"] == "test")
            ]["value"].mean()
            assert abs(task.scores["test"][0]["map_at_1000"] - ours) <= 1e-6
    one = tmp_path / "one"
    _cli(
        "export",
        "--format",
        "mteb-results",
        "--run",
        str(score),
        "--out",
        str(one),
        "--retriever",
        "wide",
    )
    again = ResultCache(one).load_results(require_model_meta=True, include_remote=False)
    assert [m.model_name for m in again.model_results] == ["wide"]
