"""Fixtures shared by the host-adapter tests: the fixture host trees, their builder, the pci.ids excerpt.

Offered as fixtures rather than importable helpers: every test folder has its own ``conftest``
module, so ``from conftest import ...`` could pick up another folder's.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from testutil.fixtures.sysfs import build

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
    """The builder of the committed trees (``testutil.fixtures.sysfs.build``)."""
    return build
