"""Who is a member: nodes of claims allocated the domain's channel (by UID), with stable indexes."""

from __future__ import annotations

from testutil.compute_domains import UID, channel_claim

from api.gpu.v1alpha1.computedomain import DomainNode
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.gpucontroller.computedomain.internal.membership import (
    member_entries,
    member_node,
    member_nodes,
    spec_channel_config,
)


def test_allocated_claims_of_the_domain_make_their_nodes_members() -> None:
    claims = [channel_claim("a", "node-x"), channel_claim("b", "node-y"), channel_claim("c", "node-x")]
    assert member_nodes(claims, UID) == {"node-x", "node-y"}


def test_a_claim_of_another_domain_uid_or_unallocated_is_no_member() -> None:
    claims = [
        channel_claim("old", "node-x", uid="another"),
        channel_claim("pending", "node-y", allocated=False),
    ]
    assert member_nodes(claims, UID) == set()
    assert spec_channel_config(claims[1]) is not None  # still names the domain: it wakes it


def test_the_node_comes_from_the_node_selector_when_the_pool_is_not_a_node_pool() -> None:
    raw = RESOURCE_CLAIM.encode(channel_claim("a", "ignored"))
    raw["status"]["allocation"]["devices"]["results"][0]["pool"] = "shared"
    raw["status"]["allocation"]["nodeSelector"] = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-z"]}]}
        ]
    }
    assert member_node(RESOURCE_CLAIM.decode(raw)) == "node-z"


def test_staying_nodes_keep_their_entry_and_new_ones_get_a_bare_one() -> None:
    previous = [
        DomainNode(name="node-b", index=1, address="10.0.0.2", ready=True),
        DomainNode(name="node-gone", index=0, ready=True),
    ]
    after = member_entries(previous, {"node-b", "node-a"})
    assert [(n.name, n.index) for n in after] == [("node-a", None), ("node-b", 1)]
    assert after[1].address == "10.0.0.2"
    assert after[1].ready
    assert after[1] is not previous[0]  # a copy: the pass may change it, the baseline stays
