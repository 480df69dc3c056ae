"""Retriever names in ``mdcr evaluate``: NAME=SPEC, per-retriever encode options, readable
default names, and no two retrievers under one name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mdcr.cli import main
from mdcr.core.errors import ConfigError
from mdcr.encoders.naming import model_object_name, name_retrievers
from tests.unit.evaluation.test_evaluate import FIXTURE, _printed


def _encode_params(home: Path) -> list[dict]:
    from mdcr.core.manifests import read_manifest

    out = []
    for p in sorted((home / "encode").iterdir()):
        manifest = read_manifest(p) if not p.name.startswith(".") else None
        if manifest is not None:
            out.append(manifest["params"])
    return out


def test_named_retrievers_with_their_own_options_in_one_command(tmp_path: Path, capsys) -> None:
    """Two variants of one encoder in one command: each named, each with its own option
    (``b.seed=7``), both with the option for all (``dim=16``); different numbers."""
    home = tmp_path / "home"
    argv = ["evaluate", "--benchmark", str(FIXTURE), "--home", str(home), "-q"]
    argv += ["--encoder", "a=random", "--encoder", "b=random"]
    argv += ["--encode-set", "dim=16", "--encode-set", "b.seed=7"]
    assert main(argv) == 0
    printed = _printed(capsys.readouterr().out)
    assert sorted(printed) == ["a", "b"]
    assert printed["a"]["AVG"] != printed["b"]["AVG"]
    params = _encode_params(home)
    assert sorted(str(p["seed"]) for p in params) == ["7", "None"]  # a's unset: its default 0
    assert [p["dim"] for p in params] == [16, 16]
    # --name names a single encoder
    assert main([*argv[:6], "--encoder", "random", "--name", "mine"]) == 0
    assert list(_printed(capsys.readouterr().out)) == ["mine"]


def test_two_retrievers_under_one_name_are_a_one_line_error(tmp_path: Path, capsys) -> None:
    argv = ["evaluate", "--benchmark", str(FIXTURE), "--home", str(tmp_path), "-q"]
    assert main([*argv, "--encoder", "x=random", "--encoder", "x=bm25"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "'x' (x=random, x=bm25)" in err and "--encoder NAME=SPEC" in err
    assert main([*argv, "--encoder", "random", "--encode-set", "zz.seed=1"]) == 2
    assert "no retriever named 'zz'" in capsys.readouterr().err
    assert main([*argv, "--encoder", "a=random", "--encoder", "b=random", "--name", "n"]) == 2
    assert "--encoder NAME=SPEC" in capsys.readouterr().err


def test_default_names_are_readable_and_never_equal(tmp_path: Path) -> None:
    from mdcr.encoders.models.hf import minilm_path

    assert name_retrievers(["minilm", "bm25", "hf:org/model-x"]) == [
        ("minilm", "minilm"),
        ("bm25", "bm25"),
        ("org/model-x", "hf:org/model-x"),
    ]
    # a sentence-transformers folder: its model card's title, not the path
    ((name, _),) = name_retrievers([f"hf:{minilm_path()}"])
    assert name == "all-MiniLM-L6-v2"
    # two folders with the same last part: a short hash of each spec
    for parent in ("one", "two"):
        (tmp_path / parent / "enc").mkdir(parents=True)
        (tmp_path / parent / "enc" / "config.json").write_text(json.dumps({}))
    one, two = f"hf:{tmp_path / 'one' / 'enc'}", f"hf:{tmp_path / 'two' / 'enc'}"
    names = [n for n, _ in name_retrievers([one, two])]
    assert names[0] != names[1] and all(n.startswith("enc-") and len(n) == 10 for n in names)
    assert name_retrievers([one]) == [("enc", one)]
    # a folder named model: its parent's name
    (tmp_path / "mine" / "model").mkdir(parents=True)
    assert name_retrievers([f"hf:{tmp_path / 'mine' / 'model'}"])[0][0] == "mine"
    # an explicit name wins; the default it would equal gets the hash
    named = name_retrievers(["random", "random=minilm"])
    assert named[1] == ("random", "minilm") and named[0][0].startswith("random-")
    with pytest.raises(ConfigError, match="no encoder after"):
        name_retrievers(["x="])


class _Card:
    def __init__(self, **kw: str | None) -> None:
        self.model_name = kw.get("model_name")
        self.model_id = kw.get("model_id")
        self.base_model = kw.get("base_model")


class _Config:
    def __init__(self, path: str) -> None:
        self.name_or_path = path


class SentenceTransformer:  # named like the real class: its name is no answer
    def __init__(self, card: _Card | None = None, config: _Config | None = None) -> None:
        if card is not None:
            self.model_card_data = card
        if config is not None:
            self.config = config


def test_a_model_objects_default_name(tmp_path: Path) -> None:
    digest = "abcdef0123456789"
    card = _Card(model_name="my-model", base_model="org/base")
    assert model_object_name(SentenceTransformer(card), digest) == "my-model"
    assert model_object_name(SentenceTransformer(_Card(base_model="org/base")), digest) == (
        "org/base"
    )
    (tmp_path / "ckpt").mkdir()
    cfg = _Config(str(tmp_path / "ckpt"))
    assert model_object_name(SentenceTransformer(_Card(), cfg), digest) == "ckpt"
    assert model_object_name(SentenceTransformer(), digest) == "SentenceTransformer-abcdef"


def test_the_api_name_labels_the_retriever_and_never_reencodes(tmp_path: Path) -> None:
    """``name=`` is the retriever's label: renaming a model object reuses its embeddings."""
    import numpy as np

    import mdcr

    class Bag:
        def encode(self, strings: list[str]) -> np.ndarray:
            return np.array([[len(s), s.count("a") + 1.0] for s in strings], dtype=np.float32)

    home = tmp_path / "home"
    first = mdcr.evaluate(Bag(), benchmark=FIXTURE, home=home, name="first")
    second = mdcr.evaluate(Bag(), benchmark=FIXTURE, home=home, name="second")
    assert set(first.summary["retriever"]) == {"first"}
    assert set(second.summary["retriever"]) == {"second"}
    assert len(_encode_params(home)) == 1
    third = mdcr.evaluate(Bag(), benchmark=FIXTURE, home=home)
    (name,) = set(third.summary["retriever"])
    assert name.startswith("Bag-") and len(name) == len("Bag-") + 6


def test_status_lines_and_the_bar_show_the_users_name_not_the_folder(
    tmp_path: Path, capsys
) -> None:
    """`--encoder mini=hf:/some/folder`: every status line and the encode bar say `mini`,
    never the folder; the name is a label, so another name reuses the encoding."""
    from mdcr.encoders.models.hf import minilm_path

    folder = str(minilm_path())
    home = tmp_path / "home"
    argv = ["evaluate", "--benchmark", str(FIXTURE), "--home", str(home)]
    assert main([*argv, "--encoder", f"mini=hf:{folder}"]) == 0
    err = capsys.readouterr().err
    assert "encode mini: " in err  # the bar
    assert "[encode] mini: 104 papers in 1 shard(s)" in err
    assert "[encode] mini: encoded 104 papers" in err
    assert folder not in err
    assert main([*argv, "--encoder", f"other=hf:{folder}"]) == 0  # renamed: not re-encoded
    err = capsys.readouterr().err
    assert "up to date" in err and "encode other" not in err and folder not in err
    assert len(_encode_params(home)) == 1
    (params,) = _encode_params(home)
    assert "label" not in params  # a setting: never hashed
