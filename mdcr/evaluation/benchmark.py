"""``mdcr evaluate --benchmark``: the pipelines that score encoders on an MDCR benchmark.

On a benchmark (a benchmark build or import output, or files in the MDCR release's
layout, which a ``benchmark-import`` step reads): per encoder an ``encode`` and a
``benchmark-rank`` step (``bm25``: a Lucene rank step; ``--scores``: a scores-file rank
step), then ``benchmark-score``. :mod:`mdcr.evaluation.result` prints MAP, nDCG and R@5
per field and the macro average, as the original MDCR scorer prints them, and the
published results of the same model only when the benchmark is the official release,
proven by provenance (:mod:`mdcr.benchmark.release`). The request and the steps both
modes share are in :mod:`mdcr.evaluation.request`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.core.errors import ConfigError
from mdcr.evaluation.arguments import arg
from mdcr.evaluation.fused import earlier_ranks, fused_steps, is_fused
from mdcr.evaluation.request import (
    BM25,
    Evaluated,
    EvaluateRequest,
    bm25_values,
    encode_options,
    safe_id,
    step,
)

if TYPE_CHECKING:
    from mdcr.core.pipeline import Pipeline, Step
    from mdcr.core.store import Artifact, Store


def _check_texts(folder: Path) -> None:
    """An import made without its data files cannot be encoded: name the user's files."""
    from mdcr.core.manifests import open_output

    out = open_output(folder)
    if out is not None and out.stage == "benchmark-import" and out.info("texts") is False:
        raise ConfigError(
            f"{arg('benchmark')} '{folder}' holds the candidate lists of '{out.info('source')}' "
            "without titles and abstracts (imported without its mdcr_<split>_data.jsonl "
            "files); give the folder of the files with their data files beside them"
        )


def benchmark_pipeline(
    req: EvaluateRequest, store: Store | None = None
) -> tuple[Pipeline, list[tuple[str, str]]]:
    """The steps that score ``req.encoders`` (and a scores file) on a benchmark.

    Returns the pipeline and (retriever name, rank step id) per retriever.
    """
    from mdcr.contracts.artifacts import BENCHMARK
    from mdcr.contracts.outputs import writes
    from mdcr.core.pipeline import Pipeline

    path = req.benchmark
    if path is None:
        raise ConfigError(f"evaluate: give {arg('benchmark')} (or {arg('pools')})")
    if not path.exists():
        raise ConfigError(f"{arg('benchmark')} '{path}' does not exist")
    steps: list[Step] = []
    needs_texts = bool(req.encoders)
    made = path.is_dir() and writes(path, BENCHMARK)  # a benchmark output, not files to import
    if made:
        bench = str(path)
        if needs_texts:
            _check_texts(path)
    else:
        if path.is_dir() and BENCHMARK.exists(path):
            raise ConfigError(
                f"{arg('benchmark')} '{path}' has a benchmark.parquet but no manifest; give the "
                "MDCR benchmark files or a benchmark stage output"
            )
        values: dict[str, Any] = {"source": str(path)}
        if not needs_texts:  # a scores file alone needs no titles and abstracts
            values["texts"] = False
        steps.append(step("import", "benchmark-import", values))
        bench = "@import"
    splits = list(req.splits)
    ranks: list[tuple[str, str]] = []
    parts: list[str] = []
    for i, (name, spec) in enumerate(req.named()):
        rank_id = f"rank_{i}_{safe_id(name)}"
        if is_fused(spec):  # its step comes after those of the ranks it fuses
            ranks.append((name, rank_id))
            continue
        if spec == BM25:
            values = {"benchmark": bench, "method": "bm25", "splits": splits, **bm25_values(req)}
        else:
            enc_id = f"encode_{i}_{safe_id(name)}"
            encode = {"corpus": bench, "targets": [bench], "encoder": spec, "label": name}
            steps.append(step(enc_id, "encode", {**encode, **encode_options(req, name)}))
            values = {"benchmark": bench, "embeddings": f"@{enc_id}", "splits": splits}
        values["retriever"] = name
        steps.append(step(rank_id, "benchmark-rank", values))
        ranks.append((name, rank_id))
    if req.scores is not None:
        values = {
            "benchmark": bench,
            "method": "scores",
            "scores_file": str(req.scores),
            "retriever": req.name,
            "splits": splits,
        }
        steps.append(step("rank_scores", "benchmark-rank", values))
        ranks.append((req.name or req.scores.stem, "rank_scores"))
    if any(is_fused(spec) for _, spec in req.named()):
        imports = [s for s in steps if s.id == "import"]
        known = path if made else _built(imports[0], store)  # the import this run uses
        earlier = earlier_ranks(store, known) if store is not None and known else {}
        named = [*req.named(), *([(ranks[-1][0], "scores")] if req.scores is not None else [])]
        fused = fused_steps(named, dict(ranks), earlier, f"benchmark '{path}'", "benchmark-fuse")
        steps += [step(*s) for s in fused]
        # The retrievers fused from earlier ranks are scored beside the fused one.
        parts = [r for _, _, values in fused for r in values["ranks"] if not r.startswith("@")]
    score = {
        "benchmark": bench,
        "ranks": [f"@{r}" for _, r in ranks] + list(dict.fromkeys(parts)),
        "splits": splits,
        "ties": req.ties,
        "by_type": req.by_type,
    }
    steps.append(step("score", "benchmark-score", score))
    return Pipeline("evaluate", Path("evaluate"), None, tuple(steps)), ranks


def _built(import_step: Step, store: Store | None) -> Path | None:
    """The output ``import_step`` would make, where an earlier command built it."""
    from mdcr.core.inputs import resolve_inputs

    if store is None:
        return None
    planned = store.plan(import_step.spec, import_step.cfg, resolve_inputs(import_step.cfg), {})
    return planned.folder if store.is_done(planned.folder, planned.fingerprint) else None


def evaluate_benchmark(req: EvaluateRequest, store: Store, *, quiet: bool = False) -> Evaluated:
    """Rank and score ``req.encoders`` (and a scores file) on ``req.benchmark``."""
    from mdcr.contracts.outputs import benchmark_origin
    from mdcr.core.pipeline import run_pipeline, set_engine

    req.check()
    pipeline, ranks = benchmark_pipeline(req, store)
    pipeline = set_engine(pipeline, req.engine)
    results: dict[str, Artifact] = run_pipeline(pipeline, store, quiet=quiet)
    bench = results["import"].path if "import" in results else req.benchmark
    return Evaluated(
        results["score"].path,
        tuple((spec, results[step_id].path) for spec, step_id in ranks),
        origin=benchmark_origin(bench) if bench is not None else None,
    )
