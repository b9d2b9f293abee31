"""Consumable capacity: shares add up to the device's capacity; requests round by the policy."""

from __future__ import annotations

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1CapacityRequestPolicy,
    V1DeviceCapacity,
)
from testutil.k8s_fields import allocation_results, present, spec_of
from testutil.unit.dra.allocator.alloc_builders import (
    DRIVER,
    Cluster,
    a30_pool,
    claim,
    device,
    exact,
    physical_class,
    resource_slice,
)

from pkg.dra.allocator import parse_quantity
from pkg.dra.allocator.capacity import CapacitySpec, consumed_amount, consumption
from pkg.dra.model import Unschedulable


def share(percent: str) -> ResourceV1ResourceClaim:
    return claim(f"share-{percent}", exact("r", "physical-timeslicing", capacity={"sharePercent": percent}))


def test_two_half_shares_fit_and_a_third_does_not() -> None:
    cluster = Cluster(a30_pool(sharing=("timeslicing",)), [physical_class("timeslicing")])
    first, second = cluster.allocate(share("50")), cluster.allocate(share("50"))
    assert isinstance(first, V1AllocationResult)
    assert isinstance(second, V1AllocationResult)
    assert isinstance(cluster.allocate(share("50")), Unschedulable)


def test_share_without_request_takes_the_default_whole_device() -> None:
    cluster = Cluster(a30_pool(sharing=("timeslicing",)), [physical_class("timeslicing")])
    cluster.allocate(claim("whole", exact("r", "physical-timeslicing")))
    assert isinstance(cluster.allocate(share("1")), Unschedulable)


def test_range_rounds_up_to_the_next_step() -> None:
    spec = CapacitySpec.from_model(
        present(
            V1DeviceCapacity.from_dict(
                {"value": "100", "requestPolicy": {"validRange": {"min": "10", "max": "100", "step": "20"}}}
            )
        )
    )
    assert consumed_amount(parse_quantity("11"), spec) == parse_quantity("30")
    assert consumed_amount(parse_quantity("5"), spec) == parse_quantity("10")
    assert isinstance(consumption({"c": parse_quantity("101")}, {"c": spec}), str)  # above max


def test_valid_values_round_up_to_the_next_listed_value() -> None:
    spec = CapacitySpec.from_model(
        V1DeviceCapacity(
            value="40Gi", request_policy=V1CapacityRequestPolicy(valid_values=["10Gi", "20Gi", "40Gi"])
        )
    )
    assert consumed_amount(parse_quantity("11Gi"), spec) == parse_quantity("20Gi")
    assert isinstance(consumption({"c": parse_quantity("41Gi")}, {"c": spec}), str)


def test_request_larger_than_an_exclusive_device_never_fits() -> None:
    gpu = device("gpu", attributes={"deviceType": "Physical"}, capacity={"memory": "24Gi"})
    cluster = Cluster([resource_slice("s", pool="p", devices=[gpu])], [physical_class(name="any")])
    selector = present(present(spec_of(cluster.classes[0]).selectors, "spec.selectors")[0].cel, "cel")
    selector.expression = f'device.attributes["{DRIVER}"].deviceType == "Physical"'
    assert isinstance(
        cluster.allocate(claim("big", exact("r", "any", capacity={"memory": "40Gi"}))), Unschedulable
    )
    assert isinstance(
        cluster.allocate(claim("ok", exact("r", "any", capacity={"memory": "20Gi"}))), V1AllocationResult
    )


def test_consumed_capacity_and_share_id_are_recorded() -> None:
    cluster = Cluster(a30_pool(sharing=("timeslicing",)), [physical_class("timeslicing")])
    result = cluster.allocate(share("33"))
    assert isinstance(result, V1AllocationResult)
    entry = allocation_results(result)[0]
    assert entry.share_id == "share-1"
    assert entry.consumed_capacity == {"sharePercent": "33", "memory": "0"}
