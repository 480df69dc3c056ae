"""Stage ``encode``: union of targets once, float16 shards, resume after a kill, reuse."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from mdcr.core.errors import ConfigError, EncoderError, InputDataError
from mdcr.core.inputs import resolve_inputs
from mdcr.core.store import Store
from mdcr.encoders.base import PaperText
from mdcr.encoders.stage import SPEC, EncodeConfig
from mdcr.encoders.store import EmbeddingStore
from mdcr.engine.faults import FaultInjected
from tests.integration.encoders.fixtures import write_corpus, write_pools

REPO = Path(__file__).resolve().parents[3]

USER_MODULE = """
import os, time
from mdcr.encoders.models.aspire import AspireEncoder
from mdcr.encoders.models.hf import HFEncoder

class SlowTiny:
    '''The tiny BERT, slowed down so that a test can kill the stage between shards.'''
    def __init__(self):
        self.inner = HFEncoder(os.environ["TINY_BERT"], name="tiny", max_length=64,
                               device="cpu", batch_tokens=256)
        self.name, self.dim, self.metric = "tiny", self.inner.dim, self.inner.metric
        self.identity = self.inner.identity

    def encode(self, texts):
        if len(texts) > 1:  # a shard's papers; a probe paper comes alone
            time.sleep(float(os.environ.get("SLOW_S", "0")))
        return self.inner.encode(texts)

class SlowTinyOpts:
    '''SlowTiny that takes the stage's options (batch_tokens and device are settings).'''
    def __init__(self, options):
        self.inner = HFEncoder(os.environ["TINY_BERT"], name="tiny", max_length=64,
                               device=options.device, batch_tokens=options.batch_tokens)
        self.name, self.dim, self.metric = "tiny", self.inner.dim, self.inner.metric

    def encode(self, texts):
        if len(texts) > 1:  # a shard's papers; a probe paper comes alone
            time.sleep(float(os.environ.get("SLOW_S", "0")))
        return self.inner.encode(texts)

def tiny_aspire():
    return AspireEncoder(os.environ["TINY_BERT"], name="tiny-aspire", max_length=64, device="cpu")
"""


@pytest.fixture()
def setup(tmp_path: Path, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "enc_test_user.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.setenv("TINY_BERT", str(tiny_bert))
    corpus = tmp_path / "corpus"
    write_corpus(corpus, 60)
    ids = [f"p{i:04d}" for i in range(60)]
    # Two overlapping pools; queries p50, p51 (and p21, which is also in the pools).
    pools = write_pools(
        tmp_path / "pools",
        {"a/r0": ids[:30], "b/r0": ids[20:50]},
        {"a/r0": {"p0050": ids[:3], "p0021": ids[5:7]}, "b/r0": {"p0051": ids[40:42]}},
    )
    small = write_pools(tmp_path / "small", {"a/r0": ids[:25]}, {"a/r0": {"p0050": ids[:2]}})
    return {"home": tmp_path / "home", "corpus": corpus, "pools": pools, "small": small}


def _run(home: Path, **kw: object) -> Path:
    cfg = EncodeConfig(**kw)  # type: ignore[arg-type]
    cfg.validate()
    return Store(home).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True).path


def test_union_of_targets_encoded_once_in_float16_shards(setup: dict[str, Path]) -> None:
    out = _run(
        setup["home"],
        corpus=str(setup["corpus"]),
        encoder="random",
        targets=(str(setup["pools"]), str(setup["small"])),
        shard_size=16,
        dim=8,
    )
    expected = sorted({f"p{i:04d}" for i in range(50)} | {"p0050", "p0051"})
    shards = sorted(out.glob("ids_*.parquet"))
    ids = [i for s in shards for i in pq.read_table(s)["paper_id"].to_pylist()]
    assert ids == expected  # 52 papers, each once, sorted
    assert len(shards) == 4  # 16 + 16 + 16 + 4
    emb = np.load(out / "emb_00000.npy")
    assert emb.dtype == np.float16 and emb.shape == (16, 8)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["info"]["counts"]["papers"] == 52
    assert manifest["info"]["counts"]["encoded"] == 52
    assert manifest["info"]["retriever"] == "random"
    assert manifest["outputs"]["ids_00003.parquet"]["rows"] == 4
    assert not list(out.glob("_*"))  # no work files left
    store = EmbeddingStore(out)
    rows = store.rows(["p0051", "p0003", "zzz"])
    assert rows[2] == -1
    want = np.load(out / "emb_00003.npy")[3]  # p0051 is the last paper
    np.testing.assert_array_equal(store.vectors(rows[:1])[0], want)


@pytest.mark.slow
def test_kill_and_resume_gives_identical_output(setup: dict[str, Path], tmp_path: Path) -> None:
    kw = dict(
        corpus=str(setup["corpus"]),
        encoder="py:enc_test_user:SlowTiny",
        targets=(str(setup["pools"]),),
        shard_size=10,
    )
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from mdcr.encoders.stage import SPEC, EncodeConfig
        from mdcr.core.inputs import resolve_inputs
        from mdcr.core.store import Store
        cfg = EncodeConfig(**{kw!r})
        Store(Path({str(setup["home"])!r})).execute(SPEC, cfg, resolve_inputs(cfg), quiet=True)
        """
    )
    env = dict(
        os.environ, SLOW_S="1.0", PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path / "mods")])
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, env=env)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            done = list((setup["home"] / "encode").glob(".*.partial/ids_00001.parquet"))
            if done or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert done, "the stage never finished its second shard"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    partial = done[0].parent
    assert not (partial / "manifest.json").exists()
    finished = sorted(p.name for p in partial.glob("ids_*.parquet"))
    assert 2 <= len(finished) < 6

    resumed = _run(setup["home"], **kw)
    fresh = _run(tmp_path / "home2", **kw)
    info = json.loads((resumed / "manifest.json").read_text())["info"]["counts"]
    assert info["resumed"] == 10 * len(finished) and info["papers"] == 52
    files = sorted(p.name for p in fresh.iterdir() if p.name != "manifest.json")
    assert files == sorted(p.name for p in resumed.iterdir() if p.name != "manifest.json")
    for name in files:
        assert (fresh / name).read_bytes() == (resumed / name).read_bytes(), name


@pytest.mark.slow
def test_a_killed_encode_resumes_under_other_settings(
    setup: dict[str, Path], tmp_path: Path
) -> None:
    """Kill the CLI after a shard, rerun with another --batch-tokens and --device: the
    finished shards are kept (settings are not hashed) and the vectors agree with an
    uninterrupted run to within float16 storage precision."""
    common = [
        "encode",
        "--corpus",
        str(setup["corpus"]),
        "--encoder",
        "py:enc_test_user:SlowTinyOpts",
        "--targets",
        str(setup["pools"]),
        "--shard-size",
        "10",
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path / "mods")]))
    cli = [sys.executable, "-m", "mdcr.cli"]
    home = ["--home", str(setup["home"]), "-q"]
    proc = subprocess.Popen(
        [*cli, *common, *home, "--batch-tokens", "64"], cwd=REPO, env=dict(env, SLOW_S="1.0")
    )
    try:
        deadline = time.time() + 120
        done: list[Path] = []
        while time.time() < deadline and not done and proc.poll() is None:
            done = list((setup["home"] / "encode").glob(".*.partial/ids_00000.parquet"))
            time.sleep(0.05)
        assert done, "the stage never finished its first shard"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    partial = done[0].parent
    n_finished = len(list(partial.glob("ids_*.parquet")))
    assert 1 <= n_finished < 6
    # The rerun and the uninterrupted run to compare with are the same CLI, run in this
    # process (the module and TINY_BERT are on its path and in its environment, by the
    # fixture): only the run that is killed needs a process of its own.
    from mdcr.cli import main

    again = io.StringIO()
    with contextlib.redirect_stdout(again):
        assert main([*common, *home, "--batch-tokens", "512", "--device", "cpu"]) == 0
    out = Path(again.getvalue().strip().splitlines()[-1])
    assert out.name == partial.name[1:].removesuffix(".partial")  # the same fingerprint
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["info"]["counts"]["resumed"] == 10 * n_finished
    assert manifest["settings"]["batch_tokens"] == 512 and manifest["settings"]["device"] == "cpu"
    fresh_out = io.StringIO()
    with contextlib.redirect_stdout(fresh_out):
        assert main([*common, "--home", str(tmp_path / "fresh"), "-q"]) == 0
    a = EmbeddingStore(out)
    b = EmbeddingStore(Path(fresh_out.getvalue().strip().splitlines()[-1]))
    assert a.ids.to_pylist() == b.ids.to_pylist()
    va = a.vectors(np.arange(len(a))).astype(np.float32)
    vb = b.vectors(np.arange(len(b))).astype(np.float32)
    np.testing.assert_allclose(va, vb, rtol=2**-10, atol=2**-14)


def test_reuse_copies_earlier_vectors(
    setup: dict[str, Path], tiny_bert: Path, tmp_path: Path
) -> None:
    """Papers an earlier output of the same encoder holds, with the same text, are copied."""
    spec = f"hf:{tiny_bert}"
    common = {"encoder": spec, "max_length": 64, "shard_size": 8}
    first = _run(
        setup["home"], corpus=str(setup["corpus"]), targets=(str(setup["small"]),), **common
    )
    second = _run(
        setup["home"], corpus=str(setup["corpus"]), targets=(str(setup["pools"]),), **common
    )
    counts = json.loads((second / "manifest.json").read_text())["info"]["counts"]
    # small = p0000..p0024 + p0050 (26 papers), all inside the 52 of pools.
    assert counts == {"papers": 52, "vectors": 52, "encoded": 26, "reused": 26, "resumed": 0}
    a, b = EmbeddingStore(first), EmbeddingStore(second)
    shared = a.ids.to_pylist()
    np.testing.assert_array_equal(b.vectors(b.rows(shared)), a.vectors(a.rows(shared)))
    # New papers are encoded as a fresh run would encode them.
    fresh_home = setup["home"] / "h3"
    fresh = EmbeddingStore(
        _run(fresh_home, corpus=str(setup["corpus"]), targets=(str(setup["pools"]),), **common)
    )
    assert fresh.identity == b.identity
    np.testing.assert_allclose(
        b.vectors(b.rows(fresh.ids)).astype(np.float32),
        fresh.vectors(np.arange(len(fresh))).astype(np.float32),
        atol=2e-3,
    )
    # Another max_length is another encoder: nothing is copied.
    other = _run(
        setup["home"],
        corpus=str(setup["corpus"]),
        targets=(str(setup["pools"]),),
        **{**common, "max_length": 32},
    )
    assert json.loads((other / "manifest.json").read_text())["info"]["counts"]["reused"] == 0
    # A paper whose text differs in another corpus is encoded again, not copied.
    changed = tmp_path / "changed"
    write_corpus(changed, 60)
    table = pq.read_table(changed / "papers.parquet").to_pandas()
    table.loc[table["paper_id"] == "p0003", "abstract"] = "A different abstract altogether."
    table.to_parquet(changed / "papers.parquet", index=False)
    again = _run(setup["home"], corpus=str(changed), targets=(str(setup["small"]),), **common)
    counts = json.loads((again / "manifest.json").read_text())["info"]["counts"]
    assert counts["encoded"] == 1 and counts["reused"] == 25
    c = EmbeddingStore(again)
    assert not np.array_equal(c.vectors(c.rows(["p0003"])), a.vectors(a.rows(["p0003"])))
    # reuse off: everything is encoded.
    off = _run(
        fresh_home,
        corpus=str(setup["corpus"]),
        targets=(str(setup["small"]),),
        reuse=False,
        **common,
    )
    assert json.loads((off / "manifest.json").read_text())["info"]["counts"]["reused"] == 0


def test_multi_vector_store_round_trip(setup: dict[str, Path], tiny_bert: Path) -> None:
    out = _run(
        setup["home"],
        corpus=str(setup["corpus"]),
        encoder="py:enc_test_user:tiny_aspire",
        targets=(str(setup["small"]),),
        shard_size=7,
    )
    store = EmbeddingStore(out)
    assert store.multi_vector and store.metric == "l2" and len(store) == 26
    assert (out / "offsets_00000.npy").is_file()
    table = pq.read_table(setup["corpus"] / "papers.parquet").to_pylist()
    by_id = {r["paper_id"]: r for r in table}
    pick = ["p0050", "p0003", "p0017"]
    vecs, offsets = store.doc_vectors(store.rows(pick))
    from mdcr.encoders.models.aspire import AspireEncoder

    enc = AspireEncoder(str(tiny_bert), name="x", max_length=64, device="cpu")
    ref, ref_off = enc.encode([PaperText(p, by_id[p]["title"], by_id[p]["abstract"]) for p in pick])
    np.testing.assert_array_equal(offsets, ref_off)
    np.testing.assert_allclose(vecs.astype(np.float32), ref, atol=2e-3)


def test_bad_targets_are_one_line_errors(setup: dict[str, Path], tmp_path: Path) -> None:
    stray = write_pools(tmp_path / "stray", {"x": ["p0001", "nope"]}, {"x": {"p0002": ["p0001"]}})
    with pytest.raises(InputDataError, match=r"1 target papers are not in the corpus .*'nope'"):
        _run(setup["home"], corpus=str(setup["corpus"]), encoder="random", targets=(str(stray),))
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "x.txt").write_text("x")
    with pytest.raises(InputDataError, match="names no papers; expected one of"):
        _run(setup["home"], corpus=str(setup["corpus"]), encoder="random", targets=(str(empty),))
    with pytest.raises(ConfigError, match="unknown encoder 'specter3'"):
        EncodeConfig(corpus="x", encoder="specter3").validate()


FAILING_MODULE = """
import numpy as np

class Broken:
    '''Fails in encode, before any shard is written.'''
    name, dim, metric = "broken", 4, "ip"

    def __init__(self, options=None):
        self.seed = options.seed if options is not None else 0

    def encode(self, texts):
        raise RuntimeError("the model is broken")

class Unbuildable:
    '''Fails when it is built.'''
    def __init__(self):
        raise ValueError("no weights here")
"""


def test_a_failed_encode_leaves_a_work_folder_only_with_shards_to_resume(
    setup: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:  # type: ignore[no-untyped-def]
    """Encoders failing before any shard (in encode, or when built, both found while the
    fingerprint is computed) leave no work folder,
    however many of them fail; one that fails after finished shards keeps them, and the
    next run resumes from them."""
    from mdcr.cli import main

    (tmp_path / "mods" / "enc_test_failing.py").write_text(FAILING_MODULE)
    home = setup["home"]
    cli = ["encode", "--corpus", str(setup["corpus"]), "--targets", str(setup["pools"])]
    cli += ["--home", str(home), "-q", "--shard-size", "10"]
    for seed in range(1, 6):  # five encoders, each its own fingerprint
        assert main([*cli, "--encoder", "py:enc_test_failing:Broken", "--seed", str(seed)]) == 2
        assert "raised RuntimeError: the model is broken" in capsys.readouterr().err
    for _ in range(2):
        assert main([*cli, "--encoder", "py:enc_test_failing:Unbuildable"]) == 2
        assert "building it failed (ValueError: no weights here)" in capsys.readouterr().err
    with pytest.raises(EncoderError, match="the model is broken"):  # through the API too
        _run(home, corpus=str(setup["corpus"]), encoder="py:enc_test_failing:Broken")
    # The probe papers (at planning) find the broken encoder: no .partial, no .lock
    assert not (home / "encode").exists() or not list((home / "encode").iterdir())

    # Failing after two finished shards (the fault hook), the work folder stays...
    kw = dict(corpus=str(setup["corpus"]), encoder="random", targets=(str(setup["pools"]),), dim=8)
    monkeypatch.setenv("MDCR_FAULT", "encode-shard-2=raise")
    for _ in range(2):  # ...through a second failure too, which resumes and fails again
        with pytest.raises(FaultInjected):
            _run(home, shard_size=10, **kw)
    (work,) = (home / "encode").iterdir()
    assert work.name.endswith(".partial")
    assert sorted(p.name for p in work.glob("ids_*.parquet")) == [
        "ids_00000.parquet",
        "ids_00001.parquet",
    ]
    monkeypatch.delenv("MDCR_FAULT")
    out = _run(home, shard_size=10, **kw)
    assert out.name == work.name[1:].removesuffix(".partial")
    counts = json.loads((out / "manifest.json").read_text())["info"]["counts"]
    assert counts["resumed"] == 20 and counts["encoded"] == 32 and counts["papers"] == 52
    assert sorted(p.name for p in (home / "encode").iterdir()) == [out.name]
