"""Allocations we wrote that the informer has not shown us yet (the scheduler's "assume cache").

Why it exists: a decision is taken from the claim cache, and the watch delivers our own write a
few milliseconds later. A second decision taken in between would not see the first allocation
and could hand out the same device again — a collision made by ourselves. So every write is
recorded here with the resourceVersions it supersedes, and readers see the written claim instead
of a cached one that still carries a superseded version. An entry is dropped as soon as the cache
shows any other version (ours or a later one) or the claim is gone.

:attr:`InFlight.lock` serialises *decisions*: they are milliseconds, and two workers deciding at
once from the same view is exactly the race this module exists to prevent. Only
:class:`~pkg.dracontroller.internal.service.decisions.Decisions` takes it. The *writes* are not
serialised: a decision ends by :meth:`InFlight.reserve`-ing the claim as it will be written, and
the lock is released before the write's round trips, so several claims' writes are on the wire at
once. Until the writer :meth:`~InFlight.settle`-s it (written: the written claim's record takes
over; failed or gone: the devices are free again), readers see the reservation whatever the cache
shows — including the cache's version of our own first write (the metadata patch), which carries
no allocation yet and would otherwise make the devices look free to the next decision.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from kubernetes.client import ResourceV1ResourceClaim

from pkg.framework.keys import object_key


def _version(claim: ResourceV1ResourceClaim) -> str:
    return (claim.metadata.resource_version if claim.metadata is not None else None) or ""


class InFlight:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._entries: dict[str, tuple[frozenset[str], ResourceV1ResourceClaim]] = {}
        self._reserved: dict[str, ResourceV1ResourceClaim] = {}
        self._guard = threading.Lock()

    def reserve(self, planned: ResourceV1ResourceClaim) -> None:
        """Readers see ``planned`` (the claim as its write will make it) until :meth:`settle`."""
        with self._guard:
            self._reserved[object_key(planned)] = planned

    def settle(self, planned: ResourceV1ResourceClaim) -> None:
        """Ends the reservation of ``planned``: its write landed (and was :meth:`record`-ed first,
        so readers never see a gap) or failed (its devices are free again)."""
        with self._guard:
            if self._reserved.get(object_key(planned)) is planned:
                del self._reserved[object_key(planned)]

    def reserved(self) -> int:
        """Writes on the wire now."""
        with self._guard:
            return len(self._reserved)

    def record(self, written: ResourceV1ResourceClaim, *, superseded: Iterable[str]) -> None:
        """``written`` (as the server returned it) replaces cached versions in ``superseded``.

        Writes chain (patch, then status PUT): every version an earlier entry replaced, and that
        entry's own version, stay superseded by the newer write.
        """
        key = object_key(written)
        with self._guard:
            earlier = self._entries.get(key)
            versions = set(superseded)
            if earlier is not None:
                versions |= earlier[0] | {_version(earlier[1])}
            versions.discard(_version(written))
            versions.discard("")
            self._entries[key] = (frozenset(versions), written)

    def resolve(self, cached: ResourceV1ResourceClaim) -> ResourceV1ResourceClaim:
        """The freshest known state of a cached claim."""
        key = object_key(cached)
        with self._guard:
            planned = self._reserved.get(key)
            if planned is not None:
                return planned
            entry = self._entries.get(key)
            if entry is None:
                return cached
            stale, written = entry
            if _version(cached) in stale:
                return written
            del self._entries[key]
        return cached

    def prune(self, present: set[str]) -> None:
        """Drops entries of claims no longer in the cache."""
        with self._guard:
            for key in [k for k in self._entries if k not in present]:
                del self._entries[key]

    def __len__(self) -> int:
        with self._guard:
            return len(self._entries)
