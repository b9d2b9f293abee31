"""gpu-handler publishing's node handler alone: the first step of a publish pass, which lets the
pass go on only while the Node is in the cache and alive. Without it there is no owner for the
ResourceSlices, so nothing is published (its create event wakes the next pass); a Node being
deleted is left to the garbage collector, which removes the slices it owns. Both stop the chain
without a requeue.

The state is the real scratch state the reconciler builds; the step has no services.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from kubernetes.client import V1Node, V1ObjectMeta
from testutil.unit.gpuhandler.gpuhandler_fakes import gpu

from pkg.framework.reconcile import StopHandlerChain
from pkg.gpuhandler.publishing.handler.node import NodeHandler
from pkg.gpuhandler.publishing.state import PassMemory, PublishState

NODE = "node-1"
LOGGER = "pkg.gpuhandler.publishing.reconciler"


def node(*, uid: str | None = "node-uid", deleting: bool = False) -> V1Node:
    return V1Node(
        metadata=V1ObjectMeta(
            name=NODE, uid=uid, deletion_timestamp=datetime(2026, 1, 1, tzinfo=UTC) if deleting else None
        )
    )


def pass_over(n: V1Node | None) -> PublishState:
    """The state the reconciler reads for one pass, with ``n`` as the cached Node."""
    card = gpu()
    return PublishState(
        node_name=NODE, node=n, gpus={str(card.metadata.name): card}, entries={}, memory=PassMemory()
    )


def test_a_live_node_lets_the_pass_go_on(caplog: pytest.LogCaptureFixture) -> None:
    state = pass_over(node())

    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert NodeHandler().handle(state) is None

    assert caplog.records == []
    assert state.memory == PassMemory()
    assert state.selection is None


@pytest.mark.parametrize(
    "cached",
    [None, V1Node(metadata=None), node(uid=None), node(uid="")],
    ids=["not-cached", "no-metadata", "no-uid", "empty-uid"],
)
def test_a_node_missing_from_the_cache_stops_the_pass_and_says_so(
    cached: V1Node | None, caplog: pytest.LogCaptureFixture
) -> None:
    state = pass_over(cached)

    with (
        caplog.at_level(logging.INFO, logger=LOGGER),
        pytest.raises(StopHandlerChain, match="no Node") as stop,
    ):
        NodeHandler().handle(state)

    assert stop.value.result is None  # the Node's create event wakes the next pass
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "publishing waits for it" in record.getMessage()
    assert record.__dict__["node"] == NODE
    assert state.memory == PassMemory()  # a pass that published nothing changes no memory


def test_a_node_being_deleted_stops_the_pass_and_leaves_its_slices_to_the_collector(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = pass_over(node(deleting=True))

    with caplog.at_level(logging.INFO, logger=LOGGER), pytest.raises(StopHandlerChain) as stop:
        NodeHandler().handle(state)

    assert stop.value.reason == "Node being deleted"
    assert stop.value.result is None
    [record] = caplog.records
    assert record.levelno == logging.INFO
    assert "its slices go with it" in record.getMessage()
