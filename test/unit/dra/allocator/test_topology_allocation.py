"""Topology in allocation: ``matchAttribute`` on pcieRoot and nvlinkDomain, best fit keeping a
multi-GPU request together, and ``explain`` naming the constraint that splits the candidates.

The pools are what gpu-handler publishes for the fixture hosts (``gpu-handler offers`` with the
simulated NVML) plus the NICs of the same hosts from the test tree's second driver
(``test/nic_driver.py``), so the attributes are the real ones.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1DeviceAllocationResult,
    V1DeviceClass,
    V1DeviceConstraint,
    V1DeviceRequestAllocationResult,
    V1ObjectMeta,
    V1ResourceClaimStatus,
    V1ResourceSlice,
)
from testutil.k8s_fields import allocation_results
from testutil.nic_driver import nic_class, nic_slice
from testutil.topology_claims import claim as new_claim
from testutil.topology_claims import gpu_with_nic, gpus_in_one_nvlink_domain, request, whole_gpu_class

from pkg.dra.allocator import AllocationInputs, Allocator, FirstFit, Unschedulable, explain
from pkg.dra.explain.render import render, summary
from pkg.gpuhandler.offline import OfflineRequest, compute_offers

SYSFS = Path(__file__).resolve().parents[3] / "fixtures" / "sysfs"
NODE = "node-a"
CLASSES: dict[str, V1DeviceClass] = {"gpu-whole": whole_gpu_class(), "nic": nic_class()}


@functools.cache
def host(scenario: str) -> tuple[V1ResourceSlice, ...]:
    """The GPU pool and the NIC pool of one fixture host."""
    gpus = compute_offers(
        OfflineRequest(node_name=NODE, sysfs_root=SYSFS / scenario, backend="simulated-nvidia")
    )
    return (*gpus.slices, nic_slice(NODE, SYSFS / scenario))


def attribute_of(
    slices: tuple[V1ResourceSlice, ...], result: V1DeviceRequestAllocationResult, name: str
) -> object:
    for rs in slices:
        for device in rs.spec.devices or ():
            if rs.spec.driver == result.driver and device.name == result.device:
                value = (device.attributes or {}).get(name)
                return None if value is None else value.string
    raise AssertionError(f"no device {result.device}")


def taken(name: str, *devices: tuple[str, str, str]) -> ResourceV1ResourceClaim:
    """Another claim, already holding ``devices`` (driver, pool, device)."""
    claim = gpu_with_nic(name, "default")
    claim.metadata = V1ObjectMeta(name=name, namespace="default", uid=f"uid-{name}")
    results = [
        V1DeviceRequestAllocationResult(request="gpu", driver=d, pool=p, device=n) for d, p, n in devices
    ]
    claim.status = V1ResourceClaimStatus(
        allocation=V1AllocationResult(devices=V1DeviceAllocationResult(results=results))
    )
    return claim


def decide(
    scenario: str,
    claim: ResourceV1ResourceClaim,
    *,
    held: tuple[ResourceV1ResourceClaim, ...] = (),
    allocator: Allocator | None = None,
) -> V1AllocationResult | Unschedulable:
    return (allocator or Allocator()).allocate(
        claim, slices=host(scenario), classes=CLASSES, allocated_claims=held
    )


GPU_POOL, NIC_POOL = ("gpu.deckhouse.io", f"gpus/{NODE}"), ("nic.test.example", f"nics/{NODE}")


@pytest.mark.parametrize(
    "allocator", [Allocator(), Allocator(strategy=FirstFit())], ids=["best-fit", "first-fit"]
)
def test_a_gpu_and_a_nic_under_one_pcie_root(allocator: Allocator) -> None:
    """The NIC under the first switch is taken: the GPU must come from the second switch too."""
    held = taken("other", (*NIC_POOL, "nic-0000-4f-00-0"))
    outcome = decide("pcie-l4-switches", gpu_with_nic("job", "default"), held=(held,), allocator=allocator)
    assert isinstance(outcome, V1AllocationResult), outcome
    results = {r.request: r for r in allocation_results(outcome)}
    assert results["nic"].device == "nic-0000-cf-00-0"
    assert results["gpu"].device in ("gpu-0000-cd-00-0", "gpu-0000-ce-00-0")
    roots = {
        attribute_of(host("pcie-l4-switches"), r, "resource.kubernetes.io/pcieRoot") for r in results.values()
    }
    assert roots == {"pci0000:ca"}


def test_every_hgx_gpu_is_paired_with_its_own_nic() -> None:
    slices = host("hgx-h100")
    outcome = decide("hgx-h100", gpu_with_nic("job", "default"))
    assert isinstance(outcome, V1AllocationResult), outcome
    gpu, nic = sorted(allocation_results(outcome), key=lambda r: r.request)
    assert attribute_of(slices, gpu, "resource.kubernetes.io/pcieRoot") == attribute_of(
        slices, nic, "resource.kubernetes.io/pcieRoot"
    )


def test_two_gpus_of_one_nvlink_domain_on_the_hgx_board() -> None:
    outcome = decide("hgx-h100", gpus_in_one_nvlink_domain("job", "default"))
    assert isinstance(outcome, V1AllocationResult), outcome
    domains = {
        attribute_of(host("hgx-h100"), r, "gpu.deckhouse.io/nvlinkDomain")
        for r in allocation_results(outcome)
    }
    assert len(allocation_results(outcome)) == 2
    assert len(domains) == 1
    assert None not in domains


def test_no_nvlink_domain_means_the_claim_stays_pending_and_explain_names_the_constraint() -> None:
    claim = gpus_in_one_nvlink_domain("job", "default")
    allocator = Allocator()
    attempt = allocator.attempt(
        claim, AllocationInputs.of(slices=host("pcie-l4-switches"), classes=CLASSES, allocated_claims=())
    )
    assert isinstance(attempt.outcome, Unschedulable)
    assert not attempt.outcome.fatal  # pending, not broken: a node with NVLink may join
    explanation = explain(attempt, allocator=allocator)
    (trace,) = explanation.constraints
    assert not trace.met
    assert trace.attribute == "gpu.deckhouse.io/nvlinkDomain"
    assert [(g.value, [(c.request, c.fitting, c.needed) for c in g.counts]) for g in trace.groups] == [
        ("(attribute missing)", [("gpus", 4, 2)])
    ]
    assert "constraint #0 matchAttribute gpu.deckhouse.io/nvlinkDomain over gpus cannot be met" in summary(
        explanation
    )
    assert "CANNOT be met" in render(explanation)


def test_explain_shows_how_the_pcie_root_splits_a_gpu_and_a_nic() -> None:
    """Only the first switch has a free GPU and only the second a free NIC."""
    held = (
        taken("a", (*GPU_POOL, "gpu-0000-cd-00-0"), (*GPU_POOL, "gpu-0000-ce-00-0")),
        taken("b", (*NIC_POOL, "nic-0000-4f-00-0")),
    )
    claim = gpu_with_nic("job", "default")
    allocator = Allocator()
    inputs = AllocationInputs.of(slices=host("pcie-l4-switches"), classes=CLASSES, allocated_claims=held)
    attempt = allocator.attempt(claim, inputs)
    assert isinstance(attempt.outcome, Unschedulable)
    (trace,) = explain(attempt, allocator=allocator).constraints
    assert not trace.met
    split = {(g.node, g.value): {c.request: c.fitting for c in g.counts} for g in trace.groups}
    assert split == {(NODE, "pci0000:4a"): {"gpu": 2, "nic": 0}, (NODE, "pci0000:ca"): {"gpu": 0, "nic": 1}}


def test_an_allocatable_claim_says_its_constraint_can_be_met() -> None:
    allocator = Allocator()
    attempt = allocator.attempt(
        gpu_with_nic("job", "default"),
        AllocationInputs.of(slices=host("hgx-h100"), classes=CLASSES, allocated_claims=()),
    )
    (trace,) = explain(attempt, allocator=allocator).constraints
    assert trace.met
    assert len([g for g in trace.groups if g.enough]) == 8  # one per root: its GPU and its NIC


def _two_cards(allocator: Allocator) -> set[str]:
    """A 2-GPU claim without constraints, with the first card of the first switch taken."""
    held = taken("other", (*GPU_POOL, "gpu-0000-4d-00-0"))
    claim = new_claim("job", "default", [request("gpus", "gpu-whole", 2)], [])
    outcome = decide("pcie-l4-switches", claim, held=(held,), allocator=allocator)
    assert isinstance(outcome, V1AllocationResult), outcome
    return {str(r.device) for r in allocation_results(outcome)}


def test_best_fit_keeps_a_multi_gpu_request_under_one_pcie_root() -> None:
    """First fit takes the next two free cards (one per switch); best fit the two that share one."""
    assert _two_cards(Allocator(strategy=FirstFit())) == {"gpu-0000-4e-00-0", "gpu-0000-cd-00-0"}
    assert _two_cards(Allocator()) == {"gpu-0000-cd-00-0", "gpu-0000-ce-00-0"}


@pytest.mark.parametrize(("count", "met"), [(2, True), (3, False)])
def test_explain_counts_distinct_roots_for_a_distinct_attribute(count: int, met: bool) -> None:
    """Spread over PCIe roots (one card per switch): the PCIe server has two roots."""
    spread = V1DeviceConstraint(requests=["gpus"], distinct_attribute="resource.kubernetes.io/pcieRoot")
    wanted = new_claim("spread", "default", [request("gpus", "gpu-whole", count)], [spread])
    allocator = Allocator()
    inputs = AllocationInputs.of(slices=host("pcie-l4-switches"), classes=CLASSES, allocated_claims=())
    attempt = allocator.attempt(wanted, inputs)
    assert isinstance(attempt.outcome, V1AllocationResult) is met
    (trace,) = explain(attempt, allocator=allocator).constraints
    assert (trace.kind, trace.met) == ("distinctAttribute", met)
    assert [g.value for g in trace.groups] == ["pci0000:4a", "pci0000:ca"]
