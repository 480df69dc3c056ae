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
    "encode_minilm": ("encode", "63a9f8a0028ad01e"),
    "encode_random": ("encode", "943d9a40a09c2e38"),
    "search_minilm": ("search", "316c09b5ff6f0f96"),
    "search_random": ("search", "dd1206444652a10a"),
    "bm25_tune": ("bm25-tune", "2003f5ca07716218"),
    "bm25": ("bm25", "3dbce39aed351513"),
    "benchmark": ("benchmark", "873b529d774dc0a4"),
    "bench_enc_minilm": ("encode", "72b192b37e9dbdde"),
    "bench_enc_random": ("encode", "a2b6cf678ea1efa0"),
    "bench_rank_bm25": ("benchmark-rank", "e0334fc20a50324d"),
    "bench_rank_minilm": ("benchmark-rank", "64bc6d1c6e13394e"),
    "bench_rank_random": ("benchmark-rank", "7f69a92e52ae6570"),
    "bench_score": ("benchmark-score", "c3f5a1139b228e2b"),
    "fuse_bm25_minilm": ("fuse", "ebeef887638b1a4f"),
    "bench_fuse_bm25_minilm": ("benchmark-fuse", "9f5f748625c99b15"),
    "bench_score_fused": ("benchmark-score", "8616e41bf42a0211"),
    "score": ("score", "629b3558a5207afb"),
    "score_fused": ("score", "bf5eae8643f83c4f"),
    "report": ("report", "6be3f46b471f14fa"),
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
