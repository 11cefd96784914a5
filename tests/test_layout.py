"""The package's shape: its import graph has no cycles, and the layers import downwards."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def modules() -> dict[str, Path]:
    """dlbench's modules by dotted name (a package by its __init__)."""
    found = {}
    for path in (SRC / "dlbench").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph(found: dict[str, Path]) -> dict[str, set[str]]:
    """Module → the dlbench modules it imports anywhere in its text (function-level imports
    included: a cycle deferred into a function is still a cycle of the design)."""

    def resolve(name: str) -> str | None:
        while name and name not in found:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in found}
    for name, path in found.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    kept = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(kept + ([base] if base else []))
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                if target.startswith("dlbench"):
                    resolved = resolve(target)
                    if resolved and resolved != name:
                        graph[name].add(resolved)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_import_graph_has_no_cycles():
    assert cycles(import_graph(modules())) == []


def test_the_cycle_check_sees_a_cycle():
    # A check that cannot fail is not a check: a planted two-module and three-module cycle.
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert sorted(cycles(graph)) == [["a", "b"], ["c", "d", "e"]]


# The layers of today's layout that hold (each pair names packages that exist, so each can
# fail). Some do not hold yet: the analysis formats numbers with dlbench.format,
# dlbench.run.cell starts the profiler of dlbench.run, and the plan asks the scenarios'
# and frameworks' registries what applies.
@pytest.mark.parametrize("lower, upper", [
    ("dlbench.measure", "dlbench.analysis"), ("dlbench.measure", "dlbench.scenarios"),
    ("dlbench.catalogue", "dlbench.scenarios"), ("dlbench.catalogue", "dlbench.frameworks"),
    ("dlbench.catalogue", "dlbench.run"), ("dlbench.frameworks", "dlbench.analysis"),
    ("dlbench.frameworks", "dlbench.report"), ("dlbench.frameworks", "dlbench.plan"),
    ("dlbench.scenarios", "dlbench.analysis"), ("dlbench.scenarios", "dlbench.run"),
    ("dlbench.scenarios", "dlbench.records"), ("dlbench.plan", "dlbench.run"),
    ("dlbench.plan", "dlbench.records"), ("dlbench.plan", "dlbench.analysis"),
    ("dlbench.plan", "dlbench.report"),
])
def test_a_lower_layer_never_imports_a_higher_one(lower, upper):
    graph = import_graph(modules())
    offending = {name: sorted(t for t in targets if t == upper or t.startswith(upper + "."))
                 for name, targets in graph.items()
                 if name == lower or name.startswith(lower + ".")}
    assert offending, f"no module of {lower}"  # the layer exists: the check can fail
    assert {k: v for k, v in offending.items() if v} == {}
