"""Typed reads of the Kubernetes models' optional fields, for tests of every tier.

The client's models declare every field Optional; a test that reads one it relies on asserts it
is set, and these helpers do so and return it typed, so a missing field fails the test with its
name rather than with an AttributeError on None. (``test/`` is on ``sys.path`` through its
conftest, so tests import this module by bare name.)
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1CounterSet,
    V1DaemonSet,
    V1Deployment,
    V1Device,
    V1DeviceAllocationConfiguration,
    V1DeviceAttribute,
    V1DeviceCapacity,
    V1DeviceCounterConsumption,
    V1DeviceRequestAllocationResult,
    V1NodeSelector,
    V1ObjectMeta,
    V1PodSpec,
    V1ResourceSlice,
    V1StatefulSet,
)

T = TypeVar("T")
S_co = TypeVar("S_co", covariant=True)


def present(value: T | None, what: str = "the field") -> T:
    """``value``, which the test expects set."""
    assert value is not None, f"{what} is not set"
    return value


class HasMetadata(Protocol):
    @property
    def metadata(self) -> V1ObjectMeta | None: ...


class HasSpec(Protocol[S_co]):
    @property
    def spec(self) -> S_co | None: ...


class HasStatus(Protocol[S_co]):
    @property
    def status(self) -> S_co | None: ...


def meta(obj: HasMetadata) -> V1ObjectMeta:
    """The object's metadata."""
    return present(obj.metadata, "metadata")


def name_of(obj: HasMetadata) -> str:
    """metadata.name."""
    return present(meta(obj).name, "metadata.name")


def uid_of(obj: HasMetadata) -> str:
    """metadata.uid."""
    return present(meta(obj).uid, "metadata.uid")


def labels_of(obj: HasMetadata) -> dict[str, str]:
    """metadata.labels, empty when there are none."""
    return dict(meta(obj).labels or {})


def annotations_of(obj: HasMetadata) -> dict[str, str]:
    """metadata.annotations, empty when there are none."""
    return dict(meta(obj).annotations or {})


def namespace_of(obj: HasMetadata) -> str:
    """metadata.namespace."""
    return present(meta(obj).namespace, "metadata.namespace")


def resource_version_of(obj: HasMetadata) -> str:
    """metadata.resourceVersion."""
    return present(meta(obj).resource_version, "metadata.resourceVersion")


def finalizers_of(obj: HasMetadata) -> list[str]:
    """metadata.finalizers, which the test expects set."""
    return present(meta(obj).finalizers, "metadata.finalizers")


def spec_of(obj: HasSpec[S_co]) -> S_co:
    """The object's spec."""
    return present(obj.spec, "spec")


def status_of(obj: HasStatus[S_co]) -> S_co:
    """The object's status."""
    return present(obj.status, "status")


def template_pod(workload: V1DaemonSet | V1Deployment | V1StatefulSet) -> V1PodSpec:
    """The pod spec of a workload's template."""
    spec = workload.spec
    assert spec is not None, "spec is not set"
    return present(spec.template.spec, "spec.template.spec")


def allocation_of(claim: ResourceV1ResourceClaim) -> V1AllocationResult:
    """A claim's status.allocation."""
    return present(status_of(claim).allocation, "status.allocation")


def allocated_node_selector(claim: ResourceV1ResourceClaim) -> V1NodeSelector:
    """A claim's status.allocation.nodeSelector."""
    return present(allocation_of(claim).node_selector, "status.allocation.nodeSelector")


def allocation_results(
    allocated: ResourceV1ResourceClaim | V1AllocationResult,
) -> list[V1DeviceRequestAllocationResult]:
    """The devices allocated: of a claim's status.allocation, or of an allocation result."""
    if isinstance(allocated, ResourceV1ResourceClaim):
        allocation = present(status_of(allocated).allocation, "status.allocation")
    else:
        allocation = allocated
    return present(present(allocation.devices, "allocation.devices").results, "allocation.devices.results")


def allocation_config(allocated: V1AllocationResult) -> list[V1DeviceAllocationConfiguration]:
    """devices.config of an allocation result."""
    return present(present(allocated.devices, "allocation.devices").config, "allocation.devices.config")


def slice_devices(rs: V1ResourceSlice) -> list[V1Device]:
    """A ResourceSlice's spec.devices."""
    return present(rs.spec.devices, "spec.devices")


def counter_sets(rs: V1ResourceSlice) -> list[V1CounterSet]:
    """A ResourceSlice's spec.sharedCounters."""
    return present(rs.spec.shared_counters, "spec.sharedCounters")


def attributes_of(device: V1Device) -> dict[str, V1DeviceAttribute]:
    """A device's attributes."""
    return present(device.attributes, "device.attributes")


def capacity_of(device: V1Device) -> dict[str, V1DeviceCapacity]:
    """A device's capacity."""
    return present(device.capacity, "device.capacity")


def consumption_of(device: V1Device) -> list[V1DeviceCounterConsumption]:
    """A device's consumesCounters."""
    return present(device.consumes_counters, "device.consumesCounters")
