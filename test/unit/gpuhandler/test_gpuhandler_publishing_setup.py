"""The publisher's wiring (this node's informers, one worker, its sources) and its layout source."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from testutil.unit.gpuhandler.gpuhandler_fakes import SYSFS, gpu

from pkg.domain.kinds import PHYSICAL_GPU
from pkg.dra.model.slices import Layout, UnsupportedServerError
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import NODE, RESOURCE_SLICE
from pkg.framework.controller.controller import Controller
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.manager.manager import Manager
from pkg.gpuhandler.publishing import PUBLISH, PUBLISH_CONTROLLER
from pkg.gpuhandler.publishing.layout import ServerLayoutPublisher
from pkg.gpuhandler.setup import GpuHandlerContainer, HandlerSettings, setup_handler


def wired(mocker: Any, *, publish: bool) -> tuple[Manager, InformerFactory, GpuHandlerContainer]:
    client = mocker.Mock(spec=KubeClient)
    client.field_manager = "gpu-handler"
    informers = InformerFactory(client)
    settings = HandlerSettings(
        node_name="node-1", backend="simulated-nvidia", sysfs_root=SYSFS / "a30-x2", publish=publish
    )
    container = GpuHandlerContainer(
        settings=settings, client=client, informers=informers, recorder=mocker.Mock(spec=EventRecorderLogger)
    )
    manager = Manager()
    setup_handler(manager, container)
    return manager, informers, container


def test_publishing_watches_only_this_nodes_objects_and_runs_one_worker(mocker: Any) -> None:
    manager, informers, container = wired(mocker, publish=True)
    scopes = {(i.kind, i.name) for i in informers.informers()}
    assert scopes == {
        (PHYSICAL_GPU, "informer-physicalgpu[gpu.deckhouse.io/node=node-1]"),
        (NODE, "informer-node[metadata.name=node-1]"),
        (RESOURCE_SLICE, "informer-resourceslice[spec.nodeName=node-1,spec.driver=gpu.deckhouse.io]"),
    }
    [controller] = [r for r in manager._runnables if getattr(r, "name", "") == PUBLISH_CONTROLLER]
    assert isinstance(controller, Controller)
    assert controller.needs_leader_election is False
    assert controller._workers == 1  # publishes of one node never overlap
    # The controller starts its sources when it runs; here each is started by hand, into the
    # controller's own listener, so the path source -> mapper -> queue is the real one.
    sources = {source.name: (source, listener) for source, listener in controller._generic_sources}
    start, start_listener = sources["start"]
    start.start(start_listener.on_generic, threading.Event())
    assert controller.queue.get() == PUBLISH  # the start-up publish
    controller.queue.done(PUBLISH)
    # A change in the card specs wakes a publish.
    cards, cards_listener = sources["card-specs"]
    stop = threading.Event()
    thread = threading.Thread(target=cards.start, args=(cards_listener.on_generic, stop))
    thread.start()
    try:
        card = container.backend().offer_inputs(gpu())
        container.card_specs().put("node-1-0-10de-20b7", card)
        deadline = time.monotonic() + 2.0
        while len(controller.queue) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join(1.0)
    assert len(controller.queue) == 1


def test_publishing_can_be_turned_off(mocker: Any) -> None:
    manager, informers, _ = wired(mocker, publish=False)
    assert [i.kind for i in informers.informers()] == [PHYSICAL_GPU]
    assert not [r for r in manager._runnables if getattr(r, "name", "") == PUBLISH_CONTROLLER]


@pytest.mark.parametrize(("minor", "layout"), [("34", Layout.INLINE), ("37+", Layout.SEPARATE)])
def test_the_layout_follows_the_server_version_read_once(mocker: Any, minor: str, layout: Layout) -> None:
    kube = mocker.Mock(spec=KubeClient)
    kube.field_manager = "gpu-handler"
    kube.raw.return_value = {"major": "1", "minor": minor}
    made = mocker.patch("pkg.gpuhandler.publishing.layout.SlicePublisher")
    reader = mocker.Mock()
    publisher = ServerLayoutPublisher(kube=kube, reader=reader)
    publisher.publish("node-1", [])
    publisher.publish("node-1", [], owner=None)
    kube.raw.assert_called_once_with("GET", "/version")
    made.assert_called_once_with(kube=kube, reader=reader, layout=layout)
    assert made.return_value.publish.call_count == 2


def test_an_unsupported_server_fails_each_publish_until_it_is_upgraded(mocker: Any) -> None:
    kube = mocker.Mock(spec=KubeClient)
    kube.field_manager = "gpu-handler"
    kube.raw.return_value = {"major": "1", "minor": "33"}
    publisher = ServerLayoutPublisher(kube=kube, reader=mocker.Mock())
    for _ in range(2):
        with pytest.raises(UnsupportedServerError, match=r"1\.33 is older than 1\.34"):
            publisher.publish("node-1", [])
    assert kube.raw.call_count == 2
