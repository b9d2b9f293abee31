"""No module imports another package's ``internal``: the part of the layer contract import-linter
cannot say ("only my parent package may import me"). The layers themselves are checked by
``lint-imports`` (pyproject.toml, ``make lint``)."""

from __future__ import annotations

import ast
from pathlib import Path

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
    """``pkg.nodeagent.internal.state`` -> ``pkg.nodeagent``; None when not internal."""
    parts = module.split(".")
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
    assert _owner_of_internal("pkg.nodeagent.internal.state.snapshot") == "pkg.nodeagent"
    assert _owner_of_internal("pkg.nodeagent.setup") is None
