"""Values shared by the unit tests of gpu-dra-controller's handlers, each run alone.

``snapshot_of`` builds a claim's snapshot with the reconciler's own ``state_factory`` over an
autospecced cache reader that knows one class (``MIG_1G``); ``allocated_claim`` and ``ours`` build a
claim allocated one MIG slice; ``races`` reads a process-wide counter (tests compare deltas).
"""

from __future__ import annotations

from collections.abc import Sequence

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1AllocationResult,
    V1DeviceAllocationResult,
    V1DeviceRequestAllocationResult,
    V1ResourceClaimConsumerReference,
    V1ResourceClaimStatus,
)
from pytest_mock import MockerFixture

from pkg.domain.metrics import registry
from pkg.dracontroller.internal.names import ALLOCATED_BY, ALLOCATED_BY_US
from pkg.dracontroller.internal.service import CacheReader
from pkg.dracontroller.internal.state import ClaimSnapshot, state_factory
from testutil.k8s_fields import meta, name_of
from testutil.unit.dra.allocator.alloc_builders import DRIVER, claim, exact
from testutil.unit.dracontroller.dra_controller_fakes import our_mig_class

MIG_1G = our_mig_class("1g")


def snapshot_of(
    mocker: MockerFixture, c: ResourceV1ResourceClaim, *, pods: Sequence[str] = ()
) -> ClaimSnapshot:
    """The snapshot the reconciler builds for ``c`` from a cache that shows ``pods`` referencing it."""
    cache_reader = mocker.create_autospec(CacheReader, instance=True)
    cache_reader.referencing_pods.return_value = list(pods)
    cache_reader.classes.return_value = {name_of(MIG_1G): MIG_1G}
    return state_factory(cache_reader)(c)


def allocated_claim(*, marked: bool = True, reserved: bool = False) -> ResourceV1ResourceClaim:
    """A claim allocated a MIG 1g slice; ``marked``: with our allocated-by mark; ``reserved``: a Pod
    already holds it."""
    c = claim("train", exact("gpu", "mig-1g"))
    if marked:
        meta(c).annotations = {ALLOCATED_BY: ALLOCATED_BY_US}
    c.status = V1ResourceClaimStatus(
        allocation=V1AllocationResult(
            devices=V1DeviceAllocationResult(
                results=[
                    V1DeviceRequestAllocationResult(
                        request="gpu", driver=DRIVER, pool="gpus-node-a", device="gpu-0-mig-1g-0"
                    )
                ]
            )
        ),
        reserved_for=[V1ResourceClaimConsumerReference(resource="pods", name="web", uid="pod-uid")]
        if reserved
        else None,
    )
    return c


def ours(*, reserved: bool = False) -> ResourceV1ResourceClaim:
    """A claim we allocated (mark and allocation); ``reserved``: a Pod already holds it."""
    return allocated_claim(reserved=reserved)


def races(when: str) -> float:
    """``gpu_dra_pod_reference_races_total{when}`` now (a process-wide counter: tests compare deltas)."""
    return registry.get_sample_value("gpu_dra_pod_reference_races_total", {"when": when}) or 0.0
