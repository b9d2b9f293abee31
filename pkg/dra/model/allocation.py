"""Identifiers and the typed failure of an allocation.

A device is identified the way Kubernetes does: driver, pool and device name (``DeviceID``); a
pool by driver and pool name (``PoolID``). Both are tuples so they hash fast on the allocator's hot
path. The success type is the client's ``V1AllocationResult``; failure is :class:`Unschedulable`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
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


class UnschedulableKind(StrEnum):
    """Why a claim cannot be allocated, as a value (a metric label), never parsed from a message."""

    UNSCHEDULABLE = "unschedulable"  # no capacity fits now
    POOL_NOT_READY = "pool-not-ready"  # a pool is being republished
    SEARCH_LIMIT = "search-limit"  # the search gave up
    INVALID = "invalid"  # fatal: the claim or a class is broken


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """The claim cannot be allocated now.

    ``fatal`` is False when capacity is missing (retry when slices or claims change) and True when
    the claim or a class is broken — a CEL compile or runtime error, a missing class, admin access
    outside an admin namespace — which, as in the kube-scheduler, fails the whole attempt rather
    than just this node. ``errors`` holds the individual messages (CEL errors name class/claim,
    selector index and device). ``kind`` says why as a value; a fatal outcome is always
    :attr:`UnschedulableKind.INVALID` (and an INVALID one fatal).
    """

    reason: str
    fatal: bool = False
    errors: tuple[str, ...] = ()
    kind: UnschedulableKind = UnschedulableKind.UNSCHEDULABLE

    def __post_init__(self) -> None:
        if self.fatal or self.kind is UnschedulableKind.INVALID:
            object.__setattr__(self, "fatal", True)
            object.__setattr__(self, "kind", UnschedulableKind.INVALID)

    def __str__(self) -> str:
        return "; ".join((self.reason, *self.errors)) if self.errors else self.reason
