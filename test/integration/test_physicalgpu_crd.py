"""The generated PhysicalGPU CRD as the API server enforces and prints it."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import V1ObjectMeta

from api.gpu.v1alpha1 import LABEL_DEVICE, LABEL_NODE, LABEL_VENDOR, PhysicalGPU
from pkg.devcluster.cluster import ControlPlane
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import InvalidError, KubeClient, PatchType

A30_STATUS: dict[str, Any] = {
    "nodeInfo": {
        "nodeName": "n1",
        "os": {"id": "ubuntu", "version": "24.04"},
        "kernelRelease": "6.8.0",
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
            "migSupported": True,
            "mig": {
                "totalSlices": 4,
                "profiles": [
                    {"profileID": 14, "name": "1g.6gb", "memoryMiB": 5949, "sliceCount": 1, "maxInstances": 4}
                ],
            },
        },
    },
    "currentState": {
        "driverType": "Nvidia",
        "nvidia": {"driverVersion": "580.76.05", "cudaVersion": "13.0", "mig": {"mode": "Disabled"}},
    },
    "conditions": [
        {
            "type": "DriverReady",
            "status": "True",
            "reason": "Validated",
            "message": "ok",
            "lastTransitionTime": "2026-11-21T10:00:00Z",
        }
    ],
}


def _create(kube: KubeClient, name: str) -> PhysicalGPU:
    labels = {LABEL_NODE: "n1", LABEL_VENDOR: "nvidia", LABEL_DEVICE: "a30-pcie"}
    return kube.create(PHYSICAL_GPU, PhysicalGPU(metadata=V1ObjectMeta(name=name, labels=labels)))


def _patch_status(kube: KubeClient, name: str, status: dict[str, object]) -> PhysicalGPU:
    return kube.patch(
        PHYSICAL_GPU, name, {"status": status}, patch_type=PatchType.MERGE, subresource="status"
    )


def test_valid_status_round_trips(kube: KubeClient, unique: str) -> None:
    name = f"n1-0-10de-20b7-{unique}"
    _create(kube, name)
    try:
        stored = _patch_status(kube, name, A30_STATUS)
        assert stored.status is not None
        assert stored.status.to_api_dict() | {"conditions": A30_STATUS["conditions"]} == A30_STATUS
    finally:
        kube.delete(PHYSICAL_GPU, name)


def test_an_amd_status_round_trips(kube: KubeClient, unique: str) -> None:
    """The AMD blocks the AMD backend writes are what the CRD keeps (nothing pruned)."""
    name = f"n1-2-1002-74a1-{unique}"
    _create(kube, name)
    status: dict[str, object] = {
        "capabilities": {
            "productName": "AMD Instinct MI300X",
            "vendor": "Amd",
            "amd": {
                "computePartitionModes": ["spx", "dpx", "qpx", "cpx"],
                "memoryPartitionModes": ["nps1", "nps4"],
            },
        },
        "currentState": {
            "driverType": "ROCm",
            "amd": {"computePartitionMode": "cpx", "memoryPartitionMode": "nps1"},
        },
    }
    try:
        stored = _patch_status(kube, name, status)
        assert stored.status is not None
        assert stored.status.to_api_dict() == status
    finally:
        kube.delete(PHYSICAL_GPU, name)


@pytest.mark.parametrize(
    ("status", "complaint"),
    [
        ({"currentState": {"driverType": "Nouveau"}}, "driverType"),
        ({"capabilities": {"memoryMiB": "lots", "vendor": "Nvidia"}}, "memoryMiB"),
        ({"capabilities": {"vendor": "Amd", "nvidia": {"migSupported": False}}}, "nvidia"),
        ({"capabilities": {"vendor": "Nvidia", "amd": {"computePartitionModes": ["spx"]}}}, "amd"),
        ({"currentState": {"driverType": "Nvidia", "amd": {"computePartitionMode": "spx"}}}, "amd"),
        (
            {"currentState": {"driverType": "ROCm", "amd": {"computePartitionMode": "SPX!"}}},
            "computePartitionMode",
        ),
        (
            {
                "capabilities": {
                    "vendor": "Nvidia",
                    "nvidia": {"migSupported": False, "mig": {"totalSlices": 4}},
                }
            },
            "mig",
        ),
        (
            {
                "pciInfo": {
                    "address": "02:00.0",
                    "class": {"code": "0302"},
                    "vendor": {"id": "10de"},
                    "device": {"id": "20b7"},
                }
            },
            "address",
        ),
    ],
    ids=[
        "enum",
        "wrong-type",
        "nvidia-block-for-amd",
        "amd-block-for-nvidia",
        "amd-state-beside-nvidia-driver",
        "amd-mode-not-lower-case",
        "mig-block-when-unsupported",
        "pci-address",
    ],
)
def test_server_rejects_invalid_status(
    kube: KubeClient, unique: str, status: dict[str, object], complaint: str
) -> None:
    name = f"n1-1-10de-20b7-{unique}"
    _create(kube, name)
    try:
        with pytest.raises(InvalidError) as rejected:
            _patch_status(kube, name, status)
        assert complaint in rejected.value.message
    finally:
        kube.delete(PHYSICAL_GPU, name)


def test_printer_columns_and_short_name(kube: KubeClient, control_plane: ControlPlane, unique: str) -> None:
    name = f"n1-2-10de-20b7-{unique}"
    _create(kube, name)
    try:
        unhealthy = {
            "type": "HardwareHealthy",
            "status": "False",
            "reason": "XidError",
            "message": "Xid 79",
            "lastTransitionTime": "2026-11-21T10:00:00Z",
        }
        _patch_status(kube, name, A30_STATUS | {"conditions": [*A30_STATUS["conditions"], unhealthy]})
        table = control_plane.kubectl("get", "pgpu", name, "-o", "wide")
        header, row = table.splitlines()[:2]
        assert header.split() == [
            "NAME",
            "NODE",
            "VENDOR",
            "DEVICE",
            "DRIVERREADY",
            "HARDWAREHEALTHY",
            "AGE",
            "DRIVER",
            "CUDA",
            "COMPUTECAP",
            "MIG",
        ]
        assert row.split()[:6] == [name, "n1", "nvidia", "a30-pcie", "True", "False"]
        assert row.split()[7:] == ["580.76.05", "13.0", "8.0", "true"]
        assert name in control_plane.kubectl("get", "gpu", "-o", "name")  # category
        explained = control_plane.kubectl("explain", "physicalgpu.status.currentState.driverType")
        assert "Nvidia" in explained
    finally:
        kube.delete(PHYSICAL_GPU, name)
