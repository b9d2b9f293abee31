"""The soak's workload: the cards it plans per kind, its Pods and claims, and its records."""

from __future__ import annotations

import random
from typing import Any

from kubernetes.client import ResourceV1ResourceClaim, V1Pod
from pytest_mock import MockerFixture
from soak.cluster import FIXTURES, NODES
from soak.run import VFIO_NODES
from soak.workload import COMPLETED, LOST, Kind, Slot, Workload, caps, claim_for, lifetimes, plan, pod_for

from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM, RESOURCE_SLICE
from pkg.gpuhandler.offline import OfflineRequest, compute_offers

D = "gpu.deckhouse.io"


def _offer(
    name: str, card: str, device_type: str, sharing: str = "Exclusive", **attrs: Any
) -> dict[str, Any]:
    attributes: dict[str, dict[str, Any]] = {
        f"{D}/pciAddress": {"string": card},
        f"{D}/deviceType": {"string": device_type},
        f"{D}/sharingStrategy": {"string": sharing},
    }
    for key, value in attrs.items():
        attributes[f"{D}/{key}"] = {"int": value} if isinstance(value, int) else {"string": value}
    return {"name": name, "attributes": attributes}


def _slice(node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"spec": {"driver": D, "pool": {"name": node}, "nodeName": node, "devices": devices}}


def _card(card: str, *, mig: int = 0) -> list[dict[str, Any]]:
    offers = [
        _offer(f"{card}-whole", card, "Physical"),
        _offer(f"{card}-ts", card, "Physical", "TimeSlicing"),
        _offer(f"{card}-mps", card, "Physical", "MPS"),
    ]
    offers += [
        _offer(f"{card}-1g-{s}", card, "MIG", migProfile="1g.6gb", placementStart=s) for s in range(mig)
    ]
    offers += [
        _offer(f"{card}-1g-me-{s}", card, "MIG", migProfile="1g.6gb+me", placementStart=s) for s in range(mig)
    ]
    return offers


SLICES = [
    _slice("a30", _card("0000:01:00.0", mig=4) + _card("0000:02:00.0", mig=4)),
    _slice("h100", _card("0000:11:00.0") + _card("0000:12:00.0") + _card("0000:13:00.0")),
    _slice("t4", [_offer("t4-vgpu-0", "0000:3b:00.0", "VGPU", vgpuType="GRID T4-4Q")]),
    _slice("rtx", _card("0000:65:00.0")),
]


def test_the_plan_gives_every_kind_cards_and_caps_from_what_they_hold() -> None:
    slots = plan(SLICES, vfio_nodes=["rtx"])
    by_card = {s.card: s.kind for s in slots}
    assert by_card["0000:3b:00.0"] is Kind.VGPU
    assert by_card["0000:65:00.0"] is Kind.VFIO
    assert by_card["0000:01:00.0"] is Kind.MIG
    assert set(by_card.values()) == set(Kind)
    assert caps(slots) == {
        Kind.MIG: 4,
        Kind.WHOLE: 1,
        Kind.TIMESLICING: 2,
        Kind.MPS: 2,
        Kind.CONTROLLER: 1,
        Kind.VGPU: 1,
        Kind.VFIO: 1,
    }


def test_every_kind_gets_a_card_before_any_kind_gets_a_second() -> None:
    # Three cards that serve every kind first, then two that serve only whole-card kinds: taking
    # the cards in turn, the third full card went to a second whole-card kind and MPS got none.
    exclusive_only = [_offer(f"{c}-whole", c, "Physical") for c in ("0000:04:00.0", "0000:05:00.0")]
    full = [d for c in ("0000:01:00.0", "0000:02:00.0", "0000:03:00.0") for d in _card(c, mig=4)]
    slots = plan([_slice("node", full + exclusive_only)])
    assert sorted(s.kind for s in slots) == sorted(
        [Kind.MIG, Kind.WHOLE, Kind.TIMESLICING, Kind.MPS, Kind.CONTROLLER]
    )
    assert {s.kind for s in slots if s.card in ("0000:04:00.0", "0000:05:00.0")} == {
        Kind.WHOLE,
        Kind.CONTROLLER,
    }


def test_every_kind_of_the_issue_is_planned_on_the_soak_s_nodes() -> None:
    """What the soak's own nodes offer (computed offline from their fixture hosts, as gpu-handler
    would publish it) gives every kind at least one card, gpu-dra-controller's included."""
    slices = []
    for spec in NODES:
        offers = compute_offers(
            OfflineRequest(
                node_name=spec.name, sysfs_root=FIXTURES / "sysfs" / spec.fixture, backend="simulated-nvidia"
            )
        )
        slices += [RESOURCE_SLICE.encode(s) for s in offers.slices]
    planned = caps(plan(slices, vfio_nodes=VFIO_NODES))
    assert set(planned) == set(Kind), f"kinds without a card: {set(Kind) - set(planned)}"
    assert all(units >= 1 for units in planned.values())


def test_a_kind_asks_by_extended_resource_only_where_the_node_is_its_own() -> None:
    slots = {s.card: s for s in plan(SLICES, vfio_nodes=["rtx"])}
    assert slots["0000:65:00.0"].extended == "gpu"  # the VM host's card, no rival on its node
    assert slots["0000:3b:00.0"].extended == "vgpu"
    whole = next(s for s in slots.values() if s.kind is Kind.WHOLE)
    assert whole.extended is None  # a share or a MIG device could take the same card by the class
    mig = next(s for s in slots.values() if s.kind is Kind.MIG)
    assert mig.extended is None
    assert 'migProfile == "1g.6gb"' in mig.selector
    assert mig.card in mig.selector


def _slot(kind: Kind, extended: str | None = None, units: int = 1) -> Slot:
    return Slot(
        kind, "node-a", "0000:01:00.0", units, "gpu-physical", extended, 'pciAddress == "0000:01:00.0"'
    )


def test_a_vm_pod_asks_by_its_resource_with_the_vfio_annotation() -> None:
    pod = POD.encode(pod_for("p", _slot(Kind.VFIO, "gpu"), lifetime=30, claim=None))
    assert pod["metadata"]["annotations"] == {f"{D}/vfio": "true"}
    [container] = pod["spec"]["containers"]
    assert container["resources"]["limits"] == {f"{D}/gpu": "1"}
    assert container["command"][-1] == "sleep 30; exit 0"
    assert pod["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "node-a"}
    assert pod["spec"]["restartPolicy"] == "Never"


def test_a_share_asks_by_a_claim_of_its_card_with_its_percentage() -> None:
    slot = Slot(Kind.MPS, "node-a", "0000:01:00.0", 2, "gpu-mps", None, "sel")
    pod = POD.encode(pod_for("p", slot, lifetime=30, claim="p"))
    assert pod["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "p"}]
    assert "annotations" not in pod["metadata"]
    claim = RESOURCE_CLAIM.encode(claim_for("p", slot))
    [request] = claim["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "gpu-mps"
    assert request["exactly"]["capacity"] == {"requests": {"sharePercent": "50"}}
    assert request["exactly"]["selectors"] == [{"cel": {"expression": "sel"}}]


class _Cluster:
    """The API server as the mocked KubeClient shows it: Pods created and not deleted, each in the
    phase the test gives it (Pending by default; absent from ``phases`` values: vanished)."""

    def __init__(self, kube: Any) -> None:
        self.pods: list[str] = []
        self.phases: dict[str, tuple[str, str | None, str | None]] = {}
        self.disruptions: dict[str, str] = {}  # Pod -> the reason of its DisruptionTarget condition
        kube.create.side_effect = self._create
        kube.list.side_effect = lambda *a, **k: ([self._pod(n) for n in self.pods], "1")
        kube.delete.side_effect = self._delete

    def _create(self, kind: Any, obj: Any, namespace: str) -> Any:
        if kind is POD:
            self.pods.append(obj.metadata.name)
        return obj

    def _delete(self, kind: Any, name: str, namespace: str) -> None:
        if kind is POD and name in self.pods:
            self.pods.remove(name)

    def _pod(self, name: str) -> V1Pod:
        phase, reason, node = self.phases.get(name, ("Pending", None, None))
        body: dict[str, Any] = {"metadata": {"name": name}, "spec": {"containers": [], "nodeName": node}}
        body["status"] = {"phase": phase, "reason": reason}
        if name in self.disruptions:
            body["status"]["conditions"] = [
                {"type": "DisruptionTarget", "status": "True", "reason": self.disruptions[name]}
            ]
        return V1Pod.model_validate(body)


def _workload(
    mocker: MockerFixture, slots: list[Slot], *, rate: float = 60
) -> tuple[Workload, Any, _Cluster]:
    kube = mocker.create_autospec(KubeClient, instance=True)
    cluster = _Cluster(kube)
    return Workload(kube, "soak", slots, rate=rate, bound=60, rng=random.Random(1)), kube, cluster


def test_the_workload_keeps_under_the_cap_and_records_what_became_of_each_pod(mocker: MockerFixture) -> None:
    workload, kube, cluster = _workload(mocker, [_slot(Kind.WHOLE, "gpu", units=2)])
    workload.step(0.0)
    workload.step(10.0)  # 10 s at 60/min: room for ten, the cap allows one more
    assert sorted(workload.records) == ["soak-whole-1", "soak-whole-2"]
    assert kube.create.call_count == 2
    workload.step(20.0)
    assert len(workload.records) == 2  # still full
    cluster.phases["soak-whole-1"] = ("Running", None, "node-a")
    workload.step(30.0)
    one, two = workload.records["soak-whole-1"], workload.records["soak-whole-2"]
    assert (one.scheduled, one.running, one.outcome) == (30.0, 30.0, None)
    assert (two.scheduled, two.outcome) == (None, None)
    cluster.phases["soak-whole-1"] = ("Succeeded", None, "node-a")
    done = workload.step(71.0)  # the second Pod, made at 10 s, has been Pending beyond the 60 s bound
    assert (one.outcome, one.finished, one.deleted) == (COMPLETED, 71.0, 71.0)
    assert two.outcome == LOST
    assert two.why.startswith("stuck Pending")
    kube.delete.assert_any_call(POD, "soak-whole-1", "soak")
    assert "deleted soak-whole-2" in done
    assert sorted(workload.records) == ["soak-whole-1", "soak-whole-2", "soak-whole-3", "soak-whole-4"]


def test_no_pod_is_lost_for_being_stuck_while_a_fault_is_fresh(mocker: MockerFixture) -> None:
    workload, _, _ = _workload(mocker, [_slot(Kind.WHOLE, "gpu")])
    workload.step(0.0)
    workload.step(100.0, calm_since=90.0)
    assert workload.records["soak-whole-1"].outcome is None
    workload.step(151.0, calm_since=90.0)
    assert workload.records["soak-whole-1"].outcome == LOST


def test_failed_evicted_and_vanished_pods_are_lost_with_why(mocker: MockerFixture) -> None:
    workload, _, cluster = _workload(mocker, [_slot(Kind.WHOLE, "gpu", units=3)])
    workload.step(0.0)
    workload.step(2.0)
    cluster.phases["soak-whole-1"] = ("Failed", None, "node-a")
    cluster.phases["soak-whole-2"] = ("Failed", "Evicted", "node-a")
    cluster.pods.remove("soak-whole-3")
    workload.step(3.0)
    whys = {name: r.why for name, r in workload.records.items()}
    assert whys["soak-whole-1"].startswith("failed")
    assert whys["soak-whole-2"].startswith("evicted")
    assert whys["soak-whole-3"].startswith("vanished")


def test_a_pod_a_controller_marked_for_deletion_is_lost_as_evicted_for_that_reason(
    mocker: MockerFixture,
) -> None:
    """The device taint eviction marks the Pod, then deletes it: the mark is what tells the
    eviction of a lost card from a deletion nobody explains."""
    workload, _, cluster = _workload(mocker, [_slot(Kind.WHOLE, "gpu", units=2)])
    workload.step(0.0)
    workload.step(2.0)
    cluster.phases["soak-whole-1"] = ("Running", None, "node-a")
    cluster.disruptions["soak-whole-1"] = "DeletionByDeviceTaintManager"
    workload.step(3.0)
    cluster.pods.remove("soak-whole-1")
    workload.step(4.0)
    record = workload.records["soak-whole-1"]
    assert record.disruption == "DeletionByDeviceTaintManager"
    assert record.why == "evicted: the Pod was deleted for DeletionByDeviceTaintManager"
    assert workload.records["soak-whole-2"].disruption == ""


def test_a_pod_that_failed_after_a_controller_marked_it_says_so(mocker: MockerFixture) -> None:
    workload, _, cluster = _workload(mocker, [_slot(Kind.WHOLE, "gpu")])
    workload.step(0.0)
    cluster.phases["soak-whole-1"] = ("Failed", None, "node-a")
    cluster.disruptions["soak-whole-1"] = "DeletionByDeviceTaintManager"
    workload.step(2.0)
    record = workload.records["soak-whole-1"]
    assert record.disruption == "DeletionByDeviceTaintManager"
    assert record.why == "failed: no reason given (marked DeletionByDeviceTaintManager)"


def test_a_controller_claim_gets_its_pod_once_allocated_and_both_go_at_the_end(mocker: MockerFixture) -> None:
    workload, kube, cluster = _workload(mocker, [_slot(Kind.CONTROLLER)])
    workload.step(0.0)
    [call] = kube.create.call_args_list
    assert call.args[0] is RESOURCE_CLAIM
    assert isinstance(call.args[1], ResourceV1ResourceClaim)
    kube.get.return_value = ResourceV1ResourceClaim.model_validate(
        {"metadata": {"name": "soak-controller-1"}}
    )
    workload.step(5.0)
    assert kube.create.call_count == 1  # not allocated yet: no Pod
    allocated: dict[str, Any] = {"allocation": {"devices": {"results": []}}}
    kube.get.return_value = ResourceV1ResourceClaim.model_validate(
        {"metadata": {"name": "soak-controller-1"}, "status": allocated}
    )
    workload.step(6.0)
    assert kube.create.call_args.args[0] is POD
    record = workload.records["soak-controller-1"]
    assert (record.pod_created, record.claims) == (6.0, ["soak-controller-1"])
    cluster.phases["soak-controller-1"] = ("Succeeded", None, "node-a")
    workload.step(40.0)
    kube.delete.assert_any_call(RESOURCE_CLAIM, "soak-controller-1", "soak")
    assert record.outcome == COMPLETED


def test_a_finished_pod_s_claim_is_deleted_before_the_pod(mocker: MockerFixture) -> None:
    """A claim left without its Pod for a moment is one gpu-dra-controller may allocate again."""
    workload, kube, cluster = _workload(mocker, [_slot(Kind.MIG)])
    workload.step(0.0)
    cluster.phases["soak-mig-1"] = ("Failed", None, "node-a")
    workload.step(10.0)
    deletes = [(c.args[0], c.args[1]) for c in kube.delete.call_args_list]
    assert deletes[:2] == [(RESOURCE_CLAIM, "soak-mig-1"), (POD, "soak-mig-1")]


def test_a_claim_deleted_by_someone_else_loses_its_pod(mocker: MockerFixture) -> None:
    workload, kube, _ = _workload(mocker, [_slot(Kind.CONTROLLER)])
    workload.step(0.0)
    kube.get.side_effect = NotFoundError(status=404, reason="NotFound", message="gone")
    workload.step(1.0)
    assert workload.records["soak-controller-1"].why.startswith("vanished: claim")


def test_pods_live_so_that_what_the_cards_hold_turns_over_at_the_rate() -> None:
    """13 Pods at once at 60 a minute: a turn of 13 s, 4 s of it not the Pod's own."""
    assert lifetimes(13, 60) == (4.5, 13.5)
    assert lifetimes(13, 30) == (11.0, 33.0)


def test_lifetimes_stay_within_their_bounds_when_the_rate_cannot_be_held() -> None:
    assert lifetimes(13, 600) == (3.0, 9.0)  # too fast for the cards: the shortest
    assert lifetimes(13, 1) == (27.5, 82.5)  # so slow that faults would find few Pods: the longest
    assert lifetimes(13, 0) == (27.5, 82.5)
