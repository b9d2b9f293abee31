"""Composition root of the allocation controller (spec §10.4 item 1).

The container declares how the parts are built; :func:`setup_controller` wires them into a
manager: the informers with their indexes, the watches, the allocations collector and the
controller. Shared across worker threads: the informer stores (thread-safe), the client, the
recorder, the allocator (thread-safe, caches compiled CEL and built pools) and the in-flight
ledger, whose lock serialises decisions.

Retries: the controller's rate limiter starts at 250 ms and doubles per failure of a claim up to
two minutes (an unschedulable claim is retried, but not hammered; events about slices, classes,
claims and Pods wake it sooner), with a process-wide bucket of 10 retries per second.
"""

from __future__ import annotations

from typing import Any

from dependency_injector import containers, providers

from pkg.domain.metrics import METRICS
from pkg.dra.allocator import Allocator
from pkg.dracontroller.internal.handler import (
    AllocateHandler,
    CollisionHandler,
    EligibilityHandler,
)
from pkg.dracontroller.internal.indexes import CLAIM_INDEXERS, POD_INDEXERS, add_indexes
from pkg.dracontroller.internal.names import CONTROLLER_NAME, DRIVER
from pkg.dracontroller.internal.service import ClaimWriter, InFlight, Inventory
from pkg.dracontroller.internal.state import state_factory
from pkg.dracontroller.internal.watch import (
    ClaimPeersWatch,
    class_watch,
    namespace_watch,
    pod_watch,
    slice_watch,
)
from pkg.dracontroller.metrics import AllocationCollector
from pkg.dracontroller.reconciler import ClaimReconciler
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.cache.store import Indexers
from pkg.framework.client import KubeClient, ResourceKind
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NAMESPACE, POD, RESOURCE_CLAIM, RESOURCE_SLICE
from pkg.framework.controller.controller import Controller
from pkg.framework.controller.enqueue import EnqueueRequestForObject
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile.contract import Request
from pkg.framework.workqueue.ratelimiter import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
)


def _informer(factory: InformerFactory, kind: ResourceKind[Any], indexers: Indexers | None = None) -> Any:
    informer = factory.get_informer(kind)
    if indexers:
        add_indexes(informer, indexers)
    return informer


def rate_limiter() -> MaxOfRateLimiter[Request]:
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(base=0.25, max_delay=120.0), BucketRateLimiter(qps=10.0, burst=100)
    )


def _inventory(
    *, claims: Any, pods: Any, slices: Any, classes: Any, namespaces: Any, in_flight: InFlight
) -> Inventory:
    return Inventory(
        claims=claims.store,
        pods=pods.store,
        slices=slices.store,
        classes=classes.store,
        namespaces=namespaces.store,
        in_flight=in_flight,
    )


def _reconciler(inventory: Inventory, handlers: list[Any]) -> ClaimReconciler:
    return ClaimReconciler(
        get_claim=inventory.claim, state_factory=state_factory(inventory), handlers=handlers
    )


class ResourceClaimContainer(containers.DeclarativeContainer):
    config = providers.Configuration()
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)
    recorder = providers.Dependency(instance_of=EventRecorderLogger)

    claim_informer = providers.Singleton(_informer, informers, RESOURCE_CLAIM, CLAIM_INDEXERS)
    pod_informer = providers.Singleton(_informer, informers, POD, POD_INDEXERS)
    slice_informer = providers.Singleton(_informer, informers, RESOURCE_SLICE)
    class_informer = providers.Singleton(_informer, informers, DEVICE_CLASS)
    namespace_informer = providers.Singleton(_informer, informers, NAMESPACE)

    in_flight = providers.Singleton(InFlight)
    inventory = providers.Singleton(
        _inventory,
        claims=claim_informer,
        pods=pod_informer,
        slices=slice_informer,
        classes=class_informer,
        namespaces=namespace_informer,
        in_flight=in_flight,
    )
    writer = providers.Singleton(ClaimWriter, client, in_flight)
    allocator = providers.Singleton(Allocator)  # best fit
    handlers = providers.List(
        providers.Singleton(EligibilityHandler, writer=writer),
        providers.Singleton(CollisionHandler, inventory=inventory, writer=writer, recorder=recorder),
        providers.Singleton(
            AllocateHandler, inventory=inventory, writer=writer, recorder=recorder, allocator=allocator
        ),
    )
    reconciler = providers.Singleton(_reconciler, inventory, handlers)
    controller = providers.Singleton(
        lambda reconciler, workers: Controller(
            metrics=METRICS,
            name=CONTROLLER_NAME,
            reconciler=reconciler,
            max_concurrent_reconciles=int(workers or 2),
            rate_limiter=rate_limiter(),
        ),
        reconciler,
        config.workers,
    )


def setup_controller(manager: Manager, container: ResourceClaimContainer) -> Controller:
    """Registers the controller, its watches and the allocations collector with ``manager``."""
    controller: Controller = container.controller()
    claims = container.claim_informer()
    slices = container.slice_informer()
    controller.watch(claims, EnqueueRequestForObject())
    ClaimPeersWatch(claims.store).watch(claims, controller)
    pod_watch().watch(container.pod_informer(), controller)
    slice_watch(claims.store).watch(slices, controller)
    class_watch(claims.store).watch(container.class_informer(), controller)
    namespace_watch(claims.store).watch(container.namespace_informer(), controller)
    METRICS.register(AllocationCollector(claims=claims.store.list, slices=slices.store.list, driver=DRIVER))
    manager.add(controller)
    return controller
