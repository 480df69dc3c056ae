"""The probe: vectors for fixed papers and for papers of the encode's own inputs, each
encoded twice.

- an encoder whose two encodings of one paper differ is not deterministic: its identity
  says so in place of the vectors (one fingerprint for one code and state), the encode
  stage warns in one line and marks the output, and everything made from it, not
  reproducible;
- the input probe takes the longest papers of the inputs and a seeded sample, so a change
  that only long texts reach is a new fingerprint, while the encoder key (and the
  identity that names the retriever) stays the same on every dataset;
- vectors copied from an earlier output only while the encoder still computes that
  output's input-probe vectors.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mdcr.cli import main
from mdcr.core.manifests import read_manifest
from mdcr.core.stage import UNREPRODUCIBLE
from mdcr.encoders.base import PaperText
from mdcr.encoders.probe import LONGEST, NONDETERMINISTIC, SAMPLED, input_probe_papers, probe
from mdcr.encoders.stage import INPUT_PROBE, PROBE_TEXTS
from mdcr.encoders.store import EmbeddingStore, cosine_form
from tests.integration.encoders.fixtures import write_corpus


class _Steady:
    name, dim, metric = "steady", 3, "ip"

    def encode(self, papers: list[PaperText]) -> np.ndarray:
        return np.array([[len(p.title), len(p.abstract), 1.0] for p in papers], dtype="f4")


class _Drifting(_Steady):
    """Another vector on every call: a counter, as stateful encoders drift."""

    calls = 0

    def encode(self, papers: list[PaperText]) -> np.ndarray:
        self.calls += 1
        return super().encode(papers) + self.calls


def test_a_deterministic_encoder_is_identified_by_its_vectors() -> None:
    first = probe("steady", _Steady())
    assert first.deterministic and first.largest_difference == 0.0
    assert first.identity == first.digest == probe("steady", _Steady()).digest


def test_vectors_that_differ_between_calls_are_named_not_deterministic() -> None:
    found = probe("drifting", _Drifting())
    assert not found.deterministic and found.largest_difference > 0
    assert found.identity == NONDETERMINISTIC


def test_cosine_vectors_are_probed_and_stored_unit_length() -> None:
    class Scaled(_Steady):
        metric = "cos"

        def __init__(self, scale: float) -> None:
            self.scale = scale

        def encode(self, papers: list[PaperText]) -> np.ndarray:
            return self.scale * super().encode(papers)

    # Under cosine a scale changes nothing that is stored, so nothing that is hashed.
    assert probe("a", Scaled(1.0)).digest == probe("b", Scaled(40.0)).digest
    x = np.array([[3.0, 4.0], [0.6, 0.8], [0.0, 0.0]], dtype=np.float32)
    stored = cosine_form(x)
    assert np.allclose(np.linalg.norm(stored[:2], axis=1), 1.0)
    assert stored[1].tobytes() == x[1].tobytes()  # already unit length: kept bit for bit
    assert not stored[2].any()  # a zero vector stays zero (counted as degenerate)


def _corpus_with_lengths(folder: Path, lengths: list[int]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    ids = [f"p{i:03d}" for i in range(len(lengths))]
    pq.write_table(
        pa.table(
            {
                "paper_id": ids,
                "title": ["t"] * len(ids),
                "abstract": ["x" * n for n in lengths],
                "year": [2020] * len(ids),
                "fields": [["Biology"]] * len(ids),
                "n_out": [1] * len(ids),
                "n_in": [1] * len(ids),
            }
        ),
        folder / "papers.parquet",
    )
    return folder / "papers.parquet"


def test_the_input_probe_is_the_longest_papers_and_a_seeded_sample(tmp_path: Path) -> None:
    lengths = [10 + 7 * i for i in range(60)]
    corpus = _corpus_with_lengths(tmp_path / "c", lengths)
    papers = input_probe_papers(corpus, [], "all")
    assert len(papers) == LONGEST + SAMPLED
    longest = [f"p{i:03d}" for i in range(59, 59 - LONGEST, -1)]
    assert [p.paper_id for p in papers[:LONGEST]] == longest
    sample = [p.paper_id for p in papers[LONGEST:]]
    assert len(set(sample)) == SAMPLED and not set(sample) & set(longest)
    assert [p.paper_id for p in input_probe_papers(corpus, [], "all")] == [
        p.paper_id for p in papers
    ]  # seeded: the same papers every time
    few = _corpus_with_lengths(tmp_path / "few", [5, 9, 7])
    assert [p.paper_id for p in input_probe_papers(few, [], "all")] == ["p001", "p002", "p000"]


LONG_ONLY = """
import os
import numpy as np

class Enc:
    name, dim, metric = "long-only", 2, "ip"

    def encode(self, texts):
        scale = float(os.environ.get("LONG_ONLY_SCALE", "1"))
        return np.array(
            [[len(t.abstract), scale if len(t.abstract) > 2000 else 1.0] for t in texts],
            dtype=np.float32,
        )
"""


def test_a_change_only_long_texts_reach_is_a_new_encode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fixed probe papers are all under 2,000 characters: only the input probe, drawn
    from the encode's own papers, sees this encoder's behaviour change."""
    (tmp_path / "long_only_mod.py").write_text(textwrap.dedent(LONG_ONLY))
    monkeypatch.syspath_prepend(str(tmp_path))
    _corpus_with_lengths(tmp_path / "corpus", [300, 900, 2500, 4000])
    argv = ["encode", "--corpus", str(tmp_path / "corpus"), "--encoder", "py:long_only_mod:Enc"]
    argv += ["--home", str(tmp_path / "home")]
    folders = []
    for scale, fresh in (("1", True), ("5", True), ("5", False)):
        monkeypatch.setenv("LONG_ONLY_SCALE", scale)
        assert main(argv) == 0
        out = capsys.readouterr()
        folders.append(Path(out.out.strip().splitlines()[-1]))
        assert ("up to date" not in out.err) is fresh, out.err
    assert folders[0] != folders[1] == folders[2]
    stores = [EmbeddingStore(f) for f in folders[:2]]
    assert [s.vectors(s.rows(["p003"]))[0, 1] for s in stores] == [1.0, 5.0]
    manifests = [read_manifest(f) or {} for f in folders[:2]]
    keys = [m["info"]["encoder_key"] for m in manifests]
    assert keys[0] == keys[1]  # the encoder key leaves the input probe out
    probes = [m["identity"][INPUT_PROBE] for m in manifests]
    assert probes[0] != probes[1]
    kept = pq.read_table(folders[1] / PROBE_TEXTS).column("paper_id").to_pylist()
    assert kept[:2] == ["p003", "p002"]  # the longest first


def test_vectors_are_copied_only_from_outputs_whose_probe_still_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two encodes sharing papers: the second copies from the first while the encoder
    computes what it did; after a change only long texts reach it does not."""
    (tmp_path / "long_only_mod.py").write_text(textwrap.dedent(LONG_ONLY))
    monkeypatch.syspath_prepend(str(tmp_path))
    corpus = _corpus_with_lengths(tmp_path / "corpus", [300, 900, 2500, 4000, 120])
    targets = {}
    for name, ids in (("a", ["p000", "p001", "p002", "p003"]), ("b", ["p002", "p003", "p004"])):
        targets[name] = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({"paper_id": ids}), targets[name])
    home = str(tmp_path / "home")

    def encode(target: str) -> str:
        argv = ["encode", "--corpus", str(corpus.parent), "--encoder", "py:long_only_mod:Enc"]
        assert main([*argv, "--targets", str(targets[target]), "--home", home]) == 0
        return capsys.readouterr().err

    monkeypatch.setenv("LONG_ONLY_SCALE", "1")
    encode("a")
    assert "reused 2 from earlier outputs" in encode("b")  # p002, p003: the same behaviour
    monkeypatch.setenv("LONG_ONLY_SCALE", "3")
    encode("a")  # a new output of a (its input probe moved)
    second = encode("b")
    assert "not copying vectors from" in second  # the scale-1 output of a is refused
    assert "reused 2 from earlier outputs" in second  # the scale-3 output of a is taken


RANDOM = """
import numpy as np

class Enc:
    name, dim, metric = "unseeded", 4, "ip"

    def encode(self, texts):
        return np.random.default_rng().standard_normal((len(texts), 4)).astype("f4")
"""


def test_a_nondeterministic_encoder_is_said_recorded_and_carried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "unseeded_mod.py").write_text(textwrap.dedent(RANDOM))
    monkeypatch.syspath_prepend(str(tmp_path))
    write_corpus(tmp_path / "corpus", 20)
    argv = ["encode", "--corpus", str(tmp_path / "corpus"), "--encoder", "py:unseeded_mod:Enc"]
    argv += ["--home", str(tmp_path / "home")]
    assert main(argv) == 0
    first = capsys.readouterr()
    assert "is not deterministic" in first.err
    assert main(argv) == 0  # the same fingerprint: reused, and said again
    again = capsys.readouterr()
    assert "up to date" in again.err and "is not deterministic" in again.err
    folder = Path(first.out.strip().splitlines()[-1])
    assert folder == Path(again.out.strip().splitlines()[-1])
    manifest = read_manifest(folder) or {}
    assert manifest["identity"]["encoder"]["probe"] == NONDETERMINISTIC
    assert manifest["info"][UNREPRODUCIBLE] == [
        "encoder 'py:unseeded_mod:Enc' is not deterministic"
    ]
    assert INPUT_PROBE not in manifest["identity"]
    assert main(["show", folder.name, "--home", str(tmp_path / "home")]) == 0
    assert "is not deterministic" in capsys.readouterr().out
    assert json.dumps(manifest)  # a plain manifest
