"""Composition root of the orchestrator.

One request exists: the configuration ConfigMap (``--operator-config`` in
``--components-namespace``). It is woken by a change of the ConfigMap's data (or its replacement by
a new object), and by a DaemonSet it rendered appearing, disappearing, or changing its spec,
labels or owners (someone edited or deleted it: put it back); each watch is a file of
``internal/watch/``, which says why. Both informers are scoped to what the controller owns: one
ConfigMap by name, the DaemonSets by label.
"""

from __future__ import annotations

from collections.abc import Sequence

from dependency_injector import containers, providers
from kubernetes.client import V1ConfigMap, V1DaemonSet

from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import ApiError, KubeClient
from pkg.framework.client.builtin_kinds import CONFIG_MAP, DAEMON_SET
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import Controller
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile import Handler, ObjectReconciler, Request
from pkg.gpucontroller.names import LABEL_OPERATOR_CONFIG, MANAGED_SELECTOR
from pkg.gpucontroller.orchestrator.internal.handler.apply import ApplyError, ApplyHandler
from pkg.gpucontroller.orchestrator.internal.handler.parse import ParseHandler
from pkg.gpucontroller.orchestrator.internal.handler.prune import PruneHandler
from pkg.gpucontroller.orchestrator.internal.service import KubeDaemonSetWriter
from pkg.gpucontroller.orchestrator.internal.state import OrchestratorState
from pkg.gpucontroller.orchestrator.internal.watch import config_map_events, daemon_set_watch

CONTROLLER_NAME = "orchestrator"


def config_maps(*, informers: InformerFactory, namespace: str, name: str) -> SharedInformer[V1ConfigMap]:
    """The one configuration ConfigMap."""
    return informers.get_informer(CONFIG_MAP, namespace=namespace, field_selector=f"metadata.name={name}")


def daemon_sets(*, informers: InformerFactory, namespace: str, name: str) -> SharedInformer[V1DaemonSet]:
    """The DaemonSets rendered from that ConfigMap."""
    selector = f"{MANAGED_SELECTOR},{LABEL_OPERATOR_CONFIG}={name}"
    return informers.get_informer(DAEMON_SET, namespace=namespace, label_selector=selector)


def new_reconciler(
    *,
    configs: SharedInformer[V1ConfigMap],
    owned: SharedInformer[V1DaemonSet],
    handlers: Sequence[Handler[OrchestratorState]],
) -> ObjectReconciler[V1ConfigMap, OrchestratorState]:
    def state(config_map: V1ConfigMap) -> OrchestratorState:
        return OrchestratorState(config_map=config_map, owned=tuple(owned.store.list()))

    # A deleted ConfigMap needs nothing: the garbage collector deletes the DaemonSets it owns.
    return ObjectReconciler(get=lambda r: configs.store.get_by_key(str(r)), state=state, handlers=handlers)


class OrchestratorContainer(containers.DeclarativeContainer):
    config = providers.Configuration()
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)
    recorder = providers.Dependency(instance_of=EventRecorderLogger)

    config_informer = providers.Singleton(
        config_maps,
        informers=informers,
        namespace=config.components_namespace.required(),
        name=config.operator_config.required(),
    )
    daemon_set_informer = providers.Singleton(
        daemon_sets,
        informers=informers,
        namespace=config.components_namespace.required(),
        name=config.operator_config.required(),
    )
    writer = providers.Singleton(KubeDaemonSetWriter, client=client)
    handlers = providers.List(
        providers.Singleton(ParseHandler, recorder=recorder),
        providers.Singleton(PruneHandler, writer=writer, recorder=recorder),
        providers.Singleton(ApplyHandler, writer=writer, recorder=recorder),
    )
    reconciler = providers.Singleton(
        new_reconciler, configs=config_informer, owned=daemon_set_informer, handlers=handlers
    )


def setup_controller(manager: Manager, container: OrchestratorContainer) -> Controller:
    request = Request(
        name=container.config.operator_config(), namespace=container.config.components_namespace()
    )
    return (
        ControllerBuilder(manager, name=CONTROLLER_NAME)
        .for_(container.config_informer(), predicates=[config_map_events()])
        .watches_with(container.daemon_set_informer(), daemon_set_watch(request))
        .backoff(base=2.0, max_delay=120.0)
        .expected_errors(ApiError, OSError, ApplyError)
        .complete(container.reconciler())
    )
