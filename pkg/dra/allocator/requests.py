"""A claim's device requests, checked and normalised before the search starts.

Each request becomes a :class:`RequestPlan` with one or more :class:`Alternative` s: an ``exactly``
request has one; a ``firstAvailable`` request has one per subrequest, tried in order (the first
that can be satisfied wins, as in the scheduler). An alternative carries its class, its compiled
selectors (class first, then request), the allocation mode (``ExactCount`` with ``count``, or
``All``), admin access, capacity requests and tolerations.

Claim-level problems are fatal (:class:`ClaimError`), like the scheduler's errors that abort a
scheduling attempt: an unknown device class, a missing class name, a selector that is not CEL,
derived attributes (not supported by the incubating allocator either), an unknown allocation mode,
and admin access in a namespace without the label ``resource.kubernetes.io/admin-access: "true"``
(the API server enforces that label at admission; we check it because we also allocate claims
that never went through a Pod).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kubernetes.client import (
    ResourceV1ResourceClaim,
    V1DeviceClass,
    V1DeviceSelector,
    V1DeviceToleration,
)

from pkg.dra.allocator.cel_env import CelEnvironment, CompiledSelector
from pkg.dra.allocator.pools import Candidate
from pkg.dra.allocator.quantity import Quantity, QuantityError, parse_quantity
from pkg.framework.keys import object_key

ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
MAX_DEVICES_PER_CLAIM = 32  # AllocationResultsMaxSize


class ClaimError(Exception):
    """The claim (or a class it uses) cannot be allocated as written."""


@dataclass(frozen=True, slots=True)
class Selector:
    compiled: CompiledSelector
    owner: str  # "class gpu-mig" or "claim ns/name", for error messages
    index: int

    @property
    def of_class(self) -> bool:
        """Whether the selector is the device class's (it says what the request may ever get), not
        the claim's own narrowing of it."""
        return self.owner.startswith("class ")


@dataclass(slots=True, eq=False)
class Alternative:
    name: str
    parent: str | None
    device_class: V1DeviceClass
    selectors: tuple[Selector, ...]
    all_devices: bool
    count: int
    admin_access: bool
    capacity: dict[str, Quantity] | None
    tolerations: tuple[V1DeviceToleration, ...]
    eligible: list[Candidate] | None = None  # devices passing the selectors, filled per allocation

    @property
    def result_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent else self.name

    @property
    def request_name(self) -> str:
        return self.parent or self.name

    @property
    def subrequest_name(self) -> str | None:
        return self.name if self.parent else None


@dataclass(slots=True, eq=False)
class RequestPlan:
    name: str
    alternatives: list[Alternative]
    chosen: int = field(default=0)


def claim_label(claim: ResourceV1ResourceClaim) -> str:
    """The claim's ``namespace/name`` for messages, ``<unnamed>`` when it has no metadata."""
    return object_key(claim) or "<unnamed>"


def plan_requests(
    claim: ResourceV1ResourceClaim,
    *,
    classes: Mapping[str, V1DeviceClass],
    env: CelEnvironment,
    namespace_labels: Mapping[str, str] | None,
) -> list[RequestPlan]:
    devices = claim.spec.devices if claim.spec is not None else None
    plans = []
    alternative = functools.partial(_alternative, claim=claim, classes=classes, env=env)
    for request in (devices.requests if devices is not None else None) or ():
        if request.first_available:
            alternatives = [
                alternative(sub, name=sub.name, parent=request.name, admin_access=False)
                for sub in request.first_available
            ]
        elif request.exactly is not None:
            exact = request.exactly
            if exact.admin_access and (namespace_labels or {}).get(ADMIN_ACCESS_LABEL) != "true":
                label = f"{ADMIN_ACCESS_LABEL}=true"
                raise ClaimError(f"request {request.name}: admin access needs the namespace label {label}")
            admin = bool(exact.admin_access)
            alternatives = [alternative(exact, name=request.name, parent=None, admin_access=admin)]
        else:
            raise ClaimError(
                f"request {request.name}: neither exactly nor firstAvailable (unsupported request type?)"
            )
        plans.append(RequestPlan(request.name, alternatives))
    return plans


def _alternative(
    spec: object,
    *,
    name: str,
    parent: str | None,
    admin_access: bool,
    claim: ResourceV1ResourceClaim,
    classes: Mapping[str, V1DeviceClass],
    env: CelEnvironment,
) -> Alternative:
    label = f"request {parent}/{name}" if parent else f"request {name}"
    class_name = getattr(spec, "device_class_name", None)
    if not class_name:
        raise ClaimError(f"{label}: missing device class name")
    device_class = classes.get(class_name)
    if device_class is None:
        raise ClaimError(f"{label}: device class {class_name} not found")
    if getattr(spec, "derived_attributes", None):
        raise ClaimError(f"{label}: derived attributes are not supported")
    selectors = class_selectors(class_name, device_class, env, label=label)
    selectors += _selectors(getattr(spec, "selectors", None), f"claim {claim_label(claim)}", env, label)
    mode = getattr(spec, "allocation_mode", None) or "ExactCount"
    if mode not in ("ExactCount", "All"):
        raise ClaimError(f"{label}: unsupported allocation mode {mode}")
    count = getattr(spec, "count", None) or 1
    if mode == "ExactCount" and count > MAX_DEVICES_PER_CLAIM:
        raise ClaimError(f"{label}: count {count} exceeds the claim limit of {MAX_DEVICES_PER_CLAIM}")
    capacity_spec = getattr(spec, "capacity", None)
    try:
        capacity = (
            {k: parse_quantity(v) for k, v in capacity_spec.requests.items()}
            if capacity_spec is not None and capacity_spec.requests
            else None
        )
    except QuantityError as err:
        raise ClaimError(f"{label}: capacity request: {err}") from None
    return Alternative(
        name=name,
        parent=parent,
        device_class=device_class,
        selectors=selectors,
        all_devices=mode == "All",
        count=count if mode == "ExactCount" else 0,
        admin_access=admin_access,
        capacity=capacity,
        tolerations=tuple(getattr(spec, "tolerations", None) or ()),
    )


def class_selectors(
    name: str, device_class: V1DeviceClass, env: CelEnvironment, *, label: str
) -> tuple[Selector, ...]:
    """The compiled selectors of class ``name``, as every request naming it gets them first
    (``label`` names the request in errors)."""
    spec = device_class.spec
    return _selectors(spec.selectors if spec else None, f"class {name}", env, label)


def class_alternative(name: str, device_class: V1DeviceClass, env: CelEnvironment) -> Alternative:
    """What a request for one device of class ``name`` with no selectors of its own gets: the
    alternative whose selector verdicts every such request shares (its :func:`~.context.selector_key`
    is theirs). Raises :class:`ClaimError` for a selector that is not CEL."""
    return Alternative(
        name="",
        parent=None,
        device_class=device_class,
        selectors=class_selectors(name, device_class, env, label=f"class {name}"),
        all_devices=False,
        count=1,
        admin_access=False,
        capacity=None,
        tolerations=(),
    )


def _selectors(
    selectors: Iterable[V1DeviceSelector] | None, owner: str, env: CelEnvironment, label: str
) -> tuple[Selector, ...]:
    result = []
    for index, selector in enumerate(selectors or ()):
        if selector.cel is None:
            raise ClaimError(
                f"{label}: {owner}: selector #{index}: CEL expression empty (unsupported selector type?)"
            )
        result.append(Selector(env.compile(selector.cel.expression), owner, index))
    return tuple(result)
