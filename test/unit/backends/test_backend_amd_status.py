"""What an AMD card shows in its PhysicalGPU status: the partition modes it lists
(``capabilities.amd``) and the ones it is in (``currentState.amd``), from its sysfs files, through the
same enrichment pipeline gpu-handler runs (offline, over the fixture trees); nothing of NVIDIA's, and a
card without partitioning has no AMD block at all (a field without a source is left out)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from api.gpu.v1alpha1 import (
    AmdCapabilities,
    AmdState,
    Capabilities,
    CurrentState,
    DriverType,
    PhysicalGPU,
    Vendor,
)
from pkg.gpuhandler.offline import OfflineRequest, compute_offers

SYSFS = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"


def _gpus(scenario: str) -> tuple[PhysicalGPU, ...]:
    result = compute_offers(
        OfflineRequest(node_name="node-1", sysfs_root=SYSFS / scenario, backend="simulated-amd")
    )
    assert not result.failures
    return result.gpus


def test_an_mi300x_shows_the_modes_it_lists_and_the_ones_it_is_in() -> None:
    gpus = _gpus("mi300x-x8")
    assert len(gpus) == 8
    for gpu in gpus:
        status = gpu.status
        assert status is not None
        assert status.capabilities is not None
        assert status.capabilities.vendor is Vendor.AMD
        assert status.capabilities.nvidia is None
        assert status.capabilities.amd == AmdCapabilities(
            compute_partition_modes=["spx", "dpx", "qpx", "cpx"], memory_partition_modes=["nps1", "nps4"]
        )
        assert status.current_state is not None
        assert status.current_state.nvidia is None
        assert status.current_state.amd == AmdState(
            compute_partition_mode="spx", memory_partition_mode="nps1"
        )


def test_a_card_without_partitioning_has_no_amd_block() -> None:
    for gpu in _gpus("mi210"):
        status = gpu.status
        assert status is not None
        assert status.capabilities is not None
        assert status.capabilities.amd is None
        assert status.current_state is None or status.current_state.amd is None


def test_the_amd_blocks_are_refused_beside_another_vendor_or_driver() -> None:
    with pytest.raises(ValidationError, match=r"capabilities\.amd is allowed only when"):
        Capabilities(vendor=Vendor.NVIDIA, amd=AmdCapabilities(compute_partition_modes=["spx"]))
    with pytest.raises(ValidationError, match=r"currentState\.amd is allowed only when"):
        CurrentState(driver_type=DriverType.VFIO, amd=AmdState(compute_partition_mode="spx"))
    assert (
        CurrentState(driver_type=DriverType.ROCM, amd=AmdState(compute_partition_mode="cpx")).amd is not None
    )
