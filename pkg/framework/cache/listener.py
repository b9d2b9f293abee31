"""What an informer tells its listeners, and the shapes listeners and informers share.

Listeners receive typed objects (pydantic models). They run on the informer's dispatch thread, never
on the watch thread, so a slow listener delays other listeners of that informer but never the watch
itself; listeners should still only enqueue work and return.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

ObjT = TypeVar("ObjT")
ObjT_contra = TypeVar("ObjT_contra", contravariant=True)


@dataclass(frozen=True)
class DeletedFinalStateUnknown(Generic[ObjT]):
    """A delete noticed only by a re-list: ``obj`` is the last state the store had, maybe stale."""

    key: str
    obj: ObjT


class ResourceListener(Protocol[ObjT_contra]):
    """Listener of one informer (client-go's ``ResourceListener``)."""

    def on_add(self, obj: ObjT_contra, *, is_in_initial_list: bool) -> None: ...

    def on_update(self, old: ObjT_contra, new: ObjT_contra) -> None: ...

    def on_delete(self, obj: ObjT_contra | DeletedFinalStateUnknown[Any]) -> None: ...
