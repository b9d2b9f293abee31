"""A stand-in for the API server's ResourceSlice endpoints, for publisher tests.

It keeps slices by name, answers ``apply`` the way the server does (stores what was sent, bumps
``resourceVersion``, keeps ``uid``, prints quantities canonically) and records every write, so a
test can assert "no write happened". ``drop`` names spec fields it silently drops, like a server
with a DRA feature gate off.
"""

from __future__ import annotations

import itertools
from typing import Any

from kubernetes.client import V1ResourceSlice

from pkg.dra.allocator.quantity import parse_quantity
from pkg.framework.client import NotFoundError
from pkg.framework.client.builtin_kinds import RESOURCE_SLICE
from pkg.framework.client.kinds import ResourceKind
from testutil.k8s_fields import meta


class FakeSliceServer:
    field_manager = "gpu-handler"

    def __init__(self, *, drop: tuple[str, ...] = ()) -> None:
        self.slices: dict[str, V1ResourceSlice] = {}
        self.writes: list[tuple[str, str]] = []
        self.drop = drop
        self._versions = itertools.count(1)

    # -- KubeClient surface ------------------------------------------------------------------

    def apply(self, kind: ResourceKind[Any], obj: V1ResourceSlice, *, force: bool = True) -> V1ResourceSlice:
        assert kind is RESOURCE_SLICE
        assert force
        name = str(meta(obj).name)
        self.writes.append(("apply", name))
        data = RESOURCE_SLICE.encode(obj)
        for device in data["spec"].get("devices") or []:
            for field in self.drop:
                device.pop(field, None)
            for cap in (device.get("capacity") or {}).values():
                cap["value"] = str(parse_quantity(cap["value"]))
        old = self.slices.get(name)
        data["metadata"]["uid"] = meta(old).uid if old else f"uid-{name}"
        data["metadata"]["resourceVersion"] = str(next(self._versions))
        stored = RESOURCE_SLICE.decode(data)
        self.slices[name] = stored
        return stored

    def delete(self, kind: ResourceKind[Any], name: str, namespace: str | None = None, **kw: Any) -> None:
        assert kind is RESOURCE_SLICE
        self.writes.append(("delete", name))
        stored = self.slices.get(name)
        if stored is None:
            raise NotFoundError(status=404, reason="NotFound", message=name)
        if kw.get("uid") and kw["uid"] != meta(stored).uid:
            raise AssertionError(f"uid precondition {kw['uid']} does not match {meta(stored).uid}")
        del self.slices[name]

    # -- SliceReader -------------------------------------------------------------------------

    def list_slices(self, node: str) -> list[V1ResourceSlice]:
        return [rs for rs in self.slices.values() if rs.spec.node_name == node]

    def generations(self) -> dict[str, int]:
        return {name: rs.spec.pool.generation for name, rs in sorted(self.slices.items())}
