"""The inventory collector reads the cache at scrape time."""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes.client import V1Condition, V1ObjectMeta
from prometheus_client import CollectorRegistry

from api.gpu.v1alpha1 import (
    LABEL_DEVICE,
    LABEL_NODE,
    LABEL_VENDOR,
    CurrentState,
    DriverType,
    PciClass,
    PciId,
    PciInfo,
    PhysicalGPU,
    PhysicalGPUStatus,
)
from pkg.framework.cache.store import Store
from pkg.gpucontroller.physicalgpu.metrics import PhysicalGPUCollector


def _gpu(name: str) -> PhysicalGPU:
    return PhysicalGPU(
        metadata=V1ObjectMeta(
            name=name, labels={LABEL_NODE: "n1", LABEL_VENDOR: "nvidia", LABEL_DEVICE: "a30-pcie"}
        ),
        status=PhysicalGPUStatus(
            pci_info=PciInfo(
                address="0000:02:00.0",
                class_=PciClass(code="0302"),
                vendor=PciId(id="10de"),
                device=PciId(id="20b7"),
            ),
            current_state=CurrentState(driver_type=DriverType.NVIDIA),
            conditions=[
                V1Condition(
                    type="DriverReady",
                    status="True",
                    reason="Validated",
                    message="",
                    last_transition_time=datetime(2026, 1, 1, tzinfo=UTC),
                )
            ],
        ),
    )


def test_series_follow_the_cache() -> None:
    store: Store[PhysicalGPU] = Store()
    registry = CollectorRegistry()
    registry.register(PhysicalGPUCollector(store))
    store.add(_gpu("n1-0-10de-20b7"))
    labels = {
        "name": "n1-0-10de-20b7",
        "node": "n1",
        "vendor": "nvidia",
        "device": "a30-pcie",
        "pci_address": "0000:02:00.0",
        "driver_type": "Nvidia",
    }
    assert registry.get_sample_value("gpu_physicalgpu_info", labels) == 1.0
    cond = {"name": "n1-0-10de-20b7", "node": "n1", "condition": "DriverReady"}
    assert registry.get_sample_value("gpu_physicalgpu_condition", {**cond, "status": "True"}) == 1.0
    assert registry.get_sample_value("gpu_physicalgpu_condition", {**cond, "status": "Unknown"}) == 0.0
    missing = {"name": "n1-0-10de-20b7", "node": "n1", "condition": "HardwareHealthy", "status": "Unknown"}
    assert registry.get_sample_value("gpu_physicalgpu_condition", missing) == 1.0

    store.delete_key("n1-0-10de-20b7")
    assert registry.get_sample_value("gpu_physicalgpu_info", labels) is None


def test_compute_domains_ready_is_exported_only_for_a_card_that_has_it() -> None:
    store: Store[PhysicalGPU] = Store()
    registry = CollectorRegistry()
    registry.register(PhysicalGPUCollector(store))
    plain, fabric = _gpu("n1-0-10de-20b7"), _gpu("n1-1-10de-20b7")
    assert fabric.status is not None
    assert fabric.status.conditions is not None
    fabric.status.conditions.append(
        V1Condition(
            type="ComputeDomainsReady",
            status="False",
            reason="HostImexService",
            message="nvidia-imex runs on the host",
            last_transition_time=datetime(2026, 1, 1, tzinfo=UTC),
        )
    )
    store.add(plain)
    store.add(fabric)

    def value(name: str, status: str) -> float | None:
        labels = {"name": name, "node": "n1", "condition": "ComputeDomainsReady", "status": status}
        return registry.get_sample_value("gpu_physicalgpu_condition", labels)

    assert value("n1-0-10de-20b7", "Unknown") is None  # in no fabric: no series, not an Unknown one
    assert value("n1-1-10de-20b7", "False") == 1.0
    assert value("n1-1-10de-20b7", "True") == 0.0
