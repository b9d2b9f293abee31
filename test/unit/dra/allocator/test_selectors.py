"""Selectors: a missing attribute is an error that is reported and fails the claim, not a crash."""

from __future__ import annotations

from testutil.k8s_fields import allocation_results
from testutil.unit.dra.allocator.alloc_builders import (
    Cluster,
    a30_pool,
    allocated,
    claim,
    device_class,
    exact,
    explained,
)

from pkg.dra.model import Unschedulable

MISSING = 'device.attributes["gpu.deckhouse.io"].noSuchAttribute == "x"'


def test_missing_attribute_fails_the_claim_with_the_cel_error() -> None:
    cluster = Cluster(a30_pool(), [device_class("broken", MISSING)])

    result = cluster.allocate(claim("c", exact("r", "broken")))

    assert isinstance(result, Unschedulable)
    assert result.fatal
    assert "class broken: selector #0 on device gpu.deckhouse.io/" in result.errors[0]
    assert "CEL runtime error" in result.errors[0]
    assert "noSuchAttribute" in result.errors[0]


def test_explain_reports_the_selector_error_per_device() -> None:
    cluster = Cluster(a30_pool(), [device_class("broken", MISSING)])
    trace = explained(
        claim("c", exact("r", "broken")), slices=cluster.slices, classes=cluster.classes, allocated_claims=[]
    )
    verdicts = trace.requests[0].devices
    assert verdicts
    assert all(v.reason == "selector error" for v in verdicts)
    assert "noSuchAttribute" in verdicts[0].detail


def test_missing_domain_reads_as_empty_map() -> None:
    guarded = device_class(
        "guarded", 'has(device.attributes["nvidia.com"].mig) || device.driver == "gpu.deckhouse.io"'
    )
    cluster = Cluster(a30_pool(), [guarded])
    assert not isinstance(cluster.allocate(claim("c", exact("r", "guarded"))), Unschedulable)


def test_compile_error_is_fatal() -> None:
    cluster = Cluster(a30_pool(), [device_class("bad", 'quantity("1") < quantity("2")')])
    result = cluster.allocate(claim("c", exact("r", "bad")))
    assert isinstance(result, Unschedulable)
    assert result.fatal
    assert "CEL compile error" in result.errors[0]


def test_claim_selectors_narrow_the_class() -> None:
    cluster = Cluster(a30_pool(), [device_class("any", "true")])
    c = claim(
        "c",
        exact(
            "r",
            "any",
            selectors=(
                'device.capacity["gpu.deckhouse.io"].memory.compareTo(quantity("12Gi")) >= 0 && '
                'device.attributes["gpu.deckhouse.io"].deviceType == "MIG"',
            ),
        ),
    )
    result = cluster.allocate(c)
    assert allocation_results(allocated(result))[0].device == "gpu-0000-02-00-0-mig-2g-0"
