"""Finding the store: --home, $MDCR_HOME, a pipeline's home, the nearest mdcr.toml or .mdcr,
the user cache; the same store from any folder; `store: PATH` printed before writing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tests.support.toy_stages  # noqa: F401  (registers the toy stages)
from mdcr.cli import main
from mdcr.core import recent
from mdcr.core.errors import ConfigError
from mdcr.core.home import find_home, user_cache_dir
from mdcr.measures import default_numba_cache

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No $MDCR_HOME; the user cache in tmp_path/xdg; a project tmp_path/proj with
    folders one/deep and two, and a folder tmp_path/elsewhere outside it."""
    monkeypatch.delenv("MDCR_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    for sub in ("proj/one/deep", "proj/two", "elsewhere"):
        (tmp_path / sub).mkdir(parents=True)
    return tmp_path


def test_the_nearest_mdcr_toml_names_the_store_relative_to_itself(env: Path) -> None:
    (env / "proj" / "mdcr.toml").write_text('[store]\nhome = "results/store"\n')
    for start in (env / "proj", env / "proj" / "one" / "deep", env / "proj" / "two"):
        home = find_home(start=start)
        assert home.path == env / "proj" / "results" / "store"
        assert home.source == f"from {env / 'proj' / 'mdcr.toml'}"


def test_an_mdcr_toml_without_a_home_keeps_the_store_in_dot_mdcr_beside_it(env: Path) -> None:
    (env / "proj" / "mdcr.toml").write_text("# a project\n")
    assert find_home(start=env / "proj" / "two").path == env / "proj" / ".mdcr"


def test_a_dot_mdcr_folder_is_the_store_and_the_nearest_marker_wins(env: Path) -> None:
    (env / "proj" / "mdcr.toml").write_text('[store]\nhome = "outer"\n')
    (env / "proj" / "one" / ".mdcr").mkdir()
    assert find_home(start=env / "proj" / "one" / "deep").path == env / "proj" / "one" / ".mdcr"
    assert find_home(start=env / "proj" / "two").path == env / "proj" / "outer"
    (env / "proj" / "one" / "mdcr.toml").write_text('[store]\nhome = "inner"\n')  # file first
    assert find_home(start=env / "proj" / "one").path == env / "proj" / "one" / "inner"


def test_without_a_marker_the_user_cache(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = find_home(start=env / "elsewhere")
    assert home.path == env / "xdg" / "mdcr" and "XDG_CACHE_HOME" in home.source
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: ignored (XDG spec)
    monkeypatch.setenv("HOME", str(env / "user"))
    assert find_home(start=env / "elsewhere").path == env / "user" / ".cache" / "mdcr"


@pytest.mark.parametrize("absolute", [True, False])
def test_every_user_cache_follows_one_xdg_rule(
    env: Path, monkeypatch: pytest.MonkeyPatch, absolute: bool
) -> None:
    """Only an absolute $XDG_CACHE_HOME counts (XDG spec); a relative one means ~/.cache,
    for each user-level cache: the user's store, recent-stores.json and numba's cache."""
    monkeypatch.setenv("HOME", str(env / "user"))
    monkeypatch.chdir(env / "elsewhere")
    xdg = str(env / "xdg") if absolute else "rel/cache"
    monkeypatch.setenv("XDG_CACHE_HOME", xdg)
    cache = (env / "xdg") if absolute else (env / "user" / ".cache")
    assert user_cache_dir()[0] == cache
    assert find_home().path == cache / "mdcr"
    assert recent.record_path() == cache / "mdcr" / "recent-stores.json"
    assert default_numba_cache() == str(cache / "mdcr" / "numba")
    # what importing mdcr.measures sets, in a fresh process (numba reads it once)
    child = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    code = "import os, mdcr.measures; print(os.environ['NUMBA_CACHE_DIR'])"
    got = subprocess.run(
        [sys.executable, "-c", code], env=child, capture_output=True, text=True, check=True
    )
    assert got.stdout.strip() == str(cache / "mdcr" / "numba")
    assert not (env / "elsewhere" / "rel").exists()


def test_order_home_then_env_then_pipeline_then_marker(
    env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (env / "proj" / "mdcr.toml").write_text('[store]\nhome = "m"\n')
    start = env / "proj" / "two"
    assert find_home(start=start).path == env / "proj" / "m"
    assert find_home(pipeline=env / "p", start=start).path == env / "p"
    monkeypatch.setenv("MDCR_HOME", str(env / "e"))
    assert find_home(pipeline=env / "p", start=start).path == env / "e"
    assert find_home(env / "h", pipeline=env / "p", start=start).path == env / "h"
    assert find_home(env / "h").source == "--home"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[store\n", "not valid TOML"),
        ('[store]\nhoem = "x"\n', "unknown key 'store.hoem'; valid: home"),
        ("[store]\nhome = 3\n", "store.home must be a non-empty string"),
        ('[stor]\nhome = "x"\n', "unknown table 'stor'; valid: store"),
    ],
)
def test_a_bad_mdcr_toml_is_a_one_line_error(
    env: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    (env / "proj" / "mdcr.toml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        find_home(start=env / "proj" / "two")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(env / "proj" / "two")
        assert main(["toy-source", "--n", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and str(env / "proj" / "mdcr.toml") in err
    assert len(err.splitlines()) == 1


def test_the_repository_keeps_the_demo_store_in_data(env: Path) -> None:
    """`make demo` and the tests' own runs use data/mdcr-home, as before, from any folder."""
    assert find_home(start=REPO / "docs").path == REPO / "data" / "mdcr-home"


def test_a_second_folder_finds_the_first_store(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    proj = env / "proj"
    (proj / "mdcr.toml").write_text('[store]\nhome = "store"\n')
    monkeypatch.chdir(proj / "one" / "deep")
    assert main(["toy-source", "--n", "3"]) == 0
    first = capsys.readouterr()
    folder = Path(first.out.strip())
    assert folder.parent.parent == proj / "store" and (folder / "manifest.json").is_file()
    store_lines = [ln for ln in first.err.splitlines() if ln.startswith("store: ")]
    assert store_lines == [f"store: {proj / 'store'} (from {proj / 'mdcr.toml'})"]

    monkeypatch.chdir(proj / "two")
    assert main(["toy-source", "--n", "3"]) == 0
    second = capsys.readouterr()
    assert second.out.strip() == str(folder)  # the same output, not a second store
    assert "up to date" in second.err and "store: " not in second.err  # nothing written
    assert not any((proj / "one").rglob("data")) and not (proj / "two" / "data").exists()

    monkeypatch.chdir(env / "elsewhere")  # outside the project: the user's store
    assert main(["toy-source", "--n", "3"]) == 0
    assert Path(capsys.readouterr().out.strip()).parent.parent == env / "xdg" / "mdcr"


def test_a_pipeline_prints_the_store_once_and_ends_with_its_last_folder(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (env / "proj" / ".mdcr").mkdir()
    pipe = env / "proj" / "p.toml"
    pipe.write_text(
        '[[step]]\nstage = "toy-source"\nid = "src"\n\n'
        '[[step]]\nstage = "toy-double"\nid = "dbl"\nsource = "@src"\n'
    )
    monkeypatch.chdir(env / "proj" / "two")
    where = f"{env / 'proj' / '.mdcr'} (the .mdcr folder in {env / 'proj'})"
    assert main(["run", str(pipe), "--dry-run"]) == 0  # the plan names its store
    assert capsys.readouterr().out.splitlines()[0] == f"store: {where}"
    assert not any((env / "proj" / ".mdcr").iterdir())
    assert main(["run", str(pipe)]) == 0
    cap = capsys.readouterr()
    assert cap.err.count("store: ") == 1
    assert f"store: {where}" in cap.err
    last = Path(cap.out.strip().splitlines()[-1])
    assert last.parent == env / "proj" / ".mdcr" / "toy-double"
    assert (last / "doubled.parquet").is_file()


def test_evaluate_uses_the_store_holding_the_pools_it_scores(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``mdcr evaluate --pools <store>/pools/<fp>`` run from a folder with no marker and no
    --home works in the store holding those pools (not the user cache), so the pools'
    earlier retrievers stand beside the new one; --home and $MDCR_HOME still win."""
    import mdcr.encoders.stage
    import mdcr.index.dense  # noqa: F401  (registers encode and search)
    from mdcr.core.home import holding_store
    from mdcr.core.inputs import resolve_inputs
    from mdcr.core.store import Store
    from mdcr.scoring.score import SPEC as SCORE
    from mdcr.scoring.score import ScoreConfig
    from tests.integration.benchmark.helpers import make_corpus, make_pools, make_run

    store = env / "proj" / "store"
    corpus = make_corpus(env / "corpus")
    pools = make_pools(store, corpus)
    bm25 = make_run(store, pools, "bm25", k=50)
    cfg = ScoreConfig(pools=str(pools), runs=(str(bm25),))
    Store(store).execute(SCORE, cfg, resolve_inputs(cfg), quiet=True)
    assert holding_store(pools) == store and holding_store(corpus) is None
    monkeypatch.chdir(env / "elsewhere")
    assert main(["evaluate", "--pools", str(pools), "--encoder", "random"]) == 0
    captured = capsys.readouterr()
    assert f"store: {store} (the store holding '{pools}')" in captured.err
    assert f"scored random on {pools}; with 1 earlier score output(s)" in captured.out
    header = next(line for line in captured.out.splitlines() if line.startswith("MAP"))
    assert header.split()[-4:] == ["bm25", "random", "expected", "chance"]
    assert not (env / "xdg" / "mdcr" / "encode").exists()  # nothing went to the user cache
    monkeypatch.setenv("MDCR_HOME", str(env / "mine"))
    assert find_home(holding=pools).path == env / "mine"
    assert find_home(env / "flag", holding=pools).path == env / "flag"
