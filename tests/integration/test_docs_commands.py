"""The docs' command examples run: every fenced ```bash command of README.md and docs/*.md.

Each command runs in this process (as ``mdcr``'s entry point runs it) from a folder of its
own, against one store shared by the module: the demo pipeline scaled down, and the inputs
the docs name beside it (tests/integration/docs_commands.py). Placeholders (``<fp>``,
``SCORE``, ``/data/mdcr`` ...) are filled from that store. An example that stops working
fails here with its file and line; a command that cannot run in a test is skipped with the
reason :data:`SKIPPED` gives, never silently (tests/unit/test_docs_commands_listed.py checks
that every command is run or listed there).
"""

from __future__ import annotations

import itertools
import shlex
from pathlib import Path

import pytest

from tests.integration.docs_commands import (
    RUN_LAST,
    DocCommand,
    DocsStore,
    build_store,
    doc_commands,
    fill,
    parse,
    run_command,
    skip_reason,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

COMMANDS = doc_commands()
RUN = sorted((c for c in COMMANDS if skip_reason(c) is None), key=lambda c: c.text in RUN_LAST)
SKIP = [c for c in COMMANDS if skip_reason(c) is not None]
# Flags whose value is a file or folder the command writes outside the store.
OUT_FLAGS = ("--out", "--static", "--scores-out")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> DocsStore:
    return build_store(tmp_path_factory.mktemp("docs"))


@pytest.mark.parametrize("command", RUN, ids=lambda c: c.where)
def test_doc_command_runs(command: DocCommand, store: DocsStore, tmp_path: Path) -> None:
    filled = fill(command.text, store)
    outcome = run_command(parse(filled), store, tmp_path)
    shown = f"{command.where}: `{command.text}`\n  run as: {shlex.join(shlex.split(filled))}"
    if outcome.code != 0:
        pytest.fail(
            f"{shown}\n  exited {outcome.code}:\n{(outcome.err or outcome.out)[-3000:]}",
            pytrace=False,
        )
    # What it says it writes is there: each --out folder or file, not empty.
    args = parse(filled).args
    for flag, value in itertools.pairwise(args):
        if flag in OUT_FLAGS:
            written = sorted(tmp_path.glob(value.rstrip("/").replace("{split}", "*")))
            assert written and all(p.is_file() or any(p.iterdir()) for p in written), (
                f"{shown}\n  wrote nothing to {flag} {value}"
            )
    assert outcome.out.strip(), f"{shown}\n  printed nothing"


@pytest.mark.parametrize("command", SKIP, ids=lambda c: c.where)
def test_doc_command_skipped(command: DocCommand) -> None:
    pytest.skip(f"{command.where}: {skip_reason(command)}")
