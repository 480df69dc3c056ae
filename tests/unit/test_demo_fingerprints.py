"""Golden fingerprints of the demo: a changed fingerprint is a decision, never an accident.

Every step of pipelines/demo.toml is planned (``mdcr run --dry-run``: nothing runs, and a
step's fingerprint follows from those of the steps before it) and its fingerprint compared
with the table below. A fingerprint changes when a stage's version, a parameter's value
(its default included), an input or an encoder's identity does; then every store rebuilds
that output and every step after it. If your change means to do that, update the table on
purpose (the failure message prints the new one); if not, it hashes something it should
not. The minilm steps are planned on the CPU, where ``precision = "auto"`` is fp32 (a GPU
run hashes bf16 and has outputs of its own).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mdcr.cli import main

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "pipelines" / "demo.toml"
ON_CPU = ["encode_minilm.device=cpu", "bench_enc_minilm.device=cpu"]

# step id -> (stage, fingerprint), in the pipeline's order.
GOLDEN = {
    "corpus": ("synth", "f7e3e5269b184e78"),
    "prefilter": ("prefilter", "f572fd36601d17cd"),
    "pools": ("pools", "b0dcfa1900d4d39a"),
    "encode_minilm": ("encode", "06b54edb5f688ca7"),
    "encode_random": ("encode", "0431f50008766336"),
    "search_minilm": ("search", "455c7a6375997ec8"),
    "search_random": ("search", "f5c4e21ba3964147"),
    "bm25_tune": ("bm25-tune", "2003f5ca07716218"),
    "bm25": ("bm25", "580de9cc2fa54de2"),
    "benchmark": ("benchmark", "bca90cc3707a0c3e"),
    "bench_enc_minilm": ("encode", "c18ea9dc382dd41f"),
    "bench_enc_random": ("encode", "1c6fd61660ad92c9"),
    "bench_rank_bm25": ("benchmark-rank", "f894474d70bb2cc9"),
    "bench_rank_minilm": ("benchmark-rank", "f5165ea6c669a25b"),
    "bench_rank_random": ("benchmark-rank", "b37ef0cff6355b4e"),
    "bench_score": ("benchmark-score", "421105984bffd2e1"),
    "fuse_bm25_minilm": ("fuse", "f57ffd1ea7563bf7"),
    "bench_fuse_bm25_minilm": ("benchmark-fuse", "f60967334a0934f6"),
    "bench_score_fused": ("benchmark-score", "c83cb8d084573b62"),
    "score": ("score", "8181d39b962fcd03"),
    "score_fused": ("score", "461d7613b333bf18"),
    "report": ("report", "eb99faed37d18c5e"),
}

_LINE = re.compile(r"^(\S+)\s+(\S+)\s+([0-9a-f]{16}|\?{16})\s+(.+)$")


def dry_run_fingerprints(
    home: Path, capsys: pytest.CaptureFixture[str], overrides: list[str]
) -> dict[str, tuple[str, str]]:
    """Each step's (stage, fingerprint) as ``mdcr run --dry-run`` prints them."""
    args = ["run", str(DEMO), "--dry-run", "--home", str(home)]
    for override in overrides:
        args += ["--set", override]
    assert main(args) == 0
    out = capsys.readouterr().out
    found = {}
    for line in out.splitlines():
        m = _LINE.match(line)
        if m:
            step, stage, fp, status = m.groups()
            assert "unknown" not in status, line  # every demo step can be planned now
            found[step] = (stage, fp)
    return found


def test_the_demo_fingerprints_are_the_golden_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = dry_run_fingerprints(tmp_path / "home", capsys, ON_CPU)
    assert list(found) == list(GOLDEN), "the demo's steps changed; update GOLDEN to match"
    changed = [s for s in GOLDEN if found[s] != GOLDEN[s]]
    table = "\n".join(f'    "{s}": ("{stage}", "{fp}"),' for s, (stage, fp) in found.items())
    assert not changed, (
        f"the fingerprints of demo step(s) {', '.join(changed)} changed "
        f"({', '.join(f'{s}: {GOLDEN[s][1]} -> {found[s][1]}' for s in changed)}). Every "
        "store will rebuild those outputs, and those after them, instead of reusing them. "
        "If your change means that (a stage's outputs, a parameter, a default or an "
        "encoder changed), update GOLDEN in tests/unit/test_demo_fingerprints.py on purpose "
        "(and any doc quoting a demo fingerprint), and bump nothing else; if it does not, "
        f"it hashes something it should not. The new table:\n{table}"
    )


def test_settings_leave_the_demo_fingerprints_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Threads, batch sizes, engines, workers, unpadded attention and compiling are
    settings: never hashed."""
    settings = [
        "encode_minilm.batch_tokens=512",
        "encode_minilm.workers=2",
        "encode_minilm.attention=unpadded",
        "encode_minilm.compile=true",
        "encode_random.workers=3",
        "search_minilm.backend=torch",
        "bm25_tune.threads=1",
        "bm25_tune.backend=lucene",
        "bm25.backend=sweep",
        "bench_rank_bm25.threads=2",
    ]
    found = dry_run_fingerprints(tmp_path / "home", capsys, [*ON_CPU, *settings])
    assert found == GOLDEN
    # ... while a parameter set to its default's value is that default, and another is not.
    same = dry_run_fingerprints(tmp_path / "home", capsys, [*ON_CPU, "score.depth=500"])
    assert same == GOLDEN
    other = dry_run_fingerprints(tmp_path / "home", capsys, [*ON_CPU, "score.depth=100"])
    assert [s for s in GOLDEN if other[s] != GOLDEN[s]] == ["score", "report"]
