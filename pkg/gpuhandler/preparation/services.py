"""The I/O of Prepare and Unprepare, each behind a small Protocol so tests can serve it from memory.

* :class:`ClaimReader` — the ResourceClaim, read fresh from the API server: the kubelet asks about
  a claim it just saw allocated, and an informer might not have it yet;
* :class:`PodReader` — a Pod reserving the claim, read fresh: its annotations ask for VFIO;
* :class:`ComputeDomainReader` — the ComputeDomain an IMEX channel's claim names, read fresh:
  whether it owns the channel, and whether its daemon on this node is ready, change by the second;
* :class:`OfferIndex` — a device of this node's pool as published (its attributes say what it
  is), from the informer of this node's slices, with a fresh LIST when the cache does not know it
  (a slice published a moment ago);
* :class:`ClaimEvents` — Kubernetes Events on the claim (and, for a failed prepare, on the
  PhysicalGPU of each card it was for, so ``kubectl describe physicalgpu`` shows it too);
* :class:`CardChanges` — tells the enrichment that a card's mode changed, so its PhysicalGPU (and
  the offers published from it) follow without waiting for the next periodic pass;
* :class:`DeviceStatusReports` — the outcome of a call for the claim's ``status.devices``
  (``Ready`` and the devices' identity; the gpu-handler's status book writes it, later, off the
  kubelet's thread).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kubernetes.client import ResourceV1ResourceClaim, V1Device, V1ObjectMeta, V1Pod, V1ResourceSlice

from api.gpu.v1alpha1 import ComputeDomain, PhysicalGPU
from pkg.domain.kinds import COMPUTE_DOMAIN, PHYSICAL_GPU
from pkg.framework.cache.informer import SharedInformer
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM, RESOURCE_SLICE
from pkg.framework.events.recorder import EventRecorderLogger, EventType
from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, ClaimRecord

# Hears the checkpoint as each Prepare, Unprepare, start-up and watchdog round leaves it (the cards
# held for VMs, the publisher's devices in use).
CheckpointListener = Callable[[CheckpointData], None]


class ClaimReader(Protocol):
    def get(self, namespace: str, name: str) -> ResourceV1ResourceClaim:
        """The claim; raises ``NotFoundError`` when it does not exist."""
        ...


class KubeClaimReader:
    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def get(self, namespace: str, name: str) -> ResourceV1ResourceClaim:
        return self._client.get(RESOURCE_CLAIM, name, namespace)


class PodReader(Protocol):
    def get(self, namespace: str, name: str) -> V1Pod:
        """The Pod; raises ``NotFoundError`` when it does not exist."""
        ...


class KubePodReader:
    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def get(self, namespace: str, name: str) -> V1Pod:
        return self._client.get(POD, name, namespace)


class ComputeDomainReader(Protocol):
    def get(self, namespace: str, name: str) -> ComputeDomain:
        """The domain; raises ``NotFoundError`` when it does not exist."""
        ...


class KubeComputeDomainReader:
    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def get(self, namespace: str, name: str) -> ComputeDomain:
        return self._client.get(COMPUTE_DOMAIN, name, namespace)


class OfferIndex(Protocol):
    def device(self, pool: str, name: str) -> V1Device | None: ...


class SliceOfferIndex:
    """Devices of this node's slices: the cache first, the API server when the cache lacks one."""

    def __init__(self, *, slices: SharedInformer[V1ResourceSlice], client: KubeClient, selector: str) -> None:
        self._slices = slices
        self._client = client
        self._selector = selector  # the informer's own field selector, for the fresh list

    def device(self, pool: str, name: str) -> V1Device | None:
        found = _find(self._slices.store.list(), pool, name)
        if found is None:
            fresh, _ = self._client.list(RESOURCE_SLICE, field_selector=self._selector)
            found = _find(fresh, pool, name)
        return found


def _find(slices: list[V1ResourceSlice], pool: str, name: str) -> V1Device | None:
    """The device in the newest generation of ``pool`` that has it."""
    candidates = [s for s in slices if s.spec.pool.name == pool]
    for resource_slice in sorted(candidates, key=lambda s: -int(s.spec.pool.generation or 0)):
        for device in resource_slice.spec.devices or []:
            if device.name == name:
                return device
    return None


class ClaimEvents(Protocol):
    def warning(self, claim: ClaimRef, *, reason: str, message: str) -> None: ...

    def normal(self, claim: ClaimRef, *, reason: str, message: str) -> None: ...

    def card_warning(self, card: str, *, reason: str, message: str) -> None:
        """A Warning on the PhysicalGPU of this node at PCI address ``card`` (none if unknown)."""
        ...


class RecorderClaimEvents:
    def __init__(self, recorder: EventRecorderLogger, gpus: Callable[[], list[PhysicalGPU]] = list) -> None:
        self._recorder = recorder
        self._gpus = gpus  # this node's PhysicalGPUs (the informer's store)

    def card_warning(self, card: str, *, reason: str, message: str) -> None:
        for gpu in self._gpus():
            status = gpu.status
            if status is not None and status.pci_info is not None and status.pci_info.address == card:
                self._recorder.event(gpu, type_="Warning", reason=reason, message=message, kind=PHYSICAL_GPU)

    def warning(self, claim: ClaimRef, *, reason: str, message: str) -> None:
        self._record(claim, "Warning", reason, message)

    def normal(self, claim: ClaimRef, *, reason: str, message: str) -> None:
        self._record(claim, "Normal", reason, message)

    def _record(self, claim: ClaimRef, type_: EventType, reason: str, message: str) -> None:
        regarding = ResourceV1ResourceClaim(
            api_version="resource.k8s.io/v1",
            kind="ResourceClaim",
            metadata=V1ObjectMeta(name=claim.name, namespace=claim.namespace, uid=claim.uid),
        )
        self._recorder.event(regarding, type_=type_, reason=reason, message=message, kind=RESOURCE_CLAIM)


class CardChanges(Protocol):
    def changed(self, card: str) -> None:
        """The card (PCI address) changed mode; whoever reports on it should look again."""
        ...


@dataclass(frozen=True, order=True)
class DeviceKey:
    """One allocated device of our driver, as the claim's ``status.devices`` keys its entry."""

    pool: str
    device: str
    share_id: str | None = None


class DeviceStatusReports(Protocol):
    def prepared(self, record: ClaimRecord) -> None:
        """The claim is prepared as ``record`` says (a fresh Prepare or the recorded answer)."""
        ...

    def failed(
        self, claim: ClaimRef, devices: Sequence[DeviceKey] | None, *, reason: str, message: str
    ) -> None:
        """Prepare failed; ``devices`` as far as the call got to know them (``None``: not at all)."""
        ...

    def unprepared(self, claim: ClaimRef) -> None: ...


class NoStatusReports:
    """Where nothing writes the claims' device status (a plugin built without the gpu-handler)."""

    def prepared(self, record: ClaimRecord) -> None:
        pass

    def failed(
        self, claim: ClaimRef, devices: Sequence[DeviceKey] | None, *, reason: str, message: str
    ) -> None:
        pass

    def unprepared(self, claim: ClaimRef) -> None:
        pass
