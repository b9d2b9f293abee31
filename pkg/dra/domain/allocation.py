"""Identifiers and the typed failure of an allocation.

A device is identified the way Kubernetes does: driver, pool and device name (``DeviceID``); a
pool by driver and pool name (``PoolID``). Both are tuples so they hash fast on the allocator's hot
path. The success type is the client's ``V1AllocationResult``; failure is :class:`Unschedulable`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class PoolID(NamedTuple):
    driver: str
    pool: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}"


class DeviceID(NamedTuple):
    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """The claim cannot be allocated now.

    ``fatal`` is False when capacity is missing (retry when slices or claims change) and True when
    the claim or a class is broken — a CEL compile or runtime error, a missing class, admin access
    outside an admin namespace — which, as in the kube-scheduler, fails the whole attempt rather
    than just this node. ``errors`` holds the individual messages (CEL errors name class/claim,
    selector index and device).
    """

    reason: str
    fatal: bool = False
    errors: tuple[str, ...] = ()

    def __str__(self) -> str:
        return "; ".join((self.reason, *self.errors)) if self.errors else self.reason
