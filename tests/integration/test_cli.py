"""The command line: help, one-line errors, stage subcommands from configs, pipelines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tests.support.toy_stages  # noqa: F401  (registers the toy stages)
from mdcr.cli import main
from mdcr.core.stage import stages

REPO = Path(__file__).resolve().parents[2]


def test_help_lists_every_stage(capsys) -> None:
    import re

    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    listed = out.split("\n  COMMAND\n", 1)[1].split("\n\n", 1)[0]
    commands = re.findall(r"^    (\S+)(?:  |$)", listed, re.M)
    groups = list(dict.fromkeys(spec.words[0] for spec in stages().values()))
    catalog = ["ls", "show", "gc", "verify"]
    assert commands == ["run", *groups, "evaluate", "export", "explore", "download", *catalog]
    assert re.search(r"^    run +run a pipeline file", listed, re.M)


def test_stage_help_shows_defaults(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["toy-source", "--help"])
    out = capsys.readouterr().out
    assert "--n N" in out and "default: 5" in out and "--label" in out


@pytest.mark.parametrize("name", sorted(n for n in stages() if not n.startswith("toy")))
def test_every_stage_help_prints_its_keys(name: str, capsys) -> None:
    """A help text with '%' (a "95% interval") once broke argparse's help."""
    spec = stages()[name]
    with pytest.raises(SystemExit) as done:
        main([*spec.words, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "--config FILE" in out and "default:" in out
    if name in ("report", "benchmark-score"):
        assert "resamples of each 95% interval" in " ".join(out.split())


def test_stage_runs_and_reruns_up_to_date(tmp_path: Path, capsys) -> None:
    assert main(["toy-source", "--n", "3", "--home", str(tmp_path)]) == 0
    first = capsys.readouterr()
    path = Path(first.out.strip())
    assert (path / "manifest.json").is_file()
    assert main(["toy-source", "--n", "3", "--home", str(tmp_path)]) == 0
    second = capsys.readouterr()
    assert "up to date" in second.err and second.out.strip() == str(path)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["toy-source", "--n", "many"],
            "mdcr: error: toy-source.n: expected an integer, got 'many'",
        ),
        (["toy-double"], "mdcr: error: toy-double: missing required key 'source'"),
        (["toy-double", "--source", "/no/such/dir"], "path '/no/such/dir' does not exist"),
        (["run", "/no/such.toml"], "pipeline file '/no/such.toml' does not exist"),
    ],
)
def test_errors_are_one_line(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    assert main([*argv, "--home", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1


def test_config_file_then_command_line(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('n = 4\nlabel = "y"\n')
    assert main(["toy-source", "--config", str(cfg), "--n", "2", "--home", str(tmp_path)]) == 0
    path = Path(capsys.readouterr().out.strip())
    import json

    assert json.loads((path / "manifest.json").read_text())["params"] == {"n": 2, "label": "y"}
    cfg.write_text("m = 1\n")
    assert main(["toy-source", "--config", str(cfg), "--home", str(tmp_path)]) == 2
    assert "unknown key 'm'; valid keys: label, n" in capsys.readouterr().err


def test_console_script_help_runs_in_a_fresh_process() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mdcr.cli", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    ).stdout
    assert "prefilter" in out and "synth" in out


def test_help_reads_alike_for_every_command(capsys) -> None:
    """Every command's one-line summary starts in lower case (or with an acronym such as
    BM25), and no option shows an internal placeholder (``--config _CONFIG``) in its usage."""
    import argparse

    from mdcr.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    summaries = {c.dest: c.help for c in sub._choices_actions}
    first_words = {name: (h or "?").split()[0] for name, h in summaries.items()}
    odd = {n: w for n, w in first_words.items() if not (w.islower() or w.isupper())}
    assert len(first_words) >= 20 and not odd, odd
    with pytest.raises(SystemExit):
        main(["encode", "--help"])
    usage = capsys.readouterr().out
    assert "--config FILE" in usage and "_CONFIG" not in usage


@pytest.mark.parametrize("under", ["x", "x/y", ""])
@pytest.mark.parametrize("command", [["toy-source"], ["ls"], ["download", "mdcr"]])
def test_a_store_at_or_under_a_file_is_one_line(
    tmp_path: Path, capsys, under: str, command: list[str]
) -> None:
    """``--home /etc/passwd/x``: a one-line error naming the path and the fix, never a
    traceback from the lock's mkdir (nor "no outputs" from ls)."""
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    home = afile / under if under else afile
    assert main(["--home", str(home), *command]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"store '{home}' (--home)" in err and "give --home a folder" in err
    assert (f"lies under '{afile}', a file" if under else "is a file") in err
    assert "no outputs" not in captured.out


def test_mdcr_home_under_a_file_names_the_variable(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("MDCR_HOME", str(tmp_path / "afile" / "store"))
    assert main(["toy-source"]) == 2
    err = capsys.readouterr().err.strip()
    assert "($MDCR_HOME) lies under" in err and "set $MDCR_HOME to a folder" in err


@pytest.mark.parametrize("command", [["ls", "encoder"], ["gc", "encoder"], ["gc", "encode", "x"]])
def test_an_unknown_stage_in_ls_and_gc_lists_the_valid_ones(
    tmp_path: Path, capsys, command: list[str]
) -> None:
    assert main(["toy-source", "--home", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main([*command, "--home", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    bad = command[-1]
    assert len(err.splitlines()) == 1 and f"unknown stage '{bad}'" in err
    assert "valid stages: " in err and "encode, " in err and "lucene-index" in err
    assert "toy-source" in err  # the stages this process registered, and the store's folders
    if bad == "encoder":
        assert "did you mean 'encode'?" in err
    assert "no encoder outputs" not in captured.out
    assert main(["ls", "toy-source", "--home", str(tmp_path)]) == 0
    assert "toy-source" in capsys.readouterr().out


def test_a_bad_step_reference_stops_the_run_before_any_step(tmp_path: Path, capsys) -> None:
    """A later step's ``@step`` that names no earlier step is found before the first step
    runs, as the dry run finds it."""
    pipe = tmp_path / "p.toml"
    pipe.write_text(
        '[[step]]\nstage = "toy-source"\nid = "src"\n\n'
        '[[step]]\nstage = "toy-double"\nid = "dbl"\nsource = "@scr"\n'
    )
    home = tmp_path / "home"
    for dry in ([], ["--dry-run"]):
        assert main(["run", str(pipe), "--home", str(home), *dry]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1
        assert "p.toml:dbl.source: '@scr' names no earlier step; earlier steps: src" in err
    assert not (home / "toy-source").exists()
