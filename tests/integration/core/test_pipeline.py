"""Pipeline files: ordering, up-to-date re-runs, --until/--only, overrides and errors."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import tests.support.toy_stages  # noqa: F401  (registers the toy stages)
from mdcr.core.errors import ConfigError
from mdcr.core.pipeline import load_pipeline, run_pipeline
from mdcr.core.store import Store

PIPE = """
[pipeline]
name = "toy"

[[step]]
stage = "toy-source"
id = "src"
n = 4

[[step]]
stage = "toy-double"
id = "dbl"
source = "@src"
factor = 3
"""


def write(tmp_path: Path, text: str = PIPE) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def test_runs_in_order_then_up_to_date(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    pipe = load_pipeline(write(tmp_path))
    first = run_pipeline(pipe, store, quiet=True)
    values = pq.read_table(first["dbl"].path / "doubled.parquet")["value"].to_pylist()
    assert values == [0, 3, 6, 9]
    second = run_pipeline(pipe, store, quiet=True)
    assert all(a.up_to_date for a in second.values())
    assert {k: a.path for k, a in first.items()} == {k: a.path for k, a in second.items()}


def test_until_and_only(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    pipe = load_pipeline(write(tmp_path))
    res = run_pipeline(pipe, store, until="src", quiet=True)
    assert list(res) == ["src"]
    res = run_pipeline(pipe, store, only="dbl", quiet=True)
    assert res["src"].up_to_date and not res["dbl"].up_to_date


def test_only_a_first_step_needs_nothing_after_it(tmp_path: Path) -> None:
    # Steps after the one asked for are neither built nor required (a fresh store).
    res = run_pipeline(load_pipeline(write(tmp_path)), Store(tmp_path / "home"), only="src")
    assert list(res) == ["src"] and not res["src"].up_to_date


def test_only_with_unbuilt_input_is_a_clear_error(tmp_path: Path) -> None:
    pipe = load_pipeline(write(tmp_path))
    with pytest.raises(ConfigError, match="needs 'src', which is not built yet"):
        run_pipeline(pipe, Store(tmp_path / "home"), only="dbl", quiet=True)


def test_override_changes_fingerprint_downstream(tmp_path: Path) -> None:
    store = Store(tmp_path / "home")
    a = run_pipeline(load_pipeline(write(tmp_path)), store, quiet=True)
    b = run_pipeline(load_pipeline(write(tmp_path), ["src.n=2"]), store, quiet=True)
    assert a["src"].fingerprint != b["src"].fingerprint
    assert a["dbl"].fingerprint != b["dbl"].fingerprint
    assert pq.read_table(b["dbl"].path / "doubled.parquet")["value"].to_pylist() == [0, 3]


def test_dry_run_plans_without_running(tmp_path: Path, capsys) -> None:
    store = Store(tmp_path / "home")
    res = run_pipeline(load_pipeline(write(tmp_path)), store, dry_run=True)
    assert res == {}
    out = capsys.readouterr().out
    assert "src" in out and "dbl" in out and out.count("will run") == 2
    assert not (tmp_path / "home").exists()


def test_a_dry_run_plans_on_an_input_not_there_yet(tmp_path: Path, capsys) -> None:
    """Data not downloaded yet: the dry run plans on (fingerprint unknown); a run stops."""
    later = tmp_path / "later"
    pipe = load_pipeline(write(tmp_path, PIPE.replace('source = "@src"', f'source = "{later}"')))
    assert run_pipeline(pipe, Store(tmp_path / "home"), dry_run=True) == {}
    out = capsys.readouterr().out
    assert f"fingerprint unknown: depends on '{later}' (not there yet)" in out
    assert "src" in out and "will run" in out
    with pytest.raises(ConfigError, match=r"dbl\.source: path '.*later' does not exist"):
        run_pipeline(pipe, Store(tmp_path / "home"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (PIPE.replace('source = "@src"', 'source = "@nope"'), "'@nope' names no earlier step"),
        (PIPE.replace("factor = 3", "factr = 3"), "unknown key 'factr'; valid keys: factor"),
        (PIPE.replace('stage = "toy-double"', 'stage = "dubble"'), "unknown stage 'dubble'"),
        (PIPE.replace('id = "dbl"', 'id = "src"'), "step id 'src' is used twice"),
        (PIPE + "\n[extra]\n", "unknown table 'extra'"),
        (PIPE.replace("n = 4", 'n = "${MDCR_TEST_UNSET_VAR}"'), "MDCR_TEST_UNSET_VAR is not set"),
    ],
)
def test_pipeline_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        pipe = load_pipeline(write(tmp_path, text))
        run_pipeline(pipe, Store(tmp_path / "home"), dry_run=True)


def test_a_folder_for_a_pipeline_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a folder; give a pipeline file such as"):
        load_pipeline(tmp_path)


def test_bad_override_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"expected STEP\.KEY=VALUE"):
        load_pipeline(write(tmp_path), ["n=3"])
    with pytest.raises(ConfigError, match="--set names no step 'zzz'"):
        load_pipeline(write(tmp_path), ["zzz.n=3"])
    with pytest.raises(ConfigError, match=r"src\.n: expected an integer"):
        load_pipeline(write(tmp_path), ["src.n=many"])


@pytest.mark.parametrize("name", ["demo", "paper", "rehearsal"])
def test_shipped_pipelines_load(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util
    import tomllib

    import mdcr.encoders.stage
    import mdcr.index.bm25.search
    import mdcr.index.bm25.tune
    import mdcr.index.dense  # noqa: F401  (registers every stage the files name)

    repo = Path(__file__).resolve().parents[3]
    monkeypatch.setenv("S2ORC_DIR", str(tmp_path))
    sets: list[str] = []
    if name == "rehearsal":  # and at another scale, as scripts/bench_paper.py sets it
        spec = importlib.util.spec_from_file_location(
            "bench_paper", repo / "scripts" / "bench_paper.py"
        )
        assert spec is not None and spec.loader is not None
        bench = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bench)
        sets = bench.overrides(0.01)
        assert "pools.dataset_sizes=2000,5000,10000,20000" in sets
    path = repo / "pipelines" / f"{name}.toml"
    pipe = load_pipeline(path, sets)
    # Every [[step]] of the file, in its order, under its id (the stage name when unnamed).
    declared = [s.get("id", s["stage"]) for s in tomllib.loads(path.read_text())["step"]]
    assert [step.id for step in pipe.steps] == declared
    assert len(declared) == {"demo": 22, "paper": 30, "rehearsal": 14}[name]
