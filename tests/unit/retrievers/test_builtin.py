"""The built-in encoders are records: labels, paper names and MDCR negative types come from
them, and adding an encoder of a known family is one record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mdcr.retrievers import builtin as builtin_encoders
from mdcr.retrievers.builtin import (
    HF_OPTIONS,
    EncoderRecord,
    mdcr_negative_models,
    negative_type_label,
    paper_names,
    retriever_label,
)


def test_the_records_give_the_labels_paper_names_and_negative_types() -> None:
    from mdcr.retrievers.builtin import MDCR_MODELS
    from mdcr.scoring.mdcr_tables import paper_type_column, type_label

    assert MDCR_MODELS == mdcr_negative_models() == ("bm25", "specter", "scincl")
    assert [type_label(t) for t in (*MDCR_MODELS, "graph", "most_cited", "random")] == [
        "chosen by BM25",
        "chosen by SPECTER",
        "chosen by SciNCL",
        "citation graph",
        "most cited",
        "random papers",
    ]
    assert [paper_type_column(t) for t in (*MDCR_MODELS, "graph", "minilm")] == [
        "BM25",
        "SPECTER",
        "SciNCL",
        "Graph",
        None,
    ]
    assert paper_names() == {
        "bm25": "BM25",
        "scibert": "SciBERT",
        "specter": "Specter",
        "scincl": "SciNCL",
        "aspire-bm": "Aspire-BM",
        "aspire-cs": "Aspire-CS",
    }
    assert [retriever_label(n) for n in ("specter", "minilm", "mine")] == [
        "Specter",
        "MiniLM",
        "mine",
    ]
    assert negative_type_label("minilm") is None  # it chose no MDCR negatives
    # Table 4 of the paper has a column for each negative type the records name.
    from mdcr.scoring.published import paper_values

    table4 = set(paper_values().query("table == 'table4'")["column"])
    assert {paper_type_column(t) for t in MDCR_MODELS} <= table4


def test_a_records_defaults_are_the_ones_hashed() -> None:
    from mdcr.encoders.registry import option_defaults

    records = {r.name: r for r in builtin_encoders.builtin_encoders()}
    assert option_defaults("specter2") == {
        "pooling": "cls",
        "metric": "l2",
        "max_length": 512,
        "input_format": "sep",
    }
    assert option_defaults("aspire-cs") == {"max_length": 502, "metric": "l2", "layers": "last"}
    assert option_defaults("random") == {"dim": 768, "seed": 0}
    assert records["scibert"].option_defaults() == option_defaults("specter")


def test_adding_an_encoder_is_one_record(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A BERT-like model declared in one record is encoded, searched and scored on an MDCR
    benchmark by the normal route, under its record's name, label and defaults."""
    import mdcr
    from tests.unit.encoders.fixtures import make_tiny_bert
    from tests.unit.evaluation.test_evaluate import FIXTURE

    folder = make_tiny_bert(tmp_path / "tiny-bert")
    record = EncoderRecord(
        name="tinybert",
        label="Tiny BERT",
        description="a tiny random BERT built by the test, final-layer [CLS], inner product",
        family="hf",
        model_id=str(folder),
        pooling="cls",
        metric="ip",
        max_length=48,
        input_format="sep",
        layers="last",
        options=HF_OPTIONS,
        dim=32,
        cost=0.05,
    )
    # The whole of adding a built-in encoder of a known family: one record more in
    # mdcr/retrievers/builtin.py's BUILTIN_ENCODERS, registered with them.
    monkeypatch.setattr(
        builtin_encoders, "BUILTIN_ENCODERS", (*builtin_encoders.BUILTIN_ENCODERS, record)
    )
    builtin_encoders.ENCODER_RECORDS.register(record)
    request.addfinalizer(lambda: builtin_encoders.ENCODER_RECORDS.unregister("tinybert"))

    home = tmp_path / "home"
    result = mdcr.evaluate("tinybert", benchmark=FIXTURE, home=home, encode_options={})
    assert set(result.summary["retriever"]) == {"tinybert"}
    assert result.summary["mean"].notna().all()
    # Built with the record's defaults, which the fingerprint hashed.
    (encoded,) = [p for p in (home / "encode").iterdir() if not p.name.startswith(".")]
    manifest = json.loads((encoded / "manifest.json").read_text())
    assert manifest["identity"]["option_defaults"] == {
        "pooling": "cls",
        "metric": "ip",
        "max_length": 48,
        "input_format": "sep",
        "layers": "last",
    }
    meta = json.loads((encoded / "encoder.json").read_text())
    assert (meta["name"], meta["dim"], meta["metric"]) == ("tinybert", 32, "ip")
    assert meta["identity"]["max_length"] == 48
    # A built-in entry by what ran, so reports show the record's label.
    from mdcr.retrievers.builtin_entry import entry_of

    assert entry_of(encoded) == {
        "builtin": "tinybert",
        "model": manifest["identity"]["encoder"],
        "options": {},
    }
    report = Path(result.report_path).read_text()
    assert "Tiny BERT" in report
