"""Differential test: our allocator and the real kube-scheduler agree on what can be allocated.

Generated, seeded scenarios run through both. A scenario is a *state* — claims already allocated
(prefill) — and a *probe* claim with one to three requests: MIG instances of any size, whole
cards, time-slicing/MPS shares with a ``sharePercent``, sometimes all on one card
(``matchAttribute`` on ``pciAddress``), sometimes a ``firstAvailable`` list. For a single claim the
question "can it be allocated now, on some node?" has one answer whatever order either allocator
tries devices in (both search exhaustively), so the verdicts must be identical; the devices chosen
may differ (best fit vs first fit). Both allocations are checked for over-commitment of devices,
shared capacity and counters.

Cards are published with the real offer builder (A30, A100 40GB, H100 80GB: every profile at every
placement, shares, Physical). To keep the run short the scenarios run in parallel *slots*: each
slot has its own two nodes and DeviceClasses that select only its cards (by ``productName``), so a
slot is a cluster of its own; within a slot scenarios run one after another, and the next starts
only when the previous probe's claim is gone (the kube-controller-manager released it). The
prefill is allocated by our allocator and written to ``status.allocation`` directly, as
gpu-dra-controller writes it; the probe claim is created after it, so the scheduler's claim cache
(one ordered watch) has seen the prefill when it sees the probe.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1CapacityRequirements,
    V1CELDeviceSelector,
    V1Container,
    V1DeviceClaim,
    V1DeviceConstraint,
    V1DeviceRequest,
    V1DeviceSelector,
    V1DeviceSubRequest,
    V1ExactDeviceRequest,
    V1ObjectMeta,
    V1Pod,
    V1PodResourceClaim,
    V1PodSpec,
    V1ResourceClaimSpec,
    V1ResourceClaimStatus,
    V1ResourceRequirements,
    V1ResourceSlice,
)
from testutil.integration.dra_objects import DRIVER, create_ready_node, device_class
from testutil.integration.scheduler_release import scheduler_places_shares
from testutil.k8s_fields import allocation_results, name_of, present, spec_of

from pkg.dra.allocator import Allocator, FirstFit, Unschedulable, parse_quantity
from pkg.dra.model.card import Card, Engines, MigProfileSpec, Placement
from pkg.dra.model.offers import build_offers
from pkg.dra.model.slices import build_slices, read_server_version
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NODE, POD, RESOURCE_CLAIM, RESOURCE_SLICE

pytestmark = pytest.mark.dra_api

SLOTS, SCENARIOS_PER_SLOT, SEED = 8, 40, 20261121
A = f'device.attributes["{DRIVER}"]'

# model: (MiB, MIG profiles as (id, name, MiB, compute slices, placement size, starts, SMs,
# copy engines, decoders)); the best estimates of test/fixtures/facts/mig-profiles.yaml
MODELS = {
    "a30": (24576, [
        (14, "1g.6gb", 5952, 1, 1, (0, 1, 2, 3), 14, 1, 1),
        (5, "2g.12gb", 11968, 2, 2, (0, 2), 28, 2, 2),
        (0, "4g.24gb", 24192, 4, 4, (0,), 56, 4, 4),
    ]),
    "a100-40gb": (40960, [
        (19, "1g.5gb", 4864, 1, 1, (0, 1, 2, 3, 4, 5, 6), 14, 1, 0),
        (15, "1g.10gb", 9984, 1, 2, (0, 2, 4, 6), 14, 1, 1),
        (14, "2g.10gb", 9984, 2, 2, (0, 2, 4), 28, 2, 1),
        (9, "3g.20gb", 20096, 3, 4, (0, 4), 42, 3, 2),
        (5, "4g.20gb", 20096, 4, 4, (0,), 56, 4, 2),
        (0, "7g.40gb", 40448, 7, 8, (0,), 98, 7, 5),
    ]),
    "h100": (81559, [
        (19, "1g.10gb", 9984, 1, 1, (0, 1, 2, 3, 4, 5, 6), 16, 1, 1),
        (15, "1g.20gb", 20096, 1, 2, (0, 2, 4, 6), 26, 1, 1),
        (14, "2g.20gb", 20096, 2, 2, (0, 2, 4), 32, 2, 2),
        (9, "3g.40gb", 40448, 3, 4, (0, 4), 60, 3, 3),
        (5, "4g.40gb", 40448, 4, 4, (0,), 64, 4, 4),
        (0, "7g.80gb", 81152, 7, 8, (0,), 132, 8, 7),
    ]),
}  # fmt: skip
NODES = (
    ("n0", (("a30", "0000:02:00.0"), ("h100", "0000:03:00.0"))),
    ("n1", (("a100-40gb", "0000:04:00.0"),)),
)
KINDS = {  # class suffix -> selector (the slot's productName guard is added per slot)
    "mig-1g": f'{A}.deviceType == "MIG" && {A}.migProfile.startsWith("1g.")',
    "mig-2g": f'{A}.deviceType == "MIG" && {A}.migProfile.startsWith("2g.")',
    "mig-3g": f'{A}.deviceType == "MIG" && {A}.migProfile.startsWith("3g.")',
    "mig-4g": f'{A}.deviceType == "MIG" && {A}.migProfile.startsWith("4g.")',
    "mig-7g": f'{A}.deviceType == "MIG" && {A}.migProfile.startsWith("7g.")',
    "physical": f'{A}.deviceType == "Physical" && {A}.sharingStrategy == "Exclusive"',
    "ts": f'{A}.deviceType == "Physical" && {A}.sharingStrategy == "TimeSlicing"',
    "mps": f'{A}.deviceType == "Physical" && {A}.sharingStrategy == "MPS"',
}
SHARED = ("ts", "mps")


def card(model: str, pci: str, slot: int) -> Card:
    mib, table = MODELS[model]
    profiles = tuple(
        MigProfileSpec(pid, name, pmib, compute, tuple(Placement(s, size) for s in starts),
                       Engines(multiprocessors=sm, copy_engines=ce, decoders=dec))
        for pid, name, pmib, compute, size, starts, sm, ce, dec in table
    )  # fmt: skip
    return Card(physical_gpu=f"s{slot}-{model}", pci_address=pci, product_name=f"slot-{slot} {model}",
                device=model, memory_mib=mib, mig_profiles=profiles)  # fmt: skip


class Slot:
    """Two nodes and the classes that select only their cards."""

    def __init__(self, kube: KubeClient, index: int, unique: str) -> None:
        self.kube, self.index, self.prefix = kube, index, f"s{index}-{unique}"
        self.nodes = [f"diff-{self.prefix}-{n}" for n, _ in NODES]
        self.slices: list[V1ResourceSlice] = []
        layout = read_server_version(kube).layout  # the layout the server's version wants
        # 1.34's scheduler cannot place shares (testutil.integration.scheduler_release): there the
        # verdicts are compared on the other kinds only.
        self.kinds = [k for k in KINDS if k not in SHARED or scheduler_places_shares(kube)]
        for node, (_, cards) in zip(self.nodes, NODES, strict=True):
            create_ready_node(kube, node)
            offers = [build_offers(card(model, pci, index)) for model, pci in cards]
            for rs in build_slices(node=node, cards=offers, generation=1, layout=layout):
                self.slices.append(kube.create(RESOURCE_SLICE, rs))
        guard = f'device.driver == "{DRIVER}" && {A}.productName.startsWith("slot-{index} ")'
        self.classes = {
            self.cls(kind): kube.create(DEVICE_CLASS, device_class(self.cls(kind), cel=f"{guard} && {sel}"))
            for kind, sel in KINDS.items()
        }

    def cls(self, kind: str) -> str:
        return f"{self.prefix}-{kind}"

    def delete(self) -> None:
        for name in self.classes:
            self.kube.delete(DEVICE_CLASS, name)
        for rs in self.slices:
            self.kube.delete(RESOURCE_SLICE, name_of(rs))
        for node in self.nodes:
            self.kube.delete(NODE, node)


def request(name: str, slot: Slot, rng: random.Random) -> V1DeviceRequest:
    kind = rng.choice(slot.kinds)
    if rng.random() < 0.15:  # a prioritised list: the largest first
        subs = [
            V1DeviceSubRequest(name=f"{k}", device_class_name=slot.cls(k))
            for k in ("mig-7g", "mig-3g", "mig-1g")
        ]
        return V1DeviceRequest(name=name, first_available=subs)
    capacity = None
    if kind in SHARED:
        capacity = V1CapacityRequirements(requests={"sharePercent": str(rng.choice((10, 30, 50, 70, 100)))})
    count = 1 if kind in SHARED or kind == "mig-7g" else rng.choice((1, 1, 1, 1, 2, 3))
    exactly = V1ExactDeviceRequest(device_class_name=slot.cls(kind), count=count, capacity=capacity)
    return V1DeviceRequest(name=name, exactly=exactly)


def new_claim(
    name: str, namespace: str, slot: Slot, rng: random.Random, requests: int
) -> ResourceV1ResourceClaim:
    reqs = [request(f"r{i}", slot, rng) for i in range(requests)]
    constraints = None
    if requests > 1 and rng.random() < 0.3:
        constraints = [V1DeviceConstraint(match_attribute=f"{DRIVER}/pciAddress")]
    if rng.random() < 0.1:  # a claim-level selector: only the A30/H100 node's models
        model = V1DeviceSelector(cel=V1CELDeviceSelector(expression=f'{A}.device != "a100-40gb"'))
        for r in reqs:
            if r.exactly is not None:
                r.exactly.selectors = [model]
    return ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name=name, namespace=namespace),
        spec=V1ResourceClaimSpec(devices=V1DeviceClaim(requests=reqs, constraints=constraints)),
    )


def overcommitted(slices: list[V1ResourceSlice], claims: list[ResourceV1ResourceClaim]) -> list[str]:
    """Devices held twice, shared capacity or counters beyond what the slices publish."""
    devices = {(rs.spec.pool.name, d.name): d for rs in slices for d in rs.spec.devices or ()}
    free = {
        (rs.spec.pool.name, cs.name, n): parse_quantity(c.value).nanos
        for rs in slices
        for cs in rs.spec.shared_counters or ()
        for n, c in cs.counters.items()
    }
    exclusive: set[tuple[str, str]] = set()
    shared: dict[tuple[str, str, str], int] = {}
    problems = []
    for c in claims:
        for r in allocation_results(c):
            key, device = (r.pool, r.device), devices[(r.pool, r.device)]
            if key in exclusive or (r.share_id is None and any(k[:2] == key for k in shared)):
                problems.append(f"{key} allocated twice")
            first_use = key not in exclusive and not any(k[:2] == key for k in shared)
            if r.share_id is None:
                exclusive.add(key)
            for name, value in (r.consumed_capacity or {"": "0"}).items():
                shared[(*key, name)] = shared.get((*key, name), 0) + parse_quantity(value).nanos
                if name and shared[(*key, name)] > parse_quantity(present(device.capacity)[name].value).nanos:
                    problems.append(f"{key} capacity {name} over-committed")
            for usage in device.consumes_counters or () if first_use else ():
                for name, counter in usage.counters.items():
                    free[(r.pool, usage.counter_set, name)] -= parse_quantity(counter.value).nanos
    problems += [f"counter {k} over-committed" for k, v in free.items() if v < 0]
    return problems


@dataclass
class Outcome:
    name: str
    ours: bool
    scheduler: bool
    problems: list[str]


def wait_scheduled(kube: KubeClient, namespace: str, pod: str, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = kube.get(POD, pod, namespace)
        if spec_of(p).node_name:
            return True
        for cond in (p.status.conditions if p.status else None) or ():
            message = cond.message or ""
            # "not found": the scheduler saw the Pod before its claim; it retries once the claim arrives.
            verdict = "cannot allocate all claims" in message and "not found" not in message
            if cond.type == "PodScheduled" and cond.reason == "Unschedulable" and verdict:
                return False
        time.sleep(0.05)
    raise AssertionError(f"pod {namespace}/{pod} neither bound nor unschedulable in {timeout}s")


def run_scenario(kube: KubeClient, namespace: str, slot: Slot, n: int, rng: random.Random) -> Outcome:
    name = f"{slot.prefix}-{n}"
    prefill: list[ResourceV1ResourceClaim] = []
    filler = Allocator(strategy=FirstFit()) if rng.random() < 0.5 else Allocator()
    for i in range(rng.randrange(0, 7)):
        c = new_claim(f"{name}-pre{i}", namespace, slot, rng, requests=1)
        result = filler.allocate(c, slices=slot.slices, classes=slot.classes, allocated_claims=prefill)
        if isinstance(result, Unschedulable):
            continue
        created = kube.create(RESOURCE_CLAIM, c)
        created.status = V1ResourceClaimStatus(allocation=result)
        prefill.append(kube.update_status(RESOURCE_CLAIM, created))
    probe = new_claim(f"{name}-probe", namespace, slot, rng, requests=rng.choice((1, 1, 1, 2, 2, 3)))
    ours = Allocator().allocate(probe, slices=slot.slices, classes=slot.classes, allocated_claims=prefill)
    assert not (isinstance(ours, Unschedulable) and ours.fatal), ours
    problems = []
    if isinstance(ours, V1AllocationResult):
        mine = probe.model_copy(deep=True)
        mine.status = V1ResourceClaimStatus(allocation=ours)
        problems += [f"ours: {p}" for p in overcommitted(slot.slices, [*prefill, mine])]
    kube.create(RESOURCE_CLAIM, probe)
    pod = V1Pod(
        metadata=V1ObjectMeta(name=name, namespace=namespace),
        spec=V1PodSpec(
            resource_claims=[V1PodResourceClaim(name="gpus", resource_claim_name=f"{name}-probe")],
            containers=[V1Container(name="main", image="registry.k8s.io/pause:3.10",
                                    resources=V1ResourceRequirements(claims=[{"name": "gpus"}]))],
        ),
    )  # fmt: skip
    kube.create(POD, pod)
    bound = wait_scheduled(kube, namespace, name)
    if bound:
        theirs = kube.get(RESOURCE_CLAIM, f"{name}-probe", namespace)
        problems += [f"scheduler: {p}" for p in overcommitted(slot.slices, [*prefill, theirs])]
    cleanup(kube, namespace, name, [name_of(c) for c in prefill])
    return Outcome(name, isinstance(ours, V1AllocationResult), bound, problems)


def cleanup(kube: KubeClient, namespace: str, name: str, prefill: list[str]) -> None:
    kube.delete(RESOURCE_CLAIM, f"{name}-probe", namespace)
    body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    kube.raw("DELETE", POD.object_path(name, namespace), body=body)  # no kubelet: delete at once
    for claim in prefill:
        kube.delete(RESOURCE_CLAIM, claim, namespace)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the controller-manager releases the probe, then it goes
        try:
            kube.get(RESOURCE_CLAIM, f"{name}-probe", namespace)
        except NotFoundError:
            return
        time.sleep(0.05)
    raise AssertionError(f"claim {namespace}/{name}-probe was not released and deleted")


def run_slot(kube: KubeClient, namespace: str, slot: Slot) -> list[Outcome]:
    rng = random.Random(SEED + slot.index)
    return [run_scenario(kube, namespace, slot, n, rng) for n in range(SCENARIOS_PER_SLOT)]


def test_feasibility_verdicts_match_the_scheduler(kube: KubeClient, namespace: str, unique: str) -> None:
    started = time.monotonic()
    slots = [Slot(kube, i, unique) for i in range(SLOTS)]
    try:
        with ThreadPoolExecutor(SLOTS) as pool:
            outcomes = [o for batch in pool.map(lambda s: run_slot(kube, namespace, s), slots) for o in batch]
    finally:
        for slot in slots:
            slot.delete()
    mismatches = [o for o in outcomes if o.ours != o.scheduler]
    problems = [(o.name, p) for o in outcomes for p in o.problems]
    feasible = sum(o.ours for o in outcomes)
    print(f"\n{len(outcomes)} scenarios in {time.monotonic() - started:.0f}s: {feasible} feasible, "
          f"{len(outcomes) - feasible} infeasible, {len(mismatches)} mismatches")  # fmt: skip
    assert len(outcomes) >= 200
    assert not mismatches, [(o.name, "ours" if o.ours else "scheduler") for o in mismatches]
    assert not problems, problems
    assert feasible >= 40
    assert len(outcomes) - feasible >= 40
