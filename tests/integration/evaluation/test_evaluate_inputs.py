"""Inputs ``mdcr evaluate`` used to accept without a word: each is now a one-line error
naming the problem and the fix, raised before any output is written where it can be."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from mdcr.cli import main
from tests.integration.evaluation.test_evaluate import FIXTURE

PLAIN = "py:tests.integration.benchmark.plain_encoders:"


def _one_line_error(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def _evaluate(home: Path, benchmark: Path = FIXTURE) -> list[str]:
    return ["evaluate", "--benchmark", str(benchmark), "--home", str(home), "-q"]


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "bench"
    shutil.copytree(FIXTURE, folder)
    return folder


def test_a_name_with_a_space_says_which_names_are_allowed(tmp_path: Path, capsys) -> None:
    err = _one_line_error([*_evaluate(tmp_path), "--encoder", "my model=random"], capsys)
    assert "unknown encoder" not in err
    assert "'my model' cannot name a retriever" in err and "no spaces" in err
    assert "letters, digits and _ . + / -" in err
    assert not (tmp_path / "encode").exists()


@pytest.mark.parametrize(
    ("encoder", "message"),
    [
        ("bm25", "no --encoder here encodes papers (bm25 encodes nothing)"),
        ("random", "encoder 'random' does not take option(s) pooling; its options: dim, seed"),
        (
            f"{PLAIN}NoOptions",
            "is built without an 'options' parameter and takes no options, so pooling would "
            "be ignored",
        ),
    ],
)
def test_an_encode_option_nothing_takes_is_refused(
    tmp_path: Path, capsys, encoder: str, message: str
) -> None:
    """Refused before anything runs: no encode output under a fingerprint the option
    changed, and no numbers printed."""
    argv = [*_evaluate(tmp_path), "--encoder", encoder, "--encode-set", "pooling=mean"]
    err = _one_line_error(argv, capsys)
    assert message in err
    assert not (tmp_path / "encode").exists() and not (tmp_path / "benchmark-rank").exists()


def test_an_encoder_that_takes_no_options_still_runs_without_them(tmp_path: Path, capsys) -> None:
    assert main([*_evaluate(tmp_path), "--encoder", f"{PLAIN}NoOptions"]) == 0
    assert "AVG" in capsys.readouterr().out


def test_asymmetric_must_be_a_bool(tmp_path: Path, capsys) -> None:
    err = _one_line_error([*_evaluate(tmp_path), "--encoder", f"{PLAIN}SaysYes"], capsys)
    assert "encoder 'says-yes' sets asymmetric = 'yes', not a bool" in err
    assert "set it to True or False" in err


def test_an_embedding_store_with_a_non_bool_flag_is_refused(tmp_path: Path, capsys) -> None:
    from mdcr.core.errors import InputDataError
    from mdcr.encoders.store import ENCODER_JSON, EmbeddingStore

    assert main([*_evaluate(tmp_path), "--encoder", "random"]) == 0
    capsys.readouterr()
    (folder,) = [p for p in (tmp_path / "encode").iterdir() if not p.name.startswith(".")]
    copy = tmp_path / "edited"
    shutil.copytree(folder, copy)
    meta = json.loads((copy / ENCODER_JSON).read_text())
    meta["asymmetric"] = "no"  # bool("no") is True
    (copy / ENCODER_JSON).write_text(json.dumps(meta))
    manifest = json.loads((copy / "manifest.json").read_text())  # what the manifest says too
    recorded = manifest["outputs"][ENCODER_JSON]
    recorded["bytes"] = (copy / ENCODER_JSON).stat().st_size
    recorded["sha256"] = hashlib.sha256((copy / ENCODER_JSON).read_bytes()).hexdigest()
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputDataError, match="asymmetric is 'no', not true or false"):
        EmbeddingStore(copy)


def _scores(tmp_path: Path, capsys) -> Path:
    """A scores file of every pair of the fixture (the random encoder's)."""
    out = tmp_path / "scores.json"
    argv = [*_evaluate(tmp_path / "h0"), "--encoder", "random", "--scores-out", str(out)]
    assert main(argv) == 0
    capsys.readouterr()
    return out


def test_a_scores_key_outside_the_benchmark_is_refused(tmp_path: Path, capsys) -> None:
    scores = _scores(tmp_path, capsys)
    assert main([*_evaluate(tmp_path / "h1"), "--scores", str(scores)]) == 0
    capsys.readouterr()
    data = json.loads(scores.read_text())
    data["nosuchquery_nosuchpaper"] = 0.5
    scores.write_text(json.dumps(data))
    err = _one_line_error([*_evaluate(tmp_path / "h1"), "--scores", str(scores)], capsys)
    assert f"1 of {len(data)} keys name no query-candidate pair of the benchmark" in err
    assert "'nosuchquery_nosuchpaper'" in err and str(scores) in err


def test_a_query_among_its_own_candidates_is_refused(tmp_path: Path, capsys) -> None:
    bench = _copy(tmp_path)
    data = json.loads((bench / "mdcr_test.json").read_text())
    field = sorted(data)[0]
    qid = sorted(data[field])[0]
    data[field][qid]["random"].append(qid)
    (bench / "mdcr_test.json").write_text(json.dumps(data))
    err = _one_line_error([*_evaluate(tmp_path / "h", bench), "--encoder", "random"], capsys)
    assert f"query '{qid}' ({field}, test) is listed among its own candidates" in err
    assert "type 'random'" in err and "remove it from its lists" in err


def test_a_field_with_no_queries_is_refused(tmp_path: Path, capsys) -> None:
    """The original scorer would average a NaN; mdcr used to drop the field silently."""
    bench = _copy(tmp_path)
    data = json.loads((bench / "mdcr_test.json").read_text())
    data["Geology"] = {}
    (bench / "mdcr_test.json").write_text(json.dumps(data))
    err = _one_line_error([*_evaluate(tmp_path / "h", bench), "--encoder", "random"], capsys)
    assert "field 'Geology' lists no queries" in err and "remove the field" in err


def test_an_unresolved_hub_model_names_the_flag_of_evaluate(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline with an empty hub cache, the commit to pin is set through evaluate's own
    flag for encode's options, not encode's `--revision`."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    err = _one_line_error([*_evaluate(tmp_path / "home"), "--encoder", "scincl"], capsys)
    assert "`--encode-set revision=<40-hex commit>`" in err and "malteos/scincl" in err


def test_a_damaged_input_is_named_by_the_flag_that_gave_it(tmp_path: Path, capsys) -> None:
    home = tmp_path / "home"
    assert main([*_evaluate(home), "--encoder", "random"]) == 0
    (imported,) = [p for p in (home / "benchmark-import").iterdir() if not p.name.startswith(".")]
    capsys.readouterr()
    data = imported / "benchmark.parquet"
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # the same size, other bytes
    data.write_bytes(bytes(raw))
    argv = [*_evaluate(home, imported), "--encoder", "random", "--encode-set", "dim=8"]
    err = _one_line_error(argv, capsys)
    assert err.startswith(f"mdcr: error: --benchmark '{imported}': the benchmark-import output")
    assert "input '" not in err
