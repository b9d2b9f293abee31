"""Telling users, once per claim, that a claim is left to the kube-scheduler because a Pod uses it.

Without it, ``kubectl describe resourceclaim`` of a claim this controller declined says nothing,
and the user cannot tell "gpu-dra-controller is down" from "a Pod references the claim, so the
scheduler allocates it where the Pod can run". One ``Normal LeftToScheduler`` Event per claim
(by UID) and process says which Pod and how it was found — in the Pod cache, by the consistent
read right before the write, or by the read right after it (the allocation was then given back).

The memory of which claims were told is bounded (least recently told forgotten first), so many
short-lived claims cannot grow it; a forgotten or restarted process tells a claim at most once
more, and the event recorder folds repeats into one Event's series anyway.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from enum import StrEnum

from kubernetes.client import ResourceV1ResourceClaim

from pkg.dracontroller.internal.names import REASON_LEFT_TO_SCHEDULER
from pkg.framework.client.builtin_kinds import RESOURCE_CLAIM
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.framework.keys import object_key


class FoundBy(StrEnum):
    """Where the referencing Pod was seen."""

    CACHE = "cache"
    READ_BEFORE_WRITE = "before-write"
    READ_AFTER_WRITE = "after-write"


_HOW = {
    FoundBy.CACHE: "",
    FoundBy.READ_BEFORE_WRITE: (
        " (found by a consistent read before writing; the Pod cache had not shown it yet)"
    ),
    FoundBy.READ_AFTER_WRITE: (
        " (created while the allocation was being written; the allocation was given back)"
    ),
}


class Handover:
    def __init__(self, *, recorder: EventRecorderLogger, capacity: int = 10_000) -> None:
        self._recorder = recorder
        self._capacity = capacity
        self._told: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def left_to_scheduler(
        self, claim: ResourceV1ResourceClaim, pods: Sequence[str], *, found: FoundBy
    ) -> None:
        """Emits the Event unless this claim was already told about."""
        uid = (claim.metadata.uid if claim.metadata is not None else None) or object_key(claim)
        with self._lock:
            if uid in self._told:
                self._told.move_to_end(uid)
                return
            self._told[uid] = None
            if len(self._told) > self._capacity:
                self._told.popitem(last=False)
        more = f" and {len(pods) - 1} more" if len(pods) > 1 else ""
        self._recorder.event(
            claim,
            type_="Normal",
            reason=REASON_LEFT_TO_SCHEDULER,
            message=(
                f"referenced by pod {pods[0]}{more}{_HOW[found]}: the kube-scheduler allocates this claim "
                "on a node where the Pod can run"
            ),
            kind=RESOURCE_CLAIM,
        )
