"""PhysicalGPU model: the wire form (camelCase, omitted optionals) and the filling rules
(docs/architecture.md#a-field-without-a-source-is-left-out)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes.client import V1Condition, V1ObjectMeta
from pydantic import ValidationError

from api.gpu.v1alpha1 import (
    API_VERSION,
    PHYSICAL_GPU_KIND,
    PHYSICAL_GPU_PLURAL,
    Capabilities,
    CurrentState,
    DriverType,
    MigMode,
    MigProfile,
    NvidiaCapabilities,
    NvidiaMigState,
    NvidiaState,
    PhysicalGPU,
    PhysicalGPUConditionType,
    PhysicalGPUStatus,
    Vendor,
)


def a30_object() -> dict[str, Any]:
    """An A30 PhysicalGPU as the API server returns it."""
    return {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "PhysicalGPU",
        "metadata": {
            "name": "node1-0-10de-20b7",
            "labels": {"gpu.deckhouse.io/node": "node1", "gpu.deckhouse.io/vendor": "nvidia"},
            "generation": 1,
            "creationTimestamp": "2025-01-02T03:04:05Z",
        },
        "spec": {},
        "status": {
            "nodeInfo": {
                "nodeName": "node1",
                "os": {"id": "ubuntu", "version": "24.04"},
                "kernelRelease": "6.8.0-45-generic",
                "bareMetal": True,
            },
            "pciInfo": {
                "address": "0000:02:00.0",
                "class": {"code": "0302", "name": "3D controller"},
                "vendor": {"id": "10de", "name": "NVIDIA Corporation"},
                "device": {"id": "20b7", "name": "GA100GL [A30 PCIe]"},
            },
            "capabilities": {
                "productName": "NVIDIA A30",
                "memoryMiB": 24576,
                "vendor": "Nvidia",
                "nvidia": {
                    "computeCap": "8.0",
                    "productArchitecture": "Ampere",
                    "computeTypes": ["FP32", "FP64"],
                    "powerLimitMinW": 100,
                    "powerLimitMaxW": 165,
                    "migSupported": True,
                    "mig": {
                        "totalSlices": 4,
                        "profiles": [
                            {
                                "profileID": 5,
                                "name": "2g.12gb",
                                "memoryMiB": 11968,
                                "sliceCount": 2,
                                "maxInstances": 2,
                                "placements": [{"start": 0, "size": 2}, {"start": 2, "size": 2}],
                            }
                        ],
                    },
                },
            },
            "conditions": [
                {
                    "type": "DriverReady",
                    "status": "True",
                    "reason": "NVMLAvailable",
                    "message": "",
                    "lastTransitionTime": "2025-01-02T03:04:05Z",
                }
            ],
            "currentState": {
                "driverType": "Nvidia",
                "nvidia": {
                    "gpuUUID": "GPU-9a1b",
                    "driverVersion": "580.76.05",
                    "cudaVersion": "13.0",
                    "powerLimitCurrentW": 165,
                    "powerLimitEnforcedW": 165,
                    "mig": {"mode": "Disabled"},
                },
            },
            "observedGeneration": 1,
        },
    }


def test_round_trip_keeps_the_wire_form_exactly() -> None:
    data = a30_object()
    assert PhysicalGPU.from_api_dict(data).to_api_dict() == data


def test_camel_case_maps_to_snake_case_attributes() -> None:
    gpu = PhysicalGPU.from_api_dict(a30_object())
    status = gpu.status
    assert status is not None
    assert status.pci_info is not None
    assert status.capabilities is not None
    assert status.pci_info.class_.code == "0302"
    assert status.capabilities.nvidia is not None
    assert status.capabilities.nvidia.mig is not None
    profile = status.capabilities.nvidia.mig.profiles[0]
    assert (profile.profile_id, profile.memory_mib) == (5, 11968)
    assert profile.placements is not None
    assert [p.start for p in profile.placements] == [0, 2]
    assert status.current_state is not None
    assert status.current_state.nvidia is not None
    assert status.current_state.driver_type is DriverType.NVIDIA
    assert status.current_state.nvidia.gpu_uuid == "GPU-9a1b"
    assert status.conditions is not None
    assert status.conditions[0].type == PhysicalGPUConditionType.DRIVER_READY
    assert gpu.metadata.name == "node1-0-10de-20b7"


def test_irregular_aliases_are_written_as_the_spec_spells_them() -> None:
    profile = MigProfile(profile_id=0, name="4g.24gb", memory_mib=24000, slice_count=4, max_instances=1)
    assert profile.to_api_dict() == {
        "profileID": 0,
        "name": "4g.24gb",
        "memoryMiB": 24000,
        "sliceCount": 4,
        "maxInstances": 1,
    }
    state = NvidiaState(gpu_uuid="GPU-1", power_limit_current_w=150, power_limit_enforced_w=140)
    assert state.to_api_dict() == {"gpuUUID": "GPU-1", "powerLimitCurrentW": 150, "powerLimitEnforcedW": 140}
    caps = NvidiaCapabilities(power_limit_min_w=100, power_limit_max_w=250, mig_supported=False)
    assert caps.to_api_dict() == {"powerLimitMinW": 100, "powerLimitMaxW": 250, "migSupported": False}


def test_a_fresh_object_carries_type_meta_and_an_empty_spec_only() -> None:
    gpu = PhysicalGPU(metadata=V1ObjectMeta(name="n-0-10de-20b7"))
    assert gpu.to_api_dict() == {
        "apiVersion": API_VERSION,
        "kind": PHYSICAL_GPU_KIND,
        "metadata": {"name": "n-0-10de-20b7"},
        "spec": {},
    }
    assert (PhysicalGPU.KIND, PhysicalGPU.PLURAL) == ("PhysicalGPU", PHYSICAL_GPU_PLURAL)


def test_unset_fields_are_not_written() -> None:
    status = PhysicalGPUStatus(current_state=CurrentState(driver_type=DriverType.VFIO))
    assert status.to_api_dict() == {"currentState": {"driverType": "VFIO"}}


def test_conditions_serialise_as_the_api_server_expects() -> None:
    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    condition = V1Condition(
        type="HardwareHealthy", status="Unknown", reason="Pending", message="", last_transition_time=when
    )
    written = PhysicalGPUStatus(conditions=[condition]).to_api_dict()
    assert written == {
        "conditions": [
            {
                "type": "HardwareHealthy",
                "status": "Unknown",
                "reason": "Pending",
                "message": "",
                "lastTransitionTime": "2025-01-02T03:04:05Z",
            }
        ]
    }


def test_unknown_fields_from_a_newer_server_are_ignored() -> None:
    data = a30_object()
    data["status"]["futureField"] = {"x": 1}
    data["status"]["capabilities"]["nvidia"]["newCapability"] = True
    assert PhysicalGPU.from_api_dict(data).to_api_dict() == a30_object()


def test_nvidia_capabilities_require_vendor_nvidia() -> None:
    with pytest.raises(
        ValidationError, match=r"capabilities.nvidia is allowed only when .*vendor is Nvidia, not Amd"
    ):
        Capabilities(vendor=Vendor.AMD, nvidia=NvidiaCapabilities(mig_supported=False))


def test_mig_block_is_absent_when_mig_is_not_supported() -> None:
    data = a30_object()
    data["status"]["capabilities"]["nvidia"]["migSupported"] = False
    data["status"]["currentState"]["nvidia"].pop("mig")
    with pytest.raises(
        ValidationError, match=r"capabilities.nvidia.mig must be absent when migSupported is false"
    ):
        PhysicalGPU.from_api_dict(data)


def test_nvidia_state_requires_the_nvidia_driver() -> None:
    with pytest.raises(
        ValidationError, match=r"currentState.nvidia is allowed only when .*driverType is Nvidia, not VFIO"
    ):
        CurrentState(driver_type=DriverType.VFIO, nvidia=NvidiaState(gpu_uuid="GPU-1"))
    with pytest.raises(ValidationError, match=r"not absent"):
        CurrentState(nvidia=NvidiaState(gpu_uuid="GPU-1"))


def test_mig_state_requires_mig_support_in_the_capabilities() -> None:
    data = a30_object()
    data["status"]["capabilities"]["nvidia"]["migSupported"] = False
    data["status"]["capabilities"]["nvidia"].pop("mig")
    with pytest.raises(
        ValidationError, match=r"currentState.nvidia.mig is allowed only when .*migSupported is true"
    ):
        PhysicalGPU.from_api_dict(data)
    data["status"]["currentState"]["nvidia"].pop("mig")
    assert PhysicalGPU.from_api_dict(data).status is not None


def test_mig_state_without_capabilities_is_accepted() -> None:
    # Capabilities are written only while DriverReady=True; the current state may outlive them.
    data = a30_object()
    del data["status"]["capabilities"]
    state = PhysicalGPU.from_api_dict(data).to_api_dict()["status"]["currentState"]
    assert state["nvidia"]["mig"] == {"mode": MigMode.DISABLED.value}


def test_assignment_is_validated_against_the_rest_of_the_status() -> None:
    gpu = PhysicalGPU.from_api_dict(a30_object())
    assert gpu.status is not None
    gpu.status.current_state = None
    no_mig = Capabilities(vendor=Vendor.NVIDIA, nvidia=NvidiaCapabilities(mig_supported=False))
    gpu.status.capabilities = no_mig
    mig_state = CurrentState(
        driver_type=DriverType.NVIDIA, nvidia=NvidiaState(mig=NvidiaMigState(mode=MigMode.ENABLED))
    )
    with pytest.raises(ValidationError, match=r"migSupported is true"):
        gpu.status.current_state = mig_state


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("pciInfo", "address"), "0000:02:00"),
        (("pciInfo", "vendor", "id"), "10DE"),
        (("capabilities", "nvidia", "computeCap"), "8"),
        (("capabilities", "memoryMiB"), -1),
        (("capabilities", "vendor"), "nvidia"),
        (("currentState", "driverType"), "nouveau"),
        (("currentState", "nvidia", "mig", "mode"), "On"),
    ],
)
def test_field_formats_are_enforced(path: tuple[str, ...], value: object) -> None:
    data = copy.deepcopy(a30_object())
    node = data["status"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ValidationError, match=path[-1]):
        PhysicalGPU.from_api_dict(data)


def test_snake_case_names_are_accepted_on_input() -> None:
    status = PhysicalGPUStatus.from_api_dict(
        {"current_state": {"driver_type": "ROCm"}, "observed_generation": 3}
    )
    assert status.to_api_dict() == {"currentState": {"driverType": "ROCm"}, "observedGeneration": 3}
