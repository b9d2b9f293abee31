"""Every handler step and every service has a unit test of its own.

Handlers decide and services do the I/O (docs/architecture.md, "Controller patterns"), so each can
be tested alone: a handler with a hand-built state and fake services, a service with a mocked
client. This test keeps that true as modules are added or moved. It reads the tree and names no
module: there is no list of allowed gaps, so a new step or service comes with its test or fails here.

The rule, kept simple enough to say in one line: **a module is covered when some test file under
``test/unit`` imports it and that file's name contains the module's name** (``handler/apply.py`` of
the orchestrator is covered by ``test_orchestrator_handler_apply.py``, which imports it). Importing
a name that a package's ``__init__`` re-exports counts as importing the module that defines it. A
test named for a group (``test_gpuclass_handlers.py``) does not count for its members: its name
does not say which step it is about, nor its failure which step broke.

What is a handler step: a class outside ``pkg/framework`` with a ``handle`` method taking the
state (a step of a reconcile's handler chain, :mod:`pkg.framework.reconcile.handler`) or with both
``take`` and ``undo`` (a step of a StepTaker pipeline, :mod:`pkg.framework.steptaker`).

What is a service, in the packages of the four controller components: a module of a ``service``
package or named ``service``/``services``, or, outside the handler and composition-root modules,
one with a function or constructor that is handed the API client (``KubeClient``) or the event
recorder (``EventRecorderLogger``): the two ports through which a component talks to the API.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PKG = ROOT / "pkg"
UNIT = ROOT / "test" / "unit"
COMPONENTS = ("dracontroller", "gpucontroller", "gpuhandler", "nodeagent")
IO_PORTS = frozenset({"KubeClient", "EventRecorderLogger"})
SERVICE_NAMES = frozenset({"service", "services"})


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _file_of(module: str) -> Path | None:
    """The source file of a module of ours (``pkg.x.y``), a package's ``__init__.py`` included."""
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The module an ``import from`` names, a relative one resolved against its importer."""
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


@cache
def _defining_module(module: str, name: str) -> str | None:
    """The module of ours that ``from module import name`` reaches: ``module.name`` when that is a
    module, else where ``module``'s ``__init__`` imported ``name`` from, followed through."""
    if _file_of(f"{module}.{name}") is not None:
        return f"{module}.{name}"
    path = _file_of(module)
    if path is None:
        return None
    if path.name != "__init__.py":
        return module
    for node in _tree(path).body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return _defining_module(_absolute(node, module, is_package=True), alias.name)
    return module


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            for alias in node.names:
                if (defining := _defining_module(node.module, alias.name)) is not None:
                    found.add(defining)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _test_files() -> list[Path]:
    return sorted(UNIT.rglob("test_*.py"))


def _methods(node: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {item.name: item for item in node.body if isinstance(item, ast.FunctionDef)}


def _is_step(node: ast.ClassDef) -> bool:
    methods = _methods(node)
    handle = methods.get("handle")
    if handle is not None and len(handle.args.args) == 2:  # (self, state)
        return True
    return "take" in methods and "undo" in methods


def _source_files(root: Path) -> Iterator[Path]:
    yield from (p for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts)


def handler_modules() -> list[Path]:
    return [
        path
        for path in _source_files(PKG)
        if path.relative_to(PKG).parts[0] != "framework"
        and any(isinstance(node, ast.ClassDef) and _is_step(node) for node in ast.walk(_tree(path)))
    ]


def _annotation_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    args = function.args
    names: set[str] = set()
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
        if arg.annotation is not None:
            names.update(
                n.id if isinstance(n, ast.Name) else n.attr
                for n in ast.walk(arg.annotation)
                if isinstance(n, ast.Name | ast.Attribute)
            )
    return names


def _is_service(path: Path, handlers: set[Path]) -> bool:
    if path.name == "__init__.py":
        return False  # a package's re-exports; its modules are listed one by one
    if "service" in path.parent.parts or path.stem in SERVICE_NAMES:
        return True
    if path in handlers or path.stem == "setup" or "handler" in path.parent.parts:
        return False
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _annotation_names(node) & IO_PORTS
        for node in ast.walk(_tree(path))
    )


def service_modules() -> list[Path]:
    handlers = set(handler_modules())
    return [
        path
        for component in COMPONENTS
        for path in _source_files(PKG / component)
        if _is_service(path, handlers)
    ]


def _uncovered(modules: list[Path]) -> list[str]:
    imports = {test: _imported_modules(test) for test in _test_files()}
    return [
        str(path.relative_to(ROOT))
        for path in modules
        if not any(
            path.stem in test.stem and _module_name(path) in imported for test, imported in imports.items()
        )
    ]


def test_every_handler_step_has_a_test_of_its_own() -> None:
    assert _uncovered(handler_modules()) == []


def test_every_service_has_a_test_of_its_own() -> None:
    assert _uncovered(service_modules()) == []


def test_the_scan_finds_steps_and_services_in_every_component() -> None:
    """The guards above would pass vacuously if the scan found nothing."""
    for component in COMPONENTS:
        assert any(p.is_relative_to(PKG / component) for p in handler_modules()), component
        assert any(p.is_relative_to(PKG / component) for p in service_modules()), component
    assert not set(handler_modules()) & set(service_modules())


def test_a_re_export_counts_as_the_module_that_defines_the_name() -> None:
    assert _defining_module("pkg.nodeagent.internal.service", "KubeWriter") == (
        "pkg.nodeagent.internal.service.kube_writer"
    )
    assert _defining_module("pkg.nodeagent.internal.service", "kube_writer") == (
        "pkg.nodeagent.internal.service.kube_writer"
    )


def test_a_module_without_a_test_named_for_it_is_a_gap() -> None:
    """With no list of allowed gaps, the guards are only as strict as this rule: a module no test
    is named for, or one a test is named for but does not import, is reported."""
    unnamed = PKG / "dracontroller" / "internal" / "service" / "no_test_is_named_for_this.py"
    named_not_imported = (
        PKG / "gpuhandler" / "decisions.py"
    )  # test_dra_controller_decisions.py imports another
    assert _uncovered([unnamed, named_not_imported]) == [
        str(unnamed.relative_to(ROOT)),
        str(named_not_imported.relative_to(ROOT)),
    ]
