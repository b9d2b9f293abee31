"""A card's multi-node NVLink fabric: NVML's fabric info read in full (newest struct first), turned
into our facts, and written to the PhysicalGPU status; NVML's own bit layout is the reference."""

from __future__ import annotations

import ctypes
import uuid
from typing import Any

import pynvml
import pytest
from pytest_mock import MockerFixture

from api.gpu.v1alpha1 import FabricState, NvidiaFabric
from pkg.backends.nvidia import nvml_port
from pkg.backends.nvidia.backend import fabric_of
from pkg.backends.nvidia.fabric import FabricFacts, fabric_facts, health_faults
from pkg.backends.nvidia.nvml import PynvmlAdapter
from pkg.backends.nvidia.nvml_port import NO_FABRIC_CLUSTER, GpuFabricInfo, NvmlError, NvmlReturn

CLUSTER = "3c1e5f0a-9d42-4b7e-a1c8-6f2d0e9b7a15"
A = "0000:18:00.0"


def info(
    *, cluster: str = CLUSTER, clique: int = 7, state: int = 3, status: int = 0, mask: int | None = 0
) -> GpuFabricInfo:
    return GpuFabricInfo(cluster_uuid=cluster, clique_id=clique, state=state, status=status, health_mask=mask)


def mask(**fields: int) -> int:
    """A health mask built with pynvml's own shifts and values (the reference for our constants)."""
    value = 0
    for name, field in fields.items():
        value |= field << getattr(pynvml, f"NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_{name}")
    return value


def test_our_nvml_constants_are_nvmls() -> None:
    for ours, theirs in [
        ("GPU_FABRIC_STATE_NOT_SUPPORTED", "NVML_GPU_FABRIC_STATE_NOT_SUPPORTED"),
        ("GPU_FABRIC_STATE_NOT_STARTED", "NVML_GPU_FABRIC_STATE_NOT_STARTED"),
        ("GPU_FABRIC_STATE_IN_PROGRESS", "NVML_GPU_FABRIC_STATE_IN_PROGRESS"),
        ("GPU_FABRIC_STATE_COMPLETED", "NVML_GPU_FABRIC_STATE_COMPLETED"),
        ("GPU_FABRIC_HEALTH_TRUE", "NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE"),
        ("GPU_FABRIC_HEALTH_FALSE", "NVML_GPU_FABRIC_HEALTH_MASK_ROUTE_UNHEALTHY_FALSE"),
        ("GPU_FABRIC_HEALTH_SHIFT_DEGRADED_BW", "NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW"),
        ("GPU_FABRIC_HEALTH_SHIFT_ROUTE_RECOVERY", "NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_RECOVERY"),
        ("GPU_FABRIC_HEALTH_SHIFT_ROUTE_UNHEALTHY", "NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ROUTE_UNHEALTHY"),
        (
            "GPU_FABRIC_HEALTH_SHIFT_ACCESS_TIMEOUT_RECOVERY",
            "NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_ACCESS_TIMEOUT_RECOVERY",
        ),
        (
            "GPU_FABRIC_HEALTH_SHIFT_INCORRECT_CONFIGURATION",
            "NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_INCORRECT_CONFIGURATION",
        ),
        (
            "GPU_FABRIC_HEALTH_WIDTH_INCORRECT_CONFIGURATION",
            "NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_INCORRECT_CONFIGURATION",
        ),
        (
            "GPU_FABRIC_CONFIGURATION_NO_PARTITION",
            "NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NO_PARTITION",
        ),
        ("GPU_FABRIC_CONFIGURATION_NONE", "NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE"),
    ]:
        assert getattr(nvml_port, ours) == getattr(pynvml, theirs), ours


@pytest.mark.parametrize(
    "reading",
    [
        None,  # the query is not offered (before Hopper, an old driver)
        info(cluster=NO_FABRIC_CLUSTER, clique=0, state=0),  # the H200 VM of the hardware tier
    ],
)
def test_a_card_in_no_fabric_has_no_facts(reading: GpuFabricInfo | None) -> None:
    assert fabric_facts(reading) is None


def test_a_single_board_that_completed_is_ready_without_a_cluster() -> None:
    assert fabric_facts(info(cluster=NO_FABRIC_CLUSTER, clique=0)) == FabricFacts(
        state=FabricState.READY, cluster_uuid=None, clique_id=0
    )


@pytest.mark.parametrize(
    ("state", "status", "expected", "reason"),
    [
        (1, 0, FabricState.JOINING, "RegistrationNotStarted"),
        (2, 0, FabricState.JOINING, "RegistrationInProgress"),
        (3, NvmlReturn.TIMEOUT, FabricState.FAILED, "RegistrationFailedTimeout"),
        (0, 0, FabricState.FAILED, "RegistrationStateNotSupported"),  # a cluster but no state
    ],
)
def test_a_fabric_card_not_joined_says_why(
    state: int, status: int, expected: FabricState, reason: str
) -> None:
    facts = fabric_facts(info(state=state, status=status))
    assert facts == FabricFacts(state=expected, cluster_uuid=CLUSTER, clique_id=7, reasons=(reason,))


def test_a_joined_card_is_ready_when_every_health_field_says_false_or_not_supported() -> None:
    healthy = mask(DEGRADED_BW=2, ROUTE_RECOVERY=2, ROUTE_UNHEALTHY=2, ACCESS_TIMEOUT_RECOVERY=0)
    healthy |= pynvml.NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NONE << 8
    assert fabric_facts(info(mask=healthy)) == FabricFacts(
        state=FabricState.READY, cluster_uuid=CLUSTER, clique_id=7
    )
    assert fabric_facts(info(mask=None)).state is FabricState.READY  # type: ignore[union-attr]


def test_each_health_fault_is_named_and_makes_the_card_degraded() -> None:
    everything = mask(DEGRADED_BW=1, ROUTE_RECOVERY=1, ROUTE_UNHEALTHY=1, ACCESS_TIMEOUT_RECOVERY=1)
    everything |= pynvml.NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_INSUFFICIENT_NVLINKS << 8
    facts = fabric_facts(info(mask=everything))
    assert facts is not None
    assert facts.state is FabricState.DEGRADED
    assert facts.reasons == (
        "DegradedBandwidth",
        "RouteRecovery",
        "RouteUnhealthy",
        "AccessTimeoutRecovery",
        "ConfigurationInsufficientNvlinks",
    )
    for name, reason in [
        ("DEGRADED_BW", "DegradedBandwidth"),
        ("ROUTE_RECOVERY", "RouteRecovery"),
        ("ROUTE_UNHEALTHY", "RouteUnhealthy"),
        ("ACCESS_TIMEOUT_RECOVERY", "AccessTimeoutRecovery"),
    ]:
        assert health_faults(mask(**{name: 1})) == (reason,)
        assert health_faults(mask(**{name: 2})) == ()
    assert health_faults(pynvml.NVML_GPU_FABRIC_HEALTH_MASK_INCORRECT_CONFIGURATION_NO_PARTITION << 8) == (
        "ConfigurationNoPartition",
    )


def test_the_status_block_leaves_out_what_nvml_did_not_say() -> None:
    assert fabric_of(None) is None
    ready = fabric_of(FabricFacts(state=FabricState.READY, cluster_uuid=None, clique_id=0))
    assert ready is not None
    assert ready.to_api_dict() == {"state": "Ready", "cliqueID": 0}
    degraded = fabric_of(
        FabricFacts(
            state=FabricState.DEGRADED, cluster_uuid=CLUSTER, clique_id=7, reasons=("RouteUnhealthy",)
        )
    )
    assert degraded == NvidiaFabric(
        state=FabricState.DEGRADED, cluster_uuid=CLUSTER, clique_id=7, reasons=["RouteUnhealthy"]
    )
    assert degraded.to_api_dict() == {
        "state": "Degraded",
        "clusterUUID": CLUSTER,
        "cliqueID": 7,
        "reasons": ["RouteUnhealthy"],
    }


class FabricLibrary:
    """Just enough of pynvml for the fabric call: which struct versions the driver takes, and
    whether it has the versioned call at all."""

    NVMLError = pynvml.NVMLError
    c_nvmlGpuFabricInfo_v3_t = pynvml.c_nvmlGpuFabricInfo_v3_t  # noqa: N815 - pynvml's name
    c_nvmlGpuFabricInfo_v2_t = pynvml.c_nvmlGpuFabricInfo_v2_t  # noqa: N815 - pynvml's name
    c_nvmlGpuFabricInfo_t = pynvml.c_nvmlGpuFabricInfo_t  # noqa: N815 - pynvml's name

    def __init__(self, *, versions: set[int], versioned_call: bool = True, health_mask: int = 0x15) -> None:
        self.versions = versions
        self.versioned_call = versioned_call
        self.health_mask = health_mask
        self.asked: list[str] = []

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetHandleByPciBusId(self, address: str) -> str:
        return address

    def _fill(self, ref: Any) -> None:
        struct = ref._obj
        struct.clusterUuid = (ctypes.c_uint8 * 16)(*uuid.UUID(CLUSTER).bytes)
        struct.cliqueId, struct.state, struct.status = 7, 3, 0
        if hasattr(struct, "healthMask"):
            struct.healthMask = self.health_mask

    def nvmlDeviceGetGpuFabricInfoV(self, handle: str, ref: Any) -> int:
        if not self.versioned_call:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        version = ref._obj.version >> 24
        self.asked.append(f"v{version}")
        if version not in self.versions:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        self._fill(ref)
        return 0

    def nvmlDeviceGetGpuFabricInfo(self, handle: str, ref: Any) -> int:
        self.asked.append("legacy")
        self._fill(ref)
        return 0


def adapter(library: FabricLibrary, mocker: MockerFixture) -> PynvmlAdapter:
    return PynvmlAdapter(library=mocker.MagicMock(wraps=library, spec=library, **_attributes(library)))


def _attributes(library: FabricLibrary) -> dict[str, Any]:
    names = ("NVMLError", "c_nvmlGpuFabricInfo_v3_t", "c_nvmlGpuFabricInfo_v2_t", "c_nvmlGpuFabricInfo_t")
    return {name: getattr(library, name) for name in names}


def test_the_newest_struct_carries_the_health_mask(mocker: MockerFixture) -> None:
    library = FabricLibrary(versions={3, 2})
    got = adapter(library, mocker).gpu_fabric_info(A)
    assert got == GpuFabricInfo(cluster_uuid=CLUSTER, clique_id=7, state=3, status=0, health_mask=0x15)
    assert library.asked == ["v3"]


def test_a_driver_that_knows_only_v2_is_asked_again_with_it(mocker: MockerFixture) -> None:
    library = FabricLibrary(versions={2})
    assert adapter(library, mocker).gpu_fabric_info(A).health_mask == 0x15
    assert library.asked == ["v3", "v2"]


def test_a_driver_without_the_versioned_call_answers_the_older_one_without_a_mask(
    mocker: MockerFixture,
) -> None:
    library = FabricLibrary(versions=set(), versioned_call=False)
    got = adapter(library, mocker).gpu_fabric_info(A)
    assert (got.cluster_uuid, got.clique_id, got.health_mask) == (CLUSTER, 7, None)
    assert library.asked == ["legacy"]


def test_another_error_names_the_call_and_the_card(mocker: MockerFixture) -> None:
    library = FabricLibrary(versions={3})
    library.nvmlDeviceGetGpuFabricInfoV = mocker.Mock(  # type: ignore[method-assign]
        side_effect=pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    )
    with pytest.raises(NvmlError) as caught:
        adapter(library, mocker).gpu_fabric_info(A)
    assert (caught.value.call, caught.value.address, caught.value.not_supported) == (
        "nvmlDeviceGetGpuFabricInfoV",
        A,
        True,
    )
