"""The same model, the same numbers: MTEB's MAP / nDCG / recall on an exported MDCR
benchmark or pool equal mdcr's for a sentence-transformers model (wrapped by MTEB's
sentence-transformers wrapper and handed to ``mdcr.evaluate``), at the same cut-offs; the
exported MTEB result files load with MTEB's own loader and hold those numbers; an MTEB
model with distinct query and document prompts scores as the ``hf:`` route with the same
prompts; and MiniLM, exported with its own input format, reads the same text in both.

Where the check is that two paths compute the same numbers, which holds for any weights,
the model is a tiny random one with MiniLM's tokenizer
(:func:`~tests.integration.ecosystem.helpers.make_tiny_sentence_transformer`, built once
for the module): encoding 600 papers twice costs seconds where MiniLM took minutes."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pandas as pd
import pytest

import mdcr
import mdcr.ecosystem.beir.export
import mdcr.mteb
from mdcr.cli import main
from tests.integration.benchmark.helpers import make_corpus, make_pools
from tests.integration.ecosystem.helpers import (
    FIXTURE,
    import_fixture,
    make_tiny_sentence_transformer,
    minilm_for_mteb,
    mteb_scores,
    sentence_transformer_for_mteb,
)

# MTEB rounds its scores to 5 decimals: equal to that precision (half its last digit).
# mdcr stores float16 vectors, MTEB scores float32 ones; on these data no ranking differs.
TOL = 5e-6 + 1e-12


def _cli(*args: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(list(args)) == 0
    return buf.getvalue()


def _means(summary: pd.DataFrame, name: str) -> dict[tuple[str, str], float]:
    rows = summary[(summary["retriever"] == name) & (summary["field"] != "AVG")]
    return {(r.field, r.measure): r.mean / 100 for r in rows.itertuples(index=False)}


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of a tiny random sentence-transformers model, built once."""
    return make_tiny_sentence_transformer(tmp_path_factory.mktemp("tiny-st"))


@pytest.mark.slow
def test_mdcr_fixture_mteb_equals_mdcr_and_results_load(tmp_path: Path, tiny_st: Path) -> None:
    home = tmp_path / "home"
    model = sentence_transformer_for_mteb(tiny_st)
    result = mdcr.evaluate(model, benchmark=FIXTURE, home=home, name="tiny-mteb")
    ours = _means(result.summary, "tiny-mteb")
    bench = import_fixture(home)
    _cli("export", "--format", "beir", "--benchmark", str(bench), "--out", str(tmp_path / "x"))
    theirs = mteb_scores(model, mdcr.mteb.tasks(tmp_path / "x"))
    fields = {f for f, _ in ours}
    assert len(fields) == 3 and len(theirs) == 3
    names = {"MAP": "map_at_1000", "nDCG": "ndcg_at_1000", "R@5": "recall_at_5"}
    for (field, measure), value in ours.items():
        got = theirs[f"mdcr.{field.replace(' ', '_')}"]["test"][names[measure]]
        assert abs(got - value) <= TOL, (field, measure, got, value)

    # the MTEB result files of that run, read back by MTEB's ResultCache
    from mteb.cache import ResultCache

    score = next((home / "benchmark-score").glob("[0-9a-f]*"))
    _cli("export", "--format", "mteb-results", "--run", str(score), "--out", str(tmp_path / "r"))
    loaded = ResultCache(tmp_path / "r").load_results(require_model_meta=True, include_remote=False)
    (model_result,) = loaded.model_results
    assert model_result.model_name == "tiny-mteb"
    got = {t.task_name: t.scores["test"][0] for t in model_result.task_results}
    assert set(got) == set(theirs)
    for (field, measure), value in ours.items():
        stored = got[f"mdcr.{field.replace(' ', '_')}"]
        assert abs(stored[names[measure]] - value) <= 1e-6  # files keep 6 decimals
        assert stored["main_score"] == stored["map_at_1000"]


@pytest.mark.slow
def test_a_pool_mteb_equals_mdcr_at_mdcr_cutoffs(tmp_path: Path, tiny_st: Path) -> None:
    """A pool of 600 (past mdcr's depth of 500, so MAP@500 and MTEB's MAP@1000 differ)
    and 4 queries citing about 36 of its papers each: the tiny model ranks them at
    MAP 26%, nDCG 63%, R@30 33%, far from both 0 and 100."""
    home = tmp_path / "home"
    corpus = make_corpus(tmp_path / "corpus", n_papers=2500)
    pools = make_pools(
        home, corpus, field_pool_size=600, fields=("Medicine",), field_queries=4, splits=("test",)
    )
    model = sentence_transformer_for_mteb(tiny_st)
    result = mdcr.evaluate(model, pools=pools, home=home, name="tiny-mteb")
    per_pool = result.per_pool[result.per_pool["retriever"] == "tiny-mteb"]
    _cli("export", "--format", "beir", "--pools", str(pools), "--out", str(tmp_path / "x"))
    tasks = mdcr.mteb.tasks(tmp_path / "x")
    assert tasks and all(t.ignore_identical_ids for t in tasks)
    theirs = mteb_scores(model, tasks)
    names = {"MAP": "map_at_500", "nDCG": "ndcg_at_500", "R@30": "recall_at_30"}
    checked = 0
    for r in per_pool.itertuples(index=False):
        got = theirs[f"mdcr.{r.pool_id.replace('/', '_').replace(' ', '_')}"]["test"]
        # float16 vectors (mdcr) against float32 (MTEB) can swap a near tie 500 deep: equal
        # as mdcr prints them (100 x mean, 1 decimal), and within 1e-4
        theirs_value = got[names[r.measure]]
        assert round(100 * theirs_value, 1) == round(r.value, 1), (r.pool_id, r.measure)
        assert abs(theirs_value - r.value / 100) <= 1e-4, (r.pool_id, r.measure)
        checked += 1
    assert checked == 3 * len(tasks)
    # MTEB's default MAP (k = 1000) counts more ranks than mdcr's MAP@500: not the same
    # measure (on a pool of 600, ranks 501-600 can only add)
    assert all(s["test"]["map_at_1000"] >= s["test"]["map_at_500"] for s in theirs.values())


@pytest.mark.slow
def test_an_mteb_model_with_prompts_scores_as_the_hf_route(tmp_path: Path) -> None:
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    from tests.integration.encoders.fixtures import make_tiny_bert

    t = Transformer(str(make_tiny_bert(tmp_path / "bert")), max_seq_length=64)
    prompts = {"query": "cited by: ", "document": "paper: "}
    st = SentenceTransformer(
        modules=[t, Pooling(t.get_embedding_dimension(), pooling_mode="mean"), Normalize()],
        prompts=prompts,
    )
    st.save(str(tmp_path / "st"))
    home = tmp_path / "home"
    wrapped = SentenceTransformerEncoderWrapper(SentenceTransformer(str(tmp_path / "st")))
    assert wrapped.model_prompts == prompts
    via_mteb = mdcr.evaluate(wrapped, benchmark=FIXTURE, home=home, name="tiny-mteb").summary
    via_hf = mdcr.evaluate(
        f"hf:{tmp_path / 'st'}",
        benchmark=FIXTURE,
        home=home,
        name="tiny-hf",
        encode_options={"input_format": "space"},
    ).summary
    a, b = _means(via_mteb, "tiny-mteb"), _means(via_hf, "tiny-hf")
    assert a.keys() == b.keys() and len(a) == 9
    for key in a:
        assert round(100 * a[key], 1) == round(100 * b[key], 1), key  # as printed
    # the prompts matter: without them the same weights score otherwise
    plain = SentenceTransformerEncoderWrapper(SentenceTransformer(str(tmp_path / "st")))
    plain.model_prompts = {}
    plain.model.prompts = {}
    c = _means(mdcr.evaluate(plain, benchmark=FIXTURE, home=home, name="tiny-plain").summary,
               "tiny-plain")  # fmt: skip
    assert any(abs(c[k] - a[k]) > 1e-9 for k in a)


@pytest.mark.slow
def test_the_export_carries_the_encoders_own_input_format(tmp_path: Path) -> None:
    """mdcr's built-in MiniLM reads ``title [SEP] abstract`` (its default input_format);
    exported with ``--encoder minilm``, MTEB's sentence-transformers MiniLM reads the same
    text and gives mdcr's numbers, where MTEB's own join (title, a space, abstract) gives
    others."""
    home = tmp_path / "home"
    ours = _means(mdcr.evaluate("minilm", benchmark=FIXTURE, home=home).summary, "minilm")
    assert len(ours) == 9
    bench = import_fixture(home)
    out = tmp_path / "x"
    argv = ["export", "--format", "beir", "--benchmark", str(bench), "--out", str(out)]
    _cli(*argv, "--encoder", "minilm")
    index = mdcr.ecosystem.beir.export.read_index(out)
    assert index["text"] == {"encoder": "minilm", "input_format": "sep", "separator": "[SEP]"}
    model = minilm_for_mteb()
    names = {"MAP": "map_at_1000", "nDCG": "ndcg_at_1000", "R@5": "recall_at_5"}

    def gaps(folder: Path) -> list[float]:
        theirs = mteb_scores(model, mdcr.mteb.tasks(folder))
        return [
            abs(theirs[f"mdcr.{field.replace(' ', '_')}"]["test"][names[measure]] - value)
            for (field, measure), value in ours.items()
        ]

    assert max(gaps(out)) <= TOL
    _cli(*argv[:-1], str(tmp_path / "plain"))  # MTEB's join: not what MiniLM read in mdcr
    assert max(gaps(tmp_path / "plain")) > 1e-3
