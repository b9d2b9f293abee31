"""Composition root of the IMEX ensemble controller.

Its requests are cliques; what wakes one (each a watch of its own in ``internal/watch/``): the
ComputeDomains pinned to it, the ResourceSlices offering its channels, its Pods and ConfigMap, and
the operator configuration (the daemons' settings).
"""

from __future__ import annotations

from collections.abc import Sequence

from dependency_injector import containers, providers
from kubernetes.client import V1ConfigMap, V1Pod, V1ResourceSlice

from api.gpu.v1alpha1 import ComputeDomain
from pkg.domain.kinds import COMPUTE_DOMAIN
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import ApiError, KubeClient
from pkg.framework.client.builtin_kinds import CONFIG_MAP, POD, RESOURCE_SLICE
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import Controller
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile import Handler, ObjectReconciler, Request
from pkg.gpucontroller.imexensemble.indexes import (
    DAEMON_BY_CLIQUE,
    DOMAIN_BY_CLIQUE,
    INDEXES,
    SLICE_BY_CLIQUE,
)
from pkg.gpucontroller.imexensemble.internal.handler.config_map import ConfigMapHandler
from pkg.gpucontroller.imexensemble.internal.handler.members import MembersHandler
from pkg.gpucontroller.imexensemble.internal.handler.pods import PodsHandler
from pkg.gpucontroller.imexensemble.internal.handler.removal import RemovalHandler
from pkg.gpucontroller.imexensemble.internal.service import KubeEnsembleApi
from pkg.gpucontroller.imexensemble.internal.state import EnsembleState
from pkg.gpucontroller.imexensemble.internal.watch import (
    domain_watch,
    ensemble_config_map_watch,
    ensemble_pod_watch,
    operator_config_watch,
    slice_watch,
)
from pkg.gpucontroller.imexensemble.render import DAEMON_SELECTOR, clique_hash, ensemble_name
from pkg.gpucontroller.imexensemble.settings import read_settings

CONTROLLER_NAME = "imexensemble"

EnsembleReconciler = ObjectReconciler[EnsembleState, EnsembleState]


def compute_domains(*, informers: InformerFactory) -> SharedInformer[ComputeDomain]:
    return informers.get_informer(COMPUTE_DOMAIN)


def resource_slices(*, informers: InformerFactory) -> SharedInformer[V1ResourceSlice]:
    return informers.get_informer(RESOURCE_SLICE)


def daemon_pods(*, informers: InformerFactory, namespace: str) -> SharedInformer[V1Pod]:
    return informers.get_informer(POD, namespace=namespace, label_selector=DAEMON_SELECTOR)


def daemon_config_maps(*, informers: InformerFactory, namespace: str) -> SharedInformer[V1ConfigMap]:
    return informers.get_informer(CONFIG_MAP, namespace=namespace, label_selector=DAEMON_SELECTOR)


def operator_config_maps(
    *, informers: InformerFactory, namespace: str, name: str
) -> SharedInformer[V1ConfigMap]:
    """The operator configuration ConfigMap (the orchestrator's informer: same namespace and selector)."""
    return informers.get_informer(CONFIG_MAP, namespace=namespace, field_selector=f"metadata.name={name}")


def new_reconciler(
    *,
    domains: SharedInformer[ComputeDomain],
    slices: SharedInformer[V1ResourceSlice],
    pods: SharedInformer[V1Pod],
    config_maps: SharedInformer[V1ConfigMap],
    operator_config: SharedInformer[V1ConfigMap],
    namespace: str,
    operator_config_name: str,
    handlers: Sequence[Handler[EnsembleState]],
) -> EnsembleReconciler:
    where = f"{namespace}/{operator_config_name}"

    def state(request: Request) -> EnsembleState:
        clique = request.name
        pinned = domains.store.by_index(DOMAIN_BY_CLIQUE, clique)
        return EnsembleState(
            clique=clique,
            domains=tuple(sorted(f"{d.metadata.namespace}/{d.metadata.name}" for d in pinned)),
            nodes=frozenset(
                s.spec.node_name
                for s in slices.store.by_index(SLICE_BY_CLIQUE, clique)
                if s.spec is not None and s.spec.node_name
            ),
            daemons=read_settings(operator_config.store.get_by_key(where), where=where),
            namespace=namespace,
            pods=tuple(pods.store.by_index(DAEMON_BY_CLIQUE, clique_hash(clique))),
            config_map=config_maps.store.get_by_key(f"{namespace}/{ensemble_name(clique)}"),
        )

    return ObjectReconciler(get=state, state=lambda s: s, handlers=handlers)


class EnsembleContainer(containers.DeclarativeContainer):
    config = providers.Configuration()
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)

    domain_informer = providers.Singleton(compute_domains, informers=informers)
    slice_informer = providers.Singleton(resource_slices, informers=informers)
    pod_informer = providers.Singleton(
        daemon_pods, informers=informers, namespace=config.components_namespace.required()
    )
    config_map_informer = providers.Singleton(
        daemon_config_maps, informers=informers, namespace=config.components_namespace.required()
    )
    operator_config_informer = providers.Singleton(
        operator_config_maps,
        informers=informers,
        namespace=config.components_namespace.required(),
        name=config.operator_config.required(),
    )
    api = providers.Singleton(KubeEnsembleApi, client=client)
    handlers = providers.List(
        providers.Singleton(RemovalHandler, api=api),
        providers.Singleton(MembersHandler),
        providers.Singleton(ConfigMapHandler, api=api),
        providers.Singleton(PodsHandler, api=api),
    )
    reconciler = providers.Singleton(
        new_reconciler,
        domains=domain_informer,
        slices=slice_informer,
        pods=pod_informer,
        config_maps=config_map_informer,
        operator_config=operator_config_informer,
        namespace=config.components_namespace.required(),
        operator_config_name=config.operator_config.required(),
        handlers=handlers,
    )


def setup_controller(manager: Manager, container: EnsembleContainer) -> Controller:
    manager.indexes.declare(*INDEXES)
    domains: SharedInformer[ComputeDomain] = container.domain_informer()
    return (
        ControllerBuilder(manager, name=CONTROLLER_NAME)
        .watches_with(domains, domain_watch())
        .watches_with(container.slice_informer(), slice_watch())
        .watches_with(container.pod_informer(), ensemble_pod_watch())
        .watches_with(container.config_map_informer(), ensemble_config_map_watch())
        .watches_with(container.operator_config_informer(), operator_config_watch(domains.store))
        .backoff(base=1.0, max_delay=60.0)
        .expected_errors(ApiError)
        .complete(container.reconciler())
    )
