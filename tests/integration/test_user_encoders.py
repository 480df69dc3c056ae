"""The encoders users bring, through every path, against a reference computed here.

Each round of trying mdcr as a new user would found a new way for one encoder to be
treated differently on different paths (refused on the command line, ranked by raw inner
product on pools and by cosine on a benchmark, reloaded by the Python API). This matrix
keeps it one encoder, one number:

- **encoders**: a torch ``nn.Module`` with a ``.pt`` state dict; a sentence-transformers
  model in a wrapper; an ``AutoModel`` wrapper; numpy ``cos`` with vectors that are not
  unit length; numpy ``ip``; weights loaded lazily on the first ``encode``; a helper in a
  subpackage; a multi-vector encoder; one that is not deterministic;
- **paths**: the command line in a subprocess started in another folder, the Python API
  with the spec and with the object; on a benchmark and on pools;
- **checks**: the same per-query values on every path, each equal to a reference computed
  in this test from the encoder's own vectors (in the store's documented form: unit length
  for ``cos``, float16) with pytrec_eval; after an edit of each kind (code, a weights file,
  a helper, an environment variable), the number of a fresh store.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import mdcr
from tests.integration.benchmark.helpers import make_corpus, make_pools
from tests.integration.encoders.fixtures import make_tiny_bert

pytestmark = [pytest.mark.slow, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "tests" / "data" / "mdcr_format_fixture"
MDCR = Path(sys.executable).parent / "mdcr"

FEATURES = '''
import zlib

import numpy as np


def grams(papers, dim):
    """Hashed word counts of title and abstract: a stand-in for a model's input."""
    out = np.zeros((len(papers), dim), dtype=np.float32)
    for i, p in enumerate(papers):
        for w in f"{p.title} {p.abstract}".lower().split():
            out[i, zlib.crc32(w.encode()) % dim] += 1.0
    return out
'''

MODULES = {
    "u_features.py": FEATURES,
    "u_torch.py": """
import pathlib

import torch

from u_features import grams


class TorchEnc(torch.nn.Module):
    name, dim, metric = "torch-enc", 8, "ip"

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(32, self.dim)
        weights = pathlib.Path(__file__).with_name("torch_weights.pt")
        self.proj.load_state_dict(torch.load(weights))
        self.eval()

    @torch.no_grad()
    def encode(self, papers):
        return self.proj(torch.from_numpy(grams(papers, 32))).numpy()
""",
    "u_st.py": """
import os

from sentence_transformers import SentenceTransformer


class StEnc:
    name, metric = "st-enc", "cos"

    def __init__(self):
        self.model = SentenceTransformer(os.environ["U_ST_FOLDER"], device="cpu")
        self.dim = self.model.get_embedding_dimension()

    def encode(self, papers):
        texts = [f"{p.title} {p.abstract}" for p in papers]
        return 3.0 * self.model.encode(texts, convert_to_numpy=True, batch_size=8)
""",
    "u_auto.py": """
import os

import torch
from transformers import AutoModel, AutoTokenizer


class AutoEnc:
    name, metric = "auto-enc", "cos"

    def __init__(self):
        folder = os.environ["U_BERT_FOLDER"]
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModel.from_pretrained(folder).eval()
        self.dim = self.model.config.hidden_size

    @torch.no_grad()
    def encode(self, papers):
        batch = self.tokenizer(
            [f"{p.title} {p.abstract}" for p in papers],
            padding=True, truncation=True, max_length=64, return_tensors="pt",
        )
        hidden = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        return ((hidden * mask).sum(1) / mask.sum(1)).numpy()
""",
    "u_cos.py": """
from u_features import grams


class CosEnc:
    name, dim, metric = "cos-enc", 24, "cos"

    def encode(self, papers):
        return 7.0 * grams(papers, 24) + 1.0  # far from unit length
""",
    "u_ip.py": """
from u_features import grams


class IpEnc:
    name, dim, metric = "ip-enc", 24, "ip"

    def encode(self, papers):
        return grams(papers, 24)
""",
    "u_lazy.py": """
import pathlib

import numpy as np

from u_features import grams


class LazyEnc:
    name, dim, metric = "lazy-enc", 6, "ip"

    def __init__(self):
        self.w = None

    def encode(self, papers):
        if self.w is None:  # weights read on the first call only
            self.w = np.load(pathlib.Path(__file__).with_name("lazy_weights.npy"))
        return grams(papers, 16) @ self.w
""",
    "u_pkg/__init__.py": "",
    "u_pkg/model.py": """
from u_pkg.sub.helpers import features


class PkgEnc:
    name, dim, metric = "pkg-enc", 16, "ip"

    def encode(self, papers):
        return features(papers)
""",
    "u_pkg/sub/__init__.py": "",
    "u_pkg/sub/helpers.py": """
from u_features import grams

WEIGHT = 1.0


def features(papers):
    x = grams(papers, 16)
    x[:, 0] *= WEIGHT
    return x
""",
    "u_multi.py": """
import numpy as np

from u_features import grams


W = np.random.default_rng(0).normal(size=(12, 12))  # real-valued scores: no ties


class MultiEnc:
    name, dim, metric = "multi-enc", 12, "ip"
    multi_vector = True

    def encode(self, papers):
        vectors, offsets = [], [0]
        for p in papers:
            pieces = [s for s in p.abstract.split(". ") if s.strip()] or [p.title or "-"]
            rows = [grams([type(p)(p.paper_id, p.title, s)], 12)[0] @ W for s in pieces]
            vectors.extend(rows)
            offsets.append(offsets[-1] + len(rows))
        return np.stack(vectors), np.array(offsets, dtype=np.int64)
""",
    "u_random.py": """
import numpy as np


class RandomEnc:
    name, dim, metric = "random-enc", 8, "ip"

    def encode(self, papers):
        return np.random.default_rng().standard_normal((len(papers), self.dim)).astype("f4")
""",
}

# (spec, module, attribute) of the deterministic encoders.
ENCODERS = [
    ("py:u_torch:TorchEnc", "u_torch", "TorchEnc"),
    ("py:u_st:StEnc", "u_st", "StEnc"),
    ("py:u_auto:AutoEnc", "u_auto", "AutoEnc"),
    ("py:u_cos:CosEnc", "u_cos", "CosEnc"),
    ("py:u_ip:IpEnc", "u_ip", "IpEnc"),
    ("py:u_lazy:LazyEnc", "u_lazy", "LazyEnc"),
    ("py:u_pkg.model:PkgEnc", "u_pkg.model", "PkgEnc"),
    ("py:u_multi:MultiEnc", "u_multi", "MultiEnc"),
]
RANDOM = "py:u_random:RandomEnc"


def _write_user_code(folder: Path, models: Path) -> None:
    import torch

    for rel, text in MODULES.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    torch.manual_seed(0)
    torch.save(torch.nn.Linear(32, 8).state_dict(), folder / "torch_weights.pt")
    np.save(folder / "lazy_weights.npy", np.random.default_rng(0).normal(size=(16, 6)))
    make_tiny_bert(models / "bert")
    _save_tiny_st(models / "bert", models / "st")


def _save_tiny_st(bert: Path, out: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    word = Transformer(str(bert), max_seq_length=64)
    pooling = Pooling(word.get_embedding_dimension(), pooling_mode="mean")
    SentenceTransformer(modules=[word, pooling], device="cpu").save(str(out))


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The user's code folder, the models it reads, an unrelated working folder, the
    environment a user's shell has, and pools to score on."""
    root = tmp_path_factory.mktemp("user")
    code, models, elsewhere = root / "code", root / "models", root / "elsewhere"
    for folder in (code, models, elsewhere):
        folder.mkdir()
    _write_user_code(code, models)
    env = {
        **os.environ,
        "PYTHONPATH": str(code),
        "U_ST_FOLDER": str(models / "st"),
        "U_BERT_FOLDER": str(models / "bert"),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    home = root / "pools-home"
    corpus = make_corpus(root / "corpus", n_papers=3000)
    pools = make_pools(
        home, corpus, field_queries=3, field_pool_size=200, fields=("Biology", "Medicine")
    )
    with pytest.MonkeyPatch.context() as mp:
        for key in ("U_ST_FOLDER", "U_BERT_FOLDER"):
            mp.setenv(key, env[key])
        mp.syspath_prepend(str(code))
        yield {"code": code, "elsewhere": elsewhere, "env": env, "pools": pools, "root": root}
    for name in [m for m in sys.modules if m.startswith("u_")]:
        del sys.modules[name]


# ----------------------------------------------------------------------- the reference


def _stored(vectors: np.ndarray, metric: str) -> np.ndarray:
    """The documented store form: unit length for cos, float16."""
    x = np.asarray(vectors, dtype=np.float64)
    if metric == "cos":
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float16).astype(np.float64)


def _reference_vectors(module: str, attr: str, papers: list[Any]) -> dict[str, Any]:
    import importlib

    enc = getattr(importlib.import_module(module), attr)()
    out = enc.encode(papers)
    if getattr(enc, "multi_vector", False):
        vectors, offsets = out
        stored = _stored(vectors, enc.metric)
        return {p.paper_id: stored[offsets[i] : offsets[i + 1]] for i, p in enumerate(papers)}
    stored = _stored(out, enc.metric)
    return {p.paper_id: stored[i : i + 1] for i, p in enumerate(papers)}


def _score(q: np.ndarray, d: np.ndarray) -> float:
    return float((q @ d.T).max(axis=0).max())  # one vector each: their product


def _benchmark_reference(module: str, attr: str) -> dict[str, float]:
    """MAP per test query of the fixture benchmark, as pytrec_eval scores the ranking."""
    import json

    import pytrec_eval

    from mdcr.encoders.base import PaperText

    lists = json.loads((BENCH / "mdcr_test.json").read_text())
    rows = [json.loads(line) for line in (BENCH / "mdcr_test_data.jsonl").open()]
    papers = [PaperText(str(r["paper_id"]), r["title"] or "", r["abstract"] or "") for r in rows]
    vec = _reference_vectors(module, attr, papers)
    run, qrels = {}, {}
    for per_query in lists.values():
        for qid, cands in per_query.items():
            ids = {str(c) for kind in cands.values() for c in kind}
            run[qid] = {c: _score(vec[qid], vec[c]) for c in ids}
            qrels[qid] = {str(c): 1 for c in cands["true"]}
    scored = pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(run)
    return {q: 100 * v["map"] for q, v in scored.items()}


def _pools_reference(module: str, attr: str, pools: Path) -> dict[tuple[str, str], float]:
    """MAP@500 per (pool, query), the top 500 of each pool by the stored vectors' scores
    (the query itself left out), as pytrec_eval's map_cut_500 scores it."""
    import pytrec_eval

    from mdcr.encoders.base import PaperText

    members = pq.read_table(pools / "pools.parquet").to_pandas()
    qrels_t = pq.read_table(pools / "qrels.parquet").to_pandas()
    papers_file = _corpus_of(pools)
    texts = pq.read_table(papers_file, columns=["paper_id", "title", "abstract"]).to_pandas()
    needed = set(members["paper_id"].astype(str)) | set(qrels_t["query_id"].astype(str))
    texts = texts[texts["paper_id"].astype(str).isin(needed)]
    papers = [
        PaperText(str(r.paper_id), r.title or "", r.abstract or "") for r in texts.itertuples()
    ]
    vec = _reference_vectors(module, attr, papers)
    out: dict[tuple[str, str], float] = {}
    for pool_id, group in members.groupby("pool_id", observed=True):
        ids = group["paper_id"].astype(str).tolist()
        rel = qrels_t[qrels_t["pool_id"] == pool_id]
        run, qrels = {}, {}
        for qid, judged in rel.groupby("query_id", observed=True):
            scores = {c: _score(vec[str(qid)], vec[c]) for c in ids if c != str(qid)}
            top = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:500]
            run[str(qid)] = dict(top)
            qrels[str(qid)] = {
                str(p): int(r) for p, r in zip(judged["paper_id"], judged["relevance"], strict=True)
            }
        scored = pytrec_eval.RelevanceEvaluator(qrels, {"map_cut"}).evaluate(run)
        out.update({(str(pool_id), q): 100 * v["map_cut_500"] for q, v in scored.items()})
    return out


def _corpus_of(pools: Path) -> Path:
    from mdcr.contracts.outputs import input_paths

    return input_paths(pools, "corpus")[0] / "papers.parquet"


# ----------------------------------------------------------------------- the paths


def _cli(user: dict[str, Any], home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``mdcr evaluate ...`` in a subprocess started in an unrelated folder."""
    env = {**user["env"], "MDCR_HOME": str(home)}
    return subprocess.run(
        [str(MDCR), "evaluate", *args],
        cwd=user["elsewhere"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _report_folder(stdout: str) -> Path:
    found = re.findall(r"^report: (.+)$", stdout, flags=re.M)
    assert found, stdout
    return Path(found[-1]).parent


def _bench_values(folder: Path) -> pd.DataFrame:
    """(retriever, query_id) -> MAP × 100 on the test split, from benchmark-score."""
    pq_ = pq.read_table(folder / "per_query.parquet").to_pandas()
    pq_ = pq_[(pq_["metric"] == "map") & (pq_["split"] == "test")]
    if "subset" in pq_:
        pq_ = pq_[pq_["subset"] == "all"]
    return pq_.set_index(["retriever", "query_id"])["value"] * 100


def _api_values(result: Any, measure: str = "MAP") -> pd.Series:
    """(retriever, query_id) -> value on a benchmark's test split; (retriever, pool_id,
    query_id) -> value on pools (every pool, both splits)."""
    rows = result.per_query
    rows = rows[rows["measure"] == measure]
    if (rows["setup"] == "mdcr").all():
        rows = rows[rows["split"] == "test"]
        return rows.set_index(["retriever", "query_id"])["value"]
    return rows.set_index(["retriever", "pool_id", "query_id"])["value"]


@pytest.fixture(scope="module")
def bench_cli(user: dict[str, Any]) -> dict[str, Any]:
    """``mdcr evaluate`` of every deterministic encoder on the benchmark, one subprocess in
    another folder, from a copy of the user's code: the CLI path of the benchmark test and
    the "before" of each edit test (which edits that copy and runs again in this store)."""
    import shutil

    code = user["root"] / "cli-code"
    shutil.copytree(user["code"], code)
    env = {**user["env"], "PYTHONPATH": str(code)}
    home = user["root"] / "cli-home"
    specs = [spec for spec, _, _ in ENCODERS]
    args = [a for spec in specs for a in ("--encoder", spec)] + ["--benchmark", str(BENCH)]
    done = _cli({**user, "env": env}, home, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    return {
        "code": code,
        "env": env,
        "home": home,
        "values": _bench_values(_report_folder(done.stdout)),
    }


def test_every_encoder_scores_one_number_on_every_benchmark_path(
    user: dict[str, Any], bench_cli: dict[str, Any]
) -> None:
    cli = bench_cli["values"]
    for spec, module, attr in ENCODERS:
        name = spec.removeprefix("py:")
        reference = pd.Series(_benchmark_reference(module, attr)).sort_index()
        by_cli = cli.xs(name, level="retriever").sort_index()
        assert np.allclose(by_cli.to_numpy(), reference.to_numpy(), atol=1e-9), spec
        spec_result = mdcr.evaluate(spec, benchmark=BENCH, home=user["root"] / "api-home")
        by_spec = _api_values(spec_result).xs(name, level="retriever").sort_index()
        assert np.allclose(by_spec.to_numpy(), reference.to_numpy(), atol=1e-9), spec
        import importlib

        obj = getattr(importlib.import_module(module), attr)()
        obj_result = mdcr.evaluate(obj, benchmark=BENCH, home=user["root"] / "obj-home")
        by_obj = _api_values(obj_result).droplevel("retriever").sort_index()
        assert np.allclose(by_obj.to_numpy(), reference.to_numpy(), atol=1e-9), spec


def test_every_encoder_scores_one_number_on_every_pools_path(user: dict[str, Any]) -> None:
    pools = user["pools"]
    chosen = [e for e in ENCODERS if e[1] in ("u_torch", "u_cos", "u_st", "u_multi", "u_lazy")]
    args = [a for spec, _, _ in chosen for a in ("--encoder", spec)] + ["--pools", str(pools)]
    home = user["root"] / "pools-cli-home"  # $MDCR_HOME: the store the CLI writes to
    done = _cli(user, home, *args)
    assert done.returncode == 0, done.stderr[-3000:]
    encoded = sorted((home / "encode").iterdir())
    references = {}
    # Every spec first: their report holds the CLI's retrievers alone, found up to date;
    # then the objects, each adding one retriever (one report each).
    for spec, module, attr in chosen:
        name = spec.removeprefix("py:")
        reference = pd.Series(_pools_reference(module, attr, pools)).sort_index()
        references[spec] = reference
        result = mdcr.evaluate(spec, pools=pools, home=home)  # found up to date
        by_spec = _api_values(result).xs(name, level="retriever").sort_index()
        by_spec = by_spec.reindex(reference.index)
        assert np.allclose(by_spec.to_numpy(), reference.to_numpy(), atol=1e-9), spec
    # The API by spec found the command line's vectors: one encoder, one fingerprint.
    assert sorted((home / "encode").iterdir()) == encoded
    import importlib

    for spec, module, attr in chosen:
        reference = references[spec]
        obj = getattr(importlib.import_module(module), attr)()
        label = f"{module}-object"
        obj_result = mdcr.evaluate(obj, pools=pools, name=label, home=home)
        by_obj = _api_values(obj_result).xs(label, level="retriever").sort_index()
        by_obj = by_obj.reindex(reference.index)
        assert np.allclose(by_obj.to_numpy(), reference.to_numpy(), atol=1e-9), spec


def test_an_encoder_that_is_not_deterministic_is_named_so(user: dict[str, Any]) -> None:
    home = user["root"] / "random-home"
    first = _cli(user, home, "--encoder", RANDOM, "--benchmark", str(BENCH))
    assert first.returncode == 0, first.stderr[-3000:]
    notice = "encoder 'u_random:RandomEnc' is not deterministic"
    assert notice in first.stderr
    assert "not reproducible" in first.stdout
    report = (_report_folder(first.stdout) / "report.md").read_text()
    assert f"**Not reproducible**: {notice}" in report
    again = _cli(user, home, "--encoder", RANDOM, "--benchmark", str(BENCH))
    assert notice in again.stderr  # said again on reuse, with the same fingerprint
    assert re.search(r"\[encode\S*\] up to date", again.stderr), again.stderr[-2000:]
    assert _bench_values(_report_folder(first.stdout)).equals(
        _bench_values(_report_folder(again.stdout))
    )
    show = subprocess.run(
        [str(MDCR), "ls", "encode"],
        env={**user["env"], "MDCR_HOME": str(home)},
        capture_output=True,
        text=True,
        check=True,
    )
    fp = re.search(r"encode\s+([0-9a-f]{16})", show.stdout)
    assert fp is not None
    shown = subprocess.run(
        [str(MDCR), "show", fp.group(1)],
        env={**user["env"], "MDCR_HOME": str(home)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert notice in shown.stdout


EDITS = {
    "code": (
        "u_ip.py",
        lambda t: t.replace(
            "return grams(papers, 24)", "return grams(papers, 24)[:, ::-1].cumsum(1)"
        ),
    ),
    "helper": ("u_pkg/sub/helpers.py", lambda t: t.replace("WEIGHT = 1.0", "WEIGHT = 9.0")),
}


EDIT_SPECS = {
    "code": "py:u_ip:IpEnc",
    "helper": "py:u_pkg.model:PkgEnc",
    "weights": "py:u_torch:TorchEnc",
    "environment": "py:u_st:StEnc",
}


def _edit(kind: str, code: Path, env: dict[str, str], other_st: Path) -> dict[str, str]:
    """Make the edit of ``kind`` in the user's ``code``; the environment to run it in."""
    if kind in EDITS:
        rel, edit = EDITS[kind]
        (code / rel).write_text(edit((code / rel).read_text()))
    elif kind == "weights":
        import torch

        torch.manual_seed(1)
        torch.save(torch.nn.Linear(32, 8).state_dict(), code / "torch_weights.pt")
    else:  # another model folder behind the same variable
        return {**env, "U_ST_FOLDER": str(other_st)}
    return env


@pytest.fixture(scope="module")
def edited_fresh(user: dict[str, Any]) -> dict[str, Any]:
    """The numbers of a fresh store after every edit: one subprocess, all four edited
    encoders, in a new home, from a copy of the code with all four edits made. Each edit
    touches what one encoder alone reads (its module, its helper, its weights file, its
    variable), so each encoder's number here is that of a fresh store after its own edit."""
    import shutil

    root = user["root"] / "edited"
    code = root / "code"
    shutil.copytree(user["code"], code)
    other = root / "st-other"
    make_tiny_bert(root / "bert-other", seed=3)
    _save_tiny_st(root / "bert-other", other)
    env = {**user["env"], "PYTHONPATH": str(code)}
    for kind in EDIT_SPECS:
        env = _edit(kind, code, env, other)
    args = [a for spec in EDIT_SPECS.values() for a in ("--encoder", spec)]
    done = _cli({**user, "env": env}, root / "fresh", *args, "--benchmark", str(BENCH))
    assert done.returncode == 0, done.stderr[-3000:]
    return {"other_st": other, "values": _bench_values(_report_folder(done.stdout))}


@pytest.mark.parametrize("kind", ["code", "helper", "weights", "environment"])
def test_after_an_edit_the_number_is_that_of_a_fresh_store(
    user: dict[str, Any], bench_cli: dict[str, Any], edited_fresh: dict[str, Any], kind: str
) -> None:
    """The edit is made in the code the benchmark CLI call ran (its "before", in its store)
    and undone afterwards; the encoders of the other edit tests read none of its files."""
    code = bench_cli["code"]
    spec = EDIT_SPECS[kind]
    name = spec.removeprefix("py:")
    kept = {p: p.read_bytes() for p in code.rglob("*") if p.is_file()}
    try:
        env = _edit(kind, code, bench_cli["env"], edited_fresh["other_st"])
        after = _cli(
            {**user, "env": env}, bench_cli["home"], "--encoder", spec, "--benchmark", str(BENCH)
        )
    finally:
        for path, data in kept.items():
            path.write_bytes(data)
    assert after.returncode == 0, after.stderr[-3000:]
    got = _bench_values(_report_folder(after.stdout)).xs(name, level="retriever")
    assert got.equals(edited_fresh["values"].xs(name, level="retriever"))
    assert not got.equals(bench_cli["values"].xs(name, level="retriever"))
