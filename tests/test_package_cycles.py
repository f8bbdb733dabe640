"""No import circle between any two modules of gpuci_tui, read from the source.

tests/test_core_structure.py holds core to its package order; this holds the
whole package (the console, the command line, the simulation too) to a plain
rule: the modules import each other as a DAG. Every import statement counts:
top level, inside functions, under ``TYPE_CHECKING`` (an import only a type
checker runs still ties two modules: each needs the other to be read). A
``from P import n`` counts as an import of ``P.n`` when that is a module, else of
``P``; a package's ``__init__`` is a module like any other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import gpuci_tui

PACKAGE = Path(gpuci_tui.__file__).parent
ROOT = "gpuci_tui"


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = [ROOT, *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports (by any statement)."""
    is_package = path.name == "__init__.py"
    base = name.split(".") if is_package else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - (node.level - 1)]
                module = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                child = f"{module}.{alias.name}"
                out.add(child if child in modules else module)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return {m for m in out if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _a_circle(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One circle through a component, for the message (``a -> b -> a``)."""
    members = set(component)
    path = [component[0]]
    seen = {component[0]}
    while True:
        step = sorted(graph[path[-1]] & members)
        back = [m for m in step if m in seen]
        if back:
            return path[path.index(back[0]) :] + [back[0]]
        path.append(step[0])
        seen.add(step[0])


def test_the_walk_sees_the_package() -> None:
    graph = _graph()
    assert len(graph) > 200
    assert "gpuci_tui.sim.server" in graph["gpuci_tui.sim"] or graph["gpuci_tui.sim.server"]


def test_no_module_imports_itself_back() -> None:
    graph = _graph()
    circles = [" -> ".join(_a_circle(c, graph)) for c in _cycles(graph)]
    assert not circles, "import circles (name a protocol, or move the shared part):\n" + "\n".join(
        circles
    )


def test_the_check_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    (component,) = _cycles(graph)
    assert component == ["a", "b", "c"]
    assert _a_circle(component, graph) == ["a", "b", "c", "a"]
