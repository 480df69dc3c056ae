"""A Lucene index's key is the store's one hash recipe (canonical JSON -> sha256 -> hex):
computed independently here; an index kept under the key of the former recipe is built
once more, and `mdcr gc` lists the old folder while it keeps the one a result searched."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from mdcr.cli import main
from mdcr.core.manifests import write_manifest
from mdcr.index.lucene.indexes import ANALYZER, INDEX_FORMAT, INDEX_STAGE, index_fingerprint

IDS = ["a", "b", "c"]


def _body(ids: list[str], text: str) -> dict:  # type: ignore[type-arg]
    ids_sha = hashlib.sha256(("\n".join(ids) + "\n").encode()).hexdigest()
    return {
        "format": INDEX_FORMAT,
        "ids": ids_sha,
        "n": len(ids),
        "text": text,
        "analyzer": ANALYZER,
    }


def _former_key(ids: list[str], text: str) -> str:
    """The key as the index module computed it before (json.dumps' default separators)."""
    return hashlib.sha256(json.dumps(_body(ids, text), sort_keys=True).encode()).hexdigest()[:16]


def test_the_index_key_is_the_one_recipe() -> None:
    body = _body(IDS, "raw:corpus")
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert index_fingerprint(IDS, "raw:corpus") == hashlib.sha256(text.encode()).hexdigest()[:16]
    assert index_fingerprint(IDS, "raw:corpus") != _former_key(IDS, "raw:corpus")  # moved once
    assert index_fingerprint(IDS, "raw:corpüs") != index_fingerprint(IDS, "raw:corpus")


def _manifest(home: Path, stage: str, fp: str, inputs: dict, info: dict) -> None:  # type: ignore[type-arg]
    folder = home / stage / fp
    folder.mkdir(parents=True)
    write_manifest(
        folder,
        {"stage": stage, "fingerprint": fp, "inputs": inputs, "info": info, "complete": True},
    )


def test_gc_keeps_the_searched_index_and_lists_the_former_key(
    lucene_jvm: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mdcr.index.lucene.indexes import Doc, build_index, read_index_meta

    home = tmp_path / "store"
    new, old = index_fingerprint(IDS, "raw:corpus"), _former_key(IDS, "raw:corpus")
    for key in (new, old):
        build_index(
            home / INDEX_STAGE / key, IDS, [Doc(IDS, ["x", "y", "z"])], meta={"fingerprint": key}
        )
        assert read_index_meta(home / INDEX_STAGE / key) is not None
    bm25, score = "b" * 16, "c" * 16
    _manifest(home, "bm25", bm25, {}, {"indexes": {"pool-1": new}})
    _manifest(home, "score", score, {"runs": [{"path": "x", "fingerprint": bm25}]}, {})
    assert main(["gc", "--home", str(home)]) == 0
    listed = capsys.readouterr().out
    assert old in listed and new not in listed and bm25 not in listed
    assert main(["gc", "--home", str(home), "--yes"]) == 0
    assert sorted(p.name for p in (home / INDEX_STAGE).iterdir() if not p.name.startswith(".")) == [
        new
    ]
