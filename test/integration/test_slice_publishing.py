"""Our slices on the real API server (in its version's layout: a separate counter slice on 1.35+,
counters inline on 1.34), and the invariant proven by the real kube-scheduler, one Pod per step.

The publisher writes an A30 and an H100 of a kubelet-less node. The server must accept every slice
and keep every field, a second publish must not write, and a changed card must move the pool to the
next generation. Then Pods with ResourceClaims show that counters alone keep modes apart: a whole
card excludes its MIG offers and the reverse, two 50% time-slicing shares fit and a third does not,
time slicing and MPS never share a card, and first fit over our order places MIG instances from the
top of the card, on the card our node order puts first (an A30 before an H100 whatever their PCI
addresses). vGPUs of a card fill it by memory and keep the whole card out. Every scenario gets its
own node, so no allocation has to be released.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import pytest
from kubernetes.client import (
    CoreV1ResourceClaim,
    ResourceV1ResourceClaim,
    V1CapacityRequirements,
    V1CELDeviceSelector,
    V1Container,
    V1DeviceClaim,
    V1DeviceRequest,
    V1DeviceSelector,
    V1ExactDeviceRequest,
    V1ObjectMeta,
    V1OwnerReference,
    V1Pod,
    V1PodResourceClaim,
    V1PodSpec,
    V1ResourceClaimSpec,
    V1ResourceRequirements,
    V1ResourceSlice,
)
from testutil.integration.dra_objects import DRIVER, create_ready_node, device_class
from testutil.integration.scheduler_release import scheduler_places_shares
from testutil.k8s_fields import allocation_results, meta, name_of, present, status_of, uid_of
from testutil.unit.dra.offers import offer_models

from pkg.dra.model.card import Card, VgpuTypeSpec
from pkg.dra.model.offers import CardOffers, build_offers
from pkg.dra.model.slices import Layout, build_slices, read_server_version
from pkg.dra.publisher import KubeSliceReader, SlicePublisher, content
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NODE, POD, RESOURCE_CLAIM, RESOURCE_SLICE

A30, H100, T4 = "0000:02:00.0", "0000:9a:00.0", "0000:3b:00.0"
ATTR = f'device.attributes["{DRIVER}"]'
NODE_LABEL = "gpu-test.deckhouse.io/node"

pytestmark = pytest.mark.dra_api


def node_cards(node: str, **a30_changes: object) -> list[CardOffers]:
    models = offer_models
    a30 = models.card("A30", A30, physical_gpu=f"{node}-0-10de-20b7", **a30_changes)
    h100 = models.card("H100", H100, physical_gpu=f"{node}-1-10de-2330")
    return [build_offers(a30), build_offers(h100)]


@pytest.fixture
def layout(kube: KubeClient) -> Layout:
    """The layout the server's version wants (:attr:`Layout.SEPARATE` on 1.35+, INLINE on 1.34)."""
    return read_server_version(kube).layout


@pytest.fixture
def publisher(kube: KubeClient, layout: Layout) -> SlicePublisher:
    return SlicePublisher(kube=kube, reader=KubeSliceReader(kube), layout=layout)


@pytest.fixture
def gpu_node(kube: KubeClient, publisher: SlicePublisher, unique: str) -> Iterator[Callable[[str], str]]:
    """Creates a Ready node with an A30 and an H100 published; removes node and slices after."""
    made: list[str] = []

    def make(suffix: str) -> str:
        name = f"gpu-pub-{unique}-{suffix}"
        node = create_ready_node(kube, name, labels={NODE_LABEL: name})
        made.append(name)
        owner = V1OwnerReference(api_version="v1", kind="Node", name=name, uid=uid_of(node))
        publisher.publish(name, node_cards(name), owner=owner)
        return name

    yield make
    for name in made:
        publisher.publish(name, [])
        with contextlib.suppress(NotFoundError):
            kube.delete(NODE, name)


@pytest.fixture
def classes(kube: KubeClient, unique: str) -> Iterator[dict[str, str]]:
    base = f'device.driver == "{DRIVER}"'
    selectors = {
        "physical": f'{base} && {ATTR}.deviceType == "Physical" && {ATTR}.sharingStrategy == "Exclusive"',
        "ts": f'{base} && {ATTR}.deviceType == "Physical" && {ATTR}.sharingStrategy == "TimeSlicing"',
        "mps": f'{base} && {ATTR}.deviceType == "Physical" && {ATTR}.sharingStrategy == "MPS"',
        "mig": f'{base} && {ATTR}.deviceType == "MIG"',
        "vgpu": f'{base} && {ATTR}.deviceType == "VGPU"',
    }
    names = {kind: f"{kind}-{unique}" for kind in selectors}
    for kind, cel in selectors.items():
        kube.create(DEVICE_CLASS, device_class(names[kind], cel=cel))
    yield names
    for name in names.values():
        kube.delete(DEVICE_CLASS, name)


def test_published_slices_are_accepted_kept_and_not_rewritten(
    kube: KubeClient, layout: Layout, publisher: SlicePublisher, gpu_node: Callable[[str], str]
) -> None:
    node = gpu_node("a")
    owner = V1OwnerReference(api_version="v1", kind="Node", name=node, uid=uid_of(kube.get(NODE, node)))
    stored = _slices(kube, node)
    shape = {  # names and device counts: the counters apart (1.35+) or with the devices (1.34)
        Layout.SEPARATE: ([f"gpu-{node}-counters-00", f"gpu-{node}-devices-00"], [0, 16 + 28]),
        Layout.INLINE: ([f"gpu-{node}-devices-00"], [16 + 28]),
    }
    names, devices = shape[layout]
    assert [name_of(rs) for rs in stored] == names
    assert {rs.spec.pool.generation for rs in stored} == {1}
    assert [len(rs.spec.devices or []) for rs in stored] == devices
    # The server kept every field: what it stores is what we built.
    built = build_slices(node=node, cards=node_cards(node), generation=1, layout=layout, owner=owner)
    assert [content(rs) for rs in stored] == [content(rs) for rs in built]
    versions = {name_of(rs): meta(rs).resource_version for rs in stored}

    again = publisher.publish(node, node_cards(node), owner=owner)
    assert not again.changed
    assert {name_of(rs): meta(rs).resource_version for rs in _slices(kube, node)} == versions

    changed = publisher.publish(node, node_cards(node, driver_version="580.82.7"), owner=owner)
    assert changed.generation == 2
    final = _slices(kube, node)
    assert {rs.spec.pool.generation for rs in final} == {2}
    assert all(versions[name_of(rs)] != meta(rs).resource_version for rs in final)
    a30 = next(d for d in final[-1].spec.devices or [] if d.name == "gpu-0000-02-00-0")
    assert present(a30.attributes)[f"{DRIVER}/driverVersion"].version == "580.82.7"


def _slices(kube: KubeClient, node: str) -> list[V1ResourceSlice]:
    items, _ = kube.list(RESOURCE_SLICE, field_selector=f"spec.nodeName={node}")
    return sorted(items, key=name_of)


def test_physical_allocation_excludes_the_cards_mig_offers(
    kube: KubeClient, namespace: str, gpu_node: Callable[[str], str], classes: dict[str, str]
) -> None:
    node = gpu_node("p")
    ask = Asker(kube, namespace, node)
    assert ask("whole", classes["physical"], card=A30) == "gpu-0000-02-00-0"
    ask.unschedulable("mig-a30", classes["mig"], card=A30)
    assert ask("mig-h100", classes["mig"], card=H100).startswith("gpu-0000-9a-00-0-mig-")


def test_mig_allocation_excludes_the_whole_and_shared_card(
    kube: KubeClient, namespace: str, gpu_node: Callable[[str], str], classes: dict[str, str]
) -> None:
    node = gpu_node("m")
    ask = Asker(kube, namespace, node)
    assert ask("mig", classes["mig"], card=A30).startswith("gpu-0000-02-00-0-mig-")
    ask.unschedulable("whole", classes["physical"], card=A30)
    ask.unschedulable("shared", classes["ts"], card=A30)
    assert ask("whole-h100", classes["physical"], card=H100) == "gpu-0000-9a-00-0"


def test_time_slicing_shares_stack_to_100_and_never_mix_with_mps(
    kube: KubeClient, namespace: str, gpu_node: Callable[[str], str], classes: dict[str, str]
) -> None:
    node = gpu_node("t")
    ask = Asker(kube, namespace, node)
    if not scheduler_places_shares(kube):  # 1.34: the known limit, asserted so a fix is noticed
        ask.unschedulable("ts-1", classes["ts"], card=A30, share="50")
        ask.unschedulable("mps-h100", classes["mps"], card=H100, share="10")
        return
    assert ask("ts-1", classes["ts"], card=A30, share="50") == "gpu-0000-02-00-0-ts"
    assert ask("ts-2", classes["ts"], card=A30, share="50") == "gpu-0000-02-00-0-ts"
    # Each share takes its percentage and, asking for no memory, none of the card's memory.
    assert ask.consumed("ts-2") == {"sharePercent": "50", "memory": "0"}
    ask.unschedulable("ts-3", classes["ts"], card=A30, share="50")
    ask.unschedulable("mps", classes["mps"], card=A30, share="10")
    assert ask("mps-h100", classes["mps"], card=H100, share="10") == "gpu-0000-9a-00-0-mps"


def test_first_fit_places_mig_instances_from_the_top(
    kube: KubeClient, namespace: str, gpu_node: Callable[[str], str], classes: dict[str, str]
) -> None:
    node = gpu_node("f")
    ask = Asker(kube, namespace, node)
    one_g = f'{ATTR}.migProfile == "1g.6gb"'
    assert ask("slice-3", classes["mig"], card=A30, extra=(one_g, f"{ATTR}.placementStart == 3")).endswith(
        "-mig-14-3"
    )
    assert ask("next-1g", classes["mig"], card=A30, extra=(one_g,)).endswith("-mig-14-2")
    assert ask("a-2g", classes["mig"], card=A30, extra=(f'{ATTR}.migProfile == "2g.12gb"',)).endswith(
        "-mig-5-0"
    )


def test_first_fit_takes_the_card_our_node_order_puts_first(
    kube: KubeClient, namespace: str, publisher: SlicePublisher, unique: str, classes: dict[str, str]
) -> None:
    # An H100 at a lower PCI address than the A30: PCI order would offer the H100's 1g first.
    name = f"gpu-pub-{unique}-o"
    node = create_ready_node(kube, name, labels={NODE_LABEL: name})
    models = offer_models
    h100 = models.card("H100", "0000:01:00.0", physical_gpu=f"{name}-0-10de-2330")
    a30 = models.card("A30", "0000:ab:00.0", physical_gpu=f"{name}-1-10de-20b7")
    owner = V1OwnerReference(api_version="v1", kind="Node", name=name, uid=uid_of(node))
    publisher.publish(name, [build_offers(h100), build_offers(a30)], owner=owner)
    try:
        ask = Asker(kube, namespace, name)
        small = (f'{ATTR}.migProfile.startsWith("1g.")',)
        assert ask("first-1g", classes["mig"], card=None, extra=small) == "gpu-0000-ab-00-0-mig-14-3"
        assert ask("a-7g", classes["mig"], card=None, extra=(f'{ATTR}.migProfile.startsWith("7g.")',)) == (
            "gpu-0000-01-00-0-mig-0-0"
        )
    finally:
        publisher.publish(name, [])
        with contextlib.suppress(NotFoundError):
            kube.delete(NODE, name)


def test_the_scheduler_follows_the_republished_fill_order(
    kube: KubeClient, namespace: str, publisher: SlicePublisher, unique: str, classes: dict[str, str]
) -> None:
    # Two A30s and an A100 (only a node of more than one MIG model follows the fill): the static
    # order offers the first A30's 1g first. Once a 1g is in use on the second A30 and the pool
    # is published again given that (what gpu-handler does after the Prepare), the next 1g goes
    # next to it, as best fit would place it.
    name = f"gpu-pub-{unique}-fill"
    node = create_ready_node(kube, name, labels={NODE_LABEL: name})
    models = offer_models
    first = models.card("A30", "0000:18:00.0", physical_gpu=f"{name}-0-10de-20b7")
    second = models.card("A30", "0000:5d:00.0", physical_gpu=f"{name}-1-10de-20b7")
    third = models.card("A100-40GB", "0000:9a:00.0", physical_gpu=f"{name}-2-10de-20b0")
    cards = [build_offers(first), build_offers(second), build_offers(third)]
    owner = V1OwnerReference(api_version="v1", kind="Node", name=name, uid=uid_of(node))
    publisher.publish(name, cards, owner=owner, in_use=[])
    try:
        ask = Asker(kube, namespace, name)
        one_g = (f'{ATTR}.migProfile == "1g.6gb"',)
        pinned = ask(
            "pinned", classes["mig"], card="0000:5d:00.0", extra=(*one_g, f"{ATTR}.placementStart == 3")
        )
        assert pinned == "gpu-0000-5d-00-0-mig-14-3"
        result = publisher.publish(name, cards, owner=owner, in_use=[pinned])
        assert result.changed
        _wait(
            lambda: {rs.spec.pool.generation for rs in _slices(kube, name)} == {result.generation},
            f"node {name}'s pool at generation {result.generation}",
        )
        time.sleep(0.5)  # the scheduler's informer
        assert ask("follows", classes["mig"], card=None, extra=one_g) == "gpu-0000-5d-00-0-mig-14-2"
        assert not publisher.publish(name, cards, owner=owner, in_use=[pinned]).changed
    finally:
        publisher.publish(name, [])
        with contextlib.suppress(NotFoundError):
            kube.delete(NODE, name)


def test_vgpus_fill_a_card_by_memory_and_exclude_the_whole_card(
    kube: KubeClient, namespace: str, publisher: SlicePublisher, unique: str, classes: dict[str, str]
) -> None:
    name = f"gpu-pub-{unique}-v"
    node = create_ready_node(kube, name, labels={NODE_LABEL: name})
    t4 = Card(
        physical_gpu=f"{name}-0-10de-1eb8",
        pci_address=T4,
        product_name="Tesla T4",
        device="tesla-t4",
        memory_mib=15360,
        vgpu_types=(
            VgpuTypeSpec("nvidia-233", "GRID T4-8Q", 8192, 2),
            VgpuTypeSpec("nvidia-232", "GRID T4-4Q", 4096, 4),
        ),
    )
    owner = V1OwnerReference(api_version="v1", kind="Node", name=name, uid=uid_of(node))
    publisher.publish(name, [build_offers(t4)], owner=owner)
    try:
        ask = Asker(kube, namespace, name)
        q8 = (f'{ATTR}.vgpuType == "GRID T4-8Q"',)
        assert ask("vm-1", classes["vgpu"], card=T4, extra=q8) == "gpu-0000-3b-00-0-vgpu-233-0"
        assert ask("vm-2", classes["vgpu"], card=T4, extra=q8) == "gpu-0000-3b-00-0-vgpu-233-1"
        ask.unschedulable("vm-3", classes["vgpu"], card=T4)  # the card's memory is spent: not even a 4Q
        ask.unschedulable("whole", classes["physical"], card=T4)  # a card with vGPUs is never given whole
    finally:
        publisher.publish(name, [])
        with contextlib.suppress(NotFoundError):
            kube.delete(NODE, name)


class Asker:
    """Creates a claim and a Pod that uses it on one node, and waits for the scheduler's verdict."""

    def __init__(self, kube: KubeClient, namespace: str, node: str) -> None:
        self.kube, self.namespace, self.node = kube, namespace, node

    def __call__(
        self, name: str, cls: str, *, card: str | None, share: str | None = None, extra: tuple[str, ...] = ()
    ) -> str:
        self._create(name, cls, card=card, share=share, extra=extra)
        _wait(lambda: self._pod_state(name) == "bound", f"pod {name} bound")
        claim = self.kube.get(RESOURCE_CLAIM, name, self.namespace)
        (result,) = allocation_results(claim)
        assert result.pool == f"gpus/{self.node}"
        return str(result.device)

    def consumed(self, name: str) -> dict[str, str]:
        claim = self.kube.get(RESOURCE_CLAIM, name, self.namespace)
        (result,) = allocation_results(claim)
        return dict(result.consumed_capacity or {})

    def unschedulable(self, name: str, cls: str, *, card: str, share: str | None = None) -> None:
        self._create(name, cls, card=card, share=share, extra=())
        _wait(lambda: self._pod_state(name) == "unschedulable", f"pod {name} unschedulable")
        pod = self.kube.get(POD, name, self.namespace)
        messages = [c.message or "" for c in status_of(pod).conditions or [] if c.type == "PodScheduled"]
        assert any("cannot allocate all claims" in m for m in messages), messages
        claim = self.kube.get(RESOURCE_CLAIM, name, self.namespace)
        assert claim.status is None or claim.status.allocation is None

    def _create(
        self, name: str, cls: str, *, card: str | None, share: str | None, extra: tuple[str, ...]
    ) -> None:
        selectors = [*([f'{ATTR}.pciAddress == "{card}"'] if card else []), *extra]
        request = V1ExactDeviceRequest(
            device_class_name=cls,
            selectors=[V1DeviceSelector(cel=V1CELDeviceSelector(expression=e)) for e in selectors],
            capacity=V1CapacityRequirements(requests={"sharePercent": share}) if share else None,
        )
        claim = ResourceV1ResourceClaim(
            metadata=V1ObjectMeta(name=name, namespace=self.namespace),
            spec=V1ResourceClaimSpec(
                devices=V1DeviceClaim(requests=[V1DeviceRequest(name="gpu", exactly=request)])
            ),
        )
        self.kube.create(RESOURCE_CLAIM, claim)
        container = V1Container(
            name="main",
            image="registry.k8s.io/pause:3.10",
            resources=V1ResourceRequirements(claims=[CoreV1ResourceClaim(name="gpu")]),
        )
        pod = V1Pod(
            metadata=V1ObjectMeta(name=name, namespace=self.namespace),
            spec=V1PodSpec(
                containers=[container],
                node_selector={NODE_LABEL: self.node},
                resource_claims=[V1PodResourceClaim(name="gpu", resource_claim_name=name)],
            ),
        )
        self.kube.create(POD, pod)

    def _pod_state(self, name: str) -> str:
        pod = self.kube.get(POD, name, self.namespace)
        if pod.spec is not None and pod.spec.node_name:
            return "bound"
        for condition in (pod.status.conditions if pod.status else None) or []:
            if condition.type == "PodScheduled" and condition.reason == "Unschedulable":
                return "unschedulable"
        return "pending"


def _wait(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")
