"""Benchmark what identifying a ``py:`` encoder by what it computes costs, beside an encode.

A ``py:`` encoder's fingerprint hashes its code, its built state and its vectors for the
32 probe papers (:mod:`mdcr.encoders.probe`). Planning its step therefore imports and
builds it, digests its state and encodes the probe papers one per call; the run then uses
that very object, so the build is not paid twice. This script measures, in one process,
for a ``py:`` encoder that wraps a real model (:class:`mdcr.encoders.models.hf.HFEncoder`):

- ``build``: building the encoder alone (what any run pays);
- ``identify``: ``identify_encoder`` (import, build, state digest, the fixed probe with 4
  papers encoded again), the plan's cost;
- ``input probe``: choosing the input probe's papers (the longest and a seeded sample of
  the encode's inputs, a DuckDB query over a corpus of ``--corpus`` papers) and encoding
  them, what the encode step's fingerprint adds;
- ``encode N``: the same encoder's ``encode`` over ``--docs`` real S2ORC titles and
  abstracts (``tests/data/s2orc_sample``, resampled), what the step's run then does.

It prints the identity's cost beyond the build as a share of the encode, and as the
number of papers the encoder encodes in that time. Best of ``--rounds``.

    python scripts/bench_probe.py --model minilm --docs 2000
    python scripts/bench_probe.py --model bert-base --docs 1000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SAMPLE = REPO / "tests" / "data" / "s2orc_sample" / "metadata_sample.jsonl"

ENCODER_MODULE = """
from mdcr.encoders.models.hf import HFEncoder


class Wrapped:
    '''A user's encoder around a real model, as researchers write one.'''

    name, metric = "wrapped", "ip"

    def __init__(self):
        self.inner = HFEncoder({source!r}, name="wrapped", max_length=256, device="cpu")
        self.dim = self.inner.dim

    def encode(self, texts):
        return self.inner.encode(texts)
"""


def _model_folder(model: str, tmp: Path) -> str:
    if model == "minilm":
        from mdcr.encoders.models.hf import minilm_path

        return str(minilm_path())
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from mdcr.encoders.models.hf import minilm_path

    folder = tmp / "bert-base"
    BertModel(BertConfig()).save_pretrained(folder)  # BERT-base shape, random weights
    BertTokenizerFast.from_pretrained(minilm_path()).save_pretrained(folder)
    return str(folder)


def _papers(n: int) -> list:
    from mdcr.encoders.base import PaperText

    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    real = [r for r in rows if r.get("title") and r.get("abstract") and len(r["abstract"]) >= 30]
    return [
        PaperText(f"b{i}", real[i % len(real)]["title"], real[i % len(real)]["abstract"])
        for i in range(n)
    ]


def _corpus(path: Path, n: int) -> Path:
    """A papers.parquet of ``n`` papers: the sample's texts, resampled, under new ids."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    real = _papers(min(n, 1000))
    pq.write_table(
        pa.table(
            {
                "paper_id": [f"c{i:08d}" for i in range(n)],
                "title": [real[i % len(real)].title for i in range(n)],
                "abstract": [real[i % len(real)].abstract for i in range(n)],
            }
        ),
        path,
    )
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["minilm", "bert-base"], default="minilm")
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--corpus", type=int, default=200_000, help="papers the input probe scans")
    args = ap.parse_args()

    import torch

    from mdcr.encoders import python_family, registry
    from mdcr.encoders.probe import input_probe_papers, probe

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        source = _model_folder(args.model, tmp)
        (tmp / "bench_probe_enc.py").write_text(ENCODER_MODULE.format(source=source))
        sys.path.insert(0, str(tmp))
        spec = "py:bench_probe_enc:Wrapped"
        papers = _papers(args.docs)
        corpus = _corpus(tmp / "papers.parquet", args.corpus)
        best = dict.fromkeys(("build", "identify", "choose", "input", "encode"), float("inf"))
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            encoder = registry.build_encoder(spec)
            best["build"] = min(best["build"], time.perf_counter() - t0)
            t0 = time.perf_counter()
            registry.identify_encoder(spec)
            best["identify"] = min(best["identify"], time.perf_counter() - t0)
            python_family.BUILT.clear()
            t0 = time.perf_counter()
            chosen = input_probe_papers(corpus, [], "all")
            best["choose"] = min(best["choose"], time.perf_counter() - t0)
            t0 = time.perf_counter()
            probe(spec, encoder, chosen)
            best["input"] = min(best["input"], time.perf_counter() - t0)
            t0 = time.perf_counter()
            encoder.encode(papers)
            best["encode"] = min(best["encode"], time.perf_counter() - t0)
        extra = best["identify"] - best["build"] + best["choose"] + best["input"]
        rate = args.docs / best["encode"]
        print(f"model {args.model}, {torch.get_num_threads()} threads, best of {args.rounds}")
        print(f"build                    {best['build']:8.2f} s")
        print(f"identify (plan)          {best['identify']:8.2f} s")
        print(f"input probe: choose      {best['choose']:8.2f} s ({args.corpus:,} corpus papers)")
        print(f"input probe: encode      {best['input']:8.2f} s ({len(chosen)} papers)")
        print(f"encode {args.docs:>6} papers      {best['encode']:8.2f} s ({rate:,.0f} papers/s)")
        print(
            f"identity beyond the build: {extra:.2f} s = {extra / best['encode']:.1%} of "
            f"encoding {args.docs} papers = the time of {extra * rate:,.0f} papers"
        )


if __name__ == "__main__":
    main()
