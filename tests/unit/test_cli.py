"""The command line: help, one-line errors, stage subcommands from configs, pipelines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tests.unit.toy_stages  # noqa: F401  (registers the toy stages)
from mdcr.cli import main
from mdcr.stage import stages

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
    assert commands == ["run", *groups, "evaluate", "export", "download", *catalog]
    assert re.search(r"^    run +run a pipeline file", listed, re.M)


def test_stage_help_shows_defaults(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["toy-source", "--help"])
    out = capsys.readouterr().out
    assert "--n N" in out and "default: 5" in out and "--label" in out


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
