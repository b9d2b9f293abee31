"""The GPU allocator: Kubernetes DRA structured-parameters allocation, best fit, no I/O.

Public surface:

* :class:`Allocator` — ``allocate(claim, *, slices, classes, allocated_claims, namespace_labels=None,
  node=None) -> V1AllocationResult | Unschedulable``, or ``attempt(claim, inputs)`` →
  :class:`AllocationAttempt` (the typed :class:`AllocationInputs` and the outcome, kept together);
* strategies :class:`BestFit` (default) and :class:`FirstFit` (the kube-scheduler's order);
* :func:`explain` → :class:`Explanation` — for an attempt taken, per request, every device and why
  it was rejected;
* :class:`CelEnvironment` — the DRA CEL environment (compile/evaluate selectors);
* :func:`parse_quantity` / :class:`Quantity` — exact Kubernetes quantities.

Module map: ``pools`` (gather complete pools) → ``allocated`` (what other claims hold) → ``counters``
and ``capacity`` (running tallies of what is free) → ``requests`` + ``selection`` + ``cel_env``
(what each request may take; ``cel_ast`` and ``cel_cost`` bound what a selector may cost,
``cel_library`` adds the quantity and semver functions) → ``strategy`` (order) → ``allocator``
(search) → ``result`` (API shape); ``attempt`` holds an attempt's typed inputs and outcome,
``explain`` diagnoses an attempt with the same pieces without searching, and ``consumption`` says
what an allocation's devices consume.
"""

from pkg.dra.allocator.allocated import AllocatedDevices
from pkg.dra.allocator.allocator import Allocator
from pkg.dra.allocator.attempt import AllocationAttempt, AllocationInputs
from pkg.dra.allocator.cel_env import CelEnvironment, SelectorError
from pkg.dra.allocator.explain import DeviceVerdict, Explanation, RequestTrace, explain
from pkg.dra.allocator.quantity import Quantity, QuantityError, parse_quantity
from pkg.dra.allocator.strategy import BestFit, FirstFit, Strategy
from pkg.dra.model import DeviceID, PoolID, Unschedulable

__all__ = [
    "AllocatedDevices",
    "AllocationAttempt",
    "AllocationInputs",
    "Allocator",
    "BestFit",
    "CelEnvironment",
    "DeviceID",
    "DeviceVerdict",
    "Explanation",
    "FirstFit",
    "PoolID",
    "Quantity",
    "QuantityError",
    "RequestTrace",
    "SelectorError",
    "Strategy",
    "Unschedulable",
    "explain",
    "parse_quantity",
]
