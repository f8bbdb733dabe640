"""The shape of gpuci_tui/core, checked from its source: no import cycles, no private reach-ins.

Every part of the engine talks to the others through their public names, and
the modules form a DAG (deferred imports inside functions are counted too:
a cycle hidden in a function is still a cycle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import gpuci_tui.core

CORE = Path(gpuci_tui.core.__file__).parent


def _modules() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(), str(p)) for p in sorted(CORE.glob("*.py"))}


def _imports(tree: ast.Module) -> set[str]:
    """Core modules imported anywhere in ``tree`` (relative or absolute)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1:
                target = module.split(".")[0] if module else ""
                if target:
                    found.add(target)
                else:  # from . import x, y
                    found.update(alias.name for alias in node.names)
            elif module.startswith("gpuci_tui.core."):
                found.add(module.split(".")[2])
            elif module == "gpuci_tui.core":
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("gpuci_tui.core."):
                    found.add(alias.name.split(".")[2])
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_core_modules_import_each_other_without_cycles() -> None:
    modules = _modules()
    graph = {name: {m for m in _imports(tree) if m in modules} for name, tree in modules.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def _private_names(modules: dict[str, ast.Module]) -> set[str]:
    """Private attributes and methods the core's own classes define."""
    names: set[str] = set()
    for tree in modules.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                names.add(node.attr)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_no_part_reaches_into_another_parts_private_members() -> None:
    """``x._y`` only on ``self``/``cls``: third-party internals (pynvml, keyring) aside."""
    modules = _modules()
    ours = _private_names(modules)
    offences = []
    for name, tree in modules.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            attr = node.attr
            if attr not in ours:
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            offences.append(f"{name}.py:{node.lineno}: .{attr}")
    assert offences == []
