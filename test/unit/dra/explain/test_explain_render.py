"""The explain report: a selector that does not compile is said once; what a claim consumes."""

from __future__ import annotations

from kubernetes.client import V1AllocationResult, V1DeviceAllocationResult, V1DeviceRequestAllocationResult
from testutil.unit.dra.allocator.alloc_builders import (
    DRIVER,
    a30_pool,
    claim,
    device_class,
    exact,
    explained,
    mig_class,
    physical_class,
    with_allocation,
)

from pkg.dra.explain.render import render, summary

BROKEN = f'device.driver == "{DRIVER}" && quantity("1") < quantity("2")'  # no < on quantities


def test_a_class_that_does_not_compile_is_reported_once() -> None:
    slices = a30_pool(sharing=("ts",))
    classes = [device_class("broken", BROKEN)]
    trace = explained(claim("c", exact("gpu", "broken")), slices=slices, classes=classes, allocated_claims=[])

    [request] = trace.requests
    assert request.devices == ()
    assert request.problem is not None
    assert request.problem.startswith("class broken: selector #0: CEL compile error: ")
    report = render(trace)
    assert report.count("CEL compile error") == 2  # the request's line and the outcome's error
    assert "request gpu: selector does not compile, no device can match" in report
    assert "on device" not in report  # a compile error belongs to the selector, not to a device
    assert summary(trace).count("CEL compile error") == 1


def test_first_share_of_a_device_takes_its_counters() -> None:
    slices = a30_pool(sharing=("ts",))
    trace = explained(
        claim("c", exact("gpu", "physical-ts", capacity={"sharePercent": "25"})),
        slices=slices,
        classes=[physical_class("ts")],
        allocated_claims=[],
    )
    [use] = trace.uses
    assert use.shared
    share = next(c for c in use.capacity if c.name == "sharePercent")
    assert (share.requested, share.consumed, share.held, share.left, share.total) == (
        "25",
        "25",
        "0",
        "75",
        "100",
    )
    assert share.rule == "as requested (validRange min 1, max 100, step 1)"
    [counters] = use.counters
    assert counters.charged
    assert dict(counters.taken)["memory"] == "24Gi"
    assert {n: f for n, f, _ in counters.left}["memory"] == "0"


def test_two_devices_of_one_claim_leave_the_card_with_both_taken() -> None:
    slices = a30_pool()
    held = with_allocation(claim("other", exact("gpu", "mig-1g")), _result("gpu-0000-02-00-0-mig-1g-3"))
    trace = explained(
        claim("c", exact("gpu", "mig-1g", count=2)),
        slices=slices,
        classes=[mig_class("1g")],
        allocated_claims=[held],
    )
    assert [u.device.rsplit("/", 1)[1] for u in trace.uses] == [
        "gpu-0000-02-00-0-mig-1g-2",
        "gpu-0000-02-00-0-mig-1g-0",
    ]
    for use in trace.uses:  # "left" is after the whole claim, the same for both
        left = {n: f for n, f, _ in use.counters[0].left}
        assert [n for n, f in left.items() if n.startswith("memory-slice-") and f != "0"] == [
            "memory-slice-1"
        ]


def _result(device: str) -> V1AllocationResult:

    return V1AllocationResult(
        devices=V1DeviceAllocationResult(
            results=[
                V1DeviceRequestAllocationResult(
                    request="gpu", driver=DRIVER, pool="gpus-node-a-gpu-0000-02-00-0", device=device
                )
            ]
        )
    )
