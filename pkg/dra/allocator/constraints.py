"""Claim constraints across the devices of one claim: ``matchAttribute`` and ``distinctAttribute``.

Both are checked incrementally while the search adds devices (``add``) and undone on backtracking
(``remove``, called exactly once per successful ``add`` with the same arguments). Like the
scheduler's, they are monotonic: once a device breaks a constraint, adding more cannot repair it.

* ``matchAttribute``: every device of the listed requests (all requests if none listed; a
  subrequest is matched by ``request`` or ``request/subrequest``) has the attribute, with one
  common value. A device without the attribute never satisfies it.
* ``distinctAttribute``: the attribute exists on every such device and no value repeats.

Attribute names are fully qualified; ``gpu.deckhouse.io/uuid`` also finds an unqualified ``uuid``
on a device of driver ``gpu.deckhouse.io``. Only scalar values (string, int, bool, version)
compare; list values never satisfy a constraint.
"""

from __future__ import annotations

from typing import Protocol

from kubernetes.client import V1DeviceConstraint

from pkg.dra.allocator.pools import Candidate

AttributeValue = tuple[str, object]


def lookup_attribute(cand: Candidate, qualified: str) -> AttributeValue | None:
    attributes = cand.device.attributes or {}
    attr = attributes.get(qualified)
    if attr is None:
        domain, _, ident = qualified.partition("/")
        if domain != cand.id.driver or not ident:
            return None
        attr = attributes.get(ident)
        if attr is None:
            return None
    for kind in ("string", "int", "bool", "version"):
        value = getattr(attr, kind)
        if value is not None:
            return kind, value
    return "unknown", None


class Constraint(Protocol):
    def add(self, request: str, subrequest: str | None, cand: Candidate) -> bool: ...
    def remove(self, request: str, subrequest: str | None, cand: Candidate) -> None: ...


class _RequestScoped:
    def __init__(self, attribute: str, requests: list[str] | None) -> None:
        self.attribute = attribute
        self.requests = frozenset(requests or ())

    def applies(self, request: str, subrequest: str | None) -> bool:
        if not self.requests or request in self.requests:
            return True
        return subrequest is not None and f"{request}/{subrequest}" in self.requests


class MatchAttribute(_RequestScoped):
    def __init__(self, attribute: str, requests: list[str] | None) -> None:
        super().__init__(attribute, requests)
        self.value: AttributeValue | None = None
        self.count = 0

    def add(self, request: str, subrequest: str | None, cand: Candidate) -> bool:
        if not self.applies(request, subrequest):
            return True
        value = lookup_attribute(cand, self.attribute)
        if value is None or value[0] == "unknown":
            return False
        if self.count and value != self.value:
            return False
        self.value = value
        self.count += 1
        return True

    def remove(self, request: str, subrequest: str | None, cand: Candidate) -> None:
        if self.applies(request, subrequest):
            self.count -= 1


class DistinctAttribute(_RequestScoped):
    def __init__(self, attribute: str, requests: list[str] | None) -> None:
        super().__init__(attribute, requests)
        self.values: list[AttributeValue] = []

    def add(self, request: str, subrequest: str | None, cand: Candidate) -> bool:
        if not self.applies(request, subrequest):
            return True
        value = lookup_attribute(cand, self.attribute)
        if value is None or value[0] == "unknown" or value in self.values:
            return False
        self.values.append(value)
        return True

    def remove(self, request: str, subrequest: str | None, cand: Candidate) -> None:
        if self.applies(request, subrequest):
            self.values.pop()


def build_constraints(constraints: list[V1DeviceConstraint] | None) -> list[Constraint]:
    """Fresh constraint trackers for one allocation; raises ValueError for an empty constraint."""
    result: list[Constraint] = []
    for index, spec in enumerate(constraints or ()):
        if spec.match_attribute:
            result.append(MatchAttribute(spec.match_attribute, spec.requests))
        elif spec.distinct_attribute:
            result.append(DistinctAttribute(spec.distinct_attribute, spec.requests))
        else:
            raise ValueError(f"constraint #{index}: empty constraint (unsupported constraint type?)")
    return result
