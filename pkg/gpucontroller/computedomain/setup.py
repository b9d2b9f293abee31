"""Composition root of the compute-domain controller.

It reconciles ComputeDomains; what else wakes one (each a watch of its own in ``internal/watch/``):
its claims (allocated or released), its template, its clique's IMEX ensemble (Pods and ConfigMap,
read from the same caches as the ensemble controller's), ResourceSlices (while it waits for a
clique) and the operator configuration (the daemons' settings).

The channel ledger lives in the node components' namespace: the ConfigMap
``<operator config>-compute-domain-channels``.
"""

from __future__ import annotations

from collections.abc import Sequence

from dependency_injector import containers, providers
from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1ConfigMap,
    V1DeviceClass,
    V1Pod,
    V1ResourceClaimTemplate,
    V1ResourceSlice,
)

from api.gpu.v1alpha1 import COMPUTE_DOMAIN_CHANNEL_DEVICE_CLASS, ComputeDomain, ComputeDomainStatus
from pkg.domain.kinds import COMPUTE_DOMAIN
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import ApiError, KubeClient
from pkg.framework.client.builtin_kinds import (
    DEVICE_CLASS,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
)
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.controller.controller import Controller
from pkg.framework.manager.manager import Manager
from pkg.framework.reconcile import Handler, KubeResourceWriter, ResourceReconciler
from pkg.gpucontroller.computedomain.internal.clique import offered_cliques
from pkg.gpucontroller.computedomain.internal.handler.channel import ChannelHandler
from pkg.gpucontroller.computedomain.internal.handler.clique import CliqueHandler
from pkg.gpucontroller.computedomain.internal.handler.deletion import DeletionHandler
from pkg.gpucontroller.computedomain.internal.handler.device_class import DeviceClassHandler
from pkg.gpucontroller.computedomain.internal.handler.ensemble import EnsembleHandler
from pkg.gpucontroller.computedomain.internal.handler.finalizer import FinalizerHandler
from pkg.gpucontroller.computedomain.internal.handler.members import MembersHandler
from pkg.gpucontroller.computedomain.internal.handler.ready import ReadyHandler
from pkg.gpucontroller.computedomain.internal.handler.template import TemplateHandler
from pkg.gpucontroller.computedomain.internal.indexes import CLAIM_BY_DOMAIN, INDEXES
from pkg.gpucontroller.computedomain.internal.service import KubeComputeDomainApi
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainResource, ComputeDomainState, Ensemble
from pkg.gpucontroller.computedomain.internal.status import conclude
from pkg.gpucontroller.computedomain.internal.watch import (
    claim_watch,
    compute_domain_events,
    daemon_config_map_watch,
    daemon_pod_watch,
    operator_config_watch,
    slice_watch,
    template_watch,
)
from pkg.gpucontroller.imexensemble import indexes as ensemble_indexes
from pkg.gpucontroller.imexensemble.indexes import DAEMON_BY_CLIQUE
from pkg.gpucontroller.imexensemble.render import (
    clique_hash,
    current_hash,
    current_pods,
    ensemble_name,
    read_members,
)
from pkg.gpucontroller.imexensemble.settings import read_settings
from pkg.gpucontroller.imexensemble.setup import (  # the same informers: the factory shares them
    compute_domains,
    daemon_config_maps,
    daemon_pods,
    operator_config_maps,
    resource_slices,
)

CONTROLLER_NAME = "computedomain"
LEDGER_SUFFIX = "compute-domain-channels"

ComputeDomainReconciler = ResourceReconciler[ComputeDomain, ComputeDomainStatus, ComputeDomainState]


def ledger_name(operator_config: str) -> str:
    return f"{operator_config}-{LEDGER_SUFFIX}"


def claims(*, informers: InformerFactory) -> SharedInformer[ResourceV1ResourceClaim]:
    return informers.get_informer(RESOURCE_CLAIM)


def claim_templates(*, informers: InformerFactory) -> SharedInformer[V1ResourceClaimTemplate]:
    return informers.get_informer(RESOURCE_CLAIM_TEMPLATE)


def device_classes(*, informers: InformerFactory) -> SharedInformer[V1DeviceClass]:
    return informers.get_informer(DEVICE_CLASS)


def new_reconciler(
    *,
    client: KubeClient,
    domains: SharedInformer[ComputeDomain],
    claims: SharedInformer[ResourceV1ResourceClaim],
    templates: SharedInformer[V1ResourceClaimTemplate],
    slices: SharedInformer[V1ResourceSlice],
    device_classes: SharedInformer[V1DeviceClass],
    pods: SharedInformer[V1Pod],
    config_maps: SharedInformer[V1ConfigMap],
    operator_config: SharedInformer[V1ConfigMap],
    namespace: str,
    operator_config_name: str,
    handlers: Sequence[Handler[ComputeDomainState]],
) -> ComputeDomainReconciler:
    where = f"{namespace}/{operator_config_name}"

    def ensemble(domain: ComputeDomain) -> Ensemble:
        """The ensemble of the clique the domain is pinned to (recorded, or else its spec's)."""
        recorded = domain.status.nvlink_domain if domain.status is not None else None
        clique = recorded or domain.spec.nvlink_domain
        if clique is None:
            return Ensemble()
        config_map = config_maps.store.get_by_key(f"{namespace}/{ensemble_name(clique)}")
        daemons = tuple(pods.store.by_index(DAEMON_BY_CLIQUE, clique_hash(clique)))
        return Ensemble(
            clique=clique,
            members=read_members(config_map),
            pods=current_pods(daemons, current_hash(config_map)),
        )

    def state(resource: ComputeDomainResource) -> ComputeDomainState:
        domain = resource.original
        meta = domain.metadata
        uid = str(meta.uid)
        others = [d for d in domains.store.list() if d.metadata.uid != uid]
        template = domain.spec.channel.resource_claim_template.name
        return ComputeDomainState(
            resource=resource,
            daemons=read_settings(operator_config.store.get_by_key(where), where=where),
            components_namespace=namespace,
            device_class=device_classes.store.get_by_key(COMPUTE_DOMAIN_CHANNEL_DEVICE_CLASS),
            template=templates.store.get_by_key(f"{meta.namespace}/{template}"),
            claims=tuple(claims.store.by_index(CLAIM_BY_DOMAIN, f"{meta.namespace}/{meta.name}")),
            cliques=offered_cliques(slices.store.list()),
            ensemble=ensemble(domain),
            live_domains=frozenset(str(d.metadata.uid) for d in domains.store.list()),
            channels_in_use=frozenset(
                d.status.channel for d in others if d.status is not None and d.status.channel is not None
            ),
        )

    return ResourceReconciler.over_cache(
        cache=domains.store,
        writer=KubeResourceWriter(client, COMPUTE_DOMAIN),
        status_type=ComputeDomainStatus,
        state_factory=state,
        handlers=handlers,
        conclude=conclude,
    )


class ComputeDomainContainer(containers.DeclarativeContainer):
    config = providers.Configuration()
    client = providers.Dependency(instance_of=KubeClient)
    informers = providers.Dependency(instance_of=InformerFactory)

    domain_informer = providers.Singleton(compute_domains, informers=informers)
    claim_informer = providers.Singleton(claims, informers=informers)
    template_informer = providers.Singleton(claim_templates, informers=informers)
    slice_informer = providers.Singleton(resource_slices, informers=informers)
    device_class_informer = providers.Singleton(device_classes, informers=informers)
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
    api = providers.Singleton(
        KubeComputeDomainApi,
        client=client,
        namespace=config.components_namespace.required(),
        ledger_name=providers.Callable(ledger_name, config.operator_config.required()),
    )
    handlers = providers.List(
        providers.Singleton(DeletionHandler, api=api),
        providers.Singleton(FinalizerHandler),
        providers.Singleton(DeviceClassHandler, api=api),
        providers.Singleton(ChannelHandler, api=api),
        providers.Singleton(CliqueHandler),
        providers.Singleton(TemplateHandler, api=api),
        providers.Singleton(MembersHandler),
        providers.Singleton(EnsembleHandler),
        providers.Singleton(ReadyHandler),
    )
    reconciler = providers.Singleton(
        new_reconciler,
        client=client,
        domains=domain_informer,
        claims=claim_informer,
        templates=template_informer,
        slices=slice_informer,
        device_classes=device_class_informer,
        pods=pod_informer,
        config_maps=config_map_informer,
        operator_config=operator_config_informer,
        namespace=config.components_namespace.required(),
        operator_config_name=config.operator_config.required(),
        handlers=handlers,
    )


def setup_controller(manager: Manager, container: ComputeDomainContainer) -> Controller:
    manager.indexes.declare(*INDEXES, *ensemble_indexes.INDEXES)
    domains: SharedInformer[ComputeDomain] = container.domain_informer()
    return (
        ControllerBuilder(manager, name=CONTROLLER_NAME)
        .for_(domains, predicates=[compute_domain_events()])
        .watches_with(container.claim_informer(), claim_watch())
        .watches_with(container.template_informer(), template_watch(domains.store))
        .watches_with(container.slice_informer(), slice_watch(domains.store))
        .watches_with(container.pod_informer(), daemon_pod_watch(domains.store))
        .watches_with(container.config_map_informer(), daemon_config_map_watch(domains.store))
        .watches_with(container.operator_config_informer(), operator_config_watch(domains.store))
        .backoff(base=1.0, max_delay=60.0)
        .expected_errors(ApiError)
        .complete(container.reconciler())
    )
