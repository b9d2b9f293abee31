"""Builders and fakes for the node agent's unit tests: devices, hosts, objects, a recording writer.

A plain module (not conftest) so tests import it by name, as the integration tests import
``dra_objects``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from kubernetes.client import V1Node, V1ObjectMeta
from pytest_mock import MockerFixture

from api.gpu.v1alpha1 import (
    LABEL_DEVICE,
    LABEL_NODE,
    LABEL_VENDOR,
    PhysicalGPU,
    PhysicalGPUStatus,
)
from pkg.hardware.hostinfo import HostInfo
from pkg.hardware.pci import PciDevice
from pkg.inventory.naming import ADDRESS_LABEL, address_key
from pkg.nodeagent.internal.state import SyncState

ROOT = Path(__file__).resolve().parents[4]
FIXTURES = ROOT / "test" / "fixtures"
SYSFS = FIXTURES / "sysfs"
T0 = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
NODE = "node-1"
# The Kubernetes label-value rule (k8s.io/apimachinery validation.IsValidLabelValue), length aside.
LABEL_VALUE_PATTERN = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def device(
    address: str = "0000:3b:00.0",
    *,
    vendor_id: str = "10de",
    device_id: str = "20b7",
    class_code: str = "0302",
    driver: str | None = "nvidia",
) -> PciDevice:
    return PciDevice(
        address=address,
        vendor_id=vendor_id,
        device_id=device_id,
        class_code=class_code,
        subsystem_vendor_id=None,
        subsystem_device_id=None,
        driver=driver,
        numa_node=None,
        iommu_group=None,
        sriov_totalvfs=None,
    )


def host(**overrides: Any) -> HostInfo:
    values: dict[str, Any] = {
        "os_id": "ubuntu",
        "os_version": "22.04",
        "os_name": "Ubuntu",
        "kernel_release": "5.15.0-105-generic",
        "bare_metal": True,
    }
    return HostInfo(**(values | overrides))


def gpu_object(
    name: str,
    address: str | None,
    *,
    uid: str | None = None,
    age: int = 0,
    status: PhysicalGPUStatus | None = None,
    deleting: bool = False,
    labels: Mapping[str, str] | None = None,
    node_label: str = NODE,
) -> PhysicalGPU:
    base = {LABEL_NODE: node_label, LABEL_VENDOR: "nvidia", LABEL_DEVICE: "a30-pcie"}
    if address is not None:
        base[ADDRESS_LABEL] = address_key(address)
    return PhysicalGPU(
        metadata=V1ObjectMeta(
            name=name,
            uid=uid or f"uid-{name}",
            resource_version="1",
            creation_timestamp=T0 + timedelta(seconds=age),
            deletion_timestamp=T0 if deleting else None,
            labels=dict(labels) if labels is not None else base,
        ),
        status=status,
    )


def sync_state(
    *,
    existing: Sequence[PhysicalGPU] = (),
    node_labels: Mapping[str, str] | None = None,
    with_node: bool = True,
) -> SyncState:
    node = V1Node(metadata=V1ObjectMeta(name=NODE, labels=dict(node_labels or {}))) if with_node else None
    return SyncState(node_name=NODE, node_label=NODE, existing=list(existing), node=node)


@dataclass
class RecordingWriter:
    """A GPUWriter/NodeWriter that answers like the server and records every call in order."""

    calls: list[tuple[str, Any]] = field(default_factory=list)
    fail_on: dict[str, Exception] = field(default_factory=dict)  # "verb:name" -> error to raise
    waits: int = 0
    _rv: Any = field(default_factory=lambda: itertools.count(100))

    def _check(self, verb: str, name: str) -> None:
        error = self.fail_on.get(f"{verb}:{name}")
        if error is not None:
            raise error

    def _bump(self, gpu: PhysicalGPU, **update: Any) -> PhysicalGPU:
        meta = V1ObjectMeta(**{**gpu.metadata.to_dict(), "resource_version": str(next(self._rv))})
        return gpu.model_copy(update={"metadata": meta, **update})

    def create(self, *, name: str, labels: Mapping[str, str]) -> PhysicalGPU:
        self._check("create", name)
        self.calls.append(("create", (name, dict(labels))))
        return self._bump(
            PhysicalGPU(metadata=V1ObjectMeta(name=name, uid=f"uid-{name}", labels=dict(labels)))
        )

    def patch_labels(self, gpu: PhysicalGPU, labels: Mapping[str, str | None]) -> PhysicalGPU:
        self._check("patch_labels", str(gpu.metadata.name))
        self.calls.append(("patch_labels", (gpu.metadata.name, dict(labels))))
        merged = {k: v for k, v in {**(gpu.metadata.labels or {}), **labels}.items() if v is not None}
        gpu = gpu.model_copy(deep=True)
        gpu.metadata.labels = merged
        return self._bump(gpu)

    def apply_status(self, gpu: PhysicalGPU, status: PhysicalGPUStatus) -> PhysicalGPU:
        self._check("apply_status", str(gpu.metadata.name))
        self.calls.append(("apply_status", (gpu.metadata.name, status.to_api_dict())))
        return self._bump(gpu, status=status)

    def remove_current_state(self, gpu: PhysicalGPU, fields: Sequence[str]) -> PhysicalGPU:
        self.calls.append(("remove_current_state", (gpu.metadata.name, list(fields))))
        return self._bump(gpu)

    def delete(self, gpu: PhysicalGPU) -> bool:
        self._check("delete", str(gpu.metadata.name))
        self.calls.append(("delete", (gpu.metadata.name, gpu.metadata.uid)))
        return True

    def patch_node_labels(self, node_name: str, labels: Mapping[str, str | None]) -> V1Node:
        self._check("patch_node_labels", node_name)
        self.calls.append(("patch_node_labels", (node_name, dict(labels))))
        return V1Node(metadata=V1ObjectMeta(name=node_name))

    def wait_for_cache(self, timeout: float) -> bool:
        self.waits += 1
        return True

    def verbs(self) -> list[str]:
        return [verb for verb, _ in self.calls]


HandlerT = TypeVar("HandlerT")


def agent_handler(mocker: MockerFixture, kind: type[HandlerT], *, writer: Any) -> HandlerT:
    """The ``kind`` step as the real container builds it, with the writer service overridden."""
    from dependency_injector import providers

    from pkg.framework.cache.informer_factory import InformerFactory
    from pkg.framework.client import KubeClient
    from pkg.nodeagent.setup import AgentSettings, NodeAgentContainer

    client = mocker.MagicMock(spec=KubeClient)
    client.field_manager = "gpu-node-agent"
    settings = AgentSettings(
        node_name=NODE, sysfs_root=FIXTURES, host_root=Path("/"), pci_ids=None, resync_period=300.0
    )
    container = NodeAgentContainer(
        settings=settings, client=client, informers=mocker.MagicMock(spec=InformerFactory)
    )
    container.writer.override(providers.Object(writer))
    [handler] = [h for h in container.handlers() if isinstance(h, kind)]
    return handler
