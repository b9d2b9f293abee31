"""Events when an allocation of our driver is created or released, whoever allocated it.

One ``Normal`` Event per claim and transition on the ResourceClaim (listing its devices), and one
per claim on each PhysicalGPU it holds a device of, so ``kubectl describe physicalgpu`` shows who
held the card and for how long. The accountant emits them once per transition of its persisted
ledger, so a restart or a leader change never repeats them; the recorder folds repeats into one
Event's series and rate-limits per object (burst 25, then one per 5 minutes), so a busy card
cannot flood the API server.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from kubernetes.client import ResourceV1ResourceClaim, V1ObjectMeta

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.dracontroller.accounting.devices import HeldDevice
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.events.recorder import EventRecorderLogger

REASON_CREATED = "AllocationCreated"
REASON_RELEASED = "AllocationReleased"


class AllocationEvents:
    def __init__(self, *, recorder: EventRecorderLogger) -> None:
        self._recorder = recorder

    def created(self, devices: Sequence[HeldDevice]) -> None:
        """``devices`` were allocated (any number of claims)."""
        for group in _by_claim(devices):
            first = group[0]
            pods = f" for pod {', '.join(first.pods)}" if first.pods else ""
            self._emit(
                group,
                reason=REASON_CREATED,
                claim_note=f"allocated {_list(group)} by {first.allocated_by}{pods}",
                card_note=f"allocated to claim {first.namespace}/{first.claim}{pods} by {first.allocated_by}",
            )

    def released(self, devices: Sequence[tuple[HeldDevice, float]]) -> None:
        """``devices`` were released after the seconds paired with each."""
        held = {d.key: s for d, s in devices}
        for group in _by_claim([d for d, _ in devices]):
            first = group[0]
            seconds = max(held[d.key] for d in group)
            self._emit(
                group,
                reason=REASON_RELEASED,
                claim_note=f"released {_list(group)} after {seconds:.0f}s",
                card_note=f"released by claim {first.namespace}/{first.claim} after {seconds:.0f}s",
            )

    def _emit(self, group: list[HeldDevice], *, reason: str, claim_note: str, card_note: str) -> None:
        first = group[0]
        claim = ResourceV1ResourceClaim(
            api_version=RESOURCE_CLAIM.api_version,
            kind=RESOURCE_CLAIM.kind,
            metadata=V1ObjectMeta(name=first.claim, namespace=first.namespace, uid=first.claim_uid),
        )
        self._recorder.event(claim, type_="Normal", reason=reason, message=claim_note, kind=RESOURCE_CLAIM)
        for card in sorted({d.facts.physical_gpu for d in group if d.facts.physical_gpu}):
            on_card = [d for d in group if d.facts.physical_gpu == card]
            gpu = PhysicalGPU(metadata=V1ObjectMeta(name=card))
            self._recorder.event(
                gpu, type_="Normal", reason=reason, message=f"{_list(on_card)} {card_note}", kind=PHYSICAL_GPU
            )


def _by_claim(devices: Sequence[HeldDevice]) -> list[list[HeldDevice]]:
    groups: dict[str, list[HeldDevice]] = defaultdict(list)
    for device in devices:
        groups[device.claim_uid].append(device)
    return [sorted(g, key=lambda d: d.key) for _, g in sorted(groups.items())]


def _list(devices: Sequence[HeldDevice]) -> str:
    named = [
        f"{d.device} ({d.facts.device_type or 'device'}, class {d.device_class}, node {d.facts.node})"
        for d in devices
    ]
    return ("device " if len(named) == 1 else "devices ") + ", ".join(named)


__all__ = ["REASON_CREATED", "REASON_RELEASED", "AllocationEvents"]
