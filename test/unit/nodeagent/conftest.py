"""Fixtures of the node agent's unit tests; the builders live in :mod:`nodeagent_fakes`."""

from __future__ import annotations

import pytest
from testutil.unit.nodeagent.nodeagent_fakes import FIXTURES, RecordingWriter

from pkg.backends import VendorRegistry
from pkg.backends.nvidia.identity import IDENTITY as NVIDIA
from pkg.hardware.pciids import PciIds


@pytest.fixture
def writer() -> RecordingWriter:
    return RecordingWriter()


@pytest.fixture(scope="session")
def pci_ids() -> PciIds:
    return PciIds.load(FIXTURES / "pci.ids")


@pytest.fixture
def vendors() -> VendorRegistry:
    return VendorRegistry([NVIDIA])
