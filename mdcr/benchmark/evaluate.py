"""``mdcr evaluate``: scoring encoders in one command, as a pipeline built in code.

``evaluate(request, store)`` builds the steps a request needs and hands them to the same
runner as ``mdcr run`` (:func:`mdcr.pipeline.run_pipeline`), so every step is a cached
stage output and reuse comes from fingerprints alone:

- on a benchmark (``--benchmark``: a benchmark build or import output, or files in the
  MDCR release's layout, which a ``benchmark-import`` step reads): per encoder an
  ``encode`` and a ``benchmark-rank`` step (``bm25``: a Lucene rank step; ``--scores``: a
  scores-file rank step), then ``benchmark-score``. It prints MAP, nDCG and R@5 per field
  and the macro average, as the original MDCR scorer prints them, and the published
  results of the same model only when the benchmark is the official release, proven by
  provenance (:mod:`mdcr.benchmark.release`).
- on pools (``--pools``): per encoder an ``encode`` and a ``search`` step (``bm25``: a
  ``bm25`` step), then ``score`` and a ``report`` that adds the new rows to the score
  outputs already made on those pools (found with ``Store.find``; for a retriever scored
  twice the newest wins).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdcr.errors import ConfigError
from mdcr.paper import DEPTH, RECALL_K

if TYPE_CHECKING:
    from mdcr.artifacts import BenchmarkOrigin
    from mdcr.pipeline import Pipeline, Step
    from mdcr.store import Artifact, Store

BM25 = "bm25"
BENCHMARK_STAGES = ("benchmark", "benchmark-import")


@dataclass(frozen=True)
class EvaluateRequest:
    """What ``mdcr evaluate`` was asked to do (its command-line options, typed)."""

    encoders: tuple[str, ...] = ()  # SPEC or NAME=SPEC (mdcr.encoders.naming)
    benchmark: Path | None = None
    pools: Path | None = None
    corpus: Path | None = None
    scores: Path | None = None
    name: str = ""
    splits: tuple[str, ...] = ()
    ties: str = "trec_eval"
    by_type: bool = True
    k1: float | None = None
    b: float | None = None
    bm25_params: Path | None = None
    encode_set: tuple[str, ...] = ()  # [NAME.]KEY=VALUE options of the encode stage
    device: str | None = None
    # Engine settings for every step that scales out (executor, ray_address, ray_workers).
    engine: dict[str, Any] = dataclasses.field(default_factory=dict)

    def named(self) -> list[tuple[str, str]]:
        """(name, spec) per ``--encoder`` (:func:`mdcr.encoders.naming.name_retrievers`)."""
        from mdcr.encoders.naming import name_retrievers, split_named

        items = list(self.encoders)
        if self.name and self.scores is None:  # --name names the one encoder
            if len(items) != 1 or split_named(items[0])[0]:
                raise ConfigError(
                    "--name names a --scores file or a single --encoder; name encoders with "
                    "--encoder NAME=SPEC"
                )
            items = [f"{self.name}={items[0]}"]
        return name_retrievers(items)

    def check(self) -> None:
        """One-line errors for requests that cannot work, before anything runs."""
        from mdcr.encoders.registry import lookup

        if self.pools is not None:
            if self.benchmark is not None or self.scores is not None:
                raise ConfigError(
                    "evaluate: --pools cannot be combined with --benchmark or --scores"
                )
            if not self.encoders:
                raise ConfigError("evaluate --pools: give --encoder SPEC (repeatable)")
        else:
            if self.benchmark is None:
                raise ConfigError("evaluate: give --benchmark PATH (or --pools PATH)")
            if not self.encoders and self.scores is None:
                raise ConfigError("evaluate: give --encoder SPEC (repeatable) or --scores FILE")
        named = self.named()
        for _, spec in named:
            if spec == BM25:
                continue
            try:
                lookup(spec)
            except ConfigError as exc:  # here bm25 is an encoder spec too
                raise ConfigError(
                    str(exc).replace("valid encoders: ", f"valid encoders: {BM25}, ")
                ) from None
        if self.scores is not None and not self.scores.is_file():
            raise ConfigError(
                f"--scores: '{self.scores}' is not a file; give a scores JSON file "
                '({"<qid>_<cid>": score}, as the original evaluate.py reads)'
            )
        for item in self.encode_set:
            if "=" not in item:
                raise ConfigError(
                    f"--encode-set '{item}': expected KEY=VALUE or NAME.KEY=VALUE, e.g. "
                    "max_length=128 (`mdcr encode --help` lists the keys)"
                )
            name, _ = _encode_set_target(item, [n for n, _ in named])
            if name and dict(named).get(name) == BM25:
                raise ConfigError(f"--encode-set '{item}': '{name}' is bm25, which encodes nothing")
        if self.bm25_params is not None and (self.k1 is not None or self.b is not None):
            raise ConfigError("evaluate: give either --bm25-params or --k1/--b, not both")


@dataclass(frozen=True)
class Evaluated:
    """What an evaluation made: the final output and the ranks or runs per retriever."""

    result: Path  # the benchmark-score or report output
    retrievers: tuple[tuple[str, Path], ...]  # (retriever name, rank or run output)
    origin: BenchmarkOrigin | None = None  # benchmark mode: where its files come from
    pools: Path | None = None  # pools mode: the pools scored on
    earlier_scores: int = 0  # pools mode: earlier score outputs in the report
    scores: tuple[Path, ...] = ()  # pools mode: the score output of this evaluation


# ---------------------------------------------------------------------------- steps


def _step(step_id: str, stage: str, values: dict[str, Any]) -> Step:
    from mdcr.config import from_mapping
    from mdcr.pipeline import Step
    from mdcr.stage import get_stage

    spec = get_stage(stage)
    return Step(step_id, spec, from_mapping(spec.config, values, f"evaluate:{step_id}"))


def _encode_set_target(item: str, names: list[str]) -> tuple[str, str]:
    """(retriever name, KEY=VALUE) of an ``--encode-set`` item: ``NAME.KEY=VALUE`` sets
    one retriever's option (the longest name that fits), a plain ``KEY=VALUE`` all's."""
    head = item.split("=", 1)[0]
    fits = [n for n in names if head.startswith(n + ".")]
    if not fits:
        if "." in head:
            raise ConfigError(
                f"--encode-set '{item}': no retriever named '{head.rsplit('.', 1)[0]}'; "
                f"names: {', '.join(names)}"
            )
        return "", item
    name = max(fits, key=len)
    return name, item[len(name) + 1 :]


def _encode_options(req: EvaluateRequest, name: str = "") -> dict[str, Any]:
    """The encode stage's options from ``--encode-set`` (those for all, then those for
    retriever ``name``) and ``--device``, as typed values."""
    from mdcr.config import parse_values
    from mdcr.encoders.stage import EncodeConfig
    from mdcr.pipeline import parse_overrides

    names = [n for n, _ in req.named()]
    common, own = [], []
    for item in req.encode_set:
        target, setting = _encode_set_target(item, names)
        if not target:
            common.append(setting)
        elif target == name:
            own.append(setting)
    text = parse_overrides([f"encode.{s}" for s in [*common, *own]]).get("encode", {})
    if req.device:
        text["device"] = req.device
    for reserved in ("corpus", "targets", "encoder"):
        if reserved in text:
            raise ConfigError(f"--encode-set {reserved}: set by evaluate itself; leave it out")
    return parse_values(EncodeConfig, text, "--encode-set")


def _bm25_values(req: EvaluateRequest) -> dict[str, Any]:
    if req.bm25_params is not None:
        return {"params" if req.pools else "bm25_params": str(req.bm25_params)}
    out: dict[str, Any] = {}
    if req.k1 is not None:
        out["k1"] = req.k1
    if req.b is not None:
        out["b"] = req.b
    return out


def _safe(spec: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in spec)


def _check_texts(folder: Path) -> None:
    """An import made without its data files cannot be encoded: name the user's files."""
    from mdcr.store import open_output

    out = open_output(folder)
    if out is not None and out.stage == "benchmark-import" and out.info("texts") is False:
        raise ConfigError(
            f"--benchmark: '{folder}' holds the candidate lists of '{out.info('source')}' "
            "without titles and abstracts (imported without its mdcr_<split>_data.jsonl "
            "files); give the folder of the files with their data files beside them"
        )


def benchmark_pipeline(req: EvaluateRequest) -> tuple[Pipeline, list[tuple[str, str]]]:
    """The steps that score ``req.encoders`` (and a scores file) on a benchmark.

    Returns the pipeline and (retriever name, rank step id) per retriever.
    """
    from mdcr.artifacts import stage_of
    from mdcr.pipeline import Pipeline

    path = req.benchmark
    if path is None:
        raise ConfigError("evaluate: give --benchmark PATH (or --pools PATH)")
    if not path.exists():
        raise ConfigError(f"--benchmark: '{path}' does not exist")
    steps: list[Step] = []
    made_by = stage_of(path) if path.is_dir() else None
    needs_texts = bool(req.encoders)
    if made_by in BENCHMARK_STAGES:
        bench = str(path)
        if needs_texts:
            _check_texts(path)
    else:
        from mdcr.artifacts import BENCHMARK

        if path.is_dir() and BENCHMARK.exists(path):
            raise ConfigError(
                f"--benchmark: '{path}' has a benchmark.parquet but no manifest; give the "
                "MDCR benchmark files or a benchmark stage output"
            )
        values: dict[str, Any] = {"source": str(path)}
        if not needs_texts:  # a scores file alone needs no titles and abstracts
            values["texts"] = False
        steps.append(_step("import", "benchmark-import", values))
        bench = "@import"
    splits = list(req.splits)
    ranks: list[tuple[str, str]] = []
    for i, (name, spec) in enumerate(req.named()):
        rank_id = f"rank_{i}_{_safe(name)}"
        if spec == BM25:
            values = {"benchmark": bench, "method": "bm25", "splits": splits, **_bm25_values(req)}
        else:
            enc_id = f"encode_{i}_{_safe(name)}"
            encode = {"corpus": bench, "targets": [bench], "encoder": spec}
            steps.append(_step(enc_id, "encode", {**encode, **_encode_options(req, name)}))
            values = {"benchmark": bench, "embeddings": f"@{enc_id}", "splits": splits}
        values["retriever"] = name
        steps.append(_step(rank_id, "benchmark-rank", values))
        ranks.append((name, rank_id))
    if req.scores is not None:
        values = {
            "benchmark": bench,
            "method": "scores",
            "scores_file": str(req.scores),
            "retriever": req.name,
            "splits": splits,
        }
        steps.append(_step("rank_scores", "benchmark-rank", values))
        ranks.append((req.name or req.scores.stem, "rank_scores"))
    score = {
        "benchmark": bench,
        "ranks": [f"@{r}" for _, r in ranks],
        "splits": splits,
        "ties": req.ties,
        "by_type": req.by_type,
    }
    steps.append(_step("score", "benchmark-score", score))
    return Pipeline("evaluate", Path("evaluate"), None, tuple(steps)), ranks


def pools_pipeline(req: EvaluateRequest, store: Store) -> tuple[Pipeline, list[tuple[str, str]]]:
    """The steps that search and score ``req.encoders`` on pools (the report comes after).

    Returns the pipeline and (retriever name, run step id) per retriever. The score step uses
    the depth and R@k of the newest earlier score output on the pools, so that the report
    compares like with like.
    """
    from mdcr.artifacts import input_paths, scores_on_pools, stage_of
    from mdcr.pipeline import Pipeline
    from mdcr.store import artifact_fingerprint

    pools = req.pools
    if pools is None or stage_of(pools) != "pools":
        raise ConfigError(f"--pools: '{pools}' is not a pools stage output")
    corpus = req.corpus
    if corpus is None:
        made_from = input_paths(pools, "corpus")
        if not made_from:
            raise ConfigError("--pools: the pools' manifest names no corpus; give --corpus")
        corpus = made_from[0]
    if not corpus.exists():
        raise ConfigError(f"--corpus: '{corpus}' does not exist; give the prefilter output")
    splits = list(req.splits) or ["test"]
    steps: list[Step] = []
    runs: list[tuple[str, str]] = []
    for i, (name, spec) in enumerate(req.named()):
        run_id = f"run_{i}_{_safe(name)}"
        if spec == BM25:
            values = {"corpus": str(corpus), "pools": str(pools), "splits": splits}
            steps.append(_step(run_id, "bm25", {**values, **_bm25_values(req)}))
        else:
            enc_id = f"encode_{i}_{_safe(name)}"
            encode = {"corpus": str(corpus), "targets": [str(pools)], "encoder": spec}
            steps.append(_step(enc_id, "encode", {**encode, **_encode_options(req, name)}))
            search: dict[str, Any] = {"pools": str(pools), "embeddings": f"@{enc_id}"}
            if req.device:
                search["device"] = req.device
            steps.append(_step(run_id, "search", search))
        runs.append((name, run_id))
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
    steps.append(_step("score", "score", score))
    return Pipeline("evaluate", Path("evaluate"), None, tuple(steps)), runs


def check_names(store: Store, pools: Path, runs: list[tuple[str, Path]]) -> None:
    """A name scored earlier on these pools by another retriever (another setup,
    :mod:`mdcr.retriever_setups`) is a one-line error, raised before anything is scored;
    the same setup again is the same retriever, whose newest scores the report takes."""
    from mdcr.artifacts import scores_on_pools
    from mdcr.retriever_setups import run_setup
    from mdcr.store import artifact_fingerprint

    new = {
        name: {"retriever": name, "path": str(p), "fingerprint": artifact_fingerprint(p)}
        for name, p in runs
    }
    setups = {name: run_setup(r) for name, r in new.items()}
    for _, folder, info in scores_on_pools(store, artifact_fingerprint(pools)):
        for r in info.runs:
            name = str(r.get("retriever"))
            if name not in new or r.get("fingerprint") == new[name].get("fingerprint"):
                continue
            now, before = setups[name], run_setup(r)
            if "?" in (now["spec"], before["spec"]) or now["key"] == before["key"]:
                continue  # the same retriever (or one that cannot be told apart)
            raise ConfigError(
                f"evaluate --pools: '{name}' already names another retriever on these pools "
                f"({before['spec']}: {before['detail'] or 'defaults'}, in '{folder}') than the "
                f"one scored now ({now['spec']}: {now['detail'] or 'defaults'}); give this one "
                f"another name with --encoder NAME=SPEC"
            )


def report_pipeline(req: EvaluateRequest, store: Store, scored: Path) -> tuple[Pipeline, int]:
    """The report of a new score output beside the earlier ones on the same pools.

    Earlier score outputs are found with ``Store.find`` and listed oldest first, the new
    one last; the report takes each retriever's scores from the last output holding it
    (``repeated_retrievers = "last"``), so each retriever's newest scores are reported and
    an output's other retrievers stay. An output whose every retriever is scored again
    later is left out. Returns the pipeline and the number of earlier outputs it includes.
    """
    from mdcr.artifacts import score_info, scores_on_pools
    from mdcr.pipeline import Pipeline

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
        "splits": list(req.splits) or ["test"],
        "paper_comparison": True,
        "repeated_retrievers": "last",
    }
    steps = (_step("report", "report", report),)
    return Pipeline("evaluate", Path("evaluate"), None, steps), len(chosen)


def evaluate(req: EvaluateRequest, store: Store, *, quiet: bool = False) -> Evaluated:
    """Build the request's pipeline and run it through the store; see the module docstring."""
    from mdcr.artifacts import benchmark_origin
    from mdcr.pipeline import run_pipeline, set_engine

    req.check()
    if req.pools is None:
        pipeline, ranks = benchmark_pipeline(req)
        pipeline = set_engine(pipeline, req.engine)
        results: dict[str, Artifact] = run_pipeline(pipeline, store, quiet=quiet)
        bench = results["import"].path if "import" in results else req.benchmark
        return Evaluated(
            results["score"].path,
            tuple((spec, results[step].path) for spec, step in ranks),
            origin=benchmark_origin(bench) if bench is not None else None,
        )
    pipeline, runs = pools_pipeline(req, store)
    pipeline = set_engine(pipeline, req.engine)
    searched = dataclasses.replace(pipeline, steps=pipeline.steps[:-1])  # all but score
    made = run_pipeline(searched, store, quiet=quiet)
    check_names(store, req.pools, [(name, made[step].path) for name, step in runs])
    # The score step alone, on the runs just made (each step is planned and printed once).
    score = pipeline.steps[-1]
    ran = tuple(str(made[step].path) for _, step in runs)
    only_score = (dataclasses.replace(score, cfg=dataclasses.replace(score.cfg, runs=ran)),)
    scored = run_pipeline(dataclasses.replace(pipeline, steps=only_score), store, quiet=quiet)
    report, n_earlier = report_pipeline(req, store, scored["score"].path)
    reported = run_pipeline(report, store, quiet=quiet)
    return Evaluated(
        reported["report"].path,
        tuple((spec, made[step].path) for spec, step in runs),
        pools=req.pools,
        earlier_scores=n_earlier,
        scores=(scored["score"].path,),
    )


# ---------------------------------------------------------------------------- output


def _scores_out(template: Path, encoder: str, split: str, n_enc: int, n_split: int) -> Path:
    text = str(template)
    if n_enc > 1 and "{encoder}" not in text:
        raise ConfigError("--scores-out: several encoders; put {encoder} in the path")
    if n_split > 1 and "{split}" not in text:
        raise ConfigError("--scores-out: several splits; put {split} in the path, or give --split")
    safe = encoder.replace("/", "_").replace(":", "_")
    return Path(text.replace("{encoder}", safe).replace("{split}", split))


def write_scores_out(template: Path, done: Evaluated) -> None:
    """Copy each rank's scores file for the original scorer to the path ``template`` names."""
    import shutil

    from mdcr.artifacts import rank_info
    from mdcr.store import atomic_path

    for spec, folder in done.retrievers:
        splits = rank_info(folder).splits
        for split in splits:
            target = _scores_out(template, spec, split, len(done.retrievers), len(splits))
            target.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(target) as tmp:
                shutil.copyfile(folder / f"scores_{split}.json", tmp)
            print(f"scores for the original scorer ({spec}, {split}): {target}", file=sys.stderr)


def print_results(done: Evaluated) -> None:
    """The original scorer's printout per retriever and split, then the report's path."""
    if done.pools is not None:
        from mdcr.benchmark.results import print_pools_summary

        print_pools_summary(done)
        return
    from mdcr.benchmark.score import read_official_results
    from mdcr.eval.published import comparable_with_published, order_retrievers, published_mdcr
    from mdcr.store import open_output

    official = read_official_results(done.result)
    published = comparable_with_published(done.origin)
    if done.origin is not None:
        print(done.origin.line())
        if not published:
            print("No published results beside it: they were computed on the official release.")
        print()
    scored = open_output(done.result)
    # Published rows go by the registry identity benchmark-score recorded, never a name.
    identities = scored.info("retriever_identities", {}) if scored else {}
    empty = scored.info("queries_without_positives", {}) if scored else {}
    for name in order_retrievers(list(official)):
        for split, fields in official[name].items():
            print(f"{name} on MDCR {split}:")
            for field, m in fields.items():
                if field == "AVG":
                    continue
                print("\t".join([field] + [f"{k}: {v:g}" for k, v in m.items()]))
            print("\t".join(["AVG"] + [f"{k}: {v:g}" for k, v in fields["AVG"].items()]))
            if empty.get(split):
                n = sum(empty[split].values())
                where = ", ".join(f"{f}: {k}" for f, k in empty[split].items())
                print(
                    f"({n} {'query' if n == 1 else 'queries'} without positives ({where}), "
                    "scored 0 and counted, as the original scorer does)"
                )
            # Only beside the official release; the label says which (declared or not).
            if published and done.origin is not None and split == "test":
                files = done.origin.files(split)
                for row in published_mdcr(identities.get(name)):
                    if row["field"] == "AVG":
                        cells = [
                            f"{k}: {row[k]:g}" for k in ("map", "ndcg", "recall_5") if k in row
                        ]
                        label = f"published AVG on {files} ({row['citation']})"
                        print("\t".join([label, *cells]))
            print()
    print(f"report: {done.result / 'report.md'}")
