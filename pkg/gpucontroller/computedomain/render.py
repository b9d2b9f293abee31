"""What the compute-domain controller writes, rendered from a domain (pure: no API calls).

* the DeviceClass of IMEX channels (one for the cluster);
* a domain's ResourceClaimTemplate: the channel request selects exactly the domain's channel in its
  clique, and with ``spec.devices`` a GPU request constrained to the same clique;
* a domain's ConfigMap (the IMEX daemon's files, :mod:`pkg.backends.nvidia.imex_config`) and one
  daemon Pod per member node, named from the domain and the member's stable index.

The Pods and the ConfigMap live in the node components' namespace, not the domain's: a domain's
namespace belongs to its job, and the daemons need privileges a job's namespace should not grant.
They cannot have the domain as owner across namespaces, so they carry its UID as a label (what the
controller finds them by) and its namespace/name as an annotation (what wakes it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from kubernetes.client import (
    V1CELDeviceSelector,
    V1ConfigMap,
    V1ConfigMapVolumeSource,
    V1Container,
    V1ContainerPort,
    V1DeviceClaim,
    V1DeviceClaimConfiguration,
    V1DeviceClass,
    V1DeviceClassSpec,
    V1DeviceConstraint,
    V1DeviceRequest,
    V1DeviceSelector,
    V1ExactDeviceRequest,
    V1HostPathVolumeSource,
    V1ObjectMeta,
    V1OpaqueDeviceConfiguration,
    V1Pod,
    V1PodSpec,
    V1Probe,
    V1ResourceClaimSpec,
    V1ResourceClaimTemplate,
    V1ResourceClaimTemplateSpec,
    V1SecurityContext,
    V1Toleration,
    V1Volume,
    V1VolumeMount,
)

from api.gpu.v1alpha1 import (
    COMPUTE_DOMAIN_CHANNEL_ATTRIBUTE,
    COMPUTE_DOMAIN_CHANNEL_DEVICE_CLASS,
    IMEX_CHANNEL_DEVICE_TYPE,
    ComputeDomain,
    ComputeDomainChannelConfig,
    ComputeDomainSettings,
)
from api.gpu.v1alpha1.computedomain import DomainNode
from pkg.backends.nvidia.imex_config import (
    CONFIG_DIR,
    CONFIG_FILE,
    member_name,
    nodes_hash,
    render_imex_files,
)
from pkg.domain.kinds import COMPUTE_DOMAIN
from pkg.framework.reconcile.owner_references import controller_reference
from pkg.gpucontroller.gpuclass.render import cel_string
from pkg.gpucontroller.names import LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_PART_OF, MANAGED_BY, PART_OF

DRIVER: Final = "gpu.deckhouse.io"
NVLINK_DOMAIN_ATTRIBUTE: Final = "nvlinkDomain"
CHANNEL_REQUEST: Final = "channel"
GPUS_REQUEST: Final = "gpus"
COMPONENT: Final = "imex-daemon"
LABEL_DOMAIN_UID: Final = "gpu.deckhouse.io/compute-domain-uid"
LABEL_NODES_HASH: Final = "gpu.deckhouse.io/imex-nodes-hash"
ANNOTATION_DOMAIN: Final = "gpu.deckhouse.io/compute-domain"
"""``<namespace>/<name>`` of the domain a daemon Pod or ConfigMap serves."""
ANNOTATION_NODE: Final = "gpu.deckhouse.io/imex-node"
DAEMON_SELECTOR: Final = f"{LABEL_COMPONENT}={COMPONENT},{LABEL_MANAGED_BY}={MANAGED_BY}"
"""The label selector of every daemon Pod and domain ConfigMap."""
DRIVER_ROOT_MOUNT: Final = "/driver-root"
CONTAINER: Final = "imex"
_NAME_ROOM: Final = 40
_HASH_IN_NAME: Final = 8
_NOT_NAME = re.compile(r"[^a-z0-9-]+")

DEFAULT_COMMAND: Final = (
    "sh",
    "-c",
    f"cat {CONFIG_DIR}/hosts >> /etc/hosts && "
    f"export PATH=$PATH:{DRIVER_ROOT_MOUNT}/usr/bin:{DRIVER_ROOT_MOUNT}/bin && "
    f"exec nvidia-imex -c {CONFIG_DIR}/{CONFIG_FILE}",
)
"""NVIDIA's daemon, from the driver root, after our stable peer names are made resolvable."""
DEFAULT_READINESS: Final = (
    "sh",
    "-c",
    f"PATH=$PATH:{DRIVER_ROOT_MOUNT}/usr/bin:{DRIVER_ROOT_MOUNT}/bin nvidia-imex-ctl -q | grep -qx READY",
)


def domain_key(domain: ComputeDomain) -> str:
    return f"{domain.metadata.namespace}/{domain.metadata.name}"


def domain_uid(domain: ComputeDomain) -> str:
    return str(domain.metadata.uid)


def channel_device_class() -> V1DeviceClass:
    expression = (
        f"device.driver == {cel_string(DRIVER)} && "
        f'device.attributes["{DRIVER}"].deviceType == {cel_string(IMEX_CHANNEL_DEVICE_TYPE)}'
    )
    return V1DeviceClass(
        api_version="resource.k8s.io/v1",
        kind="DeviceClass",
        metadata=V1ObjectMeta(
            name=COMPUTE_DOMAIN_CHANNEL_DEVICE_CLASS,
            labels={LABEL_MANAGED_BY: MANAGED_BY, LABEL_PART_OF: PART_OF},
        ),
        spec=V1DeviceClassSpec(selectors=[V1DeviceSelector(cel=V1CELDeviceSelector(expression=expression))]),
    )


def channel_selector(channel: int, clique: str) -> str:
    attributes = f'device.attributes["{DRIVER}"]'
    return (
        f"{attributes}.{COMPUTE_DOMAIN_CHANNEL_ATTRIBUTE} == {channel} && "
        f"{attributes}.{NVLINK_DOMAIN_ATTRIBUTE} == {cel_string(clique)}"
    )


def claim_template(domain: ComputeDomain, *, channel: int, clique: str) -> V1ResourceClaimTemplate:
    """The template the job's Pods reference: its claims hold the domain's channel (and GPUs)."""
    config = ComputeDomainChannelConfig(domain=str(domain.metadata.name), domain_uid=domain_uid(domain))
    requests = [
        V1DeviceRequest(
            name=CHANNEL_REQUEST,
            exactly=V1ExactDeviceRequest(
                device_class_name=COMPUTE_DOMAIN_CHANNEL_DEVICE_CLASS,
                allocation_mode="ExactCount",
                count=1,
                selectors=[
                    V1DeviceSelector(cel=V1CELDeviceSelector(expression=channel_selector(channel, clique)))
                ],
            ),
        )
    ]
    constraints = None
    devices = domain.spec.devices
    if devices is not None:
        requests.append(
            V1DeviceRequest(
                name=GPUS_REQUEST,
                exactly=V1ExactDeviceRequest(
                    device_class_name=devices.device_class_name,
                    allocation_mode="ExactCount",
                    count=devices.count,
                ),
            )
        )
        constraints = [
            V1DeviceConstraint(
                requests=[CHANNEL_REQUEST, GPUS_REQUEST],
                match_attribute=f"{DRIVER}/{NVLINK_DOMAIN_ATTRIBUTE}",
            )
        ]
    opaque = V1OpaqueDeviceConfiguration(driver=DRIVER, parameters=config.to_api_dict())
    return V1ResourceClaimTemplate(
        api_version="resource.k8s.io/v1",
        kind="ResourceClaimTemplate",
        metadata=V1ObjectMeta(
            name=domain.spec.channel.resource_claim_template.name,
            namespace=domain.metadata.namespace,
            labels={LABEL_MANAGED_BY: MANAGED_BY, LABEL_DOMAIN_UID: domain_uid(domain)},
            owner_references=[controller_reference(domain, COMPUTE_DOMAIN)],
        ),
        spec=V1ResourceClaimTemplateSpec(
            spec=V1ResourceClaimSpec(
                devices=V1DeviceClaim(
                    requests=requests,
                    constraints=constraints,
                    config=[V1DeviceClaimConfiguration(requests=[CHANNEL_REQUEST], opaque=opaque)],
                )
            )
        ),
    )


def _prefix(domain: ComputeDomain) -> str:
    """``<name>-<uid[:8]>``: readable, and unique although every namespace may use the same name."""
    name = _NOT_NAME.sub("-", str(domain.metadata.name).lower())[:_NAME_ROOM].strip("-") or "domain"
    return f"{name}-{domain_uid(domain)[:8]}"


def config_map_name(domain: ComputeDomain) -> str:
    return f"{_prefix(domain)}-imex"


def daemon_pod_name(domain: ComputeDomain, index: int, members: str) -> str:
    """``<prefix>-imex-<index>-<membership hash>``: the Pod of a new membership is created beside
    the old one while that one terminates (a Pod's name stays taken until its kubelet lets go)."""
    return f"{_prefix(domain)}-imex-{index}-{members[:_HASH_IN_NAME]}"


def imex_members(nodes: Sequence[DomainNode]) -> list[tuple[str, str | None]]:
    return [(member_name(n.index), n.address) for n in nodes]


def members_hash(nodes: Sequence[DomainNode], port: int) -> str:
    """Changes when a running daemon must restart to see the membership (not on address changes)."""
    return nodes_hash(imex_members(nodes), port=port)


def _labels(domain: ComputeDomain) -> dict[str, str]:
    return {
        LABEL_COMPONENT: COMPONENT,
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_PART_OF: PART_OF,
        LABEL_DOMAIN_UID: domain_uid(domain),
    }


def daemon_config_map(
    domain: ComputeDomain, nodes: Sequence[DomainNode], *, namespace: str, port: int
) -> V1ConfigMap:
    return V1ConfigMap(
        api_version="v1",
        kind="ConfigMap",
        metadata=V1ObjectMeta(
            name=config_map_name(domain),
            namespace=namespace,
            labels=_labels(domain),
            annotations={ANNOTATION_DOMAIN: domain_key(domain)},
        ),
        data=render_imex_files(imex_members(nodes), port=port),
    )


def daemon_pod(
    domain: ComputeDomain,
    node: DomainNode,
    *,
    nodes: Sequence[DomainNode],
    namespace: str,
    settings: ComputeDomainSettings,
    driver_root: str,
) -> V1Pod:
    """The member's IMEX daemon, pinned to its node; ``nodes`` (the whole membership) names its hash."""
    command = list(settings.command) if settings.command else list(DEFAULT_COMMAND)
    readiness = list(settings.readiness_command or DEFAULT_READINESS)
    volumes = [V1Volume(name="config", config_map=V1ConfigMapVolumeSource(name=config_map_name(domain)))]
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
        env=settings.env,
        resources=settings.resources,
        ports=[V1ContainerPort(name="imex", container_port=settings.port)],
        readiness_probe=V1Probe.model_validate(
            {"exec": {"command": readiness}, "periodSeconds": 5, "timeoutSeconds": 5}
        ),
        volume_mounts=mounts,
        security_context=V1SecurityContext(privileged=True) if settings.privileged else None,
    )
    members = members_hash(nodes, settings.port)
    labels = _labels(domain) | {LABEL_NODES_HASH: members}
    return V1Pod(
        api_version="v1",
        kind="Pod",
        metadata=V1ObjectMeta(
            name=daemon_pod_name(domain, node.index, members),
            namespace=namespace,
            labels=labels,
            annotations={ANNOTATION_DOMAIN: domain_key(domain), ANNOTATION_NODE: node.name},
        ),
        spec=V1PodSpec(
            node_name=node.name,
            containers=[container],
            volumes=volumes,
            restart_policy="Always",
            runtime_class_name=settings.runtime_class_name,
            priority_class_name=settings.priority_class_name,
            service_account_name=settings.service_account_name,
            automount_service_account_token=False,
            tolerations=settings.tolerations or [V1Toleration(operator="Exists")],
            image_pull_secrets=None,
            enable_service_links=False,
        ),
    )
