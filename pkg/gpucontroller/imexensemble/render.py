"""What the IMEX ensemble controller writes for one NVLink clique, and how it is read back (pure).

* the clique's ConfigMap ``imex-<clique hash>``: the IMEX daemon's files
  (:mod:`pkg.backends.nvidia.imex_config`) plus ``members.json``, the stable node -> index map. The
  map is the source of truth for indexes: each pass reads it back, so a member keeps its index (and
  its peers' nodes files stay the same) for as long as it stays in the clique;
* one daemon Pod per member node, ``imex-<clique hash>-<index>-<nodes hash>``, pinned to the node.

A clique (``<cluster UUID>.<clique ID>``) is longer than a name can comfortably carry, so names and
the ``imex-clique`` label use the first 10 hex digits of its SHA-256; the full clique is in the
``nvlink-domain`` annotation (what the watches map an event back to). The nodes hash is in the Pod
name so that a Pod of a new membership is created beside the old one while that one terminates (a
Pod's name stays taken until its kubelet lets go). The ConfigMap carries the current nodes hash as
an annotation, so a reader (the domain controller) can tell the current daemons from leftovers.

Everything lives in the node components' namespace: the daemons need privileges a job's namespace
should not grant, and a clique's ensemble serves every domain pinned to it, whatever its namespace.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Final

from kubernetes.client import (
    V1ConfigMap,
    V1ConfigMapVolumeSource,
    V1Container,
    V1ContainerPort,
    V1EnvVar,
    V1EnvVarSource,
    V1HostPathVolumeSource,
    V1ObjectFieldSelector,
    V1ObjectMeta,
    V1Pod,
    V1PodSpec,
    V1Probe,
    V1SecurityContext,
    V1Toleration,
    V1Volume,
    V1VolumeMount,
)

from api.gpu.v1alpha1 import ComputeDomainSettings
from pkg.backends.nvidia.imex_config import (
    CONFIG_DIR,
    CONFIG_FILE,
    HOSTS_FILE,
    member_name,
    nodes_hash,
    render_imex_files,
)
from pkg.gpucontroller.names import LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_PART_OF, MANAGED_BY, PART_OF

COMPONENT: Final = "imex-daemon"
LABEL_CLIQUE: Final = "gpu.deckhouse.io/imex-clique"
"""The clique's hash (names and selectors); the clique itself is in :data:`ANNOTATION_CLIQUE`."""
LABEL_NODES_HASH: Final = "gpu.deckhouse.io/imex-nodes-hash"
ANNOTATION_CLIQUE: Final = "gpu.deckhouse.io/nvlink-domain"
ANNOTATION_NODES_HASH: Final = LABEL_NODES_HASH
ANNOTATION_NODE: Final = "gpu.deckhouse.io/imex-node"
MEMBERS_KEY: Final = "members.json"
DAEMON_SELECTOR: Final = f"{LABEL_COMPONENT}={COMPONENT},{LABEL_MANAGED_BY}={MANAGED_BY}"
"""The label selector of every ensemble's Pods and ConfigMap."""
DRIVER_ROOT_MOUNT: Final = "/driver-root"
CONTAINER: Final = "imex"
_CLIQUE_HASH: Final = 10
_HASH_IN_NAME: Final = 8

_PATH: Final = f"PATH=$PATH:{DRIVER_ROOT_MOUNT}/usr/bin:{DRIVER_ROOT_MOUNT}/bin"
# The wrapper keeps the container's /etc/hosts equal to its own lines plus the ensemble's current
# `hosts` file: a daemon Pod that restarts elsewhere has a new address, the kubelet updates the
# mounted ConfigMap, and nvidia-imex (R570.158 and later) re-resolves its peers' names in its own
# reconnect loop; SIGUSR1 makes it reconnect at once. /etc/hosts is a file the kubelet mounts, so
# it is rewritten in place, never renamed over. Only the shell's own builtins and cat/cp: the
# daemon's image may have nothing else.
_WRAPPER: Final = f"""set -u
export {_PATH}
peers={CONFIG_DIR}/{HOSTS_FILE}
cp /etc/hosts /tmp/hosts.pod
sync_hosts() {{ cat /tmp/hosts.pod "$peers" > /etc/hosts && cp "$peers" /tmp/hosts.peers; }}
sync_hosts
nvidia-imex -c {CONFIG_DIR}/{CONFIG_FILE} &
daemon=$!
trap 'kill -TERM $daemon' TERM INT
while kill -0 $daemon 2>/dev/null; do
  sleep 5
  if [ "$(cat "$peers")" != "$(cat /tmp/hosts.peers)" ]; then sync_hosts && kill -USR1 $daemon; fi
done
wait $daemon"""

DEFAULT_COMMAND: Final = ("sh", "-c", _WRAPPER)
"""NVIDIA's daemon, from the driver root, with our stable peer names kept resolvable."""
DEFAULT_READINESS: Final = (
    "sh",
    "-c",
    f"{_PATH} nvidia-imex-ctl -c {CONFIG_DIR}/{CONFIG_FILE} -q | grep -qx READY",
)
"""READY from the daemon's command service, whose address and port are in its config.cfg."""

Members = Mapping[str, int]
"""Node name -> the node's stable index in its clique's ensemble."""


def clique_hash(clique: str) -> str:
    return hashlib.sha256(clique.encode()).hexdigest()[:_CLIQUE_HASH]


def ensemble_name(clique: str) -> str:
    """The clique's ConfigMap, and the prefix of its Pods' names."""
    return f"imex-{clique_hash(clique)}"


def daemon_pod_name(clique: str, index: int, members_hash: str) -> str:
    return f"{ensemble_name(clique)}-{index}-{members_hash[:_HASH_IN_NAME]}"


def clique_of(obj: V1Pod | V1ConfigMap) -> str | None:
    """The clique an ensemble object serves (its annotation), or ``None`` for a foreign object."""
    return (obj.metadata.annotations or {}).get(ANNOTATION_CLIQUE) if obj.metadata else None


def assign_indexes(previous: Members, nodes: set[str]) -> dict[str, int]:
    """Staying nodes keep their index; new ones get the lowest free indexes, in name order."""
    kept = {node: index for node, index in previous.items() if node in nodes}
    taken = set(kept.values())
    index = 0
    for node in sorted(nodes - kept.keys()):
        while index in taken:
            index += 1
        kept[node] = index
        taken.add(index)
    return dict(sorted(kept.items(), key=lambda item: item[1]))


def read_members(config_map: V1ConfigMap | None) -> dict[str, int]:
    """The ``members.json`` of an ensemble's ConfigMap. A map that is not one (a hand edit) reads as
    empty: indexes are handed out again, which restarts the daemons once and converges."""
    text = ((config_map.data if config_map is not None else None) or {}).get(MEMBERS_KEY)
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    members = {k: v for k, v in data.items() if isinstance(k, str) and type(v) is int and v >= 0}
    return members if len(set(members.values())) == len(members) else {}


def members_hash(members: Members, port: int) -> str:
    """Changes when a running daemon must restart to see the membership (not on address changes)."""
    return nodes_hash([(member_name(i), None) for i in members.values()], port=port)


def current_hash(config_map: V1ConfigMap | None) -> str | None:
    """The nodes hash the ensemble's ConfigMap was last written for."""
    if config_map is None or config_map.metadata is None:
        return None
    return (config_map.metadata.annotations or {}).get(ANNOTATION_NODES_HASH)


def _labels(clique: str) -> dict[str, str]:
    return {
        LABEL_COMPONENT: COMPONENT,
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_PART_OF: PART_OF,
        LABEL_CLIQUE: clique_hash(clique),
    }


def ensemble_config_map(
    clique: str, members: Members, addresses: Mapping[str, str], *, namespace: str, port: int
) -> V1ConfigMap:
    """``addresses``: node -> the IP of its current daemon Pod (nodes without one are left out)."""
    imex = [(member_name(index), addresses.get(node)) for node, index in members.items()]
    data = render_imex_files(imex, port=port) | {MEMBERS_KEY: json.dumps(dict(members), sort_keys=True)}
    return V1ConfigMap(
        api_version="v1",
        kind="ConfigMap",
        metadata=V1ObjectMeta(
            name=ensemble_name(clique),
            namespace=namespace,
            labels=_labels(clique),
            annotations={ANNOTATION_CLIQUE: clique, ANNOTATION_NODES_HASH: members_hash(members, port)},
        ),
        data=data,
    )


def daemon_pod(
    clique: str,
    node: str,
    *,
    members: Members,
    namespace: str,
    settings: ComputeDomainSettings,
    driver_root: str,
) -> V1Pod:
    """The IMEX daemon of ``node`` in the clique's ensemble, pinned to it."""
    command = list(settings.command) if settings.command else list(DEFAULT_COMMAND)
    readiness = list(settings.readiness_command or DEFAULT_READINESS)
    volumes = [V1Volume(name="config", config_map=V1ConfigMapVolumeSource(name=ensemble_name(clique)))]
    mounts = [V1VolumeMount(name="config", mount_path=CONFIG_DIR, read_only=True)]
    if not settings.command:
        volumes.append(V1Volume(name="driver-root", host_path=V1HostPathVolumeSource(path=driver_root)))
        mounts.append(V1VolumeMount(name="driver-root", mount_path=DRIVER_ROOT_MOUNT, read_only=True))
    container = V1Container(
        name=CONTAINER,
        image=settings.image,
        image_pull_policy=settings.image_pull_policy.value,
        command=command,
        args=settings.args,
        env=[*identity_env(members[node]), *(settings.env or [])],
        resources=settings.resources,
        ports=[V1ContainerPort(name="imex", container_port=settings.port)],
        readiness_probe=V1Probe.model_validate(
            {"exec": {"command": readiness}, "periodSeconds": 5, "timeoutSeconds": 5}
        ),
        volume_mounts=mounts,
        security_context=V1SecurityContext(privileged=True) if settings.privileged else None,
    )
    hashed = members_hash(members, settings.port)
    return V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=V1ObjectMeta(
            name=daemon_pod_name(clique, members[node], hashed),
            namespace=namespace,
            labels=_labels(clique) | {LABEL_NODES_HASH: hashed},
            annotations={ANNOTATION_CLIQUE: clique, ANNOTATION_NODE: node},
        ),
        spec=V1PodSpec(
            node_name=node,
            containers=[container],
            volumes=volumes,
            restart_policy="Always",
            runtime_class_name=settings.runtime_class_name,
            priority_class_name=settings.priority_class_name,
            service_account_name=settings.service_account_name,
            automount_service_account_token=False,
            tolerations=settings.tolerations or [V1Toleration(operator="Exists")],
            enable_service_links=False,
        ),
    )


def identity_env(index: int) -> list[V1EnvVar]:
    """Who the daemon is: its stable peer name (``IMEX_NODE_NAME``) and its Pod's address
    (``POD_IP``), for a wrapper's logs and the stand-in daemon, which finds itself by either."""
    return [
        V1EnvVar(name="IMEX_NODE_NAME", value=member_name(index)),
        V1EnvVar(
            name="POD_IP",
            value_from=V1EnvVarSource(field_ref=V1ObjectFieldSelector(field_path="status.podIP")),
        ),
    ]


def pod_address(pod: V1Pod | None) -> str | None:
    return pod.status.pod_ip if pod is not None and pod.status is not None and pod.status.pod_ip else None


def pod_ready(pod: V1Pod | None) -> bool:
    conditions = (pod.status.conditions if pod is not None and pod.status else None) or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def current_pods(pods: list[V1Pod] | tuple[V1Pod, ...], wanted_hash: str | None) -> dict[str, V1Pod]:
    """node -> its live daemon Pod of ``wanted_hash`` (leftovers of another membership, or Pods being
    deleted, are not the node's daemon)."""
    found: dict[str, V1Pod] = {}
    for pod in pods:
        metadata, spec = pod.metadata, pod.spec
        if metadata is None or spec is None or not spec.node_name or metadata.deletion_timestamp is not None:
            continue
        if wanted_hash is not None and (metadata.labels or {}).get(LABEL_NODES_HASH) == wanted_hash:
            found[spec.node_name] = pod
    return found
