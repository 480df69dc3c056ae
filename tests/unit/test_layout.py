"""The package's layout: the packages by role and the arrows allowed between them
(docs/architecture.md, "Layout"), no import circle between mdcr modules or subpackages,
no module holding more than one concept's worth of code, one naming convention for stage
entry points, and one discovery rule for plug-ins."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "mdcr"
# Modules are split by concept, never at a line count: a stage keeps its config, its steps
# and its registration together, and a second concept gets a module of its own. This cap
# is an alarm well above a focused module (the longest, a stage with its config and named
# steps, are under 800 lines): a module past it holds more than one concept, to be split
# where they part.
MAX_LINES = 1000


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def import_graph() -> dict[str, set[str]]:
    """mdcr module -> the mdcr modules it imports (anywhere in it, TYPE_CHECKING too)."""
    return {module: set(targets) for module, targets in _parsed_import_graph().items()}


@functools.cache  # the source is parsed once per test process, not once per test
def _parsed_import_graph() -> dict[str, frozenset[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            for t in targets:
                if t in modules and t != name and t != "mdcr":
                    graph[name].add(t)
    return {module: frozenset(targets) for module, targets in graph.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_between_modules() -> None:
    assert cycles(import_graph()) == []


def test_no_import_circle_between_subpackages() -> None:
    def unit(module: str) -> str:
        parts = module.split(".")
        return ".".join(parts[:2])

    graph: dict[str, set[str]] = {}
    for a, targets in import_graph().items():
        graph.setdefault(unit(a), set())
        for b in targets:
            graph.setdefault(unit(b), set())
            if unit(a) != unit(b):
                graph[unit(a)].add(unit(b))
    assert cycles(graph) == []


def test_the_checker_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_module_outgrows_one_concept() -> None:
    long = {
        str(path.relative_to(PACKAGE.parent)): n
        for path in sorted(PACKAGE.rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}, "split each where its concepts part"


def test_stage_entry_points_share_one_naming_convention() -> None:
    from mdcr.core.stage import stages

    for spec in stages().values():
        if not spec.run.__module__.startswith("mdcr."):
            continue  # toy stages of the tests
        snake = spec.name.replace("-", "_")
        assert spec.run.__name__ == f"run_{snake}", spec.name
        if spec.plan is not None:
            assert spec.plan.__name__ == f"plan_{snake}", spec.name  # type: ignore[attr-defined]
        if spec.identity is not None:
            assert spec.identity.__name__ == f"identify_{snake}", spec.name  # type: ignore[attr-defined]


def _imports_between(graph: dict[str, set[str]], source: str, target: str) -> list[str]:
    """``a -> b`` for each module of package ``source`` importing one of ``target``."""
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        if a == source or a.startswith(source + ".")
        for b in targets
        if b == target or b.startswith(target + ".")
    )


def test_index_and_eval_do_not_import_each_other() -> None:
    """Retrieval (index) and scoring meet only in the measures, a core package: BM25
    tuning scores through mdcr.measures, and scoring reads runs through their contract."""
    graph = import_graph()
    assert _imports_between(graph, "mdcr.index", "mdcr.scoring") == []
    assert _imports_between(graph, "mdcr.scoring", "mdcr.index") == []


def test_measures_use_only_core_modules() -> None:
    """mdcr.measures sits below every stage package, so each of them may use it."""
    graph = import_graph()
    for package in ("corpus", "pools", "encoders", "index", "scoring", "benchmark", "planning"):
        assert _imports_between(graph, "mdcr.measures", f"mdcr.{package}") == []


def test_the_layout_checker_finds_an_import_between_packages() -> None:
    graph = {
        "mdcr.index.bm25.tune": {"mdcr.scoring.metrics", "mdcr.contracts.paper"},
        "mdcr.scoring": set(),
    }
    assert _imports_between(graph, "mdcr.index", "mdcr.scoring") == [
        "mdcr.index.bm25.tune -> mdcr.scoring.metrics"
    ]


def test_eval_never_imports_the_encoders() -> None:
    """Scoring and reporting read labels, paper names and built-in entries from the
    low modules (mdcr.retrievers.builtin, mdcr.retrievers.builtin_entry), never from mdcr.encoders,
    so that they work without the encoders' code (and its torch) loaded."""
    assert _imports_between(import_graph(), "mdcr.scoring", "mdcr.encoders") == []


def test_the_builtin_records_are_data_only() -> None:
    """mdcr.retrievers.builtin imports no heavy library and of mdcr only the kernel's
    registry (and its errors): the records are data, registered next to their
    definitions."""
    tree = ast.parse((PACKAGE / "retrievers" / "builtin.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names} | {
        n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0
    }
    assert imported <= {
        "__future__",
        "dataclasses",
        "typing",
        "mdcr.core.errors",
        "mdcr.core.registry",
    }


FACES = ("mdcr.api", "mdcr.cli", "mdcr.mteb")


def _is_in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _importers_outside(
    graph: dict[str, set[str]], package: str, allowed: tuple[str, ...]
) -> list[str]:
    """``a -> b`` for each module outside ``package`` and ``allowed`` importing ``package``."""
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if _is_in(b, package)
        and not _is_in(a, package)
        and not any(_is_in(a, ok) for ok in allowed)
    )


def test_only_the_faces_import_evaluation() -> None:
    """``mdcr evaluate`` (mdcr.evaluation) is run by the faces alone: the CLI and the API
    (each through mdcr.evaluation.run), never by a stage or a library package."""
    assert _importers_outside(import_graph(), "mdcr.evaluation", FACES) == []


def test_only_the_cli_imports_explore() -> None:
    """``mdcr explore`` (mdcr.explore, its web pages and their server) is a face of its own:
    the CLI starts it; no stage or library package imports it."""
    assert _importers_outside(import_graph(), "mdcr.explore", ("mdcr.cli",)) == []


def test_no_module_imports_the_cli() -> None:
    """The command line is the top floor: nothing below it imports mdcr.cli."""
    importers = sorted(
        a
        for a, targets in import_graph().items()
        if any(_is_in(b, "mdcr.cli") for b in targets) and not _is_in(a, "mdcr.cli")
    )
    assert importers == []


def test_each_cli_command_family_sets_the_function_it_runs() -> None:
    """Every subcommand parser (a group's subcommands too) names its function by
    ``set_defaults(func=...)``: the dispatch is argparse's, never an if-chain on names."""
    import argparse

    from mdcr.cli import build_parser

    def leaves(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, object]]:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            return [(path, parser.get_default("func"))]
        found = []
        for action in subs:
            for name, child in action.choices.items():
                found += leaves(child, f"{path} {name}".strip())
        return found

    commands = leaves(build_parser(), "")
    assert len(commands) >= 20  # run, every stage, evaluate, export, download, ls ... verify
    assert [name for name, func in commands if not callable(func)] == []


def test_the_checker_finds_an_import_of_evaluation_from_a_stage() -> None:
    graph = {
        "mdcr.benchmark.rank": {"mdcr.evaluation.request"},
        "mdcr.cli.evaluate": {"mdcr.evaluation.run"},
        "mdcr.evaluation.run": {"mdcr.evaluation.pools"},
    }
    assert _importers_outside(graph, "mdcr.evaluation", FACES) == [
        "mdcr.benchmark.rank -> mdcr.evaluation.request"
    ]


# The packages by role, lowest first; each may import its own modules and those of the
# roles listed for it, nothing else of mdcr (docs/architecture.md, "Layout").
LOWER_ROLES: dict[str, tuple[str, ...]] = {
    "mdcr.core": (),
    "mdcr.contracts": ("mdcr.core",),
    "mdcr.retrievers": ("mdcr.core", "mdcr.contracts"),
}
MAX_ROOT_MODULES = 5


def _arrows_out_of_role(
    graph: dict[str, set[str]], role: str, allowed: tuple[str, ...]
) -> list[str]:
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        if _is_in(a, role)
        for b in targets
        if not any(_is_in(b, p) for p in (role, *allowed))
    )


@pytest.mark.parametrize("role", sorted(LOWER_ROLES))
def test_the_low_roles_import_only_what_lies_below_them(role: str) -> None:
    """The kernel imports nothing of the domain (no stage, contract, retriever or paper);
    the contracts only the kernel; the retriever records the kernel and the contracts."""
    assert _arrows_out_of_role(import_graph(), role, LOWER_ROLES[role]) == []


def test_the_role_checker_finds_a_kernel_module_importing_the_domain() -> None:
    graph = {"mdcr.core.store": {"mdcr.contracts.facts", "mdcr.core.locks"}}
    assert _arrows_out_of_role(graph, "mdcr.core", ()) == [
        "mdcr.core.store -> mdcr.contracts.facts"
    ]


def test_the_root_holds_the_faces_alone() -> None:
    """The package's root keeps __init__ and the faces; every other module lives in the
    package of its role."""
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


def _code_strings(tree: ast.Module) -> list[str]:
    """The string constants of a module's code (docstrings left out)."""
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def test_the_kernel_names_no_domain_module() -> None:
    """The kernel reaches the domain only through its registries, whose plug-ins are found
    by their entry points: no string in the kernel's code names a module of mdcr outside
    it (to import it)."""
    domain = {m for m in _modules() if m != "mdcr" and not _is_in(m, "mdcr.core")}
    for path in sorted((PACKAGE / "core").rglob("*.py")):
        named = [t for t in _code_strings(ast.parse(path.read_text())) if t in domain]
        assert named == [], f"{path.name} names {named}"


def test_the_kernel_checker_finds_a_module_named_in_code() -> None:
    tree = ast.parse('"""Docs may name mdcr.index.dense."""\nM = ("mdcr.index.dense",)\n')
    assert _code_strings(tree) == ["mdcr.index.dense"]


# Each registry of mdcr and the entry-point group that names the modules registering into it.
REGISTRY_GROUPS = {
    "STAGES": "mdcr.stages",
    "FORMATS": "mdcr.input_formats",
    "EXPORTS": "mdcr.exports",
    "FAMILIES": "mdcr.encoder_families",
    "ENCODER_RECORDS": "mdcr.encoder_records",
    "MEASURES": "mdcr.measures",
    "FACTS": "mdcr.facts",
    "CLOCKS": "mdcr.clocks",
}


def _registrations(path: Path) -> set[str]:
    """The registries a module registers into when it is imported (``X.register(...)`` at
    its top level, or ``@X.register`` on a class)."""
    found: set[str] = set()
    for stmt in ast.parse(path.read_text()).body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        nodes = stmt.decorator_list if isinstance(stmt, ast.ClassDef) else list(ast.walk(stmt))
        for node in nodes:
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "register"
                and isinstance(node.value, ast.Name)
                and node.value.id in REGISTRY_GROUPS
            ):
                found.add(node.value.id)
    return found


def test_every_module_that_registers_a_plug_in_is_named_by_its_group() -> None:
    """A module whose import registers a stage, format, export, ... is discovered only if
    an entry point of the registry's group (pyproject.toml) names it; and every module an
    entry point names registers something there."""
    from mdcr.core.registry import plugin_modules

    by_group: dict[str, set[str]] = {group: set() for group in REGISTRY_GROUPS.values()}
    for name, path in _modules().items():
        for registry in _registrations(path):
            by_group[REGISTRY_GROUPS[registry]].add(name)
    for group, modules in by_group.items():
        declared = {m for m in plugin_modules(group) if m.startswith("mdcr.")}
        assert declared == modules, group
