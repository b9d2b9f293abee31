"""A device kind is one module (or package) under ``pkg/gpuhandler/preparation/kinds/`` and one
registration: outside ``kinds/`` only the composition roots import a kind's own module. The
pipeline, the planner, the checkpoint, the release order and start-up loop over the registry
(``kinds/__init__.py``) and never name a kind. The exceptions are readers of the checkpoint that
report what only one kind makes, each listed with why, and a test fails when one is no longer
needed."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PKG = ROOT / "pkg"
KINDS = "pkg.gpuhandler.preparation.kinds."

# Modules outside kinds/ that may import a kind's own module, and why.
ALLOWED = {
    # the composition roots: where kinds are registered and their services wired
    "pkg/gpuhandler/preparation/setup.py": "registers the kinds",
    "pkg/gpuhandler/setup.py": "shares the passed-through kind's holds with the enrichment and publisher",
    # readers of what one kind makes
    "pkg/gpuhandler/preparation/prepared_devices.py": "exports the MIG UUID and instance of each MIG device",
    "pkg/gpuhandler/attribution/sampler.py": "MIG processes run under the MIG UUID; a VM hides its own",
    "pkg/gpuhandler/attribution/status_reports.py": "the device status names a MIG UUID, an mdev, a share",
}


def _is_module(name: str) -> bool:
    """Whether ``name`` (dotted) is a module or package under pkg/, not a name inside one."""
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _kind_imports(path: Path) -> list[str]:
    """The kind modules ``path`` imports (the registry, ``kinds/__init__.py``, is not one)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found += [n for n in names if n.startswith(KINDS) and _is_module(n)]
    return found


def _importers() -> dict[str, list[str]]:
    found = {}
    for path in sorted(PKG.rglob("*.py")):
        relative = str(path.relative_to(ROOT))
        if relative.startswith("pkg/gpuhandler/preparation/kinds/"):
            continue
        if imports := _kind_imports(path):
            found[relative] = imports
    return found


def test_only_the_composition_roots_and_the_listed_readers_import_a_kinds_module() -> None:
    offenders = {path: names for path, names in _importers().items() if path not in ALLOWED}
    assert offenders == {}, "loop over the registry (kinds/__init__.py) instead of naming a kind"


def test_every_exception_is_still_needed() -> None:
    assert set(ALLOWED) <= set(_importers()), sorted(set(ALLOWED) - set(_importers()))


def test_the_check_sees_an_import_of_a_kind(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from pkg.gpuhandler.preparation.kinds.mig import MigKind\n"
        "from pkg.gpuhandler.preparation.kinds import Kinds, share\n"
    )
    assert _kind_imports(module) == [
        "pkg.gpuhandler.preparation.kinds.mig",
        "pkg.gpuhandler.preparation.kinds.share",
    ]
