"""What the allocation controller reads: the informer caches, seen through the in-flight record.

Every read a reconcile makes goes through :class:`CacheReader`, so handlers never touch a store and
unit tests substitute one object. Claims are always passed through
:meth:`~.in_flight.InFlight.resolve`: a claim we just allocated is seen allocated even before the
watch delivers it, both as the object under reconciliation and among the allocated claims the
allocator must avoid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.client import ResourceV1ResourceClaim, V1DeviceClass, V1ResourceSlice

from pkg.dra.allocator.pools import Pool, PoolCache, gather_pools
from pkg.dracontroller.internal.eligibility import is_allocated
from pkg.dracontroller.internal.indexes import POD_BY_CLAIM
from pkg.dracontroller.internal.service.in_flight import InFlight
from pkg.framework.cache.store import Store
from pkg.framework.keys import object_key
from pkg.framework.reconcile.contract import Request


class CacheReader:
    def __init__(
        self,
        *,
        claims: Store[Any],
        pods: Store[Any],
        slices: Store[Any],
        classes: Store[Any],
        namespaces: Store[Any],
        in_flight: InFlight,
        pool_cache: PoolCache | None = None,
    ) -> None:
        self._claims, self._pods, self._slices = claims, pods, slices
        self._classes, self._namespaces = classes, namespaces
        self.in_flight = in_flight
        self._pool_cache = pool_cache or PoolCache()  # the allocator's: pools are built once

    def claim(self, request: Request) -> ResourceV1ResourceClaim | None:
        cached = self._claims.get_by_key(str(request))
        return None if cached is None else self.in_flight.resolve(cached)

    def referencing_pods(self, claim: ResourceV1ResourceClaim) -> list[str]:
        """Keys of the existing Pods, finished ones included, that reference ``claim``."""
        return self._pods.index_keys(POD_BY_CLAIM, object_key(claim))

    def classes(self) -> Mapping[str, V1DeviceClass]:
        return {str(c.metadata.name): c for c in self._classes.list() if c.metadata is not None}

    def slices(self) -> list[V1ResourceSlice]:
        return list(self._slices.list())

    def pools(self) -> list[Pool]:
        """Every complete pool, all nodes (built pools are cached until their slices change)."""
        return gather_pools(self.slices(), node=None, cache=self._pool_cache)

    def allocated_claims(self) -> list[ResourceV1ResourceClaim]:
        claims = [self.in_flight.resolve(c) for c in self._claims.list()]
        if len(self.in_flight):
            self.in_flight.prune({object_key(c) for c in claims})
        return [c for c in claims if is_allocated(c)]

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        ns = self._namespaces.get_by_key(namespace)
        return dict((ns.metadata.labels if ns is not None and ns.metadata else None) or {})
