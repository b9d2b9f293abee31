"""Which events wake a publish: offer inputs of PhysicalGPUs, the Node's MIG label, foreign slice edits."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubernetes.client import (
    V1Node,
    V1NodeCondition,
    V1NodeStatus,
    V1ObjectMeta,
    V1ResourcePool,
    V1ResourceSlice,
    V1ResourceSliceSpec,
)
from testutil.k8s_fields import meta
from testutil.unit.gpuhandler.gpuhandler_fakes import condition, gpu

from api.gpu.v1alpha1 import Capabilities, DriverType, PhysicalGPU, Vendor
from pkg.gpuhandler.publishing import LABEL_ALLOW_MIG
from pkg.gpuhandler.publishing.watches import gpu_events, node_events, slice_events


def healthy(
    status: str = "True",
    *,
    driver_ready: str = "True",
    driver_type: DriverType = DriverType.NVIDIA,
    status_updates: dict[str, Any] | None = None,
) -> PhysicalGPU:
    return gpu(
        driver_ready=driver_ready,
        driver_type=driver_type,
        extra_conditions=[condition("HardwareHealthy", status)],
        status_updates=status_updates,
    )


def test_gpu_updates_wake_a_publish_only_when_an_offer_input_changes() -> None:
    events = gpu_events()
    base = healthy()
    assert events.update(base, healthy("False"))
    assert events.update(base, healthy(driver_ready="False"))
    assert events.update(base, healthy(driver_type=DriverType.VFIO))
    going = base.model_copy(
        update={"metadata": base.metadata.model_copy(update={"deletion_timestamp": datetime.now(UTC)})}
    )
    assert events.update(base, going)
    # Capabilities reach the publisher through the card specs, not through this watch.
    caps = Capabilities(product_name="NVIDIA A30", memory_mib=24576, vendor=Vendor.NVIDIA)
    enriched = healthy(status_updates={"capabilities": caps})
    assert not events.update(base, enriched)
    assert events.create(base)
    assert events.delete(base)


def node(labels: dict[str, str] | None = None, heartbeat: str = "KubeletReady") -> V1Node:
    return V1Node(
        metadata=V1ObjectMeta(name="n", labels=labels),
        status=V1NodeStatus(conditions=[V1NodeCondition(type="Ready", status="True", reason=heartbeat)]),
    )


def test_node_updates_wake_a_publish_when_the_mig_decision_changes() -> None:
    events = node_events()
    assert events.update(node(), node({LABEL_ALLOW_MIG: "false"}))
    assert events.update(node({LABEL_ALLOW_MIG: "false"}), node({LABEL_ALLOW_MIG: "true"}))
    assert not events.update(node({LABEL_ALLOW_MIG: "true"}), node())  # allowed either way
    assert not events.update(node(), node({"team": "ml"}))
    assert not events.update(node(), node(heartbeat="KubeletStillReady"))
    deleting = node()
    meta(deleting).deletion_timestamp = datetime.now(UTC)
    assert events.update(node(), deleting)
    assert events.create(node())
    assert events.delete(node())


def rs(generation: int = 1, *, devices: int = 0, labels: dict[str, str] | None = None) -> V1ResourceSlice:
    return V1ResourceSlice(
        metadata=V1ObjectMeta(name="gpu-n-devices-00", labels=labels, resource_version=str(generation)),
        spec=V1ResourceSliceSpec(
            driver="gpu.deckhouse.io",
            node_name="n",
            pool=V1ResourcePool(name="gpus/n", generation=generation, resource_slice_count=devices + 1),
        ),
    )


def test_slice_deletes_and_edits_wake_a_publish_but_creates_do_not() -> None:
    events = slice_events()
    assert events.delete(rs())
    assert events.update(rs(), rs(devices=1))  # someone edited the spec
    assert events.update(rs(1), rs(2))  # a new generation (ours: one pass finds nothing to do)
    assert not events.update(rs(), rs(labels={"x": "y"}))
    assert not events.create(rs())
