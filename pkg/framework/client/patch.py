"""RFC 6902 JSON patches for object metadata.

Why JSON patch for metadata: a controller owns a few finalizers, labels and
annotations, never the whole ``metadata``. A PUT of the object would overwrite whatever other
writers put there since our read; a JSON patch names exactly the paths we touch. Paired with a
``test`` op on ``/metadata/resourceVersion`` it is also an atomic compare-and-swap: the server
applies all operations or none, and only to the version we computed them from.

Shape of the operations :func:`metadata_patch` emits:

* maps (``labels``, ``annotations``): a whole-map ``add`` when the map was empty or absent (an
  ``add`` of a member into a missing map would fail), a whole-map ``remove`` when it becomes empty,
  otherwise one ``add``/``replace``/``remove`` per key, so a patch says what changed;
* ``finalizers``: the whole list (``add``/``replace``/``remove``). Index-based element ops would be
  correct only against the exact list we read, and whole-list ops are just as safe under the
  ``resourceVersion`` test while staying readable.

Empty and absent are the same thing here: the API server omits empty maps and lists.

Keys are JSON pointer tokens, so ``~`` and ``/`` are escaped (``gpu.deckhouse.io/node`` becomes
``gpu.deckhouse.io~1node``); forgetting this addresses a nested path that does not exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict

from kubernetes.client import V1ObjectMeta

PatchOpName = Literal["add", "remove", "replace", "test"]


class PatchOp(TypedDict):
    """One RFC 6902 operation (only the ops this project emits)."""

    op: PatchOpName
    path: str
    value: NotRequired[Any]


def escape_pointer(key: str) -> str:
    """Escapes one JSON pointer reference token (RFC 6901 §3: ``~`` first, then ``/``)."""
    return key.replace("~", "~0").replace("/", "~1")


def test_op(path: str, value: Any) -> PatchOp:
    """A ``test`` op: the whole patch fails unless ``path`` holds ``value``."""
    return {"op": "test", "path": path, "value": value}


def map_patch(
    path: str, original: Mapping[str, str] | None, changed: Mapping[str, str] | None
) -> list[PatchOp]:
    """Operations turning the string map at ``path`` from ``original`` into ``changed``."""
    before, after = dict(original or {}), dict(changed or {})
    if before == after:
        return []
    if not before:
        return [{"op": "add", "path": path, "value": after}]
    if not after:
        return [{"op": "remove", "path": path}]
    ops: list[PatchOp] = []
    for key in sorted(before.keys() - after.keys()):
        ops.append({"op": "remove", "path": f"{path}/{escape_pointer(key)}"})
    for key in sorted(after):
        if key not in before:
            ops.append({"op": "add", "path": f"{path}/{escape_pointer(key)}", "value": after[key]})
        elif before[key] != after[key]:
            ops.append({"op": "replace", "path": f"{path}/{escape_pointer(key)}", "value": after[key]})
    return ops


def list_patch(path: str, original: Sequence[str] | None, changed: Sequence[str] | None) -> list[PatchOp]:
    """Operations turning the string list at ``path`` from ``original`` into ``changed`` (whole list)."""
    before, after = list(original or []), list(changed or [])
    if before == after:
        return []
    if not before:
        return [{"op": "add", "path": path, "value": after}]
    if not after:
        return [{"op": "remove", "path": path}]
    return [{"op": "replace", "path": path, "value": after}]


def metadata_patch(original: V1ObjectMeta, changed: V1ObjectMeta) -> list[PatchOp]:
    """Operations for the finalizers, labels and annotations that differ; ``[]`` when none do.

    The caller adds the ``resourceVersion`` :func:`test_op` (it knows which version it read).
    """
    return [
        *list_patch("/metadata/finalizers", original.finalizers, changed.finalizers),
        *map_patch("/metadata/labels", original.labels, changed.labels),
        *map_patch("/metadata/annotations", original.annotations, changed.annotations),
    ]


# ``test_op`` is a builder, not a test: keep pytest from collecting it where a test module imports it.
test_op.__test__ = False  # type: ignore[attr-defined]
