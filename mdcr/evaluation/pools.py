"""``mdcr evaluate --pools``: the pipelines that score encoders on pools.

Per encoder an ``encode`` and a ``search`` step (``bm25``: a ``bm25`` step), then
``score`` and a ``report`` that adds the new rows to the score outputs already made on
those pools (found with ``Store.find``; for a retriever scored twice the newest wins).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.contracts.paper import DEPTH, RECALL_K
from mdcr.core.errors import ConfigError
from mdcr.core.hints import flag
from mdcr.evaluation.arguments import arg
from mdcr.evaluation.fused import earlier_pool_runs, fused_steps, is_fused
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
    from mdcr.core.store import Store


def default_splits(req: EvaluateRequest) -> list[str]:
    """The splits searched with BM25 and reported: those asked for, else test, or the pools'
    own splits when they have no test split (a BEIR dataset with dev qrels only)."""
    from mdcr.contracts.artifacts import POOL_META

    if req.splits:
        return list(req.splits)
    if req.pools is None or not POOL_META.exists(req.pools):
        return ["test"]
    have = set(POOL_META.read_pandas(req.pools, columns=["split"])["split"].astype(str))
    return ["test"] if "test" in have or not have else sorted(have)


def pools_pipeline(req: EvaluateRequest, store: Store) -> tuple[Pipeline, list[tuple[str, str]]]:
    """The steps that search and score ``req.encoders`` on pools (the report comes after).

    Returns the pipeline and (retriever name, run step id) per retriever. The score step uses
    the depth and R@k of the newest earlier score output on the pools, so that the report
    compares like with like.
    """
    from mdcr.contracts.artifacts import PAPERS, POOLS
    from mdcr.contracts.outputs import input_paths, scores_on_pools, writes
    from mdcr.core.fingerprints import artifact_fingerprint
    from mdcr.core.pipeline import Pipeline

    pools = req.pools
    if pools is None or not writes(pools, POOLS):
        raise ConfigError(f"{arg('pools')} '{pools}' is not a pools (or beir-import) stage output")
    corpus = req.corpus
    if corpus is None and writes(pools, PAPERS):
        corpus = pools  # it holds its papers (beir-import), the queries' texts among them
    if corpus is None:
        made_from = input_paths(pools, "corpus")
        if not made_from:
            raise ConfigError(
                f"{arg('pools')} '{pools}': its manifest names no corpus; give the prefilter "
                "output with the command line's --corpus"
            )
        corpus = made_from[0]
    if not corpus.exists():
        raise ConfigError(f"--corpus: '{corpus}' does not exist; give the prefilter output")
    splits = default_splits(req)
    steps: list[Step] = []
    runs: list[tuple[str, str]] = []
    for i, (name, spec) in enumerate(req.named()):
        run_id = f"run_{i}_{safe_id(name)}"
        if is_fused(spec):  # its step comes after those of the runs it fuses
            pass
        elif spec == BM25:
            values = {"corpus": str(corpus), "pools": str(pools), "splits": splits}
            steps.append(step(run_id, "bm25", {**values, **bm25_values(req)}))
        else:
            enc_id = f"encode_{i}_{safe_id(name)}"
            encode = {
                "corpus": str(corpus),
                "targets": [str(pools)],
                "encoder": spec,
                "label": name,
            }
            steps.append(step(enc_id, "encode", {**encode, **encode_options(req, name)}))
            search: dict[str, Any] = {"pools": str(pools), "embeddings": f"@{enc_id}"}
            if req.device:
                search["device"] = req.device
            steps.append(step(run_id, "search", search))
        runs.append((name, run_id))
    earlier_runs = (
        earlier_pool_runs(store, pools) if any(is_fused(s) for _, s in req.named()) else {}
    )
    steps += [
        step(*s)
        for s in fused_steps(req.named(), dict(runs), earlier_runs, f"pools '{pools}'", "fuse")
    ]
    earlier = scores_on_pools(store, artifact_fingerprint(pools))
    depth, recall_k = (
        (earlier[-1][2].depth, earlier[-1][2].recall_k) if earlier else (DEPTH, RECALL_K)
    )
    score = {
        "pools": str(pools),
        "runs": [f"@{r}" for _, r in runs],
        "names": [n for n, _ in runs],
        "depth": depth,
        "recall_k": recall_k,
    }
    steps.append(step("score", "score", score))
    return Pipeline("evaluate", Path("evaluate"), None, tuple(steps)), runs


def check_names(store: Store, pools: Path, runs: list[tuple[str, Path]]) -> list[str]:
    """Names scored earlier on these pools by another setup (:mod:`mdcr.retrievers.setups`),
    checked before anything is scored.

    The same spec in another setup (a ``py:`` encoder edited, a folder's weights retrained,
    other encode options) is the same retriever scored again: its newest scores replace the
    older ones in the report, and the returned line says so, unless the newest earlier
    score of that name already has this setup. Another spec under an old name is a one-line
    error. The same setup again is the same retriever, said nothing of.
    """
    from mdcr.contracts.outputs import scores_on_pools
    from mdcr.core.fingerprints import artifact_fingerprint
    from mdcr.retrievers.setups import run_setup

    new = {
        name: {"retriever": name, "path": str(p), "fingerprint": artifact_fingerprint(p)}
        for name, p in runs
    }
    setups = {name: run_setup(r) for name, r in new.items()}
    replaced: dict[str, str] = {}
    for _, folder, info in scores_on_pools(store, artifact_fingerprint(pools)):  # oldest first
        for r in info.runs:
            name = str(r.get("retriever"))
            if name not in new:
                continue
            if r.get("fingerprint") == new[name].get("fingerprint"):
                replaced.pop(name, None)  # scored so since: nothing changed
                continue
            now, before = setups[name], run_setup(r)
            if "?" in (now["spec"], before["spec"]) or now["key"] == before["key"]:
                replaced.pop(name, None)  # the same retriever (or one not told apart)
                continue
            if _same_encoder(now["spec"], before["spec"]):
                replaced[name] = (
                    f"evaluate: '{name}' ({now['spec']}) changed since it was scored "
                    f"on these pools ({before['detail'] or 'defaults'}, now "
                    f"{now['detail'] or 'defaults'}); its new scores replace the older ones "
                    "in the report"
                )
                continue
            raise ConfigError(
                f"evaluate: '{name}' already names another retriever on these pools "
                f"({before['spec']}: {before['detail'] or 'defaults'}, in '{folder}') than the "
                f"one scored now ({now['spec']}: {now['detail'] or 'defaults'}); give this one "
                f"another name ({flag('--encoder NAME=SPEC', 'name=')})"
            )
    return list(replaced.values())


def _same_encoder(now: str, before: str) -> bool:
    """Whether two encoder specs name one encoder, changed or not: the same spec, or two
    model objects handed to ``mdcr.evaluate`` (``mem:`` specs carry the object's digest,
    which changes with it)."""
    return now == before or (now.startswith("mem:") and before.startswith("mem:"))


def report_pipeline(req: EvaluateRequest, store: Store, scored: Path) -> tuple[Pipeline, int]:
    """The report of a new score output beside the earlier ones on the same pools.

    Earlier score outputs are found with ``Store.find`` and listed oldest first, the new
    one last; the report takes each retriever's scores from the last output holding it
    (``repeated_retrievers = "last"``), so each retriever's newest scores are reported and
    an output's other retrievers stay. An output whose every retriever is scored again
    later is left out. Returns the pipeline and the number of earlier outputs it includes.
    """
    from mdcr.contracts.outputs import score_info, scores_on_pools
    from mdcr.core.pipeline import Pipeline

    found = score_info(scored)
    if found is None:
        raise ConfigError(f"'{scored}' is not a score output")
    new = found[1]
    chosen: list[Path] = []
    later = set(new.retrievers)
    for _, folder, info in reversed(scores_on_pools(store, new.pools_fingerprint)):
        if folder == scored:
            continue
        if info.retrievers - later:  # a retriever scored nowhere later
            chosen.append(folder)
        later |= info.retrievers
    report = {
        "scores": [*(str(p) for p in reversed(chosen)), str(scored)],
        "splits": default_splits(req),
        "paper_comparison": True,
        "repeated_retrievers": "last",
    }
    steps = (step("report", "report", report),)
    return Pipeline("evaluate", Path("evaluate"), None, steps), len(chosen)


def evaluate_pools(req: EvaluateRequest, store: Store, *, quiet: bool = False) -> Evaluated:
    """Search, score and report ``req.encoders`` on ``req.pools``; see the module docstring."""
    from mdcr.core.pipeline import run_pipeline, set_engine

    req.check()
    if req.pools is None:
        raise ConfigError(f"evaluate: give {arg('pools')}")
    pipeline, runs = pools_pipeline(req, store)
    pipeline = set_engine(pipeline, req.engine)
    searched = dataclasses.replace(pipeline, steps=pipeline.steps[:-1])  # all but score
    made = run_pipeline(searched, store, quiet=quiet)
    for line in check_names(store, req.pools, [(n, made[step_id].path) for n, step_id in runs]):
        print(line, file=sys.stderr, flush=True)
    # The score step alone, on the runs just made (each step is planned and printed once).
    score = pipeline.steps[-1]
    ran = tuple(str(made[step_id].path) for _, step_id in runs)
    only_score = (dataclasses.replace(score, cfg=dataclasses.replace(score.cfg, runs=ran)),)
    scored = run_pipeline(dataclasses.replace(pipeline, steps=only_score), store, quiet=quiet)
    report, n_earlier = report_pipeline(req, store, scored["score"].path)
    reported = run_pipeline(report, store, quiet=quiet)
    return Evaluated(
        reported["report"].path,
        tuple((spec, made[step_id].path) for spec, step_id in runs),
        pools=req.pools,
        earlier_scores=n_earlier,
        scores=(scored["score"].path,),
    )
