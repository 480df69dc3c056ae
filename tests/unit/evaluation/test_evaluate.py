"""``mdcr evaluate`` end to end on the MDCR-format fixture, against pytrec_eval."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mdcr.cli import main
from tests.unit.benchmark.reference import MEASURES, original_scorer

FIXTURE = Path(__file__).resolve().parents[2] / "data" / "mdcr_format_fixture"


def _printed(out: str) -> dict[str, dict[str, dict[str, float]]]:
    """The per-field lines ``mdcr evaluate`` prints: {retriever: {field: {measure: v}}}."""
    result: dict[str, dict[str, dict[str, float]]] = {}
    current = None
    for line in out.splitlines():
        if line.endswith(" on MDCR test:"):
            current = line.split(" on MDCR")[0]
            result[current] = {}
        elif current and "\t" in line:
            name, *cells = line.split("\t")
            result[current][name] = {c.split(": ")[0]: float(c.split(": ")[1]) for c in cells}
    return result


def _evaluate(home: Path, encoders: list[str]) -> str:
    import contextlib
    import io

    argv = ["evaluate", "--benchmark", str(FIXTURE), "--home", str(home), "-q"]
    for e in encoders:
        argv += ["--encoder", e]
    argv += ["--scores-out", str(home / "scores_{encoder}.json")]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    return buf.getvalue()


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> dict:
    home = tmp_path_factory.mktemp("eval")
    return {"home": home, "stdout": _evaluate(home, ["random"])}


def test_evaluate_random_equals_the_original_scorer(evaluated: dict) -> None:
    check_against_reference(evaluated, "random")


@pytest.mark.slow
def test_evaluate_bm25_equals_the_original_scorer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lucene BM25 through the JVM: a few seconds to start.
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "home"
    check_against_reference({"home": home, "stdout": _evaluate(home, ["bm25"])}, "bm25")
    # The collection's index is in the store (never the working folder), and the rank
    # output records it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
    (rank,) = (home / "benchmark-rank").glob("*/manifest.json")
    indexes = json.loads(rank.read_text())["info"]["indexes"]
    assert set(indexes.values()) == {p.name for p in (home / "lucene-index").iterdir()}


def check_against_reference(evaluated: dict, encoder: str) -> None:
    scores_file = evaluated["home"] / f"scores_{encoder}.json"
    scores = json.loads(scores_file.read_text())
    benchmark = json.loads((FIXTURE / "mdcr_test.json").read_text())
    n_pairs = len(
        {
            (q, c)
            for f in benchmark.values()
            for q, ls in f.items()
            for cs in ls.values()
            for c in cs
        }
    )
    assert len(scores) == n_pairs
    ref_fields, ref_avg, _ = original_scorer(benchmark, scores)
    printed = _printed(evaluated["stdout"])[encoder]
    for field, vals in ref_fields.items():
        for m in MEASURES:
            assert printed[field][m] == vals[m], (field, m)
    for m in MEASURES:
        assert printed["AVG"][m] == ref_avg[m]


def test_tied_scores_and_an_empty_true_list_print_the_originals_numbers(
    tmp_path: Path, capsys
) -> None:
    """``mdcr evaluate`` with its defaults on a score file where every score is equal, and a
    query whose ``true`` list is empty: the printout equals the original scorer's (pytrec_eval
    as evaluate.py runs it) and says how many queries had no positive."""
    import shutil

    benchmark = json.loads((FIXTURE / "mdcr_test.json").read_text())
    benchmark["Art"]["1002"]["true"] = []
    files = tmp_path / "official"
    files.mkdir()
    (files / "mdcr_test.json").write_text(json.dumps(benchmark))
    shutil.copy(FIXTURE / "mdcr_test_data.jsonl", files / "mdcr_test_data.jsonl")
    pairs = {
        f"{q}_{c}"
        for f in benchmark.values()
        for q, ls in f.items()
        for cs in ls.values()
        for c in cs
    }
    scores = dict.fromkeys(sorted(pairs), 0.5)
    (tmp_path / "tied.json").write_text(json.dumps(scores))
    argv = ["evaluate", "--scores", str(tmp_path / "tied.json"), "--name", "tied"]
    assert main([*argv, "--benchmark", str(files), "--home", str(tmp_path / "home"), "-q"]) == 0
    out = capsys.readouterr().out
    printed = _printed(out)["tied"]
    ref_fields, ref_avg, _ = original_scorer(benchmark, scores)
    assert {f: printed[f] for f in ref_fields} == ref_fields and printed["AVG"] == ref_avg
    assert "(1 query without positives (Art: 1), scored 0 and counted" in out
    (scored,) = (tmp_path / "home" / "benchmark-score").iterdir()
    info = json.loads((scored / "manifest.json").read_text())["info"]
    assert info["queries_without_positives"] == {"test": {"Art": 1}} and info["ties"] == "trec_eval"
    assert "1 query has an empty `true` list (Art: 1)" in (scored / "report.md").read_text()


def test_scores_file_mode_gives_the_same_numbers(evaluated: dict, capsys) -> None:
    scores_file = evaluated["home"] / "scores_random.json"
    rc = main(
        [
            "evaluate",
            "--scores",
            str(scores_file),
            "--name",
            "again",
            "--benchmark",
            str(FIXTURE),
            "--home",
            str(evaluated["home"]),
            "-q",
        ]
    )
    assert rc == 0
    again = _printed(capsys.readouterr().out)["again"]
    assert again == _printed(evaluated["stdout"])["random"]


def test_rerun_is_cached_and_report_has_both_tables(evaluated: dict, capsys) -> None:
    rc = main(
        [
            "evaluate",
            "--encoder",
            "random",
            "--benchmark",
            str(FIXTURE),
            "--home",
            str(evaluated["home"]),
        ]
    )
    assert rc == 0
    cap = capsys.readouterr()
    assert "running" not in cap.err and cap.err.count("up to date") == 4
    report = Path(cap.out.strip().splitlines()[-1].split("report: ")[1]).read_text()
    assert "(Table 3 layout)" in report and "(Table 4 layout)" in report
    assert "| Fields | Random MAP | Random R@5 |" in report


def test_bad_arguments_are_one_line_errors(tmp_path: Path, capsys) -> None:
    assert (
        main(
            ["evaluate", "--encoder", "nope", "--benchmark", str(FIXTURE), "--home", str(tmp_path)]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert "unknown encoder 'nope'" in err and len(err.splitlines()) == 1
    assert main(["evaluate", "--encoder", "random", "--home", str(tmp_path)]) == 2
    assert "give --benchmark" in capsys.readouterr().err


EDITABLE = """
import numpy as np

class Enc:
    name = "editable"
    dim = 3
    metric = "ip"

    def encode(self, texts):
        w = np.array({weights}, dtype=np.float32)
        feats = [[len(t.title), len(t.abstract), t.abstract.count("a")] for t in texts]
        return np.asarray(feats, dtype=np.float32) * w
"""


def test_an_edited_encoder_never_returns_cached_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Edit a py: encoder between two calls: the second call encodes again and prints the
    new encoder's numbers, not the first one's."""
    monkeypatch.syspath_prepend(str(tmp_path))
    module = tmp_path / "editable_enc.py"
    argv = ["evaluate", "--encoder", "py:editable_enc:Enc", "--benchmark", str(FIXTURE)]
    argv += ["--home", str(tmp_path / "home")]
    module.write_text(EDITABLE.format(weights=[1.0, 0.0, 0.0]))
    assert main(argv) == 0
    first = capsys.readouterr()
    module.write_text(EDITABLE.format(weights=[0.0, 0.0, 1.0]))
    assert main(argv) == 0
    second = capsys.readouterr()
    assert "[encode_0_editable_enc_Enc] running encode" in second.err
    name = "editable_enc:Enc"  # a py: spec's default name
    assert _printed(first.out)[name] != _printed(second.out)[name]
    # The same source again: every step is up to date, and the first numbers come back.
    module.write_text(EDITABLE.format(weights=[1.0, 0.0, 0.0]))
    assert main(argv) == 0
    third = capsys.readouterr()
    assert "running" not in third.err
    assert _printed(third.out) == _printed(first.out)
    module.unlink()
    assert main(argv) == 2
    assert "cannot import module 'editable_enc'" in capsys.readouterr().err


def test_encode_set_passes_parameters_and_settings(tmp_path: Path, capsys) -> None:
    """--encode-set reaches the encode step: a parameter is hashed, a setting recorded."""
    from mdcr.core.manifests import read_manifest

    home = tmp_path / "home"
    argv = ["evaluate", "--encoder", "minilm", "--benchmark", str(FIXTURE), "--home", str(home)]
    argv += ["-q", "--encode-set", "max_length=64", "--encode-set", "batch_tokens=512"]
    assert main(argv) == 0
    (encode,) = [p for p in (home / "encode").iterdir() if not p.name.startswith(".")]
    manifest = read_manifest(encode)
    assert manifest is not None
    assert manifest["params"]["max_length"] == 64 and manifest["settings"]["batch_tokens"] == 512
    capsys.readouterr()
    assert main([*argv, "--encode-set", "nope=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--encode-set: unknown key 'nope'" in err and len(err.splitlines()) == 1


def test_hf_minilm_folder_scores_exactly_like_minilm(tmp_path: Path, capsys) -> None:
    """The offline all-MiniLM-L6-v2 through ``hf:`` (its sentence-transformers config:
    mean pooling, Normalize, 256 tokens) prints the same numbers as the built-in ``minilm``."""
    from mdcr.encoders.models.hf import minilm_path

    spec = f"hf:{minilm_path()}"
    argv = ["evaluate", "--encoder", "minilm", "--encoder", spec, "--benchmark", str(FIXTURE)]
    assert main([*argv, "--home", str(tmp_path), "-q"]) == 0
    printed = _printed(capsys.readouterr().out)
    # named by its model card's title, not by its path
    assert printed["minilm"] == printed["all-MiniLM-L6-v2"] and printed["minilm"]["AVG"]["map"] > 0


def test_a_name_never_brings_published_or_paper_numbers(evaluated: dict, capsys) -> None:
    """A scores file or a model object named like a model with published MDCR results
    (``scincl``, ``specter``) is not that model: no published row, no paper comparison, no
    paper label. Only the built-in entry (here: ``random``) is recorded."""
    import mdcr
    from tests.unit.benchmark.test_api import Bag

    home = evaluated["home"]
    scores_file = home / "scores_random.json"
    argv = ["evaluate", "--scores", str(scores_file), "--name", "scincl"]
    assert main([*argv, "--benchmark", str(FIXTURE), "--home", str(home)]) == 0
    out = capsys.readouterr().out
    assert "scincl on MDCR test:" in out and "published AVG" not in out
    assert "published AVG" not in evaluated["stdout"]  # random has no published results
    mdcr.evaluate(Bag(1.0), benchmark=FIXTURE, home=home, name="specter")
    entries = {}
    for folder in (home / "benchmark-score").iterdir():
        manifest = json.loads((folder / "manifest.json").read_text())
        entries.update(manifest["info"]["builtin_entries"])
        md = (folder / "report.md").read_text()
        assert "Published MDCR" not in md and "Comparison with the paper" not in md
        header = (folder / "tables" / "mdcr_test_table3.csv").read_text().splitlines()[0]
        assert "SciNCL" not in header and "SPECTER" not in header and "Specter" not in header
    assert entries["scincl"] is None and entries["specter"] is None
    assert entries["random"]["builtin"] == "random" and entries["random"]["options"] == {}


@pytest.mark.parametrize(
    ("request_args", "message"),
    [
        ({"encoders": ("nonsense",)}, "unknown encoder 'nonsense'; valid encoders: bm25, "),
        ({"encoders": ("random",), "encode_set": ("dim",)}, "--encode-set 'dim': expected KEY"),
        ({"scores": Path("/nonexistent/s.json")}, "--scores: '/nonexistent/s.json' is not a file"),
    ],
)
def test_evaluate_requests_that_cannot_work_name_the_option(
    request_args: dict, message: str
) -> None:
    from mdcr.core.errors import ConfigError
    from mdcr.core.hints import typed_in
    from mdcr.evaluation.request import EvaluateRequest

    req = EvaluateRequest(benchmark=FIXTURE, **request_args)
    with typed_in("cli", "evaluate"), pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        req.check()


def test_python_errors_speak_of_arguments_not_flags(tmp_path: Path) -> None:
    import mdcr
    from mdcr.core.errors import ConfigError

    home = tmp_path / "home"
    cases = [
        ({"benchmark": 123}, "benchmark=123: give a folder as a str or a pathlib.Path"),
        ({"pools": 4.5}, "pools=4.5: give a folder"),
        ({"pools": tmp_path, "benchmark": FIXTURE}, "pools= cannot be combined with benchmark="),
        ({"benchmark": FIXTURE, "encode_options": {"dim": "x"}}, "encode_options"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ConfigError, match=re.escape(message)) as info:
            mdcr.evaluate("random", home=home, **kwargs)
        text = str(info.value)
        assert "\n" not in text and "--" not in text, text
