"""ComputeDomain: the Pods of one job, on several nodes of a multi-node NVLink system, sharing GPU
memory through IMEX, and nobody else (docs/compute-domains.md).

A job creates a ComputeDomain in its namespace and its Pods reference the ResourceClaimTemplate the
domain names (``spec.channel.resourceClaimTemplate.name``); gpu-controller makes that template.
Each claim made from it gets the domain's own IMEX channel on whichever node the Pod lands, so two
jobs on the same nodes hold different channels and cannot import each other's memory, and one node
may serve several domains. No node count is given up front: the nodes whose Pods hold a claim of
the domain are its members (``status.nodes``), and the domain grows and shrinks with its Pods.

Why each field is where it is:

* ``status.channel`` is chosen by gpu-controller, unique among the cluster's domains, and never
  changes while the domain lives: the template selects exactly that channel, and gpu-handler's
  Prepare checks that the claim's domain owns the channel it was allocated, so a hand-written
  claim of another namespace's channel is refused on the node.
* ``spec.nvlinkDomain`` pins the domain to one NVLink clique (the value of the
  ``gpu.deckhouse.io/nvlinkDomain`` device attribute: ``<cluster UUID>.<clique ID>``); left out,
  gpu-controller chooses the clique that offers the most nodes when it first sees the domain and
  records it in ``status.nvlinkDomain``. IMEX reaches only cards of one clique, so a domain
  spread over two would not work.
* ``spec.devices`` optionally puts the job's GPUs in the same claim as the channel, with a
  ``matchAttribute`` constraint on ``gpu.deckhouse.io/nvlinkDomain`` over both, so the scheduler
  picks cards of the domain's clique.
* ``status.nodes[].index`` is the node's stable identity in the IMEX configuration: its daemon is
  named by it (``imex-<index>``), and a node keeps its index while it stays a member, so a
  restarted daemon Pod (a new IP address) is the same peer to the others.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import ClassVar, Final, Literal

from kubernetes.client import V1ObjectMeta
from pydantic import Field

from api.gpu.v1alpha1.common import API_VERSION, ApiModel, Conditions, Int32

KIND: Final = "ComputeDomain"
PLURAL: Final = "computedomains"
CHANNEL_CONFIG_KIND: Final = "ComputeDomainChannelConfig"

MAX_CHANNEL: Final = 2047
"""The NVIDIA driver's IMEX channels are minor numbers 0..2047 of ``nvidia-caps-imex-channels``."""
MAX_NODES: Final = 1024
"""More nodes than any NVLink fabric has (an NVL72 rack has 18 compute trays, NVL576 has 144)."""
NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
NVLINK_DOMAIN_PATTERN: Final = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.[0-9]+$"

READY_CONDITION: Final = "Ready"
FINALIZER: Final = "gpu.deckhouse.io/compute-domain"
DEVICE_TYPE: Final = "ImexChannel"
"""The ``gpu.deckhouse.io/deviceType`` of an IMEX channel device (``imex-channel-<N>``)."""
CHANNEL_ATTRIBUTE: Final = "imexChannel"
"""The int attribute ``gpu.deckhouse.io/imexChannel`` of a channel device: its channel number."""
CHANNEL_DEVICE_CLASS: Final = "imex-channel.gpu.deckhouse.io"


class DomainState(StrEnum):
    READY = "Ready"
    NOT_READY = "NotReady"


class ClaimTemplateRef(ApiModel):
    name: str = Field(
        max_length=253,
        pattern=NAME_PATTERN,
        description="The ResourceClaimTemplate gpu-controller makes in the domain's namespace; the "
        "job's Pods reference it in spec.resourceClaims.",
    )


class Channel(ApiModel):
    resource_claim_template: ClaimTemplateRef = Field(description="How the job's Pods join the domain.")


class DomainDevices(ApiModel):
    """GPUs the domain's claims get beside the channel, kept in the domain's NVLink clique."""

    device_class_name: str = Field(max_length=253, pattern=NAME_PATTERN, description="The GPUs' DeviceClass.")
    count: Int32 = Field(default=1, ge=1, le=64, description="GPUs per claim (per Pod).")


class ComputeDomainSpec(ApiModel):
    channel: Channel = Field(description="The claim template the job's Pods reference.")
    nvlink_domain: str | None = Field(
        default=None,
        max_length=64,
        pattern=NVLINK_DOMAIN_PATTERN,
        description="The NVLink clique (<cluster UUID>.<clique ID>, the devices' gpu.deckhouse.io/"
        "nvlinkDomain) the domain's Pods must land in; unset: gpu-controller chooses one.",
    )
    devices: DomainDevices | None = Field(
        default=None, description="GPUs in the same claim as the channel, in the same clique."
    )


class DomainNode(ApiModel):
    name: str = Field(max_length=253, description="The node.")
    index: Int32 | None = Field(
        default=None,
        ge=0,
        le=MAX_NODES,
        description="The node's stable index in its NVLink clique's IMEX ensemble; unset while the node "
        "is not in it.",
    )
    address: str | None = Field(
        default=None, max_length=64, description="The node's IMEX daemon's address, once it runs."
    )
    ready: bool = Field(
        default=False, description="Whether the node's IMEX daemon (its clique's ensemble's) is ready."
    )


class ComputeDomainStatus(ApiModel):
    state: DomainState | None = Field(default=None, description="Ready when every member's daemon is.")
    channel: Int32 | None = Field(
        default=None, ge=1, le=MAX_CHANNEL, description="The domain's IMEX channel, unique in the cluster."
    )
    nvlink_domain: str | None = Field(
        default=None, max_length=64, description="The NVLink clique the domain's claims select."
    )
    nodes: list[DomainNode] | None = Field(
        default=None, max_length=MAX_NODES, description="The nodes whose Pods hold a claim of the domain."
    )
    conditions: Conditions | None = Field(default=None, description="Ready, with the reason it is not.")
    observed_generation: int | None = Field(default=None, ge=0, description="The spec this status is for.")
    last_membership_change: datetime | None = Field(
        default=None, description="When nodes last joined or left."
    )


class ComputeDomain(ApiModel):
    """A set of Pods on several nodes that share GPU memory through one IMEX channel."""

    KIND: ClassVar[str] = KIND
    PLURAL: ClassVar[str] = PLURAL

    api_version: Literal["gpu.deckhouse.io/v1alpha1"] = Field(
        default=API_VERSION, alias="apiVersion", description="API version of the object."
    )
    kind: Literal["ComputeDomain"] = Field(default="ComputeDomain", description="Kind of the object.")
    metadata: V1ObjectMeta = Field(default_factory=V1ObjectMeta, description="Standard object metadata.")
    spec: ComputeDomainSpec = Field(description="How the job's Pods join the domain.")
    status: ComputeDomainStatus | None = Field(default=None, description="Members, channel and readiness.")


class ComputeDomainChannelConfig(ApiModel):
    """The opaque configuration of a channel request in a domain's claim template: which domain the
    claim is of. gpu-handler refuses a channel whose claim names no domain, or a domain (in the
    claim's own namespace) that does not own the channel."""

    api_version: Literal["gpu.deckhouse.io/v1alpha1"] = Field(default=API_VERSION, alias="apiVersion")
    kind: Literal["ComputeDomainChannelConfig"] = Field(default="ComputeDomainChannelConfig")
    domain: str = Field(max_length=253, pattern=NAME_PATTERN, description="The ComputeDomain's name.")
    domain_uid: str = Field(alias="domainUID", max_length=64, description="The ComputeDomain's UID.")
