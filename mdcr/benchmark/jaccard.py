"""Stage ``benchmark-jaccard`` (``mdcr benchmark jaccard``): which models give MDCR's
model-based negatives (paper section 4.1, "Model-based selection").

The paper compiled each model's top 200 candidates per query on the field-level pools,
computed "the average Jaccard index between the highest-ranked negative candidates of
different model pairs", and chose the three models with the lowest average Jaccard index
(BM25, SciNCL and SPECTER): models whose top negatives overlap least make different
mistakes. Here:

- A model's negatives for a query are its ``top_n`` highest-ranked candidates that the
  query does not cite (qrels), i.e. exactly the set ``mdcr benchmark build`` samples from.
- ``J(a, b)`` is the Jaccard index of two models' negative sets, averaged over every
  field-level query of the chosen splits (each query counts once; per field in the
  parquet). A query where both sets are empty is left out of that pair's mean.
- A model's average Jaccard index is the mean of ``J`` with every other model. The
  suggestion is the ``n_select`` models with the lowest average (the paper's wording); the
  subset of ``n_select`` models with the lowest mean pairwise ``J`` is reported beside it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mdcr.contracts.paper import MDCR_TOP_N
from mdcr.core.config import input_path, param
from mdcr.core.errors import ConfigError, InputDataError
from mdcr.core.stage import STAGES, StageContext, StagePlan, StageSpec

if TYPE_CHECKING:
    import pandas as pd

    from mdcr.core.stage import PlanFacts

ALL = "ALL"


@dataclass(frozen=True)
class JaccardConfig:
    pools: str = input_path(help="pools output (field-level pools and qrels)")
    runs: tuple[str, ...] = input_path(
        help="search/bm25 outputs on those pools, one per model (named by info.retriever)",
        multiple=True,
    )
    top_n: int = param(
        MDCR_TOP_N, help="each model's top N ranks hold its highest-ranked negatives"
    )
    splits: tuple[Literal["val", "test"], ...] = param(
        ("val",), help="splits whose field-level queries are compared (validation: no test peek)"
    )
    pool_rep: int = param(0, help="repetition of the field-level pools to use")
    n_select: int = param(3, help="how many models to suggest")

    def validate(self) -> None:
        if self.top_n < 1 or self.n_select < 1 or self.pool_rep < 0:
            raise ConfigError("benchmark-jaccard: top_n and n_select must be >= 1, pool_rep >= 0")
        if not self.splits:
            raise ConfigError("benchmark-jaccard.splits: give val and/or test")


def negative_sets(
    run_file: Path, pool_ids: list[str], positives: dict[tuple[str, str], set[str]], top_n: int
) -> dict[tuple[str, str], set[str]]:
    """(pool, query) -> the run's top-N candidates that are not the query's positives."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(
        run_file,
        columns=["pool_id", "query_id", "paper_id", "rank"],
        filters=[("pool_id", "in", pool_ids), ("rank", "<=", top_n)],
    )
    out: dict[tuple[str, str], set[str]] = {}
    for pool, q, p in zip(
        pc.cast(table["pool_id"], "string").to_pylist(),
        table["query_id"].to_pylist(),
        table["paper_id"].to_pylist(),
        strict=True,
    ):
        key = (str(pool), str(q))
        if p not in positives.get(key, ()):
            out.setdefault(key, set()).add(str(p))
    return out


def jaccard_table(
    sets: dict[str, dict[tuple[str, str], set[str]]],
    queries: list[tuple[str, str, str]],
) -> pd.DataFrame:
    """Mean Jaccard index per model pair, per field and over all queries (field ``ALL``).

    ``queries``: (pool_id, query_id, field). Columns: model_a, model_b, field, jaccard,
    n_queries (symmetric: both orders are listed; the diagonal is 1).
    """
    import pandas as pd

    rows = []
    models = sorted(sets)
    for a, b in itertools.product(models, models):
        vals: dict[str, list[float]] = {}
        for pool, q, fld in queries:
            sa = sets[a].get((pool, q), set())
            sb = sets[b].get((pool, q), set())
            union = len(sa | sb)
            if union == 0:
                continue
            j = len(sa & sb) / union
            vals.setdefault(fld, []).append(j)
            vals.setdefault(ALL, []).append(j)
        for fld, v in vals.items():
            rows.append((a, b, fld, sum(v) / len(v), len(v)))
    return pd.DataFrame(rows, columns=["model_a", "model_b", "field", "jaccard", "n_queries"])


def suggest(matrix: pd.DataFrame, n: int) -> tuple[pd.DataFrame, list[str], list[str]]:
    """(per-model average J with the others, the n lowest, the n-subset of lowest mean J)."""
    import pandas as pd

    allq = matrix[(matrix["field"] == ALL) & (matrix["model_a"] != matrix["model_b"])]
    models = sorted(set(matrix["model_a"]))
    per_model = (
        (allq.groupby("model_a")["jaccard"].mean().reindex(models).rename("avg_jaccard"))
        .reset_index()
        .rename(columns={"model_a": "model"})
    )
    per_model = per_model.sort_values(["avg_jaccard", "model"], kind="stable")
    lowest = per_model["model"].head(n).tolist()
    pair = {
        (str(a), str(b)): float(j)
        for a, b, j in zip(allq["model_a"], allq["model_b"], allq["jaccard"], strict=True)
    }
    best: list[str] = []
    best_val = float("inf")
    for combo in itertools.combinations(models, min(n, len(models))):
        vals = [pair.get((a, b), 0.0) for a, b in itertools.combinations(combo, 2)]
        v = sum(vals) / len(vals) if vals else 0.0
        if v < best_val - 1e-15:
            best, best_val = list(combo), v
    return pd.DataFrame(per_model).reset_index(drop=True), lowest, best


def run_benchmark_jaccard(cfg: JaccardConfig, ctx: StageContext) -> None:
    from mdcr.benchmark.build import find_runs, pool_of
    from mdcr.contracts.artifacts import POOL_META, QRELS, RUNS
    from mdcr.contracts.outputs import run_info

    pools_dir = ctx.input("pools")
    folders = ctx.inputs.get("runs") or []
    names = [info.retriever if (info := run_info(f)) else "" for f in folders]
    if len(folders) < 2:
        raise ConfigError("benchmark-jaccard.runs: give the runs of at least two models")
    run_dirs = find_runs(folders, tuple(names), pools_dir)
    meta = POOL_META.read_pandas(pools_dir).astype({"pool_id": str})
    field_meta = meta[(meta["setup"] == "field") & meta["split"].isin(cfg.splits)]
    if field_meta.empty:
        raise InputDataError(
            f"'{pools_dir}' has no field-level pools in {', '.join(cfg.splits)}; build them first"
        )
    groups = sorted(set(zip(field_meta["split"], field_meta["field"], strict=True)))
    pool_ids = sorted({pool_of(meta, s, f, cfg.pool_rep) for s, f in groups})
    field_of = dict(zip(meta["pool_id"], meta["field"], strict=True))
    qrels = QRELS.read_pandas(pools_dir).astype({"pool_id": str})
    qrels = qrels[qrels["pool_id"].isin(pool_ids)]
    positives: dict[tuple[str, str], set[str]] = {}
    for pool, q, p in zip(qrels["pool_id"], qrels["query_id"], qrels["paper_id"], strict=True):
        positives.setdefault((pool, str(q)), set()).add(str(p))
    queries = sorted((pool, q, str(field_of[pool])) for pool, q in positives)
    sets = {}
    for name, folder in run_dirs.items():
        with ctx.timed(name):
            sets[name] = negative_sets(RUNS.require(folder), pool_ids, positives, cfg.top_n)
    matrix = jaccard_table(sets, queries)
    per_model, lowest, best = suggest(matrix, cfg.n_select)
    matrix.to_parquet(ctx.output("jaccard.parquet", rows=len(matrix)), index=False)
    per_model.to_parquet(ctx.output("per_model.parquet", rows=len(per_model)), index=False)
    (ctx.out / "jaccard.md").write_text(_markdown(matrix, per_model, lowest, best, cfg, queries))
    ctx.output("jaccard.md")
    ctx.record("suggested_models", lowest)
    ctx.record("lowest_mean_subset", best)
    ctx.record("queries", len(queries))
    ctx.record("pools", pool_ids)


def _markdown(
    matrix: pd.DataFrame,
    per_model: pd.DataFrame,
    lowest: list[str],
    best: list[str],
    cfg: JaccardConfig,
    queries: list[tuple[str, str, str]],
) -> str:
    allq = matrix[matrix["field"] == ALL]
    models = sorted(set(matrix["model_a"]))
    look: dict[tuple[str, str], float] = {
        (str(a), str(b)): float(j)
        for a, b, j in zip(allq["model_a"], allq["model_b"], allq["jaccard"], strict=True)
    }
    lines = [
        "# Jaccard index between the models' top negatives",
        "",
        f"Negatives: each model's top {cfg.top_n} candidates that the query does not cite, on "
        f"the field-level pools (repetition {cfg.pool_rep}) of {', '.join(cfg.splits)}; mean "
        f"over {len(queries)} queries.",
        "",
        "| | " + " | ".join(models) + " |",
        "|---|" + "---:|" * len(models),
    ]
    for a in models:
        cells = [f"{look[(a, b)]:.3f}" if (a, b) in look else "–" for b in models]
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    lines += ["", "| model | average Jaccard with the others |", "|---|---:|"]
    for r in per_model.itertuples(index=False):
        lines.append(f"| {r.model} | {r.avg_jaccard:.3f} |")
    lines += [
        "",
        f"Suggested models (the {cfg.n_select} lowest averages, as the paper chose): "
        f"**{', '.join(lowest)}**.",
        f"Subset of {cfg.n_select} with the lowest mean pairwise Jaccard: {', '.join(best)}.",
        "",
        "Use them as `benchmark.models` (the names are the runs' retriever names).",
    ]
    return "\n".join(lines) + "\n"


def plan_benchmark_jaccard(
    cfg: JaccardConfig, inputs: dict[str, list[Path]], upstream: Mapping[Path, PlanFacts]
) -> StagePlan:
    from mdcr.planning.work import facts_of, queries_work

    runs = len(inputs.get("runs", []))
    pools = facts_of(inputs, "pools", upstream)
    # Priced with the score stage's rate: both read each query's list of every run.
    queries = pools[0].field_queries_per_split * len(cfg.splits) if pools else 0
    return StagePlan(
        f"Jaccard index of the top-{cfg.top_n} negatives of {runs} "
        f"models on the field-level {', '.join(cfg.splits)} pools; suggest {cfg.n_select}",
        work=queries_work("score", queries, runs) if pools else None,
    )


SPEC = STAGES.register(
    StageSpec(
        name="benchmark-jaccard",
        version="1",
        config=JaccardConfig,
        run=run_benchmark_jaccard,
        help="Jaccard index of models' top negatives; suggests MDCR's model-based types",
        plan=plan_benchmark_jaccard,
        main_output="jaccard.md",
        command="benchmark jaccard",
    )
)
