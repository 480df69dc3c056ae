"""``mdcr evaluate --pools``: encode, search and score one encoder on existing pools, and
report it beside the retrievers already scored there, reusing every cached artifact."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from mdcr.cli import main
from mdcr.core.inputs import resolve_inputs
from mdcr.core.manifests import read_manifest
from mdcr.core.store import Store
from mdcr.scoring.score import SPEC as SCORE
from mdcr.scoring.score import ScoreConfig
from tests.unit.benchmark.helpers import make_corpus, make_pools, make_run


def _evaluate(home: Path, pools: Path) -> tuple[int, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(
            ["evaluate", "--pools", str(pools), "--encoder", "random", "--home", str(home), "-q"]
        )
    return rc, buf.getvalue()


@pytest.mark.slow
def test_pools_mode_adds_rows_beside_existing_retrievers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    corpus = make_corpus(tmp_path / "corpus")
    pools = make_pools(home, corpus, field_pool_size=400)
    earlier = make_run(home, pools, "bm25", k=100)
    old_random = make_run(home, pools, "random", k=100)  # scored again below
    cfg = ScoreConfig(pools=str(pools), runs=(str(earlier), str(old_random)))
    old_score = Store(home).execute(SCORE, cfg, resolve_inputs(cfg), quiet=True).path

    rc, out = _evaluate(home, pools)
    assert rc == 0
    report = Path(out.strip().splitlines()[-1].split("report: ")[1])
    info = read_manifest(report.parent)["info"]  # type: ignore[index]
    assert info["retrievers"][:1] == ["bm25"] and "random" in info["retrievers"]
    text = report.read_text()
    assert "`bm25`" in text and "`random`" in text
    # bm25 stays from the earlier output; its random is the one scored now
    assert f"scores the same retriever name again: `random` from `{old_score}`." in text
    assert old_random.name not in text
    # A second call builds nothing: encode, search, score and report are all cached.
    n_before = sum(1 for _ in home.rglob("manifest.json"))
    rc, out2 = _evaluate(home, pools)
    assert rc == 0 and out2 == out
    assert sum(1 for _ in home.rglob("manifest.json")) == n_before


def test_inputs_are_found_again_in_the_store_holding_an_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A manifest records an input's path as given (here relative to the folder the run
    started in); it is found again from any folder, in a copy of the store, and an input
    that changed since is an error."""
    import json
    import shutil

    from mdcr.contracts.outputs import input_paths
    from mdcr.core.errors import ManifestMismatchError

    corpus = make_corpus(tmp_path / "corpus")
    monkeypatch.chdir(tmp_path)
    pools = make_pools(Path("home"), corpus)
    run = make_run(Path("home"), pools, "bm25")  # pools given as home/pools/<fp>
    assert input_paths(run, "pools") == [(tmp_path / pools).resolve()]
    monkeypatch.chdir(tmp_path / "corpus")  # elsewhere: the relative path leads nowhere
    assert input_paths(tmp_path / run, "pools") == [(tmp_path / pools).resolve()]
    shutil.copytree(tmp_path / "home", tmp_path / "copy")
    copied = tmp_path / "copy" / run.relative_to("home")
    assert input_paths(copied, "pools") == [(tmp_path / "copy" / pools.relative_to("home"))]
    # the copy's pools gone, and a different output where the recorded path points
    shutil.rmtree(tmp_path / "copy" / pools.relative_to("home"))
    other = tmp_path / "corpus" / pools
    shutil.copytree(tmp_path / pools, other)
    manifest = json.loads((other / "manifest.json").read_text())
    (other / "manifest.json").write_text(json.dumps({**manifest, "fingerprint": "0" * 16}))
    with pytest.raises(ManifestMismatchError, match="has changed since; re-run that step"):
        input_paths(copied, "pools")


def test_one_name_for_two_retrievers_on_pools_is_an_error(tmp_path: Path, capsys) -> None:
    """Scoring another encoder under a name already scored on the pools is a one-line
    error naming both setups; the same encoder changed (other options, an edited ``py:``
    module) replaces the older result of its name, said in one line; the same retriever
    scored again is reported once, newest first; the report lists each retriever's setup."""
    home = tmp_path / "home"
    pools = make_pools(home, make_corpus(tmp_path / "corpus"), field_pool_size=400)
    base = ["evaluate", "--pools", str(pools), "--home", str(home), "-q"]
    assert main([*base, "--encoder", "random", "--encode-set", "dim=8"]) == 0
    capsys.readouterr()
    other = "random=py:tests.integration.fake_encoders:Specter"
    assert main([*base, "--encoder", other]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "'random' already names another retriever" in err and "fake_encoders" in err
    assert "--encoder NAME=SPEC" in err
    changed = ["--encoder", "random", "--encode-set", "dim=8", "--encode-set", "seed=3"]
    assert main([*base, *changed]) == 0
    out = capsys.readouterr()
    said = [line for line in out.err.splitlines() if "changed since it was scored" in line]
    assert len(said) == 1 and "'random'" in said[0] and "seed=3" in said[0]
    report = Path(out.out.strip().splitlines()[-1].split("report: ")[1])
    assert "| `random` | `random` | dim=8, seed=3 |" in report.read_text()
    # the same random again beside a renamed variant: one random, newest; two setups listed
    argv = [*base, "--encoder", "random", "--encoder", "r3=random", "--encode-set", "dim=8"]
    assert main([*argv, "--encode-set", "r3.seed=3"]) == 0
    report = Path(capsys.readouterr().out.strip().splitlines()[-1].split("report: ")[1])
    info = read_manifest(report.parent)["info"]  # type: ignore[index]
    assert sorted(info["retrievers"]) == ["r3", "random"]
    text = report.read_text()
    assert "| `random` | `random` | dim=8 |" in text
    assert "| `r3` | `random` | dim=8, seed=3 |" in text


EDITED_ENCODER = """
import numpy as np

class Enc:
    name, dim, metric = "edited", 4, "ip"

    def encode(self, texts):
        rng = np.random.default_rng({seed})
        return rng.standard_normal((len(texts), 4)).astype(np.float32)
"""


def test_an_edited_py_encoder_rescored_under_its_name_replaces_its_older_result(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The edit-and-rescore loop: the same ``py:`` spec, edited, is scored again under the
    same name; one line says its new scores replace the older ones, and the report has
    the new numbers."""
    (tmp_path / "mods").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    home = tmp_path / "home"
    pools = make_pools(home, make_corpus(tmp_path / "corpus"), field_pool_size=400)
    argv = ["evaluate", "--pools", str(pools), "--home", str(home), "-q"]
    argv += ["--encoder", "mine=py:edited_enc:Enc"]
    reports = []
    for seed in (1, 2):
        (tmp_path / "mods" / "edited_enc.py").write_text(EDITED_ENCODER.format(seed=seed))
        assert main(argv) == 0
        out = capsys.readouterr()
        said = [line for line in out.err.splitlines() if "changed since it was scored" in line]
        assert len(said) == (seed - 1)
        reports.append(Path(out.out.strip().splitlines()[-1].split("report: ")[1]).read_text())
    assert reports[0] != reports[1] and reports[1].count("| `mine` |") == 1
    assert main(argv) == 0  # nothing changed since: nothing to say
    assert "changed since it was scored" not in capsys.readouterr().err


class EnvironmentModel:
    """A model object whose output depends on an environment variable, not on its state."""

    def encode(self, sentences: list[str]) -> object:
        import os

        import numpy as np

        scale = float(os.environ.get("MDCR_TEST_MODEL_SCALE", "1"))
        rows = [[len(s), scale * (sum(map(ord, s)) % 97), 1.0] for s in sentences]
        return np.array(rows, dtype=np.float32)


def test_a_model_object_whose_behaviour_changed_is_scored_again_under_its_name(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mdcr.evaluate(model): an environment variable the model reads changes its probe
    vectors, so its fingerprint; the new scores replace the older ones of its name."""
    import mdcr

    home = tmp_path / "home"
    pools = make_pools(home, make_corpus(tmp_path / "corpus"), field_pool_size=400)
    means = []
    for scale in ("1", "-3"):
        monkeypatch.setenv("MDCR_TEST_MODEL_SCALE", scale)
        result = mdcr.evaluate(EnvironmentModel(), pools=pools, name="envm", progress=False)
        means.append(result.summary.query("retriever == 'envm'")["mean"].tolist())
    assert means[0] != means[1]
    said = [ln for ln in capsys.readouterr().err.splitlines() if "changed since" in ln]
    assert len(said) == 1 and "'envm'" in said[0]
