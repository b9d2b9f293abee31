"""The parts of the layer contract import-linter cannot say: no module imports another package's
``internal`` ("only my parent package may import me"), and the framework names nothing of the
project. The layers themselves are checked by ``lint-imports`` (pyproject.toml, ``make lint``)."""

from __future__ import annotations

import ast
from pathlib import Path

from testutil.unit.architecture.module_text import docstring_ids

ROOT = Path(__file__).resolve().parents[3]


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return found


def _owner_of_internal(module: str) -> str | None:
    """``pkg.nodeagent.internal.state`` -> ``pkg.nodeagent``; None when not internal (or not ours:
    third-party packages have internals of their own, such as ``google.protobuf.internal``)."""
    parts = module.split(".")
    if parts[0] not in ("pkg", "api"):
        return None
    return ".".join(parts[: parts.index("internal")]) if "internal" in parts else None


def test_only_the_owning_package_imports_its_internal() -> None:
    offenders = []
    for path in sorted((ROOT / "pkg").rglob("*.py")):
        importer = _module(path)
        for imported in _imports(path):
            owner = _owner_of_internal(imported)
            if owner is not None and not (importer == owner or importer.startswith(owner + ".")):
                offenders.append(f"{importer} imports {imported}")
    assert offenders == []


def test_the_rule_sees_a_violation() -> None:
    assert _owner_of_internal("pkg.nodeagent.internal.state.sync_state") == "pkg.nodeagent"
    assert _owner_of_internal("pkg.nodeagent.setup") is None
    assert _owner_of_internal("google.protobuf.internal.containers") is None


def _code_strings(path: Path) -> list[str]:
    """String constants of a module, docstrings left out (they may cite the project as an example)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = docstring_ids(tree)
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_the_framework_names_nothing_of_the_project() -> None:
    """No ``gpu_`` metric name, no API group of ours: the process hands those in."""
    found = [
        f"{path.relative_to(ROOT)}: {text!r}"
        for path in sorted((ROOT / "pkg" / "framework").rglob("*.py"))
        for text in _code_strings(path)
        if "gpu_" in text or "gpu.deckhouse.io" in text
    ]
    assert found == []
