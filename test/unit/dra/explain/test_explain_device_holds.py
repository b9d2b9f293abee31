"""The report's details say what holds each blocked device, in the verdict's words (the claim, the
Pod, the share's percentage, the MIG devices filling the card), never the counter the allocator
found used up; on the allocator's real inputs (slices as gpu-handler publishes them, claims the
allocator allocated itself)."""

from __future__ import annotations

from collections.abc import Callable

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1DeviceClass,
    V1ResourceClaimConsumerReference,
    V1ResourceSlice,
)
from testutil.unit.dra.allocator.alloc_builders import (
    Cluster,
    a30_pool,
    claim,
    exact,
    mig_class,
    physical_class,
)

from pkg.dra.allocator import AllocationInputs, Allocator
from pkg.dra.explain.causes import everyone
from pkg.dra.explain.report import explain_inputs

CARD = "gpu-0000-02-00-0"
WHOLE = f"{CARD}-physical"  # the card's whole-card offer, as the builders name it


def _held(
    cluster: Cluster, name: str, request_class: str, *, namespace: str = "user", **capacity: str
) -> None:
    """A claim the allocator allocated, reserved for the Pod of the same name."""
    held = claim(name, exact("gpu", request_class, capacity=capacity or None), namespace=namespace)
    cluster.allocate(held, node=None)
    assert held.status is not None
    assert held.status.allocation is not None
    held.status.reserved_for = [
        V1ResourceClaimConsumerReference(resource="pods", name=name, uid=f"pod-{name}")
    ]


def _details(
    slices: list[V1ResourceSlice],
    classes: list[V1DeviceClass],
    cluster: Cluster,
    asked: ResourceV1ResourceClaim,
    readable: Callable[[str], bool] = everyone,
) -> str:
    inputs = AllocationInputs.of(slices=slices, classes=classes, allocated_claims=cluster.claims)
    report = explain_inputs(asked, inputs, allocator=Allocator(), readable=readable)
    assert not report.allocatable
    details = report.text.split("details:\n", 1)[1]
    assert "counter set" not in details
    return details


def _line(details: str, device: str) -> str:
    """What the details say of ``device`` (its name, on any pool)."""
    [line] = [x for x in details.splitlines() if f"/{device}: " in x]
    return line.split(f"/{device}: ", 1)[1]


def test_a_whole_card_held_by_another_claim_names_its_pod() -> None:
    slices, classes = a30_pool("node-a", card=CARD), [physical_class()]
    cluster = Cluster(slices, classes)
    _held(cluster, "train", "physical-exclusive")
    details = _details(slices, classes, cluster, claim("c", exact("gpu", "physical-exclusive")))
    assert _line(details, WHOLE) == "held by the whole card of Pod user/train (claim user/train)"


def test_a_share_with_no_capacity_left_names_the_shares_that_hold_it() -> None:
    slices, classes = a30_pool("node-a", card=CARD, sharing=("mps",)), [physical_class("mps")]
    cluster = Cluster(slices, classes)
    _held(cluster, "infer", "physical-mps", sharePercent="80")
    asked = claim("c", exact("gpu", "physical-mps", capacity={"sharePercent": "50"}))
    details = _details(slices, classes, cluster, asked)
    assert _line(details, f"{CARD}-mps") == (
        "no sharePercent left: held by the MPS share (80%) of Pod user/infer (claim user/infer)"
    )


def test_a_card_held_by_a_share_of_another_mode_says_whose_share() -> None:
    slices = a30_pool("node-a", card=CARD, sharing=("mps",))
    classes = [physical_class(), physical_class("mps")]
    cluster = Cluster(slices, classes)
    _held(cluster, "mps-demo", "physical-mps", namespace="demo", sharePercent="30")
    details = _details(slices, classes, cluster, claim("c", exact("gpu", "physical-exclusive")))
    assert _line(details, WHOLE) == (
        f"card {CARD} is held by the MPS share (30%) of Pod demo/mps-demo (claim demo/mps-demo)"
    )


def test_a_card_cut_into_mig_devices_says_how_many_and_whose() -> None:
    slices, classes = a30_pool("node-a", card=CARD), [physical_class(), mig_class("1g")]
    cluster = Cluster(slices, classes)
    for name in ("a", "b", "c"):
        _held(cluster, name, "mig-1g")
    details = _details(slices, classes, cluster, claim("whole", exact("gpu", "physical-exclusive")))
    line = _line(details, WHOLE)
    assert line.startswith(f"card {CARD} holds 3 MIG 1g devices (")
    assert line.endswith("); a whole card needs it free")
    for name in ("a", "b", "c"):
        assert f"the MIG 1g device of Pod user/{name} (claim user/{name})" in line


def test_a_mig_device_whose_part_of_the_card_is_taken_says_by_whom() -> None:
    slices, classes = a30_pool("node-a", card=CARD), [mig_class("1g"), mig_class("4g")]
    cluster = Cluster(slices, classes)
    _held(cluster, "small", "mig-1g")
    details = _details(slices, classes, cluster, claim("big", exact("gpu", "mig-4g")))
    [blocked] = [x for x in details.splitlines() if x.strip().startswith("counters exhausted")]
    assert blocked.endswith(
        f": its part of card {CARD} is held by the MIG 1g device of Pod user/small (claim user/small)"
    )


def test_holders_the_caller_cannot_read_are_not_named_in_the_details_either() -> None:
    slices, classes = (
        a30_pool("node-a", card=CARD, sharing=("mps",)),
        [physical_class(), physical_class("mps")],
    )
    cluster = Cluster(slices, classes)
    _held(cluster, "secret-job", "physical-mps", namespace="secret", sharePercent="30")
    asked = claim("c", exact("gpu", "physical-exclusive"))
    details = _details(slices, classes, cluster, asked, readable="default".__eq__)
    assert _line(details, WHOLE) == f"card {CARD} is held by claims you cannot read"
    assert "secret" not in details
