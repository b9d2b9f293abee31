"""What a publish must write: compare a node's desired slices with the ones that exist.

The comparison is of *content*: the spec without ``pool.generation``, with every quantity in
canonical form (the server stores ``24576Mi`` as ``24Gi``), plus owner references. The generation
is left out because it is ours to choose: a pool whose content is unchanged keeps its generation
and gets no write at all, while any change — a card added, removed or different, a slice gone, a
slice count, slices left at mixed generations by a failed publish — moves every slice of the pool
to ``max(existing) + 1``, because consumers read only the newest generation of a pool.

:func:`dropped_fields` is the other direction: what the server did not keep of what we sent.
A server whose DRA feature gates are off silently drops ``sharedCounters``, ``consumesCounters``,
``allowMultipleAllocations`` and request policies, and without them the counters no longer keep
Physical, MIG and shared allocations apart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes.client import V1ResourceSlice

from pkg.dra.allocator.quantity import QuantityError, parse_quantity

_QUANTITY_FIELDS = frozenset({"value", "default", "min", "max", "step"})


@dataclass(frozen=True)
class SliceChanges:
    """``generation`` the pool has after the writes; nothing to write when ``unchanged``."""

    generation: int
    apply: tuple[V1ResourceSlice, ...] = ()
    delete: tuple[V1ResourceSlice, ...] = ()

    @property
    def unchanged(self) -> bool:
        return not self.apply and not self.delete


def slice_changes(
    *, pool: str, existing: Sequence[V1ResourceSlice], desired_at: Callable[[int], list[V1ResourceSlice]]
) -> SliceChanges:
    """The writes that turn ``existing`` (the node's slices of our driver) into the desired pool.

    ``desired_at(generation)`` builds the desired slices at a generation. Slices of other pools
    (an older naming) are deleted like any slice that is no longer desired.
    """
    current = max((rs.spec.pool.generation for rs in existing if rs.spec.pool.name == pool), default=0)
    desired = desired_at(current)
    wanted = {_name(rs) for rs in desired}
    obsolete = tuple(rs for rs in existing if _name(rs) not in wanted)
    by_name = {_name(rs): rs for rs in existing}
    same = not obsolete and all(
        (old := by_name.get(_name(rs))) is not None
        and old.spec.pool.generation == current
        and content(old) == content(rs)
        for rs in desired
    )
    if same:
        return SliceChanges(current)
    if not desired:
        return SliceChanges(current, delete=obsolete)
    return SliceChanges(current + 1, apply=tuple(desired_at(current + 1)), delete=obsolete)


def content(rs: V1ResourceSlice) -> dict[str, Any]:
    """A slice's comparable content: canonical spec without the generation, and its owners."""
    data = rs.model_dump(by_alias=True, exclude_none=True, mode="json")
    spec = _canonical(data.get("spec") or {})
    spec.get("pool", {}).pop("generation", None)
    owners = sorted(
        (o.get("apiVersion"), o.get("kind"), o.get("name"), o.get("uid"))
        for o in (data.get("metadata") or {}).get("ownerReferences") or []
    )
    return {"spec": spec, "owners": owners}


def dropped_fields(sent: V1ResourceSlice, stored: V1ResourceSlice) -> list[str]:
    """Paths of ``sent.spec`` that ``stored`` lacks or holds differently (empty when all kept)."""
    return _missing(content(sent)["spec"], content(stored)["spec"], "spec")


def _missing(sent: Any, stored: Any, path: str) -> list[str]:
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [path]
        return [p for k, v in sent.items() for p in _missing(v, stored.get(k), f"{path}.{k}")]
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(stored) != len(sent):
            return [path]
        return [
            p
            for i, (a, b) in enumerate(zip(sent, stored, strict=True))
            for p in _missing(a, b, f"{path}[{i}]")
        ]
    return [] if sent == stored else [path]


def _canonical(value: Any, field: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _canonical(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v, "value" if field == "validValues" else "") for v in value]
    if isinstance(value, str) and field in _QUANTITY_FIELDS:
        try:
            return str(parse_quantity(value))
        except QuantityError:
            return value
    return value


def _name(rs: V1ResourceSlice) -> str:
    return str(rs.metadata.name if rs.metadata else "")
