"""The package's shape: its import graph has no cycles, and each layer of dlbench.LAYERS
imports only from the layers below it."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def modules(root: Path = SRC) -> dict[str, Path]:
    """The modules of the dlbench package under root by dotted name (a package by its
    __init__)."""
    found = {}
    for path in (root / "dlbench").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
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


# -- the layers (dlbench.LAYERS): a package or module imports nothing of a layer above its own


def layer_index(layers: tuple[tuple[str, ...], ...]) -> dict[str, int]:
    """Each name directly under dlbench/ (a package or a module) → its layer, from 0 at the
    bottom."""
    return {name: i for i, names in enumerate(layers) for name in names}


def layer_of(module: str, index: dict[str, int]) -> int:
    """The layer of a dotted module: its top-level package's or module's; the package's own
    __init__ (`dlbench`) lies beneath every layer. KeyError for a name in no layer."""
    parts = module.split(".")
    return -1 if len(parts) == 1 else index[parts[1]]


def upward_imports(graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...]
                   ) -> dict[tuple[str, str], list[str]]:
    """(importing package, imported package) → the module imports behind it, for every
    import of a layer above the importer's."""
    index = layer_index(layers)
    found: dict[tuple[str, str], list[str]] = {}
    for name, targets in sorted(graph.items()):
        for target in sorted(targets):
            if layer_of(target, index) > layer_of(name, index):
                packages = (".".join(name.split(".")[:2]), ".".join(target.split(".")[:2]))
                found.setdefault(packages, []).append(f"{name} -> {target}")
    return found


def test_every_package_and_module_has_one_layer():
    """LAYERS names each folder and module directly under dlbench/ exactly once, and
    nothing else: a new package has to take its place in the order."""
    from dlbench import LAYERS

    named = [name for names in LAYERS for name in names]
    present = {path.stem if path.is_file() else path.name
               for path in (SRC / "dlbench").iterdir()
               if (path.suffix == ".py" and path.name != "__init__.py")
               or (path / "__init__.py").is_file()}
    assert sorted(named) == sorted(set(named)), "a name in two layers"
    assert set(named) == present


def test_no_layer_imports_a_layer_above_it():
    """Over packages: no module imports one of a layer above its own package's, anywhere
    in its text (imports inside functions too: deferring one does not change the design)."""
    from dlbench import LAYERS

    assert upward_imports(import_graph(modules()), LAYERS) == {}



# The modules of a framework's folder that the catalogue imports by name (importlib, which
# the graph does not see): the framework's declaration and its recipes. They are the
# catalogue's, kept in the framework's folder.
READ_BY_THE_CATALOGUE = ("about", "recipes")


def test_what_the_catalogue_reads_from_a_framework_folder_imports_nothing_above_it():
    from dlbench import LAYERS

    index = layer_index(LAYERS)
    graph = import_graph(modules())
    read = {name: targets for name, targets in graph.items()
            if name.startswith("dlbench.frameworks.")
            and name.rpartition(".")[2] in READ_BY_THE_CATALOGUE}
    assert len(read) >= 2 * 2, sorted(read)  # two frameworks' at least: the check can fail
    above = {name: sorted(t for t in targets if layer_of(t, index) > index["catalogue"])
             for name, targets in read.items()}
    assert {name: targets for name, targets in above.items() if targets} == {}

def test_the_layer_check_sees_an_upward_import(tmp_path):
    """A planted upward import, inside a function, in a fake package parsed like the real
    one, is caught; imports downward, within a layer and of the package's __init__ are
    not."""
    files = {
        "dlbench/__init__.py": "LAYERS = ()\n",
        "dlbench/low/__init__.py": "",
        "dlbench/low/a.py": "import dlbench\n\n\ndef f():\n    from dlbench.high import b\n",
        "dlbench/high/__init__.py": "from dlbench.low.a import f\n",
        "dlbench/high/b.py": "from dlbench.high import c\nfrom dlbench import low\n",
        "dlbench/high/c.py": "",
        "dlbench/top.py": "from dlbench.high.b import c\n",
        "dlbench/side.py": "from dlbench import top\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(modules(tmp_path))
    layers = (("low",), ("high",), ("top", "side"))
    assert upward_imports(graph, layers) == {
        ("dlbench.low", "dlbench.high"): ["dlbench.low.a -> dlbench.high.b"]}
    # The same graph with the order turned over: every downward import is now upward.
    assert set(upward_imports(graph, layers[::-1])) == {
        ("dlbench.high", "dlbench.low"), ("dlbench.top", "dlbench.high")}
    with pytest.raises(KeyError):  # a package in no layer is an error, not a pass
        upward_imports(graph, (("low",), ("high",)))
