"""Step 8, daemons: the domain's ConfigMap and one IMEX daemon Pod per member node.

Each Pod's name and labels carry the hash of the membership (its peers' stable names and the
config). A Pod of another hash, or of a node that left, is deleted and the current one created
beside it, so every daemon starts with the peers of the current membership. Addresses are not in
the hash: a restarted daemon's new address reaches its peers through the ConfigMap's ``hosts``
file. Then each member's ``address`` and ``ready`` are read from its current Pod.
"""

from __future__ import annotations

from kubernetes.client import V1Pod

from pkg.framework.reconcile.contract import Result
from pkg.gpucontroller.computedomain.internal.meta import meta
from pkg.gpucontroller.computedomain.internal.service import ComputeDomainApi
from pkg.gpucontroller.computedomain.internal.state import ComputeDomainState
from pkg.gpucontroller.computedomain.internal.status import REASON_NO_DAEMON_SETTINGS, not_ready
from pkg.gpucontroller.computedomain.render import (
    daemon_config_map,
    daemon_pod,
    daemon_pod_name,
    members_hash,
)


class DaemonsHandler:
    name = "daemons"

    def __init__(self, *, api: ComputeDomainApi) -> None:
        self._api = api

    def handle(self, state: ComputeDomainState) -> Result | None:
        settings = state.daemons.settings
        if settings is None:
            raise not_ready(state, reason=REASON_NO_DAEMON_SETTINGS, message=str(state.daemons.problem))
        domain, namespace = state.domain, state.components_namespace
        members = members_hash(state.nodes, settings.port)
        wanted = {daemon_pod_name(domain, n.index, members): n for n in state.nodes}
        current: dict[str, V1Pod] = {}
        for pod in state.pods:
            name = str(meta(pod).name)
            node = wanted.get(name)
            if node is not None and pod.spec is not None and pod.spec.node_name == node.name:
                current[name] = pod
            elif meta(pod).deletion_timestamp is None:
                self._api.delete_pod(pod)
        for name, node in wanted.items():
            found = current.get(name)
            if found is None:
                self._api.create_pod(
                    daemon_pod(
                        domain,
                        node,
                        nodes=state.nodes,
                        namespace=namespace,
                        settings=settings,
                        driver_root=state.daemons.driver_root,
                    )
                )
            live = found is not None and meta(found).deletion_timestamp is None
            node.address = _address(found) if live else None
            node.ready = _ready(found) if live else False
        config_map = daemon_config_map(domain, state.nodes, namespace=namespace, port=settings.port)
        if state.config_map is None or state.config_map.data != config_map.data:
            self._api.apply_config_map(config_map)
        state.status.nodes = state.nodes
        return None


def _address(pod: V1Pod | None) -> str | None:
    return pod.status.pod_ip if pod is not None and pod.status is not None and pod.status.pod_ip else None


def _ready(pod: V1Pod | None) -> bool:
    conditions = (pod.status.conditions if pod is not None and pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)
