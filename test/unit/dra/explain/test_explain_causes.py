"""The verdict of ``explain``: each cause a pending claim can have, stated first in the user's words
with what would change it, on the allocator's real inputs (slices as gpu-handler publishes them,
classes as gpu-controller makes them, claims allocated by the allocator itself).

One scenario per cause; each checks the sentence a person reads, the same content as data (what
``-o json``/``-o yaml`` print), and whether "retry when capacity changes" is said.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1DeviceClass,
    V1DeviceConstraint,
    V1DeviceTaint,
    V1ResourceClaimConsumerReference,
    V1ResourceSlice,
)
from testutil.unit.dra.allocator.alloc_builders import (
    DRIVER,
    Cluster,
    a30_pool,
    claim,
    device_class,
    exact,
    mig_class,
    physical_class,
)

from pkg.dra.allocator import AllocationInputs, Allocator
from pkg.dra.explain.causes import everyone
from pkg.dra.explain.report import Report, explain_inputs
from pkg.dra.explain.verdict import NO_RETRY_NOTE, RETRY_NOTE, CauseKind

CARD_A, CARD_B = "gpu-0000-02-00-0", "gpu-0000-03-00-0"
SINCE = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@dataclass
class Scene:
    """A cluster as the allocator sees it: slices, classes, and the claims it allocated."""

    slices: list[V1ResourceSlice]
    classes: list[V1DeviceClass]
    cluster: Cluster

    @classmethod
    def of(cls, slices: list[V1ResourceSlice], *classes: V1DeviceClass) -> Scene:
        return cls(slices, list(classes), Cluster(slices, list(classes)))

    def hold(
        self, name: str, request_class: str, *, count: int = 1, namespace: str = "user", **capacity: str
    ) -> None:
        """A claim allocated by the allocator, reserved for the Pod of the same name."""
        held = claim(
            name, exact("gpu", request_class, count=count, capacity=capacity or None), namespace=namespace
        )
        self.cluster.allocate(held, node=None)
        assert held.status is not None, f"{name} was not allocated"
        assert held.status.allocation is not None
        held.status.reserved_for = [
            V1ResourceClaimConsumerReference(resource="pods", name=name, uid=f"pod-{name}")
        ]

    def explain(self, asked: ResourceV1ResourceClaim, readable: Callable[[str], bool] = everyone) -> Report:
        inputs = AllocationInputs.of(
            slices=self.slices, classes=self.classes, allocated_claims=self.cluster.claims
        )
        return explain_inputs(asked, inputs, allocator=Allocator(), readable=readable)


def one_cause(report: Report) -> tuple[str, dict[str, object]]:
    """The report's only cause line and its data, after checking text and data agree."""
    assert report.verdict is not None
    assert not report.allocatable
    [cause] = report.verdict.causes
    data = json.loads(json.dumps(report.verdict.to_dict()))  # what -o json prints
    [as_data] = data["causes"]
    assert as_data["text"] == cause.text
    assert as_data["kind"] == cause.kind
    lines = report.text.splitlines()
    assert lines[1] == "verdict: NOT allocatable"  # the cause comes first, before any device
    assert lines[2].startswith("  cause: ")
    assert cause.text in lines[2]
    assert lines[3] == f"    would change it: {cause.remedy}"
    return cause.text, as_data


def retry_said(report: Report) -> bool:
    last = report.text.splitlines()[-1]
    said = last.endswith(f"({RETRY_NOTE})")
    assert said or last.endswith(f"({NO_RETRY_NOTE})") or "broken" in last
    return said


def two_nodes() -> list[V1ResourceSlice]:
    return a30_pool("node-a", card=CARD_A) + a30_pool("node-b", card=CARD_B)


def test_more_whole_cards_asked_than_on_any_node() -> None:
    scene = Scene.of(two_nodes(), physical_class())
    report = scene.explain(claim("wants-two", exact("gpu", "physical-exclusive", count=2)))
    text, data = one_cause(report)
    assert text == "2 whole cards asked, 2 match in the cluster, at most 1 on one node"
    assert data["kind"] == CauseKind.TOO_FEW.value
    facts = data["facts"]
    assert isinstance(facts, dict)
    assert (facts["asked"], facts["matching"], facts["mostOnOneNode"]) == (2, 2, 1)
    assert retry_said(report)


def test_more_asked_than_exist() -> None:
    scene = Scene.of(two_nodes(), physical_class())
    report = scene.explain(claim("wants-three", exact("gpu", "physical-exclusive", count=3)))
    text, _ = one_cause(report)
    assert text.startswith("3 whole cards asked, 2 match in the cluster")


def test_a_mig_profile_no_card_offers_lists_the_profiles_that_exist() -> None:
    scene = Scene.of(two_nodes(), mig_class("7g"))
    report = scene.explain(claim("wants-7g", exact("gpu", "mig-7g")))
    text, data = one_cause(report)
    assert text.startswith("no device matches the selector of class mig-7g (")
    assert text.endswith("; migProfile offered: 1g, 2g, 4g")  # deviceType "MIG" exists: not listed
    assert data["retry"] is False
    assert data["facts"] == {
        "selector": scene.classes[0].spec.selectors[0].cel.expression,  # type: ignore[union-attr,index]
        "owner": "class mig-7g",
        "values": {"migProfile": ["1g", "2g", "4g"]},
    }
    assert not retry_said(report)
    assert RETRY_NOTE not in report.text


def test_a_claim_selector_no_device_of_the_class_satisfies() -> None:
    scene = Scene.of(two_nodes(), mig_class())
    selector = f'device.attributes["{DRIVER}"].migProfile == "3g"'
    report = scene.explain(claim("wants-3g", exact("gpu", "mig-any", selectors=(selector,))))
    text, _ = one_cause(report)
    assert text == (
        f"no device matches the selector of claim default/wants-3g ({selector}); "
        "14 devices are of class mig-any; migProfile offered: 1g, 2g, 4g"
    )
    assert not retry_said(report)


def test_whole_cards_held_by_others_name_the_pod_and_claim() -> None:
    scene = Scene.of(a30_pool("node-a", card=CARD_A), physical_class())
    scene.hold("train", "physical-exclusive")
    report = scene.explain(claim("wants-one", exact("gpu", "physical-exclusive")))
    text, data = one_cause(report)
    assert text == (
        "1 asked, 1 match, 0 free on one node; "
        "1 whole card is held by the whole card of Pod user/train (claim user/train)"
    )
    assert data["kind"] == CauseKind.HELD.value
    assert data["facts"]["holders"] == ["user/train"]  # type: ignore[index]
    assert retry_said(report)


def test_holders_the_caller_cannot_read_are_not_named() -> None:
    scene = Scene.of(a30_pool("node-a", card=CARD_A), physical_class())
    scene.hold("train", "physical-exclusive", namespace="secret")
    report = scene.explain(claim("wants-one", exact("gpu", "physical-exclusive")), readable="default".__eq__)
    text, data = one_cause(report)
    assert text.endswith("1 whole card is held by claims you cannot read")
    assert "secret" not in report.text.split("details:")[0]
    assert data["facts"]["hiddenHolders"] == 1  # type: ignore[index]
    assert "holders" not in data["facts"]  # type: ignore[operator]


def test_a_share_says_its_percentage_and_whose_it_is() -> None:
    scene = Scene.of(a30_pool("node-a", card=CARD_A, sharing=("mps",)), physical_class("mps"))
    scene.hold("infer", "physical-mps", sharePercent="80")
    report = scene.explain(claim("wants-half", exact("gpu", "physical-mps", capacity={"sharePercent": "50"})))
    text, _ = one_cause(report)
    assert text.endswith("1 MPS share is held by the MPS share (80%) of Pod user/infer (claim user/infer)")
    assert retry_said(report)


def test_a_card_used_as_mig_devices_is_not_a_free_whole_card() -> None:
    scene = Scene.of(a30_pool("node-a", card=CARD_A), physical_class(), mig_class("1g"))
    scene.hold("a", "mig-1g", count=2)
    scene.hold("b", "mig-1g")
    report = scene.explain(claim("wants-card", exact("gpu", "physical-exclusive")))
    text, data = one_cause(report)
    assert data["kind"] == CauseKind.OTHER_MODE.value
    assert f"card {CARD_A} on node node-a holds 3 MIG 1g devices; a whole card needs the card free" in text
    assert "MIG 1g device of Pod user/a (claim user/a)" in text
    assert "MIG 1g device of Pod user/b (claim user/b)" in text
    assert "counter set" not in text  # the mechanism stays in the details
    assert data["facts"]["cards"] == [CARD_A]  # type: ignore[index]
    assert retry_said(report)


def _tainted(slices: list[V1ResourceSlice]) -> list[V1ResourceSlice]:
    taint = V1DeviceTaint(
        key="gpu.deckhouse.io/unhealthy", value="xid-79", effect="NoSchedule", time_added=SINCE
    )
    for s in slices:
        for device in s.spec.devices or ():
            device.taints = [taint]
    return slices


def test_a_tainted_card_says_which_taint_and_since_when() -> None:
    scene = Scene.of(_tainted(a30_pool("node-a", card=CARD_A)), physical_class())
    report = scene.explain(claim("wants-one", exact("gpu", "physical-exclusive")))
    text, data = one_cause(report)
    assert text == (
        "1 asked, 1 match, 0 free on one node; 1 whole card is tainted "
        "gpu.deckhouse.io/unhealthy=xid-79:NoSchedule (since 2026-03-01T12:00:00+00:00), "
        "which the request does not tolerate"
    )
    assert data["facts"]["taints"] == [  # type: ignore[index]
        "gpu.deckhouse.io/unhealthy=xid-79:NoSchedule since 2026-03-01T12:00:00+00:00"
    ]


def _second_root(slices: list[V1ResourceSlice]) -> list[V1ResourceSlice]:
    for s in slices:
        for device in s.spec.devices or ():
            device.attributes["pciAddress"].string = "0000:03:00.0"  # type: ignore[index]
    return slices


def test_a_match_attribute_that_splits_the_free_devices() -> None:
    slices = a30_pool("node-a", card=CARD_A) + _second_root(a30_pool("node-a", card=CARD_B))
    scene = Scene.of(slices, physical_class())
    same = V1DeviceConstraint(match_attribute=f"{DRIVER}/pciAddress")
    asked = claim("pair", exact("gpu", "physical-exclusive", count=2), constraints=[same])
    report = scene.explain(asked)
    text, data = one_cause(report)
    assert text.startswith(f"matchAttribute {DRIVER}/pciAddress: no single value has enough free devices")
    assert "gpu 1 of 2" in text
    assert data["kind"] == CauseKind.CONSTRAINT.value
    assert retry_said(report)


def test_a_class_that_does_not_compile_is_the_claim_to_fix() -> None:
    broken = device_class("broken", f'device.driver == "{DRIVER}" && quantity("1") < quantity("2")')
    scene = Scene.of(a30_pool("node-a", card=CARD_A), broken)
    report = scene.explain(claim("c", exact("gpu", "broken")))
    text, data = one_cause(report)
    assert text.startswith(
        "the claim cannot be allocated as written: class broken: selector #0: CEL compile error"
    )
    assert data["retry"] is False
    assert RETRY_NOTE not in report.text


def test_an_allocatable_claim_has_no_cause() -> None:
    scene = Scene.of(a30_pool("node-a", card=CARD_A), physical_class())
    report = scene.explain(claim("c", exact("gpu", "physical-exclusive")))
    assert report.verdict is not None
    assert report.verdict.to_dict() == {"allocatable": True, "retry": False, "causes": []}
    assert "verdict:" not in report.text


def test_only_devices_of_the_requests_class_are_listed() -> None:
    """A whole card held under a MIG request is not the MIG request's business: it is counted in
    one line with the other devices its class never selects."""
    slices = a30_pool("node-a", card=CARD_A) + a30_pool("node-b", card=CARD_B, profiles=())
    scene = Scene.of(slices, physical_class(), mig_class("4g"))
    scene.hold("big", "mig-4g")
    scene.hold("whole", "physical-exclusive")  # node-b's card: node-a's is used as MIG
    report = scene.explain(claim("c", exact("gpu", "mig-4g")))
    details = report.text.split("details:")[1]
    assert "request gpu: 1 device of class mig-4g (1 already allocated)" in details
    assert "-physical" not in details
    assert "other devices are not of class mig-4g (--all lists them)" in details


@pytest.mark.parametrize("count", [1, 2])
def test_retry_is_said_only_where_capacity_would_help(count: int) -> None:
    """The same claim, short of capacity (retry) or asking for a profile nobody offers (no retry)."""
    scene = Scene.of(a30_pool("node-a", card=CARD_A), mig_class("4g"), mig_class("7g"))
    scene.hold("big", "mig-4g")
    short = scene.explain(claim("c", exact("gpu", "mig-4g", count=count)))
    missing = scene.explain(claim("d", exact("gpu", "mig-7g", count=count)))
    assert retry_said(short)
    assert short.verdict is not None
    assert short.verdict.retry
    assert not retry_said(missing)
    assert missing.verdict is not None
    assert not missing.verdict.retry


def test_cards_of_one_name_on_two_nodes_are_told_apart() -> None:
    """Card names are PCI addresses: the same on every node of one model, so each is named with its node."""
    slices = a30_pool("node-a", card=CARD_A) + a30_pool("node-b", card=CARD_A, sharing=("mps",))
    scene = Scene.of(slices, physical_class(), mig_class("1g"), physical_class("mps"))
    scene.hold("nb", "mig-1g")
    scene.hold("infer", "physical-mps", sharePercent="60")
    report = scene.explain(claim("wants-card", exact("gpu", "physical-exclusive")))
    text, data = one_cause(report)
    assert (
        f"card {CARD_A} on node node-a holds 1 MIG 1g device; card {CARD_A} on node node-b holds 1 MPS share"
        in text
    )
    assert data["facts"]["holders"] == ["user/infer", "user/nb"]  # type: ignore[index]
