"""The allocation result has the shape the API and the scheduler use."""

from __future__ import annotations

from kubernetes.client import V1AllocationResult
from testutil.k8s_fields import allocation_config, allocation_results, present
from testutil.unit.dra.allocator.alloc_builders import (
    Cluster,
    a30_pool,
    allocated,
    claim,
    device,
    device_class,
    exact,
    first_available,
    mig_class,
    resource_slice,
)

from pkg.dra.allocator import Allocator


def test_results_config_and_node_selector() -> None:
    mig = device_class(
        "mig-1g", 'device.attributes["gpu.deckhouse.io"].migProfile == "1g"', config=[{"mode": "mig"}]
    )
    cluster = Cluster(a30_pool(), [mig, mig_class("2g")])
    c = claim(
        "c",
        exact("a", "mig-1g"),
        exact("b", "mig-1g"),
        first_available("c", ("big", "mig-2g")),
        config=[(None, {"all": True}), (["b"], {"only": "b"}), (["c/big"], {"sub": True})],
    )

    result = cluster.allocate(c)

    assert isinstance(result, V1AllocationResult)
    assert [r.request for r in allocation_results(result)] == ["a", "b", "c/big"]
    assert {r.driver for r in allocation_results(result)} == {"gpu.deckhouse.io"}
    assert allocation_results(result)[0].pool == "gpus-node-a-gpu-0000-02-00-0"
    config = [
        (e.source, e.requests, present(e.opaque, "opaque").parameters) for e in allocation_config(result)
    ]
    assert config == [
        ("FromClass", ["a", "b"], {"mode": "mig"}),
        ("FromClaim", None, {"all": True}),
        ("FromClaim", ["b"], {"only": "b"}),
        ("FromClaim", ["c/big"], {"sub": True}),
    ]
    term = present(result.node_selector, "nodeSelector").node_selector_terms[0]
    assert present(term.match_fields, "matchFields")[0].to_dict() == {
        "key": "metadata.name",
        "operator": "In",
        "values": ["node-a"],
    }
    assert term.match_expressions is None


def test_class_config_used_by_every_request_applies_to_all() -> None:
    mig = device_class("mig-1g", "true", config=[{"mode": "mig"}])
    result = Cluster(a30_pool(profiles=("1g",)), [mig]).allocate(
        claim("c", exact("a", "mig-1g"), exact("b", "mig-1g"))
    )
    assert allocation_config(allocated(result))[0].requests is None


def test_network_attached_devices_need_no_node_selector() -> None:
    shared = resource_slice("net", pool="net", node=None, devices=[device("d0")])
    result = Allocator().allocate(
        claim("c", exact("r", "any")),
        slices=[shared],
        classes=[device_class("any", "true")],
        allocated_claims=[],
    )
    assert isinstance(result, V1AllocationResult)
    assert result.node_selector is None


def test_without_a_node_the_first_local_device_fixes_the_node() -> None:
    cluster = Cluster(
        a30_pool("node-a", profiles=("1g",)) + a30_pool("node-b", profiles=("1g",)), [mig_class("1g")]
    )
    result = cluster.allocate(claim("c", exact("r", "mig-1g", count=6)), node=None)
    assert not isinstance(result, V1AllocationResult)  # 4 slices per node, one node per claim
    result = cluster.allocate(claim("c", exact("r", "mig-1g", count=3)), node=None)
    assert {r.pool for r in allocation_results(allocated(result))} == {"gpus-node-a-gpu-0000-02-00-0"}
    terms = present(allocated(result).node_selector, "nodeSelector").node_selector_terms
    assert present(terms[0].match_fields, "matchFields")[0].values == ["node-a"]
