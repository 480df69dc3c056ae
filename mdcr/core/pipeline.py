"""Pipeline files: the stages and their configs in order, run through the artifact store.

A pipeline file is TOML::

    [pipeline]
    name = "demo"
    home = "data/mdcr-home"      # optional; $MDCR_HOME and --home take precedence

    [[step]]
    stage = "synth"              # a registered stage
    id = "corpus"                # optional handle (default: the stage name)
    n_papers = 20000             # the stage's config keys

    [[step]]
    stage = "prefilter"
    input = "@corpus"            # the output of an earlier step

String values may use ``${NAME}`` for an environment variable (for example the S2ORC
location), and ``--set step.key=value`` overrides any key from the command line.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mdcr.core.config import from_mapping, override
from mdcr.core.errors import ConfigError, UnresolvedIdentityError
from mdcr.core.inputs import resolve_inputs
from mdcr.core.registry import Registry
from mdcr.core.stage import (
    PlanFacts,
    StagePlan,
    StageSpec,
    Work,
    get_stage,
    keeping_for_run,
    stages,
)
from mdcr.core.store import Artifact, Store

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_RESERVED = ("stage", "id")


@dataclass(frozen=True)
class Step:
    id: str
    spec: StageSpec
    cfg: Any


@dataclass(frozen=True)
class Pipeline:
    name: str
    path: Path
    home: Path | None
    steps: tuple[Step, ...]

    def step(self, key: str) -> Step:
        for s in self.steps:
            if s.id == key:
                return s
        matches = [s for s in self.steps if s.spec.name == key]
        if len(matches) == 1:
            return matches[0]
        ids = ", ".join(s.id for s in self.steps)
        if len(matches) > 1:
            raise ConfigError(f"stage '{key}' appears {len(matches)} times; name a step id: {ids}")
        raise ConfigError(f"no step '{key}' in {self.path}; steps: {ids}")


def _expand(value: Any, where: str) -> Any:
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in os.environ:
                raise ConfigError(
                    f"{where}: environment variable {name} is not set; "
                    f"set it or override the key with --set"
                )
            return os.environ[name]

        return _ENV.sub(sub, value)
    if isinstance(value, list):
        return [_expand(v, where) for v in value]
    return value


def parse_overrides(overrides: list[str]) -> dict[str, dict[str, str]]:
    """``["pools.sizes=1000,2000"]`` -> ``{"pools": {"sizes": "1000,2000"}}``."""
    out: dict[str, dict[str, str]] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        step, dot, name = key.partition(".")
        if not sep or not dot or not step or not name:
            raise ConfigError(f"--set '{item}': expected STEP.KEY=VALUE, e.g. pools.seed=1")
        out.setdefault(step.strip(), {})[name.strip()] = value.strip()
    return out


def load_pipeline(path: Path, overrides: list[str] | None = None) -> Pipeline:
    """Read and validate a pipeline file; every step's config is checked before anything runs."""
    if path.is_dir():
        raise ConfigError(f"'{path}' is a folder; give a pipeline file such as pipelines/demo.toml")
    if not path.is_file():
        raise ConfigError(f"pipeline file '{path}' does not exist; see the pipelines/ folder")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    unknown = set(data) - {"pipeline", "step"}
    if unknown:
        raise ConfigError(f"{path}: unknown table '{sorted(unknown)[0]}'; valid: pipeline, step")
    meta = data.get("pipeline", {})
    bad = set(meta) - {"name", "home", "description"}
    if bad:
        raise ConfigError(
            f"{path}: unknown key 'pipeline.{sorted(bad)[0]}'; valid: name, home, description"
        )
    raw_steps = data.get("step", [])
    if not raw_steps:
        raise ConfigError(f"{path}: no [[step]] tables; a pipeline needs at least one step")
    over = parse_overrides(overrides or [])
    all_stages = stages()
    steps: list[Step] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_steps, 1):
        if "stage" not in raw:
            valid = ", ".join(sorted(all_stages))
            raise ConfigError(f"{path}: step {i} has no 'stage' key; valid stages: {valid}")
        spec = get_stage(str(raw["stage"]))
        step_id = str(raw.get("id", spec.name))
        if step_id in seen:
            raise ConfigError(f"{path}: step id '{step_id}' is used twice; give each step an id")
        seen.add(step_id)
        where = f"{path.name}:{step_id}"
        params = {k: _expand(v, where) for k, v in raw.items() if k not in _RESERVED}
        cfg: Any = from_mapping(spec.config, params, where)
        step_over = over.pop(step_id, None)
        if step_over:
            cfg = override(cfg, step_over, where)
        steps.append(Step(step_id, spec, cfg))
    if over:
        ids = ", ".join(s.id for s in steps)
        raise ConfigError(f"--set names no step '{next(iter(over))}'; steps: {ids}")
    home = Path(meta["home"]) if "home" in meta else None
    return Pipeline(str(meta.get("name", path.stem)), path, home, tuple(steps))


def run_pipeline(
    pipeline: Pipeline,
    store: Store,
    *,
    until: str | None = None,
    only: str | None = None,
    dry_run: bool = False,
    quiet: bool = False,
) -> dict[str, Artifact]:
    """Plan every step, then run them in order, skipping those that are up to date.

    The same runner serves ``mdcr run`` and ``mdcr evaluate`` (which builds its pipeline
    in code). With ``dry_run`` it prints each step's fingerprint, state and plan. What a
    stage keeps for the next ones (the Ray engine's workers) is closed when it returns.
    """
    with keeping_for_run():
        return _run_steps(pipeline, store, until=until, only=only, dry_run=dry_run, quiet=quiet)


def _run_steps(
    pipeline: Pipeline,
    store: Store,
    *,
    until: str | None,
    only: str | None,
    dry_run: bool,
    quiet: bool,
) -> dict[str, Artifact]:
    steps = list(pipeline.steps)
    for last_id in (until, only):  # nothing after the last step asked for is planned
        if last_id is not None:
            last = pipeline.step(last_id)
            steps = steps[: steps.index(last) + 1]
    selected = {pipeline.step(only).id} if only is not None else {s.id for s in steps}
    check_references(pipeline, steps, dry_run=dry_run)
    folders: dict[str, Path] = {}
    known: dict[Path, str] = {}
    facts: dict[Path, PlanFacts] = {}
    unknown: dict[Path, str] = {}  # dry run: folders whose fingerprint cannot be known yet
    results: dict[str, Artifact] = {}
    timed: list[tuple[Step, float]] = []
    for step in steps:
        where = f"{pipeline.path.name}:{step.id}"
        inputs = resolve_inputs(
            step.cfg, folders, where=where, missing=unknown if dry_run else None
        )
        if dry_run:
            plan = _dry_run_step(
                step, store, inputs, known, facts, folders, selected, unknown, echo=print
            )
            if plan is not None and plan.work is not None:
                timed.append((step, _print_time(step, plan.work)))
            continue
        planned = store.plan(step.spec, step.cfg, inputs, known)
        folders[step.id] = planned.folder
        known[planned.folder] = planned.fingerprint
        done = store.is_done(planned.folder, planned.fingerprint)
        if step.id not in selected:
            if not done:
                broken = store.damage(planned.folder, planned.fingerprint)
                why = (
                    "which is not built yet"
                    if broken is None
                    else f"whose output is damaged: {broken}"
                )
                raise ConfigError(
                    f"step '{only}' needs '{step.id}', {why}; "
                    f"run with --until {only} instead of --only"
                )
            results[step.id] = Artifact(planned.folder, planned.fingerprint, up_to_date=True)
            continue
        for paths in inputs.values():
            for p in paths:
                if p in known and not store.is_done(p, known[p]):
                    raise ConfigError(f"{where}: input {p} is not built")
        results[step.id] = store.run(planned, quiet=quiet, label=step.id)
    if dry_run:
        _print_time_table(timed)
    return results


def check_references(pipeline: Pipeline, steps: list[Step], *, dry_run: bool = False) -> None:
    """Every step's input references checked before any step runs: an ``@step`` must name
    an earlier step, and a path must exist (a dry run plans on without it), so a bad
    reference in step 5 stops the run before step 1 starts, with the error of that step."""
    earlier: dict[str, Path] = {}
    for step in steps:
        where = f"{pipeline.path.name}:{step.id}"
        resolve_inputs(step.cfg, earlier, where=where, missing={} if dry_run else None)
        earlier[step.id] = Path(step.id)  # a stand-in: only the step's name is checked


def planned_work(pipeline: Pipeline, store: Store) -> dict[str, Work]:
    """Each step's planned work, as a dry run prices it (scripts/bench_paper.py --fit)."""
    folders: dict[str, Path] = {}
    known: dict[Path, str] = {}
    facts: dict[Path, PlanFacts] = {}
    unknown: dict[Path, str] = {}
    selected = {s.id for s in pipeline.steps}
    works: dict[str, Work] = {}
    for step in pipeline.steps:
        where = f"{pipeline.path.name}:{step.id}"
        inputs = resolve_inputs(step.cfg, folders, where=where, missing=unknown)
        plan = _dry_run_step(
            step,
            store,
            inputs,
            known,
            facts,
            folders,
            selected,
            unknown,
            echo=lambda _: None,
            fresh=True,
        )
        if plan is not None and plan.work is not None:
            works[step.id] = plan.work
    return works


class Clock(Protocol):
    """Prices a dry run's steps in wall time (the built-in one: :mod:`mdcr.engine.clock`,
    rates measured in the paper's rehearsals). The kernel only prints what it says."""

    name: str  # what the runner asks the registry for (WALL_TIME)

    def step(self, cfg: Any, work: Work) -> tuple[float, list[str]]:
        """A step's seconds (those that count for the total) and its lines."""
        ...

    def table(self, timed: list[tuple[str, str, Any, float]]) -> list[str]:
        """The closing lines: each (step id, stage, config, seconds) and the total."""
        ...


# The dry run's clock, registered by a module of the entry-point group mdcr.clocks.
CLOCKS: Registry[Clock] = Registry(
    "dry-run clock", key=lambda clock: clock.name, group="mdcr.clocks"
)
WALL_TIME = "wall time"


def _print_time(step: Step, work: Work) -> float:
    """Print a step's estimated time; return the seconds that count for the total."""
    seconds, lines = CLOCKS.get(WALL_TIME).step(step.cfg, work)
    for line in lines:
        print(f"    {line}")
    return seconds


def _print_time_table(timed: list[tuple[Step, float]]) -> None:
    """The dry run's last lines: each step's estimated wall time and the total."""
    if not timed:
        return
    print()
    rows = [(step.id, step.spec.name, step.cfg, seconds) for step, seconds in timed]
    for line in CLOCKS.get(WALL_TIME).table(rows):
        print(line)


def _dry_run_step(
    step: Step,
    store: Store,
    inputs: dict[str, list[Path]],
    known: dict[Path, str],
    facts: dict[Path, PlanFacts],
    folders: dict[str, Path],
    selected: set[str],
    unknown: dict[Path, str],
    *,
    echo: Callable[[str], None],
    fresh: bool = False,
) -> StagePlan | None:
    """Print one step's fingerprint, state and plan; record its folder and facts.

    A step whose identity cannot be resolved now (a hub model neither cached nor
    reachable) is planned on, but its fingerprint, and its dependants', is unknown.
    Returns the plan of a selected step that would run (``fresh``: as if nothing were
    built), else None.
    """
    waits_for = [unknown[p] for paths in inputs.values() for p in paths if p in unknown]
    broken = None
    try:
        if waits_for:
            raise UnresolvedIdentityError(
                f"depends on {waits_for[0]}, whose fingerprint is unknown"
            )
        planned = store.plan(step.spec, step.cfg, inputs, known)
        fp, folder = planned.fingerprint, planned.folder
        status = "up to date" if store.is_done(folder, fp) else "will run"
        broken = store.damage(folder, fp) if status == "will run" else None
    except UnresolvedIdentityError as exc:
        fp = "?" * 16
        folder = store.folder(step.spec.name, f"unresolved-{step.id}")
        unknown[folder] = step.id
        status = f"fingerprint unknown: {exc}"
    if step.id not in selected and status == "will run":
        status = "skipped"
    folders[step.id] = folder
    known[folder] = fp
    damaged = f" (damaged: {broken}; built again)" if broken and status == "will run" else ""
    echo(f"{step.id:<18} {step.spec.name:<12} {fp}  {status}{damaged}")
    if step.spec.plan is None:
        return None
    plan = step.spec.plan(step.cfg, inputs, facts)
    if plan.facts is not None:
        facts[folder] = plan.facts
    if step.id not in selected:
        return None
    for line in plan.text.splitlines():
        echo(f"    {line}")
    if status in ("up to date", "skipped") and not fresh:
        return None
    return plan


def summarize(
    pipeline: Pipeline, results: dict[str, Artifact], store: Store, notes: Sequence[str] = ()
) -> list[str]:
    """Lines saying where every step's outputs are, then ``notes`` (what to do next), then
    the last step's main file, and last of all its output folder alone (what a next stage
    would take), as a stage command ends."""
    lines = [f"Outputs of pipeline '{pipeline.name}' (under {store.home}):"]
    for step in pipeline.steps:
        if step.id in results:
            art = results[step.id]
            state = "up to date" if art.up_to_date else "built"
            lines.append(f"  {step.id:<18} {state:<10} {art.path}")
    lines.extend(notes)
    last = next((s for s in reversed(pipeline.steps) if s.id in results), None)
    if last is not None:
        folder = results[last.id].path
        if last.spec.main_output:
            lines.append(f"{last.spec.main_output}: {folder / last.spec.main_output}")
        lines.append(str(folder))
    return lines


def set_engine(pipeline: Pipeline, values: dict[str, Any]) -> Pipeline:
    """``pipeline`` with the engine settings ``values`` on every step that has them
    (``mdcr run --engine ray``; :mod:`mdcr.engine`); steps that do not scale out are
    left as they are."""
    import dataclasses

    if not values:
        return pipeline
    steps = []
    for step in pipeline.steps:
        names = {f.name for f in dataclasses.fields(step.spec.config)}
        if "executor" in names:
            cfg = dataclasses.replace(step.cfg, **values)
            cfg.validate()
            step = dataclasses.replace(step, cfg=cfg)
        steps.append(step)
    return dataclasses.replace(pipeline, steps=tuple(steps))
