"""Fixtures shared by the host-adapter tests: the fixture host trees, their builder, the pci.ids excerpt.

Offered as fixtures rather than importable helpers: every test folder has its own ``conftest``
module, so ``from conftest import ...`` could pick up another folder's.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture(scope="session")
def sysfs_fixtures() -> Path:
    """``test/fixtures/sysfs``: one folder per scenario, each usable as a sysfs root."""
    return _FIXTURES / "sysfs"


@pytest.fixture(scope="session")
def pci_ids_excerpt() -> Path:
    return _FIXTURES / "pci.ids"


@pytest.fixture(scope="session")
def builder() -> ModuleType:
    """``test/fixtures/sysfs/build.py`` loaded by path: ``test`` is not a package here."""
    name = "sysfs_fixture_build"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _FIXTURES / "sysfs" / "build.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
    return sys.modules[name]
