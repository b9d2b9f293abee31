"""The metadata of a built-in object, never ``None`` (the client's models type it optional, though
every object the API server returns has it)."""

from __future__ import annotations

from typing import Protocol

from kubernetes.client import V1ObjectMeta


class HasMeta(Protocol):
    @property
    def metadata(self) -> V1ObjectMeta | None: ...


def meta(obj: HasMeta) -> V1ObjectMeta:
    return obj.metadata if obj.metadata is not None else V1ObjectMeta()
