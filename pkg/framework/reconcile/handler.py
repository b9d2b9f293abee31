"""Handlers: the steps of a reconcile, one concern each.

A handler reads the state snapshot, edits the resource's working copy (status, conditions,
finalizers, labels) and calls services for any I/O; it never touches the API client itself, so a
unit test drives it with a hand-built state and fake services. Handlers run in a fixed order, and
each may:

* return ``None`` (nothing to ask) or a :class:`~pkg.framework.reconcile.contract.Result` (requeue, or
  requeue after a delay); the chain merges all of them;
* raise :class:`StopHandlerChain` to end the chain early on purpose ("object is being deleted,
  the remaining steps do not apply"). This is not a failure: the changes made so far are written
  and the stop's optional Result is merged in;
* raise any other exception: the chain stops, the changes made so far are *still written* (a
  handler that failed may have set a condition explaining why, and users should see it), then the
  exception propagates and the controller retries with backoff. The Go reference skips the write on
  error; that hides the reason for a failure exactly when it matters most.

A handler that also implements :class:`AfterWrite` gets ``after_write(state)`` once the template's
writer has stored the changes. That is the place for effects that must follow a persisted state,
such as emitting an event only once the condition it reports is really in the object.

The state handlers share says what it is by its base class:

* :class:`Snapshot`: read-only. Handlers read it and edit only what it hands out for editing (a
  :class:`~pkg.framework.reconcile.resource.Resource`'s working copy); everything else is fixed
  when the reconcile starts. Frozen dataclasses.
* :class:`Scratch`: a blackboard filled in chain order (what discovery found, what a step wrote,
  which reads failed). A step may rely on the fields of the steps before it, which is why the
  chain's order is part of a controller's setup. One per reconcile, never shared across workers.
"""

from __future__ import annotations

from typing import Protocol, TypeVar, runtime_checkable

from pkg.framework.reconcile.contract import Result

StateT_contra = TypeVar("StateT_contra", contravariant=True)


class Handler(Protocol[StateT_contra]):
    """One step of the chain."""

    @property
    def name(self) -> str:
        """Short stable name, used in logs and errors."""
        ...

    def handle(self, state: StateT_contra) -> Result | None: ...


@runtime_checkable
class AfterWrite(Protocol[StateT_contra]):
    """Optional hook of a handler; runs only after a successful write, and only for handlers whose
    ``handle`` ran in this reconcile."""

    def after_write(self, state: StateT_contra) -> None: ...


class Snapshot:
    """Base of a read-only state (see the module docs)."""

    __slots__ = ()


class Scratch:
    """Base of a scratch state, filled in chain order (see the module docs)."""

    __slots__ = ()


class StopHandlerChain(Exception):  # noqa: N818 - a signal that ends the chain, not an error
    """Ends the chain early without failing the reconcile; the update is still written."""

    def __init__(self, result: Result | None = None, *, reason: str = "") -> None:
        super().__init__(reason or "handler chain stopped")
        self.result = result
        self.reason = reason
