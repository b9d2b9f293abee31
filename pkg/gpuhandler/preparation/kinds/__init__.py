"""Device kinds: what preparing and releasing one device of a claim means, one module per kind.

A claim's devices are prepared one after the other, each by its kind (:class:`DeviceKind`): a whole
card (:mod:`.whole_card`), a MIG device (:mod:`.mig`), a TimeSlicing or MPS share of a card
(:mod:`.share`), a card passed through to a VM (:mod:`.vfio`), a VM's vGPU (:mod:`.vgpu`). A kind
works from the device's checkpoint record alone, written before anything changes on the node, so the
same record that prepared a device can release it after a crash. ``prepare`` returns everything a
container of the device needs (its :class:`~pkg.backends.preparation.ContainerEdits`, made in one
place); ``release`` undoes it and is idempotent: what is already gone is success.

:class:`Kinds` says which kind a recorded device is, from its record: each kind but the whole
card has a field of its own (``mig``, ``sharing``, ``vfio``, ``vgpu``, ...). Adding a kind is one
module (and its record field) and one entry in the list the composition root
(:mod:`~pkg.gpuhandler.preparation.setup`) registers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kubernetes.client import ResourceV1ResourceClaim

from pkg.backends.preparation import CardPreparer, ContainerEdits
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, ClaimRecord, DeviceRecord
from pkg.gpuhandler.preparation.failures import PrepareFailedError


@dataclass
class ClaimWork:
    """What a kind reads and reports while it prepares or releases one claim's devices.

    ``record`` is the claim's checkpoint record (a kind may complete its own device's entry, as
    the MIG kind does with the instance it made); ``checkpoint`` shows the other claims on the
    node; ``resource`` is the claim as read from the API server (Prepare only). A kind adds the
    cards whose mode it changed to ``changed_cards`` (the enrichment looks at them again) and, the
    first time it switches a card's MIG mode, the mode it found to ``found_mig_modes`` (a
    rolled-back Prepare puts it back).
    """

    record: ClaimRecord
    checkpoint: CheckpointData
    resource: ResourceV1ResourceClaim | None = None
    changed_cards: set[str] = field(default_factory=set)
    found_mig_modes: dict[str, bool] = field(default_factory=dict)

    def others_on(self, card: str) -> list[ClaimRecord]:
        """The other claims with a device on ``card``, in any state."""
        return [c for c in self.checkpoint.claims_on_card(card) if c.uid != self.record.uid]

    def mig_mode_changed(self, card: str, *, found: bool) -> None:
        """Notes that ``card``'s MIG mode was switched away from ``found``."""
        self.found_mig_modes.setdefault(card, found)
        self.changed_cards.add(card)


def require_free(preparer: CardPreparer, card: str, work: ClaimWork, *, to: str) -> None:
    """Refuses (``CardBusy``) to switch ``card`` ``to`` another mode while another claim is on it,
    in any state, or a process runs on it: a mode switch resets what runs there."""
    claim = f"claim {work.record.namespace}/{work.record.name}"
    if others := work.others_on(card):
        raise PrepareFailedError(
            "CardBusy", f"{claim}: card {card} must switch {to} but is prepared for {others[0]}"
        )
    if processes := list(preparer.processes(card)):
        raise PrepareFailedError(
            "CardBusy", f"{claim}: card {card} must switch {to} but runs processes {processes}"
        )


class DeviceKind(Protocol):
    @property
    def name(self) -> str:
        """The kind's name, for messages."""
        ...

    @property
    def record_field(self) -> str | None:
        """The field of a device's record that only a device of this kind has (``mig``,
        ``sharing``, ``vfio``); ``None`` for the kind of a device that has none of them."""
        ...

    def prepare(self, device: DeviceRecord, work: ClaimWork) -> ContainerEdits:
        """Makes ``device`` ready (idempotently) and returns what a container of it needs."""
        ...

    def release(self, device: DeviceRecord, work: ClaimWork) -> None:
        """Undoes ``prepare`` for ``device``, or whatever part of it happened; idempotent."""
        ...


class UnknownKindError(LookupError):
    """A recorded device of no registered kind, or of several (a bug, or a record of a newer release)."""


class Kinds:
    """The registered kinds; a device is of the kind whose record field its record has, else of the
    kind without a field."""

    def __init__(self, kinds: Sequence[DeviceKind]) -> None:
        self._kinds = tuple(kinds)

    def of(self, device: DeviceRecord) -> DeviceKind:
        marked = [
            k for k in self._kinds if k.record_field and getattr(device, k.record_field, None) is not None
        ]
        plain = [k for k in self._kinds if k.record_field is None]
        found = marked or plain
        if len(found) != 1:
            raise UnknownKindError(
                f"device {device.device} on card {device.card} is of "
                + (f"{len(found)} kinds: {[k.name for k in found]}" if found else "no known kind")
            )
        return found[0]
