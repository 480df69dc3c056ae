"""The docs' command examples, and the small store they run on (tests/integration/
test_docs_commands.py).

The commands are every logical line of the fenced ```bash blocks of README.md and docs/*.md:
comments dropped, a line ending in ``\\`` joined to the next, a pipe's continuation
(``| ...``) joined to its line, and a ``for``/``while`` loop or an ``if`` kept whole up to
its ``done`` or ``fi``. The store is the demo pipeline (pipelines/demo.toml) scaled down
through the same stages: a pipeline file of the same steps with smaller values, so the
docs' ``mdcr run pipelines/demo.toml ...`` run on it as written.

A command runs unless :data:`SKIPPED` says why it cannot run in a test; its placeholders
(``<pools output folder>``, ``SCORE``, ``/data/mdcr`` ...) are filled by
:data:`PLACEHOLDERS` from the store. ``tests/unit/test_docs_commands_listed.py`` checks,
without a store, that every command is one or the other, so that a new example cannot
escape the test.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

# The demo scaled down (step id -> key -> value; None drops the key, so the stage's default
# applies). MiniLM keeps its own default length (256 tokens), the one `mdcr evaluate
# --encoder minilm` uses, so the docs' evaluations reuse the store's vectors. Encoding the
# pools' papers (about 450, two-sentence abstracts) is most of the store's time, hence the
# small pools: 3 queries cite up to about 55 papers, 2 field queries up to about 90.
SMALL_DEMO: dict[str, dict[str, Any]] = {
    "corpus": {"n_papers": 1500, "abstract_sentences": 2},
    "pools": {
        "n_queries_dataset": 3,
        "dataset_sizes": [80, 160],
        "fields": ["Medicine", "Biology"],
        "field_queries": 2,
        "field_pool_size": 100,
        "repetitions": 1,
    },
    "encode_minilm": {"max_length": None},
    "bench_enc_minilm": {"max_length": None},
}

_STEP_LINE = re.compile(r"^  (\S+) +(?:built|up to date) +(/\S+)$")
_FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```", re.S | re.M)
_OPENS = re.compile(r"(?<![\w-])(do|then)(?![\w-])")
_CLOSES = re.compile(r"(?<![\w-])(done|fi)(?![\w-])")


@dataclass(frozen=True)
class DocCommand:
    """One command of the docs: where it is written (``README.md:102``) and its text."""

    where: str
    text: str


def doc_files(repo: Path = REPO) -> list[Path]:
    """The pages whose examples are run: the README and every page of docs/."""
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


def doc_commands(repo: Path = REPO) -> list[DocCommand]:
    """Every command of the fenced ```bash blocks of :func:`doc_files`, in page order."""
    found: list[DocCommand] = []
    for page in doc_files(repo):
        text = page.read_text(encoding="utf-8")
        name = page.relative_to(repo).as_posix()
        for fence in _FENCE.finditer(text):
            if fence.group(1) != "bash":
                continue
            first = text.count("\n", 0, fence.start(2)) + 1
            for offset, command in logical_lines(fence.group(2)):
                found.append(DocCommand(f"{name}:{first + offset}", command))
    return found


def logical_lines(block: str) -> list[tuple[int, str]]:
    """A block's commands, each with the offset of the line it starts on."""
    commands: list[tuple[int, str]] = []
    text = ""
    start = depth = 0
    for offset, raw in enumerate(block.splitlines()):
        line = strip_comment(raw).strip()
        if not line:
            continue
        if text.endswith("\\"):  # a continued line
            text = text[:-1].rstrip() + " " + line
        elif text and line.startswith(("|", "&&")):  # a pipe or list continued
            text += " " + line
        elif text and depth > 0:  # inside a loop or an if
            text += "\n" + line
        else:
            if text:
                commands.append((start, text))
            text, start = line, offset
        depth += len(_OPENS.findall(line)) - len(_CLOSES.findall(line))
    if text:
        commands.append((start, text))
    return commands


def strip_comment(line: str) -> str:
    """The line without its shell comment (a ``#`` that starts a word outside quotes)."""
    quote = ""
    previous = " "
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\" and quote != "'":
                i += 1
            elif c == quote[-1]:
                quote = ""
        elif c in "\"'":
            quote = "$'" if c == "'" and previous == "$" else c
        elif c == "\\":
            i += 1
        elif c == "#" and previous.isspace():
            return line[:i].rstrip()
        if quote == "$'" and c == "\\":  # $'...' keeps backslash escapes
            i += 1
        previous = c
        i += 1
    return line


def python_block_after(page: Path, marker: str) -> str:
    """The first ```python block after ``marker`` on ``page`` (the README's my_encoder.py)."""
    text = page.read_text(encoding="utf-8")
    at = text.index(marker)
    fence = next(f for f in _FENCE.finditer(text, at) if f.group(1) == "python")
    return fence.group(2)


# ------------------------------------------------------------------- the scaled-down demo


def small_demo_toml(repo: Path = REPO) -> str:
    """pipelines/demo.toml with :data:`SMALL_DEMO`'s values, as TOML."""
    raw = tomllib.loads((repo / "pipelines" / "demo.toml").read_text(encoding="utf-8"))
    unused = dict(SMALL_DEMO)
    lines = ["[pipeline]", *_toml_table(raw["pipeline"])]
    for step in raw["step"]:
        changes = unused.pop(str(step.get("id", step["stage"])), {})
        lines += ["", "[[step]]", *_toml_table({**step, **changes})]
    if unused:
        raise KeyError(f"SMALL_DEMO names steps that demo.toml lacks: {sorted(unused)}")
    return "\n".join(lines) + "\n"


def _toml_table(table: dict[str, Any]) -> list[str]:
    return [f"{key} = {_toml_value(value)}" for key, value in table.items() if value is not None]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def step_folders(printed: str) -> dict[str, Path]:
    """Each step's output folder from ``mdcr run``'s closing summary."""
    return {m[1]: Path(m[2]) for m in map(_STEP_LINE.match, printed.splitlines()) if m}


# ------------------------------------------------------------------- the store and its inputs


@dataclass(frozen=True)
class DocsStore:
    """The scaled-down demo's store, and the inputs the docs' examples name beside it.

    ``steps`` maps the demo's step ids to their output folders; ``release`` holds the
    benchmark's files in the MDCR release's layout (what ``/data/mdcr`` names); ``beir``
    one pool as a BEIR folder (what ``scifact/`` names); ``beir_pools`` its ``mdcr import
    beir`` output; ``s2ag`` a synthetic S2AG release; ``model`` a small BERT saved as a hub
    model is (what ``my-org/my-model`` names); ``packages`` a folder holding the package
    ``mypkg`` whose module ``enc`` is the README's ``my_encoder.py`` (``py:mypkg.enc:...``).
    """

    home: Path
    pipeline: Path
    steps: dict[str, Path]
    release: Path
    beir: Path
    beir_pools: Path
    s2ag: Path
    model: Path
    packages: Path

    def prefix(self, step: str) -> str:
        """The shortest prefix of a step's fingerprint (4 digits or more) that names it alone
        in the store as it is now."""
        fingerprint = self.steps[step].name
        others = {p.name for p in self.home.glob("*/*") if p.name != fingerprint}
        for n in range(4, len(fingerprint) + 1):
            if not any(o.startswith(fingerprint[:n]) for o in others):
                return fingerprint[:n]
        return fingerprint


def build_store(root: Path) -> DocsStore:
    """Run the scaled-down demo into ``root/store`` and write the inputs beside it."""
    from tests.integration.encoders.fixtures import make_tiny_bert

    pipeline = root / "small_demo.toml"
    pipeline.write_text(small_demo_toml(), encoding="utf-8")
    home = root / "store"
    steps = step_folders(mdcr_main("run", str(pipeline), "--home", str(home), "-q"))
    release = root / "mdcr-release"
    release.mkdir()
    for split in ("val", "test"):
        for name in (f"mdcr_{split}.json", f"mdcr_{split}_data.jsonl"):
            shutil.copyfile(steps["benchmark"] / name, release / name)
    exported = root / "beir-pools"
    mdcr_main("export", "--format", "beir", "--pools", str(steps["pools"]), "--out", str(exported))
    beir = exported / f"dataset_test_{min(SMALL_DEMO['pools']['dataset_sizes'])}_r0"
    imported = mdcr_main("import", "beir", "--source", str(beir), "--home", str(home), "-q")
    synth = mdcr_main("synth", "--format", "s2ag", "--n-papers", "400", "--home", str(home), "-q")
    packages = root / "site-packages"
    (packages / "mypkg").mkdir(parents=True)
    (packages / "mypkg" / "__init__.py").write_text("", encoding="utf-8")
    (packages / "mypkg" / "enc.py").write_text(readme_encoder(), encoding="utf-8")
    return DocsStore(
        home=home,
        pipeline=pipeline,
        steps=steps,
        release=release,
        beir=beir,
        beir_pools=Path(imported.splitlines()[-1]),
        s2ag=Path(synth.splitlines()[-1]),
        model=make_tiny_bert(root / "my-model", max_positions=512),
        packages=packages,
    )


def readme_encoder(repo: Path = REPO) -> str:
    """The README's ``my_encoder.py``, as written."""
    return python_block_after(repo / "README.md", "## Scoring your encoder")


def mdcr_main(*args: str) -> str:
    """``mdcr ARGS`` in this process; what it printed. Anything but exit code 0 raises."""
    from mdcr.cli import main

    printed, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors):
        code = main(list(args))
    if code != 0:
        said = (errors.getvalue() or printed.getvalue())[-2000:]
        raise RuntimeError(f"mdcr {' '.join(args)} exited {code}: {said}")
    return printed.getvalue()


# ------------------------------------------------------------------- what is not run, and why

_SETUP = "installs packages (`make setup` does it before the tests)"
_HUB = "needs the model's weights from the model hub, which tests cannot reach"
_CLUSTER = "needs a Ray cluster at head:6379; tests/integration/test_ray_engine.py runs Ray"
_PAPER = "the paper's full pipeline on the user's S2ORC download (hours, terabytes)"
_S2_API = "downloads a release from the Semantic Scholar API (network and an API key)"
_SERVER = "serves web pages until ctrl-C; the explore tests run its server and its pages"

# Every command of the docs that is not run, with the one reason it cannot run in a test.
# tests/unit/test_docs_commands_listed.py checks that each is still in the docs.
SKIPPED: dict[str, str] = {
    "make demo": "the demo at full size (minutes); tests/integration/test_demo.py runs it",
    "make test": "the test suite itself",
    "pip install torch==2.13.0": _SETUP,
    "pip install -e '.[all]'": _SETUP,
    "pip install --no-deps pyserini==1.6.0": _SETUP,
    "mdcr download mdcr": "fetches the official release over the network; "
    "tests/unit/benchmark/test_release.py tests the download from a local server",
    "mdcr evaluate --encoder specter --pools <pools output folder>": _HUB + " (SPECTER)",
    "mdcr explore": _SERVER,
    "mdcr explore 0f14": _SERVER,
    "S2ORC_DIR=/data/s2orc/metadata mdcr run pipelines/paper.toml --until benchmark": _PAPER,
    "S2ORC_DIR=/data/s2orc/metadata mdcr run pipelines/paper.toml": _PAPER,
    "mdcr run pipelines/paper.toml --engine ray --ray-address head:6379": _CLUSTER,
    "mdcr run pipelines/demo.toml --engine ray": "starts a local Ray instance (about a minute "
    "and 2 GB); tests/integration/test_ray_engine.py runs pipelines on Ray",
    "RAY_ADDRESS=head:6379 mdcr evaluate --pools $P --encoder specter --engine ray": _CLUSTER,
    "ray start --head --port=6379": "starts a Ray cluster's head node (Ray's own command)",
    "ray start --address=HEAD_IP:6379": "joins a Ray cluster (Ray's own command)",
    "ray status": "reports on a running Ray cluster (Ray's own command)",
    "export MDCR_HOME=/shared/mdcr-home HF_HOME=/shared/hf": "sets a cluster's shared "
    "folders for the commands after it (no command of its own)",
    "S2ORC_DIR=/shared/s2orc/metadata mdcr run pipelines/paper.toml --engine ray "
    "--ray-address HEAD_IP:6379": _CLUSTER + "; " + _PAPER,
    "python scripts/bench_explore.py": "a benchmark (minutes), measured in its own runs",
    "python scripts/bench_explore.py --pool-size 200000": "a benchmark at the paper's "
    "scale (minutes), measured in its own runs",
    "export S2_API_KEY=...": _S2_API,
    "API=https://api.semanticscholar.org/datasets/v1": _S2_API,
    'RELEASE=$(curl -s "$API/release/latest" | python -c \'import json,sys; '
    'print(json.load(sys.stdin)["release_id"])\')': _S2_API,
    "B=/data/mdcr": "sets the shell variable of the recipes below (they fill it themselves)",
    "mdcr evaluate --benchmark $B --encoder hf:intfloat/e5-base-v2 --encode-set "
    '"query_prompt=query: " --encode-set "document_prompt=passage: "': _HUB + " (e5)",
    "mdcr evaluate --benchmark $B --encoder hf:BAAI/bge-base-en-v1.5 --encode-set "
    '"query_prompt=Represent this sentence for searching relevant passages: "': _HUB + " (BGE)",
    "mdcr evaluate --benchmark $B --encoder hf:nomic-ai/nomic-embed-text-v1.5 --encode-set "
    'trust_remote_code=true --encode-set "query_prompt=search_query: " --encode-set '
    '"document_prompt=search_document: "': _HUB + " (nomic, and its remote code)",
    "mdcr evaluate --benchmark $B --encoder hf:Qwen/Qwen3-Embedding-0.6B --encode-set "
    "$'query_prompt=Instruct: Given a scientific paper title, retrieve paper abstracts that "
    'are cited by the given paper\\nQuery:\' --encode-set "document_prompt="': _HUB + " (Qwen3)",
}

# Commands whose S2AG download loop (docs/s2ag.md) starts with these words.
SKIPPED_PREFIXES: dict[str, str] = {"for ds in papers abstracts citations; do": _S2_API}

# Commands run last: they delete what no result uses.
RUN_LAST = frozenset({"mdcr gc --yes"})


def skip_reason(command: DocCommand) -> str | None:
    """Why ``command`` is not run; None: it is run."""
    if command.text in SKIPPED:
        return SKIPPED[command.text]
    return next((why for p, why in SKIPPED_PREFIXES.items() if command.text.startswith(p)), None)


# ------------------------------------------------------------------- placeholders


def _word(written: str) -> str:
    """A regex of ``written`` standing as a word of its own (not inside a path or name)."""
    return rf"(?<![\w/.$-]){re.escape(written)}(?![\w/-])"


def _step(step: str) -> Callable[[DocsStore], str]:
    return lambda store: str(store.steps[step])


# What the docs write where a user puts their own folder or name (a regex), and what the
# test puts there: the store's outputs of the stage the docs name, the inputs beside it.
PLACEHOLDERS: tuple[tuple[str, Callable[[DocsStore], str]], ...] = (
    (re.escape("data/mdcr-home/score/<fp>"), _step("score")),
    (
        rf"{re.escape('<store>/downloads/mdcr')}|{_word('/data/mdcr')}|{_word('$B')}",
        lambda store: str(store.release),
    ),
    (
        r"<the benchmark folder make demo printed>|<benchmark output folder>|<benchmark output>|"
        + _word("BENCH"),
        _step("benchmark"),
    ),
    (
        r"<the pools folder make demo printed>|<pools output folder>|"
        + _word("POOLS")
        + "|"
        + _word("$P"),
        _step("pools"),
    ),
    (r"<report or score output>|" + _word("OUTPUT"), _step("report")),
    (r"<report, score or benchmark-score output>", _step("bench_score")),
    (r"<benchmark-rank output>", _step("bench_rank_minilm")),
    (_word("SCORE"), _step("score")),
    (_word("RUN"), _step("search_minilm")),
    (r"<that folder>|<printed folder>", lambda store: str(store.beir_pools)),
    (_word("scifact/"), lambda store: str(store.beir)),
    (_word("my-org/my-model"), lambda store: str(store.model)),
    (_word("/data/s2orc/metadata"), _step("corpus")),
    (_word("/data/s2ag/2026-11-18") + '|"s2ag/\\$RELEASE"', lambda store: str(store.s2ag)),
    (_word("pipelines/demo.toml"), lambda store: str(store.pipeline)),
    (_word("pipelines/paper.toml"), lambda store: str(REPO / "pipelines" / "paper.toml")),
    (_word("58fa"), lambda store: store.prefix("score")),
    # The demo's larger pools: the small store's smallest, a setup of every report here
    # (the BEIR import is of that pool).
    (
        _word("dataset-test-800"),
        lambda _: f"dataset-test-{min(SMALL_DEMO['pools']['dataset_sizes'])}",
    ),
    (re.escape("[--retriever NAME]"), lambda _: "--retriever minilm"),
    (_word("OUT") + "|" + _word("DIR"), lambda _: "out"),
    # As written it rebuilds every step after the pools (minutes): it runs up to the pools
    # it changes.
    (re.escape("--set pools.seed=1"), lambda _: "--set pools.seed=1 --until pools"),
)

# What is left of a placeholder after filling: <...>, a shell variable, an upper-case word.
_UNFILLED = re.compile(r"<[^>]*>|\$\w+|(?<![\w/.=-])[A-Z][A-Z_]{2,}(?![\w/-])")
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
PROGRAMS = ("mdcr", ".venv/bin/mdcr")


def fill(text: str, store: DocsStore) -> str:
    """``text`` with every placeholder of :data:`PLACEHOLDERS` filled from ``store``."""
    for pattern, value in PLACEHOLDERS:
        if re.search(pattern, text):  # a value only where it is used (prefix reads the store)
            text = re.sub(pattern, value(store).replace("\\", "\\\\"), text)
    return text


@dataclass(frozen=True)
class Invocation:
    """A filled command, parsed: its environment assignments and mdcr's arguments."""

    env: dict[str, str]
    args: list[str]


def split_command(filled: str) -> Invocation | None:
    """``NAME=value ... mdcr ARGS`` as an :class:`Invocation`; None for another program.
    Bash's ``$'...'`` quoting is read as bash reads it (``\\n``: a newline)."""
    words = shlex.split(_ANSI_C.sub(_unquote_ansi_c, filled))
    env: dict[str, str] = {}
    while words and _ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words or words[0] not in PROGRAMS:
        return None
    return Invocation(env, words[1:])


def parse(filled: str) -> Invocation:
    """:func:`split_command`, where anything but an mdcr command with every placeholder
    filled is an error that asks for a placeholder or a skip."""
    invocation = split_command(filled)
    if invocation is None:
        raise ValueError(f"not an mdcr command: {filled!r}; fill it or give a reason to skip it")
    left = _UNFILLED.findall(shlex.join(invocation.args))
    if left:
        raise ValueError(f"placeholder(s) {left} left in {filled!r}: add them to PLACEHOLDERS")
    return invocation


_ANSI_C = re.compile(r"\$'((?:[^'\\]|\\.)*)'")


def _unquote_ansi_c(match: re.Match[str]) -> str:
    return shlex.quote(
        match.group(1).encode("latin-1", "backslashreplace").decode("unicode_escape")
    )


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


# Modules that `py:` specs of the docs import; dropped before each command so that each
# imports them afresh from its own folder, as a new process would.
USER_MODULES = ("my_encoder", "mypkg", "mypkg.enc")


def run_command(invocation: Invocation, store: DocsStore, cwd: Path) -> Outcome:
    """Run ``invocation`` in this process from ``cwd`` (which holds ``my_encoder.py``),
    with ``$MDCR_HOME`` the store, ``store.packages`` installed and its environment set."""
    import pytest

    from mdcr.cli import main

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        mp.setenv("MDCR_HOME", str(store.home))
        mp.syspath_prepend(str(store.packages))
        for name, value in invocation.env.items():
            if name == "PYTHONPATH":  # in this process: the folders go on sys.path
                for folder in reversed(value.split(os.pathsep)):
                    mp.syspath_prepend(str((cwd / folder).resolve()))
            else:
                mp.setenv(name, value)
        for name in USER_MODULES:
            sys.modules.pop(name, None)
        (cwd / "my_encoder.py").write_text(readme_encoder(), encoding="utf-8")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(invocation.args)
            except SystemExit as stop:  # argparse's usage errors
                code = stop.code if isinstance(stop.code, int) else 2
    return Outcome(code, out.getvalue(), err.getvalue())
