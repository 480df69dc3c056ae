"""The encode stage's progress bar moves per batch and ends at its total; its end line
counts the papers encoded and those copied from earlier outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mdcr.core.inputs import resolve_inputs
from mdcr.core.stage import StageContext
from mdcr.core.store import Store
from mdcr.encoders.progress import ShardProgress, papers_done, report_to
from mdcr.encoders.stage import SPEC, EncodeConfig
from tests.integration.encoders.fixtures import write_corpus, write_pools


class Bar:
    """Stands in for tqdm: records every update."""

    def __init__(self, total: int | None = None, **_: Any) -> None:
        self.total = total
        self.updates: list[int] = []
        self.closed = False

    def update(self, n: int) -> None:
        self.updates.append(n)

    def close(self) -> None:
        self.closed = True


@pytest.fixture()
def bars(monkeypatch: pytest.MonkeyPatch) -> list[Bar]:
    made: list[Bar] = []

    def progress(self: StageContext, iterable: Any = None, **kw: Any) -> Bar:
        made.append(Bar(**kw))
        return made[-1]

    monkeypatch.setattr(StageContext, "progress", progress)
    return made


@pytest.fixture()
def batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The papers of every batch the transformer runs, counted at its forward pass."""
    from mdcr.encoders.models.hf import TransformerRunner

    seen: list[int] = []
    forward = TransformerRunner.hidden

    def counted(self: TransformerRunner, batch: Any, *args: Any) -> Any:
        seen.append(len(batch.rows))
        return forward(self, batch, *args)

    monkeypatch.setattr(TransformerRunner, "hidden", counted)
    return seen


@pytest.fixture()
def data(tmp_path: Path) -> dict[str, Path]:
    corpus = tmp_path / "corpus"
    ids = write_corpus(corpus, 60)
    small = write_pools(tmp_path / "small", {"a/r0": ids[:25]}, {"a/r0": {"p0050": ids[:2]}})
    big = write_pools(tmp_path / "big", {"a/r0": ids[:50]}, {"a/r0": {"p0051": ids[:2]}})
    return {"home": tmp_path / "home", "corpus": corpus, "small": small, "big": big}


def _encode(data: dict[str, Path], target: str, encoder: str, **kw: Any) -> Path:
    cfg = EncodeConfig(
        corpus=str(data["corpus"]), targets=(str(data[target]),), encoder=encoder, **kw
    )
    cfg.validate()
    return Store(data["home"]).execute(SPEC, cfg, resolve_inputs(cfg)).path


def test_the_bar_moves_per_batch_and_a_second_run_reuses_the_first(
    data: dict[str, Path],
    tiny_bert: Path,
    bars: list[Bar],
    batches: list[int],
    capsys: pytest.CaptureFixture[str],
) -> None:
    opts = {"max_length": 64, "batch_tokens": 256, "shard_size": 16}
    out = _encode(data, "small", f"hf:{tiny_bert}", **opts)  # 26 papers: shards of 16 and 10
    (bar,) = bars
    assert len(batches) > 2  # more batches than shards, so a per-shard bar would differ
    assert bar.updates == batches  # one update per batch, by the batch's papers
    assert sum(bar.updates) == bar.total == 26 and bar.closed
    err = capsys.readouterr().err
    assert f"[encode] hf:{tiny_bert}: encoded 26 papers, reused 0 from earlier outputs\n" in err
    feed = json.loads((out / "manifest.json").read_text())["info"]["runtime"]["feed"]
    assert (feed["papers"], feed["pieces"], feed["batches"]) == (26, 2, len(batches))
    assert (feed["threads"], feed["attention"]) == (0, "padded")  # the CPU's defaults
    assert 0 <= feed["wait_s"] <= feed["run_s"]

    batches.clear()
    # 51 papers (p0000-p0049, p0051); p0000-p0024 were encoded above
    _encode(data, "big", f"hf:{tiny_bert}", **opts)
    bar = bars[1]
    assert sum(batches) == 26 and bar.total == 51 and sum(bar.updates) == 51
    # shard 0 (p0000-p0015) is copied whole, shard 1 (p0016-p0031) in part: each shard's
    # copies move the bar at once, then every encoded batch moves it by its papers
    assert bar.updates == [16, 9, *batches]
    err = capsys.readouterr().err
    assert f"[encode] hf:{tiny_bert}: encoded 26 papers, reused 25 from earlier outputs\n" in err


def test_tokenizer_threads_and_cpu_replicas_move_the_bar_per_batch(
    data: dict[str, Path], tiny_bert: Path, bars: list[Bar], batches: list[int]
) -> None:
    from mdcr.encoders.models.hf import TransformerRunner

    made = TransformerRunner.__init__

    def two_replicas(self: TransformerRunner, *args: Any, **kw: Any) -> None:
        made(self, *args, **kw)
        self.chunk_docs = 5
        self.replicate(["cpu", "cpu"])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TransformerRunner, "__init__", two_replicas)
        out = _encode(data, "small", f"hf:{tiny_bert}", max_length=64, workers=2, shard_size=16)
    assert sorted(bars[0].updates) == sorted(batches) and sum(bars[0].updates) == 26
    feed = json.loads((out / "manifest.json").read_text())["info"]["runtime"]["feed"]
    assert (feed["papers"], feed["threads"], feed["devices"]) == (26, 2, 2)
    assert feed["pieces"] == 6  # per shard: 5 + 5 + 5 + 1, then 5 + 5


def test_an_encoder_that_reports_nothing_moves_the_bar_per_shard(
    data: dict[str, Path], bars: list[Bar]
) -> None:
    _encode(data, "big", "random", dim=8, shard_size=16)  # 51 papers
    assert bars[0].updates == [16, 16, 16, 3] and bars[0].total == 51


def test_over_reporting_never_moves_the_bar_past_a_shard() -> None:
    bar = Bar(total=12)
    moved = ShardProgress(bar, [5, 7])
    with report_to(moved):
        papers_done(3)
        papers_done(9)  # more than the shard has left
        moved.next_shard()
        papers_done(2)
        moved.next_shard()
    papers_done(4)  # nobody listens any more
    assert bar.updates == [3, 2, 2, 5]
