"""The benchmark's trivial controller in pkg/framework: ``python framework_controller.py KUBECONFIG``.

The shape of the project's own controllers: an informer, a controller with the default rate
limiter and 4 workers, an :class:`~pkg.framework.reconcile.ObjectReconciler` reading the object
from the cache, one handler, and a service that merge-patches the status subresource.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass

from bench.controllers.bench_item import BENCH_ITEM, NAMESPACE, BenchItem, needs_reconcile, observed
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.client import KubeClient, PatchType
from pkg.framework.client.config import new_api_client
from pkg.framework.controller.builder import ControllerBuilder
from pkg.framework.keys import namespaced_key
from pkg.framework.manager.manager import Manager, install_signal_handlers
from pkg.framework.reconcile import ObjectReconciler, Request, Result, Snapshot

WORKERS = 4


@dataclass(frozen=True)
class ItemState(Snapshot):
    item: BenchItem
    started: float


class StatusWriter:
    """The service: one merge patch of ``status.framework``."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def write(self, item: BenchItem, status: dict[str, object]) -> None:
        name, namespace = str(item.metadata.name), item.metadata.namespace
        body = {"status": {"framework": status}}
        self._client.patch(
            BENCH_ITEM, name, body, patch_type=PatchType.MERGE, namespace=namespace, subresource="status"
        )


class ObserveHandler:
    name = "observe"

    def __init__(self, writer: StatusWriter) -> None:
        self._writer = writer

    def handle(self, state: ItemState) -> Result | None:
        if needs_reconcile(state.item.spec, state.item.status, "framework"):
            self._writer.write(state.item, observed(state.item.spec, state.started))
        return None


def main() -> None:
    client = KubeClient(new_api_client(sys.argv[1]), field_manager="bench-framework")
    informer = SharedInformer(client=client, kind=BENCH_ITEM, namespace=NAMESPACE)

    def get(request: Request) -> BenchItem | None:
        return informer.store.get_by_key(namespaced_key(request.namespace, request.name))

    reconciler = ObjectReconciler(
        get=get,
        state=lambda item: ItemState(item, time.time()),
        handlers=[ObserveHandler(StatusWriter(client))],
    )
    manager = Manager()
    manager.add(informer)
    ControllerBuilder(manager, name="bench").for_(informer).workers(
        WORKERS
    ).without_leader_election().complete(reconciler)
    stop = threading.Event()
    install_signal_handlers(stop)
    manager.run(stop)


if __name__ == "__main__":
    main()
