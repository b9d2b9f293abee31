"""Table 2: packing on a fragmenting MIG workload, as a fraction of the offline optimum.

The cluster: one node with two each of H100 80GB, A100 40GB and A30 (the offer tests' models,
``test/unit/dra/offers/offer_models.py``), every MIG profile at every placement published as the
gpu-handler publishes it. The workload: a seeded sequence of arrivals of 1g/2g/3g/4g/7g requests
(a DeviceClass per size: any profile whose name starts with it, on whichever card has one) and
releases of a random live request. Counted: requests satisfied before the first failure, for

* **kube-scheduler, searched**: the real scheduler allocating each request's claim for a Pod, on
  our slices as published (it has no device scoring and takes the first device that fits, in
  slice order, so this order is what packs): the order ``packing_order.py`` searched;
* **kube-scheduler, before**: the same on the order we published before the search (smallest
  instances first, placements from the highest start down, cards in PCI order);
* **kube-scheduler, NVML**: the same on slices whose MIG placements are listed as NVML lists them
  (ascending start), cards in PCI order, as drivers that publish NVML's list do;
* **best fit**: ``pkg.dra.allocator`` with ``BestFit``, as gpu-dra-controller allocates;
* **optimum**: the exact search of ``packing_search`` on the same sequence.

The scheduler runs are real: a claim and a Pod per arrival, the next event only after the Pod is
bound, and a release deletes the Pod and its claim and waits until the kube-controller-manager has
released it. Each (node, seed, order) runs on its own node with DeviceClasses that see only that node's
cards (a ``productName`` prefix), so the runs go on side by side on one control plane.

Beside the mixed node, every card model of the MIG tables alone (a node of two of its cards, the
workload restricted to the sizes it has): the models over 20 seeds and, in the full run, the real
scheduler on a few seeds.
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1CELDeviceSelector,
    V1DeviceClass,
    V1DeviceClassSpec,
    V1DeviceSelector,
    V1Namespace,
    V1ObjectMeta,
    V1ResourceClaimStatus,
    V1ResourceSlice,
)
from testutil.unit.dra.offers.offer_models import card

from bench.bench_cluster import BenchPlane, bench_plane, wait_for
from bench.packing_first_fit import Node, Rank, satisfied
from bench.packing_order import card_of
from bench.packing_search import Event, Optimum, optimum
from bench.packing_workloads import BENCH, Workload
from bench.scheduler_bench import claim_for, pod_for
from pkg.backends.nvidia.profiles import all_models
from pkg.devcluster.nodes import create_ready_node
from pkg.dra.allocator import Allocator, BestFit, FirstFit, Strategy, Unschedulable
from pkg.dra.model.card import Card
from pkg.dra.model.fill_order import fill_rank
from pkg.dra.model.offer_order import by_pci, mig_position, node_order, nvml_position, previous_position
from pkg.dra.model.offers import CardOffers, build_offers
from pkg.dra.model.slices import Layout, build_slices
from pkg.dra.publisher import KubeSliceReader, SlicePublisher
from pkg.framework.client import KubeClient, NotFoundError
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NAMESPACE, POD, RESOURCE_CLAIM, RESOURCE_SLICE

DRIVER = "gpu.deckhouse.io"
A = f'device.attributes["{DRIVER}"]'
SIZES = tuple(size for size, _ in BENCH.weights)
MIXED = (
    ("H100", "0000:18:00.0"),
    ("A100-40GB", "0000:2a:00.0"),
    ("A30", "0000:3a:00.0"),
    ("H100", "0000:5d:00.0"),
    ("A100-40GB", "0000:9a:00.0"),
    ("A30", "0000:ab:00.0"),
)
NAMESPACE_NAME = "packing"
FILL = "fill"  # the fill-following order: the searched order re-ranked by what is in use
ORDERS = (FILL, "searched", "before", "NVML")  # table 2's orders; "fill" is what we publish


@dataclass(frozen=True)
class Bench:
    """One node of the table: its cards (PCI order) and the workload on the sizes they serve."""

    name: str
    cards: tuple[Card, ...]
    workload: Workload

    def offers(self, order: str, tag: str = "") -> list[CardOffers]:
        """The cards' offers in ``order``; ``tag`` prefixes their product names, so a slot's
        classes see only them."""
        position = {
            FILL: mig_position,
            "searched": mig_position,
            "before": previous_position,
            "NVML": nvml_position,
        }[order]
        return [
            build_offers(replace(c, product_name=f"{tag}{c.product_name}") if tag else c, order=position)
            for c in self.cards
        ]

    def slices(
        self, order: str, node: str, tag: str = "", in_use: Collection[str] = ()
    ) -> list[V1ResourceSlice]:
        """The slices in ``order``; for :data:`FILL`, given the device names ``in_use``."""
        arrange = node_order if order in (FILL, "searched") else by_pci
        return build_slices(
            node=node,
            cards=self.offers(order, tag),
            generation=1,
            layout=Layout.SEPARATE,
            arrange=arrange,
            in_use=in_use if order == FILL else None,
        )

    def follow(self) -> Rank:
        """The fill-following ranks given the names in use, as the publisher computes them."""
        offers = {c.card.pci_address: c for c in self.offers(FILL)}
        static = [offers[c.pci_address] for c in node_order([c.card for c in offers.values()])]
        return lambda names: fill_rank(static, names)

    def sequence(self, seed: int) -> list[Event]:
        return self.workload.sequence(seed)


def mixed() -> Bench:
    """Table 2's node: two each of H100 80GB, A100 40GB and A30, the bench workload."""
    return Bench("mixed", tuple(card(model, pci) for model, pci in MIXED), BENCH)


def alone() -> list[Bench]:
    """Every model of the MIG tables on a node of two, the workload on the sizes it has."""
    out: dict[str, Bench] = {}
    for facts in all_models():
        cards = (card_of(facts, "0000:18:00.0"), card_of(facts, "0000:5d:00.0"))
        sizes = frozenset(p.name.split(".")[0] for p in cards[0].mig_profiles)
        workload = BENCH.on(sizes)
        if workload is not None:
            out.setdefault(facts.key, Bench(facts.key, cards, workload))
    return list(out.values())


def device_class(name: str, size: str, tag: str = "") -> V1DeviceClass:
    cel = f'device.driver == "{DRIVER}" && {A}.deviceType == "MIG" && {A}.migProfile.startsWith("{size}.")'
    if tag:
        cel += f' && {A}.productName.startsWith("{tag}")'
    selector = V1DeviceSelector(cel=V1CELDeviceSelector(expression=cel))
    return V1DeviceClass(metadata=V1ObjectMeta(name=name), spec=V1DeviceClassSpec(selectors=[selector]))


def in_process(strategy: Strategy, bench: Bench, events: Sequence[Event], order: str = "searched") -> int:
    """Our allocator on the sequence, on the bench's slices in ``order`` (:data:`FILL`: slices
    published again after every arrival and release, given the devices in use)."""

    versions = itertools.count(1)

    def published(in_use: Collection[str]) -> list[V1ResourceSlice]:
        slices = bench.slices(order, "pack", in_use=in_use)
        version = str(next(versions))  # a new version: the allocator's pool cache sees the new order
        for rs in slices:
            assert rs.metadata is not None
            rs.metadata.resource_version = version
        return slices

    slices = published(())
    classes = {f"mig-{s}": device_class(f"mig-{s}", s) for s in SIZES}
    allocator = Allocator(strategy=strategy)
    live: dict[int, ResourceV1ResourceClaim] = {}
    for e in events:
        if order == FILL:
            slices = published([d for c in live.values() for d in allocated_devices(c)])
        if e.release is not None:
            live.pop(e.release)
            continue
        c = claim_for(f"a{e.index}", "x", f"mig-{e.size}")
        assert c.metadata is not None
        c.metadata.uid = f"uid-{e.index}"
        outcome = allocator.allocate(c, slices=slices, classes=classes, allocated_claims=list(live.values()))
        if isinstance(outcome, Unschedulable):
            return len([x for x in events[: events.index(e)] if x.release is None])
        c.status = V1ResourceClaimStatus(allocation=outcome)
        live[e.index] = c
    return len([x for x in events if x.release is None])


def allocated_devices(claim: ResourceV1ResourceClaim) -> list[str]:
    """The device names a claim's allocation holds."""
    allocation = claim.status.allocation if claim.status else None
    results = allocation.devices.results if allocation and allocation.devices else None
    return [r.device for r in results or ()]


class Slot:
    """One node with the bench's cards in one order and one class per size that sees only them."""

    def __init__(self, kube: KubeClient, name: str, *, bench: Bench, order: str) -> None:
        self.kube, self.name = kube, name
        self.tag = tag = f"{name} "
        self.bench, self.order = bench, order
        self.in_use: dict[str, list[str]] = {}  # claim name -> its devices, as Prepare records them
        create_ready_node(kube, name)
        if order == FILL:  # published as the gpu-handler publishes: SlicePublisher, fill order
            self.publisher = SlicePublisher(kube=kube, reader=KubeSliceReader(kube), layout=Layout.SEPARATE)
            self.republish()
        else:
            for rs in bench.slices(order, name, tag):
                kube.create(RESOURCE_SLICE, rs)
        for size in SIZES:
            kube.create(DEVICE_CLASS, device_class(self.cls(size), size, tag))

    def cls(self, size: str) -> str:
        return f"{self.name}-mig-{size}"

    def republish(self) -> None:
        """What the gpu-handler does once Prepare or Unprepare changed the devices in use: publish
        the node's slices in the fill-following order, then give the scheduler's informer a moment
        (it decides the next Pod on the order it has seen; there is no way to ask which)."""
        in_use = [d for devices in self.in_use.values() for d in devices]
        result = self.publisher.publish(self.name, self.bench.offers(FILL, self.tag), in_use=in_use)
        if result.changed:
            wait_for(
                lambda: self._published(result.generation),
                what=f"node {self.name}'s slices at generation {result.generation}",
                timeout=30,
                every=0.02,
            )
            time.sleep(0.2)

    def _published(self, generation: int) -> bool:
        slices, _ = self.kube.list(RESOURCE_SLICE, field_selector=f"spec.nodeName={self.name}")
        return bool(slices) and all(rs.spec.pool.generation == generation for rs in slices)

    def run(self, events: Sequence[Event]) -> int:
        satisfied = 0
        for e in events:
            if e.release is not None:
                name = f"{self.name}-{e.release}"
                self._release(name)
                if self.order == FILL:
                    self.in_use.pop(name, None)
                    self.republish()
                continue
            name = f"{self.name}-{e.index}"
            c = claim_for(name, NAMESPACE_NAME, self.cls(e.size))
            self.kube.create(RESOURCE_CLAIM, c)
            self.kube.create(POD, pod_for(c))
            if not self._scheduled(name):
                return satisfied
            satisfied += 1
            if self.order == FILL:
                self.in_use[name] = allocated_devices(self.kube.get(RESOURCE_CLAIM, name, NAMESPACE_NAME))
                self.republish()
        return satisfied

    def _scheduled(self, name: str, grace: float = 4.0) -> bool:
        """Bound, or unschedulable for ``grace`` seconds (a Pod created right after a release can
        meet a scheduler whose claim cache has not seen the release yet; it retries on the event)."""
        refused_at: float | None = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            pod = self.kube.get(POD, name, NAMESPACE_NAME)
            if pod.spec is not None and pod.spec.node_name:
                return True
            for cond in (pod.status.conditions if pod.status else None) or ():
                message = cond.message or ""
                if (
                    cond.type == "PodScheduled"
                    and cond.reason == "Unschedulable"
                    and "not found" not in message
                ):
                    refused_at = refused_at or time.monotonic()
            if refused_at is not None and time.monotonic() - refused_at > grace:
                return False
            time.sleep(0.05)
        raise TimeoutError(f"Pod {NAMESPACE_NAME}/{name} neither bound nor unschedulable in 120s")

    def _release(self, name: str) -> None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        self.kube.raw("DELETE", POD.object_path(name, NAMESPACE_NAME), body=body)  # no kubelet
        self.kube.delete(RESOURCE_CLAIM, name, NAMESPACE_NAME)

        def gone() -> bool:
            try:
                self.kube.get(RESOURCE_CLAIM, name, NAMESPACE_NAME)
            except NotFoundError:
                return True
            return False

        wait_for(gone, what=f"claim {NAMESPACE_NAME}/{name} released and deleted", timeout=60, every=0.05)


Job = tuple[str, int, str]  # bench name, seed, order


def scheduler_runs(bp: BenchPlane, jobs: Sequence[tuple[Bench, int, str]]) -> dict[Job, int]:
    """The real scheduler on every (bench, seed, order), side by side on one control plane."""
    bp.kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name=NAMESPACE_NAME)))
    wait_for(
        lambda: "default" in bp.plane.kubectl("get", "sa", "-n", NAMESPACE_NAME, "-o", "name"),
        what="the namespace's service account",
        timeout=60,
    )
    slots = {
        (b.name, seed, order): (
            Slot(
                bp.kube, f"p-{b.name.lower().replace('_', '-')}-{seed}-{order.lower()}", bench=b, order=order
            ),
            b.sequence(seed),
        )
        for b, seed, order in jobs
    }
    with ThreadPoolExecutor(min(len(slots), 16)) as pool:
        futures = {job: pool.submit(slot.run, events) for job, (slot, events) in slots.items()}
        return {job: f.result() for job, f in futures.items()}


def solve(bench: Bench, events: Sequence[Event], *, at_least: int) -> Optimum:
    """The optimum, looking a little past what the heuristics reached, and further while the
    optimum satisfies everything it looked at."""
    offers = bench.offers("searched")
    horizon = at_least + 8
    while True:
        best = optimum(offers, events, horizon=horizon)
        if best.satisfied < best.arrivals or best.arrivals < horizon:
            return best
        horizon += 8


def simulated(bench: Bench, events: Sequence[Event], order: str) -> int:
    """First fit by ``packing_first_fit`` (the search's objective) on the bench's slices; for
    :data:`FILL` re-ranked after every event by the publisher's function."""
    node = Node.from_slices(bench.slices(order, "pack"))
    return satisfied(
        node.by_size(), node.capacities, events, follow=bench.follow() if order == FILL else None
    )


MODEL_ROWS = ("first fit, fill", "first fit, searched", "first fit, before", "first fit, NVML", "best fit")


def model_totals(bench: Bench, seeds: Sequence[int]) -> tuple[dict[str, int], int, bool, bool]:
    """Per strategy the requests satisfied over ``seeds``, the optimum's, whether every optimum
    was proven, and whether the search's simulation agreed with our allocator everywhere."""
    sums = dict.fromkeys(MODEL_ROWS, 0)
    optimal, exact, agree = 0, True, True
    for seed in seeds:
        events = bench.sequence(seed)
        reached = {f"first fit, {o}": simulated(bench, events, o) for o in ORDERS}
        reached["best fit"] = in_process(BestFit(), bench, events)
        checked = ORDERS if seed <= CHECKED_SEEDS else ()  # our allocator's first fit: slow on FILL
        agree &= all(in_process(FirstFit(), bench, events, o) == reached[f"first fit, {o}"] for o in checked)
        best = solve(bench, events, at_least=max(reached.values()))
        optimal, exact = optimal + best.satisfied, exact and best.exact
        for k, v in reached.items():
            sums[k] += v
    return sums, optimal, exact, agree


CHECKED_SEEDS = 5


def many_seeds(benches: Sequence[Bench], count: int) -> tuple[list[str], bool]:
    """The models (first fit = the scheduler, as the table checks) over more seeds than the real
    scheduler runs, per node: totals as fractions of the optimum's."""
    lines = [f"  seeds 1-{count} (models), fraction of the optimum's total:"]
    lines.append(f"  {'node':>22} " + " ".join(f"{k:>20}" for k in MODEL_ROWS) + f" {'optimum':>8}")
    exact = True
    for bench in benches:
        sums, optimal, proven, agree = model_totals(bench, range(1, count + 1))
        exact &= proven
        cells = " ".join(f"{f'{v} ({v / optimal:.3f})':>20}" for v in sums.values())
        note = "" if agree else "  note: the search's simulation and our allocator differ"
        lines.append(f"  {bench.name:>22} {cells} {optimal:>8}{note}")
    lines.append(
        f"  (the first-fit rows by packing_first_fit, checked against our allocator's first fit on seeds "
        f"1-{CHECKED_SEEDS})"
    )
    return lines, exact


def print_real(bench: Bench, seeds: Sequence[int], real: dict[Job, int]) -> bool:
    """One block of real-scheduler rows beside the models and the optimum; exact optimum?"""
    rows: dict[str, list[int]] = {f"kube-scheduler, {o}": [] for o in ORDERS}
    rows |= {f"first fit (model), {o}": [] for o in ORDERS}
    rows |= {"best fit": [], "optimum": []}
    exact = True
    for seed in seeds:
        events = bench.sequence(seed)
        for o in ORDERS:
            rows[f"kube-scheduler, {o}"].append(real[(bench.name, seed, o)])
            rows[f"first fit (model), {o}"].append(in_process(FirstFit(), bench, events, o))
        rows["best fit"].append(in_process(BestFit(), bench, events))
        best = solve(bench, events, at_least=max(v[-1] for k, v in rows.items() if k != "optimum" and v))
        exact &= best.exact
        rows["optimum"].append(best.satisfied)
    print(
        f"  {bench.name}: {bench.workload.name} workload on {'/'.join(w for w, _ in bench.workload.weights)}"
    )
    print(f"  {'seed':>26} " + " ".join(f"{s:>11}" for s in seeds) + f" {'total':>11}")
    opt = rows["optimum"]
    for label, values in rows.items():
        cells = " ".join(f"{f'{v} ({v / o:.2f})':>11}" for v, o in zip(values, opt, strict=True))
        print(f"  {label:>26} {cells} {f'{sum(values)} ({sum(values) / sum(opt):.2f})':>11}")
    for o in ORDERS:
        if rows[f"first fit (model), {o}"] != rows[f"kube-scheduler, {o}"]:
            print(f"  note: our first-fit model and the real scheduler differ on the {o} order")
    return exact


def main(*, quick: bool = False) -> None:
    seeds = (1, 2) if quick else tuple(range(1, 9))
    alone_seeds = () if quick else (1, 2)
    benches = alone()
    print(
        "2. packing: one node with 2 x (H100 80GB, A100 40GB, A30), seeded 1g/2g/3g/4g/7g arrivals "
        f"({'/'.join(str(w) for _, w in BENCH.weights)}%), {BENCH.release_rate:.0%} releases;"
    )
    print("  requests satisfied before the first failure (fraction of the optimum)")
    started = time.monotonic()
    jobs = [(mixed(), seed, o) for seed in seeds for o in ORDERS]
    jobs += [(b, seed, o) for b in benches for seed in alone_seeds for o in ORDERS]
    with bench_plane() as bp:
        real = scheduler_runs(bp, jobs)
    scheduler_seconds = time.monotonic() - started
    exact = print_real(mixed(), seeds, real)
    for b in benches if alone_seeds else ():
        exact &= print_real(b, alone_seeds, real)
    lines, proven = many_seeds([mixed(), *benches], 5 if quick else 20)
    print("\n".join(lines))
    print(
        f"  optimum {'exact' if exact and proven else 'NOT proven optimal (the solver hit its time limit)'}; "
        f"scheduler runs ({len(jobs)} nodes) took {scheduler_seconds:.0f}s"
    )


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
