"""Every command example of the docs is run by tests/integration/test_docs_commands.py or
skipped there with a reason: none escapes, and no reason outlives its command.

No store is built: the placeholders are filled with stand-in paths, and each command must
then read as ``[NAME=value ...] mdcr ARGS`` with nothing of a placeholder left.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.integration.docs_commands import (
    PLACEHOLDERS,
    SKIPPED,
    SKIPPED_PREFIXES,
    DocCommand,
    DocsStore,
    doc_commands,
    fill,
    logical_lines,
    parse,
    readme_encoder,
    skip_reason,
    small_demo_toml,
    split_command,
    strip_comment,
)

COMMANDS = doc_commands()
STEPS = [str(s.get("id", s["stage"])) for s in tomllib.loads(small_demo_toml())["step"]]
STAND_IN = DocsStore(
    home=Path("/store"),
    pipeline=Path("/in/small_demo.toml"),
    steps={step: Path(f"/store/{step}/0123456789abcdef") for step in STEPS},
    release=Path("/in/mdcr-release"),
    beir=Path("/in/beir"),
    beir_pools=Path("/store/beir-import/0123456789abcdef"),
    s2ag=Path("/store/synth/fedcba9876543210"),
    model=Path("/in/my-model"),
    packages=Path("/in/site-packages"),
)


def test_the_docs_have_command_examples() -> None:
    pages = {c.where.split(":")[0] for c in COMMANDS}
    assert {"README.md", "docs/scoring.md", "docs/stages.md", "docs/ecosystem.md"} <= pages
    assert len(COMMANDS) >= 80


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.where)
def test_every_command_is_run_or_skipped_with_a_reason(
    command: DocCommand, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(DocsStore, "prefix", lambda self, step: "0123")
    if skip_reason(command) is not None:
        return
    try:
        invocation = parse(fill(command.text, STAND_IN))
    except ValueError as exc:
        pytest.fail(f"{command.where}: {exc}; or add it to SKIPPED with a reason", pytrace=False)
    assert invocation.args, command.where


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.where)
def test_every_mdcr_command_parses(command: DocCommand, monkeypatch: pytest.MonkeyPatch) -> None:
    """Skipped ones too: each flag and subcommand of an mdcr example exists (argparse)."""
    from mdcr.cli import build_parser

    monkeypatch.setattr(DocsStore, "prefix", lambda self, step: "0123")
    invocation = split_command(fill(command.text, STAND_IN))
    if invocation is None:
        assert skip_reason(command) is not None, command.where
        return
    try:
        build_parser().parse_args(invocation.args)
    except SystemExit:
        pytest.fail(f"{command.where}: mdcr's parser refuses `{command.text}`", pytrace=False)


def test_bash_quoting_is_read_as_bash_reads_it() -> None:
    invocation = split_command("A=1 mdcr x --set $'p=Q: a\\nb' --set \"d=\"")
    assert invocation is not None
    assert invocation.env == {"A": "1"} and invocation.args == [
        "x",
        "--set",
        "p=Q: a\nb",
        "--set",
        "d=",
    ]
    assert split_command("ray status") is None


def test_every_skip_names_a_command_of_the_docs() -> None:
    texts = {c.text for c in COMMANDS}
    assert sorted(set(SKIPPED) - texts) == []
    for prefix in SKIPPED_PREFIXES:
        assert any(t.startswith(prefix) for t in texts), prefix
    assert all(len(why) > 10 for why in [*SKIPPED.values(), *SKIPPED_PREFIXES.values()])


def test_every_placeholder_fills_a_command() -> None:
    run = [c.text for c in COMMANDS if skip_reason(c) is None]
    unused = [p for p, _ in PLACEHOLDERS if not any(re.search(p, t) for t in run)]
    assert unused == []


def test_logical_lines_join_continuations_and_keep_loops_whole() -> None:
    block = (
        "# a comment\n"
        "mdcr ls   # every output\n"
        "mdcr export --run R \\\n"
        "    --out DIR\n"
        "curl -s URL\n"
        "  | python -c 'print(1)  # not a comment'\n"
        "for x in a b; do\n"
        '  echo "$x"\n'
        "done\n"
    )
    assert logical_lines(block) == [
        (1, "mdcr ls"),
        (2, "mdcr export --run R --out DIR"),
        (4, "curl -s URL | python -c 'print(1)  # not a comment'"),
        (6, 'for x in a b; do\necho "$x"\ndone'),
    ]
    assert strip_comment("echo '#x' # y") == "echo '#x'"
    assert strip_comment("echo a#b") == "echo a#b"


def test_the_small_demo_and_the_readme_encoder_are_read() -> None:
    steps = tomllib.loads(small_demo_toml())["step"]
    pools = next(s for s in steps if s["stage"] == "pools")
    assert pools["dataset_sizes"] == [80, 160] and len(steps) == 22
    assert "class MyEncoder" in readme_encoder()
