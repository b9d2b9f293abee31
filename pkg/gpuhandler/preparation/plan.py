"""What a claim's allocation asks of this node: which of our offers, for which requests, configured
how, and of which device kind.

Everything is read from the allocation and from the published offer, never guessed from names:
a result names a device of our pool; the device's attributes in this node's ResourceSlices say
what it is (``deviceType``, ``sharingStrategy``, the card's ``pciAddress`` — none for a device on
no card, an IMEX channel — and what its kind reads: a MIG placement, a partition, an mdev type);
the allocation's opaque configs for our driver (from the class, then the claim, the later winning)
say how it is configured. The first registered kind that accepts the offer plans the rest
(:mod:`.kinds`), so this module names no kind. Anything that does not fit — a result for another
node's pool, a device this node does not publish, an attribute missing or of the wrong kind, a
config that is not a valid :class:`~api.gpu.v1alpha1.GpuConfig` or
:class:`~api.gpu.v1alpha1.ComputeDomainChannelConfig` (each parsed by its own model, any other kind
refused by name) — is a :class:`~.kinds.PlanError` that names the claim, so the Prepare fails with
a reason a person can act on.

Whether a VM's launcher consumes the claim is a fact of the claim, read once here from the Pods
reserving it (:func:`vm_requested`): every device of such a claim must be of a kind a VM uses, and a
device a VM uses is refused for a container by its own kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubernetes.client import ResourceV1ResourceClaim, V1DeviceRequestAllocationResult, V1ObjectMeta
from pydantic import ValidationError

from api.gpu.v1alpha1 import (
    COMPUTE_DOMAIN_CHANNEL_CONFIG_KIND,
    ComputeDomainChannelConfig,
    GpuConfig,
    GpuConfigError,
    SharingStrategy,
    parse_gpu_config,
)
from api.gpu.v1alpha1.config import KIND as GPU_CONFIG_KIND
from pkg.domain.names import DOMAIN, DRIVER
from pkg.framework.client import NotFoundError
from pkg.gpuhandler.preparation.checkpoint import ClaimRecord, DeviceRecord
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.kinds import (
    VFIO_ANNOTATION,
    Consumer,
    DeviceKind,
    Kinds,
    Offer,
    PlanContext,
    PlanError,
    attribute,
    enum_value,
    pci_address,
)
from pkg.gpuhandler.preparation.services import OfferIndex, PodReader

SKIP_PREPARE: Final = "NodePrepareResources"  # a result's skipNodeOperations entry: not ours to prepare
REASON_VM_NOT_ALLOWED: Final = "VfioNotAllowed"
PCI_ADDRESS: Final = "pciAddress"
_NO_CARD: Final = "\0"  # the attribute's default: the offer is on no card
_CONFIG_KINDS: Final = frozenset({GPU_CONFIG_KIND, COMPUTE_DOMAIN_CHANNEL_CONFIG_KIND})


@dataclass(frozen=True)
class ClaimPlan:
    """The devices of the claim this node prepares, each with its kind's record, as the claim's
    checkpoint record will hold them."""

    namespace: str
    name: str
    uid: str
    devices: tuple[DeviceRecord, ...]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class ClaimPlanner:
    """Plans a claim for this node's ``pool`` from its published ``offers``, through ``kinds``."""

    def __init__(self, *, pool: str, offers: OfferIndex, pods: PodReader, kinds: Kinds) -> None:
        self._pool = pool
        self._offers = offers
        self._pods = pods
        self._kinds = kinds

    def plan(
        self,
        claim: ResourceV1ResourceClaim,
        offers: Sequence[Offer] | None = None,
        *,
        earlier: ClaimRecord | None = None,
    ) -> ClaimPlan:
        """The devices of ``claim`` this node must prepare (its ``offers``, when already read);
        ``earlier`` is the claim's record from an unfinished attempt, whose choices a retry keeps."""
        meta = claim.metadata or V1ObjectMeta()
        label = f"claim {meta.namespace}/{meta.name}"
        if offers is None:
            offers = self.offers(claim)
        context = PlanContext(
            claim=claim, label=label, for_vm=vm_requested(claim, self._pods), earlier=earlier
        )
        devices = []
        for offer in offers:
            kind = self._kinds.for_offer(offer, for_vm=context.for_vm)
            if kind.on_card and not offer.on_card:
                raise PlanError(f"{offer.where} has no str attribute {DOMAIN}/{PCI_ADDRESS}")
            if context.for_vm and kind.consumer is Consumer.CONTAINER:
                raise PrepareFailedError(
                    REASON_VM_NOT_ALLOWED,
                    f"{label}: VFIO needs a whole card allocated exclusively, but device {offer.name} "
                    f"is {_described(kind, offer)}",
                )
            device = DeviceRecord(
                pool=str(offer.result.pool),
                device=offer.name,
                requests=[str(offer.result.request)],
                card=offer.card,
                device_type=offer.device_type,
                share_id=offer.result.share_id,
            )
            record = kind.plan(offer, context)
            if record is not None and kind.record_field is not None:
                device.set_kind_record(kind.record_field, record)
            devices.append(device)
        return ClaimPlan(
            namespace=str(meta.namespace), name=str(meta.name), uid=str(meta.uid), devices=tuple(devices)
        )

    def offers(self, claim: ResourceV1ResourceClaim) -> tuple[Offer, ...]:
        """The allocated devices of ``claim`` this node prepares, each with its offer and config."""
        meta = claim.metadata or V1ObjectMeta()
        label = f"claim {meta.namespace}/{meta.name}"
        allocation = claim.status.allocation if claim.status else None
        if allocation is None or allocation.devices is None:
            raise PlanError(f"{label} is not allocated")
        offers = []
        for result in allocation.devices.results or []:
            if result.driver != DRIVER or SKIP_PREPARE in (result.skip_node_operations or []):
                continue
            if result.pool != self._pool:
                raise PlanError(
                    f"{label}: device {result.device} is allocated from pool {result.pool}, not {self._pool}"
                )
            device = self._offers.device(result.pool, result.device)
            if device is None:
                raise PlanError(f"{label}: device {result.device} is not published in pool {self._pool}")
            where = f"{label}: device {result.device}"
            config, domain = _configs_for(result, allocation.devices.config or [], label)
            sharing = enum_value(
                SharingStrategy,
                attribute(device, "sharingStrategy", str, where, default="Exclusive"),
                "sharingStrategy",
                where,
            )
            wanted = config.sharing.strategy if config is not None and config.sharing is not None else None
            if wanted is not None and wanted is not sharing:
                raise PlanError(
                    f"{where} is a {sharing.value} device but its config asks for sharing strategy "
                    f"{wanted.value}"
                )
            address = attribute(device, PCI_ADDRESS, str, where, default=_NO_CARD)
            on_card = address is not _NO_CARD
            offers.append(
                Offer(
                    result=result,
                    device=device,
                    config=config,
                    card=pci_address(address, where) if on_card else str(result.device),
                    device_type=attribute(device, "deviceType", str, where),
                    sharing=sharing,
                    where=where,
                    on_card=on_card,
                    domain=domain,
                )
            )
        if not offers:
            raise PlanError(f"{label} has no device of driver {DRIVER} to prepare")
        return tuple(offers)


def driver_capabilities(offer: Offer) -> frozenset[str] | None:
    """The driver capabilities the offer's config asks for; None when it names none (the node's
    default)."""
    if offer.config is None or offer.config.driver_capabilities is None:
        return None
    return frozenset(capability.value for capability in offer.config.driver_capabilities)


def _described(kind: DeviceKind, offer: Offer) -> str:
    """``a MIG device``, ``a TimeSlicing share``: the kind's name, with the offer's strategy."""
    if offer.sharing is SharingStrategy.EXCLUSIVE:
        return f"a {kind.name}"
    return f"a {offer.sharing.value} {kind.name}"


def vm_requested(claim: ResourceV1ResourceClaim, pods: PodReader) -> bool:
    """Whether the Pods reserving ``claim`` ask for its devices as a VM's (:data:`~.kinds.VFIO_ANNOTATION`);
    they must agree, and say "true" or "false"."""
    meta = claim.metadata or V1ObjectMeta()
    label = f"claim {meta.namespace}/{meta.name}"
    answers: dict[str, bool] = {}
    for consumer in (claim.status.reserved_for if claim.status else None) or []:
        if consumer.resource != "pods" or (consumer.api_group or "") != "":
            continue
        try:
            pod = pods.get(str(meta.namespace), consumer.name)
        except NotFoundError:
            continue  # gone already: it asks for nothing
        if pod.metadata is None or pod.metadata.uid != consumer.uid:
            continue
        value = (pod.metadata.annotations or {}).get(VFIO_ANNOTATION)
        if value is None:
            answers[consumer.name] = False
        elif value.strip().lower() in ("true", "false"):
            answers[consumer.name] = value.strip().lower() == "true"
        else:
            raise PrepareFailedError(
                "InvalidAllocation",
                f'{label}: Pod {consumer.name} has annotation {VFIO_ANNOTATION}="{value}"; '
                'use "true" or "false"',
            )
    if len(set(answers.values())) > 1:
        asking = sorted(name for name, wants in answers.items() if wants)
        others = sorted(name for name, wants in answers.items() if not wants)
        raise PrepareFailedError(
            REASON_VM_NOT_ALLOWED,
            f"{label}: Pods {asking} ask for VFIO but Pods {others} share the claim without it; "
            "a card bound to vfio-pci serves one VM only",
        )
    return any(answers.values())


def _configs_for(
    result: V1DeviceRequestAllocationResult, configs: Sequence[Any], label: str
) -> tuple[GpuConfig | None, ComputeDomainChannelConfig | None]:
    """The effective config of each kind for a result: class configs first, then claim configs;
    the last of a kind wins. A config of a kind we do not know is refused by name."""
    request = str(result.request)
    parent = request.split("/", 1)[0]  # a subrequest "gpu/mig" is configured by "gpu" too
    best: dict[str, tuple[tuple[int, int], Any]] = {}
    for position, config in enumerate(configs):
        opaque = config.opaque
        if opaque is None or opaque.driver != DRIVER:
            continue
        requests = config.requests or []
        if requests and request not in requests and parent not in requests:
            continue
        parameters = opaque.parameters
        # Without a kind (or not an object) it is read as a GpuConfig, whose parser says what is wrong.
        kind = parameters.get("kind", GPU_CONFIG_KIND) if isinstance(parameters, dict) else GPU_CONFIG_KIND
        if kind not in _CONFIG_KINDS:
            raise PlanError(
                f"{label}: the {DRIVER} config for request {request} is of kind {kind!r}, "
                f"not one of {sorted(_CONFIG_KINDS)}"
            )
        rank = (0 if config.source == "FromClass" else 1, position)
        if kind not in best or rank > best[kind][0]:
            best[kind] = (rank, parameters)
    gpu = best.get(GPU_CONFIG_KIND)
    channel = best.get(COMPUTE_DOMAIN_CHANNEL_CONFIG_KIND)
    try:
        return (
            parse_gpu_config(gpu[1]) if gpu is not None else None,
            ComputeDomainChannelConfig.model_validate(channel[1]) if channel is not None else None,
        )
    except (GpuConfigError, ValidationError) as exc:
        raise PlanError(f"{label}: the {DRIVER} config for request {request} is invalid: {exc}") from None
