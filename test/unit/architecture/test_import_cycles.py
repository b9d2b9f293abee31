"""No import cycle among the modules of pkg/ and api/, counting the imports that run later.

A cycle is dodged, not removed, by moving one of its imports into a function: the modules still
need each other, the order they load in still decides whether the program starts, and every such
import hides the structure from import-linter (which reads module-level imports only). So the graph
here is the *runtime* one: every ``import`` and ``from ... import`` of a module, at module level or
inside a function, method, class or ``try``; only those under ``if TYPE_CHECKING:`` are left out,
because they never run. A cycle is broken by moving code where it belongs (a shared error into a
module of its own, a vendor's entry-point factory beside its identity rather than inside it).

An edge goes to the module named: ``from pkg.a import b`` is an edge to ``pkg.a.b`` when ``b`` is a
submodule and to ``pkg.a`` otherwise; ``import pkg.a.b`` is an edge to ``pkg.a.b``. Importing
``pkg.a.b`` also runs ``pkg/a/__init__.py``, but that edge is not drawn: every package whose
``__init__`` re-exports its submodules would then be a cycle of its own.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("pkg", "api")
# pkg/ and api/ hold some 450 modules; far fewer means the walk lost its way (and would pass).
MIN_MODULES = 300

Graph = Mapping[str, frozenset[str]]


def module_files(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Every module under ``root/<package>``, by dotted name (a package by its ``__init__``)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` or ``if typing.TYPE_CHECKING:``."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run, at any depth; the bodies of ``if TYPE_CHECKING:`` are
    skipped (their ``else:`` is not)."""
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
        else:
            pending.extend(ast.iter_child_nodes(node))


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module a ``from`` import names, relative imports resolved against ``module``."""
    if node.level == 0:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imported_modules(module: str, path: Path, known: Iterable[str]) -> set[str]:
    """The modules of ``known`` that ``module`` (at ``path``) imports at runtime."""
    names = set(known)
    tree = ast.parse(path.read_text(), filename=str(path))
    targets: set[str] = set()
    for node in _runtime_imports(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        source = _absolute(module, path.name == "__init__.py", node)
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            targets.add(submodule if submodule in names else source)
    return {target for target in targets if target in names and target != module}


def import_graph(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, frozenset[str]]:
    files = module_files(root, packages)
    return {module: frozenset(imported_modules(module, path, files)) for module, path in files.items()}


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module, each sorted, in name order
    (iterative: no recursion limit to meet)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return sorted(components)


def shortest_cycle(graph: Graph, members: Iterable[str]) -> list[str]:
    """A shortest cycle through the first (by name) of ``members``, a strongly connected component:
    the modules in order, the first repeated at the end."""
    inside = set(members)
    start = min(inside)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for successor in sorted(graph[node] & inside):
            if successor == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if successor not in came_from:
                came_from[successor] = node
                queue.append(successor)
    raise AssertionError(f"not strongly connected: {sorted(inside)}")


def cycle_report(graph: Graph) -> list[str]:
    """One line per strongly connected component: a cycle through it, then all its members."""
    return [
        f"{' -> '.join(shortest_cycle(graph, members))}   (members: {', '.join(members)})"
        for members in strongly_connected(graph)
    ]


def test_no_import_cycles() -> None:
    graph = import_graph(ROOT)
    assert len(graph) >= MIN_MODULES, f"found only {len(graph)} modules under {PACKAGES}"
    assert sum(len(targets) for targets in graph.values()) >= len(graph), "hardly any imports found"
    report = cycle_report(graph)
    assert not report, "import cycles (deferred imports included):\n" + "\n".join(report)


def _write(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_cycle_dodged_by_a_deferred_import_is_reported(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a/__init__.py": "from pkg.a.identity import IDENTITY\n",  # a re-export: no cycle
            "pkg/a/identity.py": (
                "IDENTITY = 1\n\n\ndef create():\n    from .backend import Backend\n\n    return Backend()\n"
            ),
            "pkg/a/backend.py": "from pkg.a import identity\n\n\nclass Backend:\n    pass\n",
            "pkg/b.py": (  # a cycle under TYPE_CHECKING only: never runs, not reported
                "from typing import TYPE_CHECKING\n\n"
                "if TYPE_CHECKING:\n    import pkg.c\nelse:\n    import os\n"
            ),
            "pkg/c.py": "from pkg import b\n",
        },
    )
    graph = import_graph(tmp_path, ["pkg"])
    assert graph["pkg.a.identity"] == {"pkg.a.backend"}  # relative, and inside a function
    assert graph["pkg.a.backend"] == {"pkg.a.identity"}  # a submodule named by "from pkg.a import"
    assert graph["pkg.a"] == {"pkg.a.identity"}
    assert graph["pkg.b"] == set()
    assert graph["pkg.c"] == {"pkg.b"}
    assert cycle_report(graph) == [
        "pkg.a.backend -> pkg.a.identity -> pkg.a.backend   (members: pkg.a.backend, pkg.a.identity)"
    ]


def test_every_module_of_a_longer_cycle_is_named() -> None:
    graph = {
        "m.a": frozenset({"m.b"}),
        "m.b": frozenset({"m.c", "m.d"}),
        "m.c": frozenset({"m.a"}),
        "m.d": frozenset({"m.b"}),
        "m.e": frozenset({"m.a"}),
    }
    assert cycle_report(graph) == ["m.a -> m.b -> m.c -> m.a   (members: m.a, m.b, m.c, m.d)"]
