"""gpu-dra-controller as a process against the real control plane (with scheduler and KCM).

One controller runs for the module (``dra_controller_process``); every test has its own node and
classes. What is proven against the real API server and kube-controller-manager:

* a pre-provisioned claim (no Pod) is allocated: the API server accepted ``status.allocation``,
  the delete-protection finalizer and our mark are there, an ``Allocated`` event names the device;
* a claim a Pod references is left to the scheduler: we never write it, and say so with a
  ``LeftToScheduler`` event (the race with a lagging Pod cache: ``test_dra_controller_race.py``);
  a finished Pod (Succeeded or Failed) holds its claim too, until the Pod is deleted — then the
  claim is ours and is allocated;
* a claim that cannot fit gets a ``Warning AllocationFailed`` event that says its cause first
  (who holds the card), then the allocator's reason;
* deleting an allocated claim releases its device (kube-controller-manager clears the allocation
  and the finalizer) and the waiting claim gets the very same device.
"""

from __future__ import annotations

import urllib.request

import pytest
from testutil.integration.dra_controller_process import (
    ALLOCATED_BY,
    FINALIZER,
    GpuNode,
    allocated_devices,
    controller,
    events_for,
    gpu_node,
    new_claim,
    pending_pod,
    written_by_us,
)
from testutil.integration.dra_objects import DRIVER
from testutil.integration.process_helpers import eventually
from testutil.k8s_fields import (
    allocated_node_selector,
    allocation_results,
    annotations_of,
    finalizers_of,
    present,
)

from pkg.framework.client import KubeClient, PatchType
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM

__all__ = ["controller", "gpu_node"]  # fixtures, imported to be used here

pytestmark = pytest.mark.dra_api


def test_pre_provisioned_claim_is_allocated(
    kube: KubeClient, namespace: str, gpu_node: GpuNode, controller: int
) -> None:
    kube.create(RESOURCE_CLAIM, new_claim("shared", namespace, gpu_node.cls("mig")))
    devices = eventually(lambda: allocated_devices(kube, namespace, "shared"), what="the claim allocated")
    assert len(devices) == 1
    assert devices[0].startswith("gpu-0000-02-00-0-mig-14-")
    claim = kube.get(RESOURCE_CLAIM, "shared", namespace)
    assert annotations_of(claim)[ALLOCATED_BY] == "gpu-dra-controller"
    assert FINALIZER in finalizers_of(claim)
    result = allocation_results(claim)[0]
    assert (result.driver, result.pool) == (DRIVER, f"gpus/{gpu_node.name}")
    term = allocated_node_selector(claim).node_selector_terms[0]
    assert present(term.match_fields)[0].values == [gpu_node.name]
    notes = eventually(lambda: events_for(kube, namespace, "shared", "Allocated"), what="an Allocated event")
    assert f"{DRIVER}/gpus/{gpu_node.name}/{devices[0]}" in notes[0]
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{controller}/metrics", timeout=5).read().decode()
    assert f'gpu_dra_claim_allocations_total{{class="{gpu_node.cls("mig")}",deviceType="MIG"' in metrics


def test_claim_of_a_pending_pod_is_left_to_the_scheduler(
    kube: KubeClient, namespace: str, gpu_node: GpuNode, controller: int
) -> None:
    # The Pod first (no node can take it), then its claim: whether or not the controller's Pod
    # cache has seen the Pod when the claim arrives, the claim must never be written by us.
    kube.create(POD, pending_pod("waiting", namespace, "for-pod"))
    kube.create(RESOURCE_CLAIM, new_claim("for-pod", namespace, gpu_node.cls("mig")))
    # The controller has judged the claim once it says so; only then is "not written" evidence.
    [note] = eventually(
        lambda: events_for(kube, namespace, "for-pod", "LeftToScheduler"), what="a LeftToScheduler event"
    )
    assert note.startswith(f"referenced by pod {namespace}/waiting")
    assert not written_by_us(kube.get(RESOURCE_CLAIM, "for-pod", namespace))
    # The controller works: a claim without a Pod, created afterwards, is allocated, and the
    # claim of the Pod still is not (both woken by the same slice and claim events).
    kube.create(RESOURCE_CLAIM, new_claim("after", namespace, gpu_node.cls("mig")))
    eventually(lambda: allocated_devices(kube, namespace, "after"), what="the later claim allocated")
    assert not written_by_us(kube.get(RESOURCE_CLAIM, "for-pod", namespace))


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_claim_of_a_finished_pod_is_left_until_the_pod_is_deleted(
    kube: KubeClient, namespace: str, gpu_node: GpuNode, controller: int, phase: str
) -> None:
    # A finished Pod's claim is the one kube-controller-manager deallocates while the scheduler
    # hands its devices on: allocating it then races the scheduler for the same device.
    kube.create(POD, pending_pod("finished", namespace, "of-finished"))
    kube.patch(
        POD,
        "finished",
        {"status": {"phase": phase}},
        patch_type=PatchType.MERGE,
        namespace=namespace,
        subresource="status",
    )
    kube.create(RESOURCE_CLAIM, new_claim("of-finished", namespace, gpu_node.cls("mig")))
    [note] = eventually(
        lambda: events_for(kube, namespace, "of-finished", "LeftToScheduler"),
        what="a LeftToScheduler event",
    )
    assert note.startswith(f"referenced by pod {namespace}/finished")
    assert not written_by_us(kube.get(RESOURCE_CLAIM, "of-finished", namespace))
    # The Pod gone, the claim is ours: its delete event wakes the claim and it is allocated.
    kube.delete(POD, "finished", namespace)
    eventually(
        lambda: allocated_devices(kube, namespace, "of-finished"),
        what="the claim allocated once the Pod is gone",
    )


def test_no_fit_warns_and_deletion_releases_the_device(
    kube: KubeClient, namespace: str, gpu_node: GpuNode, controller: int
) -> None:
    physical = gpu_node.cls("physical")
    kube.create(RESOURCE_CLAIM, new_claim("first", namespace, physical))
    held = eventually(lambda: allocated_devices(kube, namespace, "first"), what="the first claim allocated")
    assert held == ["gpu-0000-02-00-0"]
    kube.create(RESOURCE_CLAIM, new_claim("second", namespace, physical))
    notes = eventually(
        lambda: events_for(kube, namespace, "second", "AllocationFailed"), what="an AllocationFailed event"
    )
    # the cause first, in the user's words (who holds the card), then the allocator's mechanism
    assert notes[0].startswith("request gpu: 1 asked, ")
    assert f"of claim {namespace}/first" in notes[0]  # the holder, named: same namespace
    assert "; cannot allocate all claims; request gpu: " in notes[0]
    assert "already allocated" in notes[0]
    assert allocated_devices(kube, namespace, "second") is None

    kube.delete(RESOURCE_CLAIM, "first", namespace)
    eventually(
        lambda: (
            allocated_devices(kube, namespace, "first") is None
            and allocated_devices(kube, namespace, "second") == held
        ),
        timeout=60,
        what="the released device allocated to the waiting claim",
    )
