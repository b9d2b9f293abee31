"""Composition root of the allocation controller: every part is built here and nowhere else.

The container declares how the parts are built, each provider naming what it passes, so a test
overrides one part of the real container; :func:`setup_controller` declares the indexes the
controller reads with the manager and registers the controller with the builder: the informers, the
watches and the allocations collector. Shared across worker threads: the informer stores
(thread-safe), the client, the recorder, the allocator (thread-safe, caches compiled CEL and built pools),
the pool cache (the allocator's, also read by the collision check, so a cluster's pools are built
once) and the in-flight record, whose lock serialises decisions.

Retries: the controller's rate limiter starts at 250 ms and doubles per failure of a claim up to
two minutes (an unschedulable claim is retried, but not hammered; events about slices, classes,
claims and Pods wake it sooner), with a process-wide bucket of 10 retries per second.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from dependency_injector import containers, providers
from kubernetes.client import ResourceV1ResourceClaim, V1DeviceClass, V1Namespace, V1Pod, V1ResourceSlice

from api.gpu.v1alpha1 import ClaimExplanation
from pkg.domain.kinds import CLAIM_EXPLANATION, PHYSICAL_GPU
from pkg.domain.names import DRIVER
from pkg.dra.allocator import Allocator
from pkg.dra.allocator.pools import PoolCache
from pkg.dracontroller.accounting.accountant import Accountant
from pkg.dracontroller.accounting.collector import AccountingCollector
from pkg.dracontroller.accounting.devices import HeldDevice, held_devices
from pkg.dracontroller.accounting.events import AllocationEvents
from pkg.dracontroller.accounting.index_cache import DeviceIndexCache
from pkg.dracontroller.accounting.store import LedgerStore
from pkg.dracontroller.explanations.explainer import Explainer, NodeReader
from pkg.dracontroller.explanations.reconciler import DEFAULT_TTL, ExplanationReconciler
from pkg.dracontroller.explanations.writer import ExplanationWriter
from pkg.dracontroller.heap import HeapSettler
from pkg.dracontroller.internal.handler import (
    AfterWriteHandler,
    AllocateHandler,
    CollisionHandler,
    EligibilityHandler,
)
from pkg.dracontroller.internal.indexes import INDEXES
from pkg.dracontroller.internal.names import ALLOCATED_BY, CONTROLLER_NAME
from pkg.dracontroller.internal.pod_projection import project_pod
from pkg.dracontroller.internal.service import (
    CacheReader,
    ClaimWriter,
    Decisions,
    Handover,
    InFlight,
    PodReferenceBarrier,
    PodReferenceReader,
)
from pkg.dracontroller.internal.slice_interning import SliceInterner
from pkg.dracontroller.internal.state import ClaimSnapshot, state_factory
from pkg.dracontroller.internal.watch import (
    allocation_landed_watch,
    capacity_freed_watch,
    class_watch,
    namespace_watch,
    pod_watch,
    slice_watch,
)
from pkg.dracontroller.metrics import AllocationCollector
from pkg.dracontroller.reconciler import ClaimReconciler
from pkg.dracontroller.warmup import SelectorWarmer
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import ApiError, KubeClient, NotFoundError, ResourceKind
from pkg.framework.client.builtin_kinds import (
    DEVICE_CLASS,
    NAMESPACE,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
)
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import Controller
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile import Handler, Request
from pkg.framework.workqueue.ratelimiter import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
)

logger = logging.getLogger(__name__)

DEFAULT_WORKERS = 8
"""Decisions are serial under the in-flight lock; a worker then waits for its claim's two writes
(about two API round trips), so 8 workers keep writes of several claims on the wire at once."""
DEFAULT_LEDGER = "gpu-dra-allocation-ledger"
DEFAULT_ACCOUNTING_PERIOD = 10.0


def informer(*, informers: InformerFactory, kind: ResourceKind[Any]) -> SharedInformer[Any]:
    """The cluster-wide informer of ``kind`` (its indexes: ``internal/indexes.py``, declared with
    the manager by :func:`setup_controller`)."""
    return informers.get_informer(kind)


def pod_informer(*, informers: InformerFactory) -> SharedInformer[V1Pod]:
    """The cluster-wide Pod informer, projected to what the controller reads (``pod_projection``):
    the cache then grows by a few hundred bytes per Pod instead of tens of KiB. Set before the
    informer is created; if another part of the process created it first (it would then read full
    Pods), the projection is left out rather than taken from under it."""
    with contextlib.suppress(RuntimeError):
        informers.set_transform(POD, project_pod)
    return informer(informers=informers, kind=POD)


def slice_informer(*, informers: InformerFactory) -> SharedInformer[V1ResourceSlice]:
    """The cluster-wide ResourceSlice informer, its devices sharing every repeated value
    (``slice_interning``: about a ninth of the memory). Like the Pod projection, set before the
    informer exists, and left out if another part of the process created it first."""
    with contextlib.suppress(RuntimeError):
        informers.set_object_transform(RESOURCE_SLICE, SliceInterner())
    return informer(informers=informers, kind=RESOURCE_SLICE)


def rate_limiter() -> MaxOfRateLimiter[Request]:
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(base=0.25, max_delay=120.0), BucketRateLimiter(qps=10.0, burst=100)
    )


def new_cache_reader(
    *,
    claims: SharedInformer[ResourceV1ResourceClaim],
    pods: SharedInformer[V1Pod],
    slices: SharedInformer[V1ResourceSlice],
    classes: SharedInformer[V1DeviceClass],
    namespaces: SharedInformer[V1Namespace],
    in_flight: InFlight,
    pool_cache: PoolCache,
) -> CacheReader:
    return CacheReader(
        claims=claims.store,
        pods=pods.store,
        slices=slices.store,
        classes=classes.store,
        namespaces=namespaces.store,
        in_flight=in_flight,
        pool_cache=pool_cache,
    )


def new_reconciler(*, cache_reader: CacheReader, handlers: list[Handler[ClaimSnapshot]]) -> ClaimReconciler:
    return ClaimReconciler(
        get_claim=cache_reader.claim, state_factory=state_factory(cache_reader), handlers=handlers
    )


def node_reader(*, client: KubeClient) -> NodeReader:
    """A Node by name, read once per explanation that names one (the controller caches no Nodes:
    only ``--node`` explanations need one, and a Node cache would cost every replica memory)."""

    def read(name: str) -> Any:
        try:
            return client.get(NODE, name)
        except NotFoundError:
            return None

    return read


def new_explanation_reconciler(
    *,
    explanations: SharedInformer[ClaimExplanation],
    explainer: Explainer,
    writer: ExplanationWriter,
    ttl: float | None,
) -> ExplanationReconciler:
    def get(request: Request) -> ClaimExplanation | None:
        obj: ClaimExplanation | None = explanations.store.get_by_key(str(request))
        return obj

    return ExplanationReconciler(get=get, explainer=explainer, writer=writer, ttl=ttl or DEFAULT_TTL)


class HeldDevices:
    """The devices our claims hold, with the facts of the slice and PhysicalGPU caches (indexed
    once per change of those caches, :mod:`pkg.dracontroller.accounting.index_cache`)."""

    def __init__(
        self,
        *,
        claims: SharedInformer[ResourceV1ResourceClaim],
        slices: SharedInformer[V1ResourceSlice],
        physical_gpus: SharedInformer[Any],
    ) -> None:
        self._claims, self._slices, self._gpus = claims, slices, physical_gpus
        self.devices = DeviceIndexCache(
            slices=slices.store.list, physical_gpus=physical_gpus.store.list, driver=DRIVER
        )

    def of(self, claims: Iterable[ResourceV1ResourceClaim]) -> list[HeldDevice]:
        index = self.devices.index()
        return [
            device
            for claim in claims
            for device in held_devices(claim, index, driver=DRIVER, allocated_by_annotation=ALLOCATED_BY)
        ]

    def now(self) -> list[HeldDevice]:
        return self.of(self._claims.store.list())

    def synced(self) -> bool:
        return all(i.has_synced() for i in (self._claims, self._slices, self._gpus))


def new_accountant(
    *,
    held: HeldDevices,
    client: KubeClient,
    recorder: EventRecorderLogger,
    claims: SharedInformer[ResourceV1ResourceClaim],
    collector: AccountingCollector,
    namespace: str | None,
    ledger: str | None,
    period: float | None,
) -> Accountant:
    accountant = Accountant(
        claims=claims.store.list,
        held=held.of,
        synced=held.synced,
        store=LedgerStore(client=client, namespace=namespace or "default", name=ledger or DEFAULT_LEDGER),
        events=AllocationEvents(recorder=recorder),
        collector=collector,
        period=period or DEFAULT_ACCOUNTING_PERIOD,
    )
    claims.add_listener(accountant)
    return accountant


class ResourceClaimContainer(containers.DeclarativeContainer):
    config = providers.Configuration()
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)
    recorder = providers.Dependency(instance_of=EventRecorderLogger)

    claim_informer = providers.Singleton(informer, informers=informers, kind=RESOURCE_CLAIM)
    pod_informer = providers.Singleton(pod_informer, informers=informers)
    slice_informer = providers.Singleton(slice_informer, informers=informers)
    class_informer = providers.Singleton(informer, informers=informers, kind=DEVICE_CLASS)
    namespace_informer = providers.Singleton(informer, informers=informers, kind=NAMESPACE)
    physical_gpu_informer = providers.Singleton(informer, informers=informers, kind=PHYSICAL_GPU)

    in_flight = providers.Singleton(InFlight)
    pool_cache = providers.Singleton(PoolCache)  # shared: the allocator and the collision check
    cache_reader = providers.Singleton(
        new_cache_reader,
        claims=claim_informer,
        pods=pod_informer,
        slices=slice_informer,
        classes=class_informer,
        namespaces=namespace_informer,
        in_flight=in_flight,
        pool_cache=pool_cache,
    )
    writer = providers.Singleton(ClaimWriter, client=client, in_flight=in_flight)
    allocator = providers.Singleton(Allocator, pool_cache=pool_cache)  # best fit
    pod_reader = providers.Singleton(PodReferenceReader, client=client)
    pod_references = providers.Singleton(PodReferenceBarrier, pods=pod_informer, fallback=pod_reader)
    handover = providers.Singleton(Handover, recorder=recorder)
    decisions = providers.Singleton(
        Decisions, cache_reader=cache_reader, writer=writer, allocator=allocator, pods=pod_references
    )
    handlers = providers.List(
        providers.Singleton(EligibilityHandler, writer=writer, handover=handover),
        providers.Singleton(AfterWriteHandler, decisions=decisions, handover=handover),
        providers.Singleton(CollisionHandler, decisions=decisions, recorder=recorder),
        providers.Singleton(
            AllocateHandler, decisions=decisions, recorder=recorder, allocator=allocator, handover=handover
        ),
    )
    reconciler = providers.Singleton(new_reconciler, cache_reader=cache_reader, handlers=handlers)
    heap_settler = providers.Singleton(HeapSettler, allocator=allocator)
    selector_warmer = providers.Singleton(SelectorWarmer, allocator=allocator, cache_reader=cache_reader)

    # ClaimExplanations: answered from the same cache reader, decisions and pools (explanations/).
    explanation_informer = providers.Singleton(informer, informers=informers, kind=CLAIM_EXPLANATION)
    explainer = providers.Singleton(
        Explainer,
        decisions=decisions,
        allocator=allocator,
        pool_cache=pool_cache,
        nodes=providers.Singleton(node_reader, client=client),
    )
    explanation_writer = providers.Singleton(ExplanationWriter, client=client)
    explanation_reconciler = providers.Singleton(
        new_explanation_reconciler,
        explanations=explanation_informer,
        explainer=explainer,
        writer=explanation_writer,
        ttl=config.explanations.ttl,
    )

    held_devices = providers.Singleton(
        HeldDevices, claims=claim_informer, slices=slice_informer, physical_gpus=physical_gpu_informer
    )
    accounting_collector = providers.Singleton(AccountingCollector, held=held_devices.provided.now)
    accountant = providers.Singleton(
        new_accountant,
        held=held_devices,
        client=client,
        recorder=recorder,
        claims=claim_informer,
        collector=accounting_collector,
        namespace=config.accounting.namespace,
        ledger=config.accounting.ledger,
        period=config.accounting.period,
    )


CUSTOM_KINDS: tuple[ResourceKind[Any], ...] = (PHYSICAL_GPU, CLAIM_EXPLANATION)
"""Our CRDs the controller watches (the accountant reads PhysicalGPUs; ClaimExplanations are
answered by the explanation controller)."""
EXPLANATION_CONTROLLER_NAME = "claimexplanation"


class MissingCustomResourceError(RuntimeError):
    """The API server does not serve a CRD the controller watches."""


def require_custom_kinds(client: KubeClient, kinds: Iterable[ResourceKind[Any]] = CUSTOM_KINDS) -> None:
    """Fails at once, naming the CRD, when the API server does not serve one of ``kinds``.

    Why: an informer of a kind the server does not know lists, gets 404, backs off and retries
    forever, and the manager reports only that caches did not sync minutes later; the operator
    then has to guess which kind is missing. One LIST of one item per kind at start-up says it.
    Only a 404 is conclusive; any other error is left to the informers, which retry with backoff."""
    for kind in kinds:
        try:
            client.list_page(kind, limit=1)
        except NotFoundError as exc:
            raise MissingCustomResourceError(
                f"the API server does not serve {kind.plural}.{kind.group}/{kind.version}: "
                f"install the CustomResourceDefinition {kind.plural}.{kind.group} (config/crd)"
            ) from exc
        except ApiError as exc:
            logger.warning("cannot check that %s is served: %s", kind, exc)


def setup_controller(manager: Manager, container: ResourceClaimContainer) -> Controller:
    """Registers the controller, its watches, the allocations collector, the accountant
    (leader only; :mod:`pkg.dracontroller.accounting`), the heap settler
    (:mod:`pkg.dracontroller.heap`), the selector warmer (leader only;
    :mod:`pkg.dracontroller.warmup`) and the ClaimExplanation controller
    (:mod:`pkg.dracontroller.explanations`) with ``manager``."""
    manager.indexes.declare(*INDEXES)
    claims = container.claim_informer()
    slices = container.slice_informer()
    controller = (
        ControllerBuilder(manager, name=CONTROLLER_NAME)
        .for_(claims)
        .watches_with(claims, capacity_freed_watch(claims.store))
        .watches_with(claims, allocation_landed_watch(claims.store))
        .watches_with(container.pod_informer(), pod_watch())
        .watches_with(slices, slice_watch(claims.store))
        .watches_with(container.class_informer(), class_watch(claims.store))
        .watches_with(container.namespace_informer(), namespace_watch(claims.store))
        .workers(int(container.config.workers() or DEFAULT_WORKERS))
        .rate_limiter(rate_limiter())
        .complete(container.reconciler())
    )
    manager.metrics.register(
        AllocationCollector(
            claims=claims.store.list, devices=container.held_devices().devices.index, driver=DRIVER
        )
    )
    manager.metrics.register(container.accounting_collector())
    manager.add(container.accountant())
    manager.add(container.heap_settler())
    manager.add(container.selector_warmer())
    # Leader only, one worker (ExplanationReconciler.max_workers): an explanation reads the leader's
    # caches and pools, and one diagnosis at a time bounds its memory; failures back off.
    (
        ControllerBuilder(manager, name=EXPLANATION_CONTROLLER_NAME)
        .for_(container.explanation_informer())
        .backoff(base=1.0, max_delay=60.0)
        .complete(container.explanation_reconciler())
    )
    return controller
