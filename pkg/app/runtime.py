"""The shared runtime of a control-plane process: client, informer cache, recorder, manager.

One container per process holds the singletons every controller shares: one API client and
connection pool, one informer per watched kind (so two controllers never open two watches of the
same objects), one event recorder. Controllers' own containers take these as dependencies.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Mapping

from dependency_injector import containers, providers
from kubernetes.client import ApiClient

from pkg.app.options import ManagerOptions
from pkg.domain.metrics import METRICS
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.client.config import new_api_client
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.logging import setup_logging
from pkg.framework.manager.leaderelection import LeaderElectionConfig
from pkg.framework.manager.manager import Manager, install_signal_handlers
from pkg.framework.metrics import MetricsProvider

# Lease calls must fail well inside the renew deadline (10 s), or one hung request could outlast it;
# their own transport has no retries, which would multiply the timeout.
LEASE_REQUEST_TIMEOUT = 4.0


def _lease_client(options: ManagerOptions, component: str) -> KubeClient:
    api = new_api_client(options.kubeconfig, user_agent=component, retries=0, qps_pool_size=2)
    return KubeClient(api, field_manager=component, request_timeout=LEASE_REQUEST_TIMEOUT)


def new_manager(
    *, options: ManagerOptions, component: str, informers: InformerFactory, metrics: MetricsProvider
) -> Manager:
    election = None
    if options.leader_elect:
        election = LeaderElectionConfig(
            lease_name=options.leader_election_id, lease_namespace=options.leader_election_namespace
        )
    manager = Manager(
        metrics=metrics,
        leader_election=election,
        lease_client=_lease_client(options, component) if election else None,
        monitoring_bind_address=options.metrics_bind_address,
    )
    manager.add(informers)
    return manager


def new_client(*, api_client: ApiClient, component: str) -> KubeClient:
    return KubeClient(api_client, field_manager=component)


def new_recorder(*, client: KubeClient, component: str) -> EventRecorderLogger:
    return EventRecorderLogger(
        client=client,
        reporting_controller=f"gpu.deckhouse.io/{component}",
        reporting_instance=socket.gethostname(),
    )


class RuntimeContainer(containers.DeclarativeContainer):
    options = providers.Dependency(instance_of=ManagerOptions)
    component = providers.Dependency(instance_of=str)

    metrics = providers.Object(METRICS)  # the project's provider: namespace gpu, one registry
    api_client = providers.Singleton(new_api_client, options.provided.kubeconfig, user_agent=component)
    client = providers.Singleton(new_client, api_client=api_client, component=component)
    informers = providers.Singleton(InformerFactory, client)
    recorder = providers.Singleton(new_recorder, client=client, component=component)
    manager = providers.Singleton(
        new_manager, options=options, component=component, informers=informers, metrics=metrics
    )


Setup = Callable[[RuntimeContainer, Manager], Callable[[], None] | None]
"""Registers a binary's controllers on the manager; may return a cleanup run after the manager stops."""


def run_controllers(
    *,
    component: str,
    options: ManagerOptions,
    setup: Setup,
    log_extra: Mapping[str, object] | None = None,
) -> int:
    """Runs a binary, the same way for all four: logging, the shared runtime, ``setup`` (which
    registers the binary's controllers on the manager), then the manager until SIGTERM/SIGINT; the
    cleanup ``setup`` returned (stop the event recorder, close the backend) runs however it ends.

    ``setup`` runs on the main thread, so it may install signal handlers (the node agent's SIGHUP).
    """
    setup_logging()
    runtime = RuntimeContainer(options=options, component=component)
    manager = runtime.manager()
    cleanup = setup(runtime, manager)
    stop = threading.Event()
    install_signal_handlers(stop)
    logging.getLogger(component).info(
        "starting", extra=dict(log_extra or {"leader_elect": options.leader_elect})
    )
    try:
        manager.run(stop)
    finally:
        if cleanup is not None:
            cleanup()
    return 0
