"""Composition root of the ResourceSlice publishing loop.

:class:`PublishingContainer` is given what the gpu-handler already has (the enrichment's card
specs, its informer of this node's PhysicalGPUs, the backend, the health tracker, the client) and
adds:

* an informer of this Node (field selector ``metadata.name``), for the owner reference and the
  ``allow-mig`` label, and one of this node's slices of our driver (field selectors
  ``spec.nodeName`` and ``spec.driver``), to notice slices deleted or edited by others. Nothing
  else is listed or watched: a node component's load must not grow with the cluster;
* through :func:`setup_publishing`, a single-worker controller running
  :class:`~pkg.gpuhandler.publishing.reconciler.PublishReconciler` for its one request, woken by
  the card specs' subscription, the health tracker's verdict changes (device taints), the
  devices in use changing (:mod:`.in_use`: the fill-following order after a Prepare), the three
  watches, the start-up and a jittered periodic resync (the reconciler's ``requeue_after``).

The existing slices are read with a LIST per publish (:class:`KubeSliceReader`) rather than from
the slice informer: a publish right after another must see the previous one's writes, or it would
give a changed pool the generation it already has.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from dependency_injector import containers, providers
from kubernetes.client import V1Device, V1Node, V1OwnerReference

from api.gpu.v1alpha1 import LABEL_NODE, PhysicalGPU
from pkg.backends import VendorBackend
from pkg.backends.nvidia.imex_host import ImexHostReader
from pkg.domain.informers import node_named, node_resource_slices
from pkg.dra.model.offers import CardOffers
from pkg.dra.model.slices import UnsupportedServerError
from pkg.dra.publisher import FieldsDroppedError, KubeSliceReader, PublishResult
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import ApiError, KubeClient
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import Controller
from pkg.framework.controller.enqueue import EnqueueRequestsFromMapFunc
from pkg.framework.controller.source import ChannelSource, StartSource
from pkg.framework.manager.manager import Manager
from pkg.gpuhandler.enrichment.card_specs import CardSpecProvider
from pkg.gpuhandler.enrichment.compute_domains import TURNED_OFF, NodeChannels
from pkg.gpuhandler.enrichment.readiness import Holds
from pkg.gpuhandler.health import HealthTracker
from pkg.gpuhandler.health.taints import device_taints
from pkg.gpuhandler.node_lock import node_lock
from pkg.gpuhandler.publishing.channels import ChannelOffers
from pkg.gpuhandler.publishing.handler.publish import Publisher
from pkg.gpuhandler.publishing.in_use import DevicesInUse, wake_if_fill_followed
from pkg.gpuhandler.publishing.layout import ServerLayoutPublisher
from pkg.gpuhandler.publishing.reconciler import PUBLISH, PublishReconciler
from pkg.gpuhandler.publishing.watches import gpu_events, node_events, slice_events

PUBLISH_CONTROLLER = "resourceslice-publisher"
# A failed publish is retried after 1 s, 2 s, 4 s, ... at most 5 minutes apart.
RETRY_BASE_SECONDS = 1.0
RETRY_MAX_SECONDS = 300.0


@dataclass(frozen=True)
class PublishSettings:
    """``node_label`` is the node's ``gpu.deckhouse.io/node`` value (a second guard on the cache)."""

    node_name: str
    node_label: str
    resync_period: float
    startup_grace: float = 30.0
    lock_path: Path | None = None  # the node lock, shared with the kubelet plugin (None: no plugin)
    lock_timeout: float = 30.0
    # IMEX channels offered to compute domains (0: none), and where the host's facts are read
    # (:mod:`pkg.backends.nvidia.imex_host`).
    imex_channels: int = 0
    proc_root: Path = Path("/proc")
    processes_proc: Path = Path("/proc")
    host_root: Path = Path("/")


class LockedPublisher:
    """Publishes under the node lock, so two gpu-handler instances never publish at once."""

    def __init__(self, *, publisher: ServerLayoutPublisher, lock_path: Path, timeout: float) -> None:
        self._publisher = publisher
        self._lock_path = lock_path
        self._timeout = timeout

    def publish(
        self,
        node: str,
        cards: Sequence[CardOffers],
        *,
        owner: V1OwnerReference | None = None,
        in_use: Collection[str] | None = None,
        channels: Sequence[V1Device] = (),
    ) -> PublishResult:
        with node_lock(self._lock_path, timeout=self._timeout):
            return self._publisher.publish(node, cards, owner=owner, in_use=in_use, channels=channels)


def new_publisher(*, client: KubeClient, settings: PublishSettings) -> Publisher:
    publisher = ServerLayoutPublisher(kube=client, reader=KubeSliceReader(client))
    if settings.lock_path is None:
        return publisher
    return LockedPublisher(publisher=publisher, lock_path=settings.lock_path, timeout=settings.lock_timeout)


def new_channel_offers(*, settings: PublishSettings, node_channels: NodeChannels) -> ChannelOffers | None:
    """The node's IMEX channel offers; none when the count is 0 (``node_channels`` is told so
    once). A host whose driver registers no channel device (another vendor's) offers none by the
    host's own facts."""
    if settings.imex_channels == 0:
        node_channels.tell(TURNED_OFF)
        return None
    reader = ImexHostReader(
        proc_root=settings.proc_root, processes_proc=settings.processes_proc, host_root=settings.host_root
    )
    return ChannelOffers(host=reader.read, count=settings.imex_channels, node_channels=node_channels)


def new_reconciler(
    *,
    settings: PublishSettings,
    nodes: SharedInformer[V1Node],
    gpus: SharedInformer[PhysicalGPU],
    card_specs: CardSpecProvider,
    publisher: Publisher,
    backend: VendorBackend,
    health_tracker: HealthTracker,
    holds: Holds | None = None,
    in_use: DevicesInUse | None = None,
    channels: ChannelOffers | None = None,
) -> PublishReconciler:
    def this_nodes_gpus() -> list[PhysicalGPU]:
        """The label check is a second guard behind the informer's selector."""
        return [
            g for g in gpus.store.list() if (g.metadata.labels or {}).get(LABEL_NODE) == settings.node_label
        ]

    return PublishReconciler(
        node_name=settings.node_name,
        get_node=nodes.store.get_by_key,
        list_gpus=this_nodes_gpus,
        card_specs=card_specs,
        publisher=publisher,
        pci_vendor_id=backend.identity.pci_vendor_id,
        driver_type=backend.driver_type,
        resync_period=settings.resync_period,
        startup_grace=settings.startup_grace,
        holds=holds,
        taints=lambda address: device_taints(
            health_tracker.verdict(address), health_tracker.fabric.fault(address)
        ),
        in_use=in_use.names if in_use is not None else lambda: None,
        channels=channels,
    )


class PublishingContainer(containers.DeclarativeContainer):
    settings = providers.Dependency(instance_of=PublishSettings)
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)
    card_specs: providers.Dependency[CardSpecProvider] = providers.Dependency()
    gpu_informer = providers.Dependency(instance_of=SharedInformer)  # this node's PhysicalGPUs
    backend: providers.Dependency[VendorBackend] = providers.Dependency()
    holds: providers.Object[Holds | None] = providers.Object(
        None
    )  # cards passed through for claims (VfioHolds), when the plugin runs
    # The node's health verdicts (gpu-handler's); a private, never-unhealthy one when not given.
    health_tracker = providers.Dependency(
        instance_of=HealthTracker, default=providers.Singleton(HealthTracker, quiet_period=0.0)
    )

    # Where the publish pass tells its IMEX channel decision (the enrichment's, for
    # ComputeDomainsReady); a private one, read by no one, when not given.
    node_channels = providers.Dependency(instance_of=NodeChannels, default=providers.Singleton(NodeChannels))

    # The devices prepared on this node, told by the kubelet plugin's checkpoint feed (the
    # composition root connects it); never told without the plugin: the static order.
    in_use = providers.Singleton(DevicesInUse)

    node_informer = providers.Singleton(
        node_named, informers=informers, node_name=settings.provided.node_name
    )
    slice_informer = providers.Singleton(
        node_resource_slices, informers=informers, node_name=settings.provided.node_name
    )
    publisher = providers.Singleton(new_publisher, client=client, settings=settings)
    channels = providers.Singleton(new_channel_offers, settings=settings, node_channels=node_channels)
    reconciler = providers.Singleton(
        new_reconciler,
        settings=settings,
        nodes=node_informer,
        gpus=gpu_informer,
        card_specs=card_specs,
        publisher=publisher,
        backend=backend,
        holds=holds,
        health_tracker=health_tracker,
        in_use=in_use,
        channels=channels,
    )


def setup_publishing(manager: Manager, container: PublishingContainer) -> Controller:
    """Registers the publishing controller, its watches and triggers with ``manager``."""
    publish = EnqueueRequestsFromMapFunc(lambda _obj: [PUBLISH])
    cards_changed = ChannelSource(name="card-specs")
    container.card_specs().subscribe(cards_changed.send)
    health_changed = ChannelSource(name="card-health")  # taints follow the verdict at once
    container.health_tracker().subscribe(lambda address, _old, _new: health_changed.send(address))
    container.health_tracker().fabric.subscribe(health_changed.send)  # and the fabric's taints
    in_use_changed = ChannelSource(name="devices-in-use")  # the fill-following order after Prepare
    card_specs = container.card_specs()
    container.in_use().subscribe(
        wake_if_fill_followed(lambda: (e.card for e in card_specs.snapshot().values()), in_use_changed.send)
    )
    return (
        ControllerBuilder(manager, name=PUBLISH_CONTROLLER)
        .watches(container.gpu_informer(), publish, predicates=[gpu_events()])
        .watches(container.node_informer(), publish, predicates=[node_events()])
        .watches(container.slice_informer(), publish, predicates=[slice_events()])
        .watches(cards_changed, publish)
        .watches(health_changed, publish)
        .watches(in_use_changed, publish)
        .watches(StartSource(), publish)  # the start-up publish, taken once the caches have synced
        .without_leader_election()
        .backoff(base=RETRY_BASE_SECONDS, max_delay=RETRY_MAX_SECONDS)
        .expected_errors(ApiError, OSError, FieldsDroppedError, UnsupportedServerError)
        .complete(container.reconciler())  # a SingletonReconciler: publishes of one node never overlap
    )
