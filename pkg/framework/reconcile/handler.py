"""Handlers: the steps of a reconcile, one concern each (spec §10.4 item 4).

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

A handler that also implements :class:`Finalizer` gets ``finalize(state)`` after the update was
stored. That is the place for effects that must follow a persisted state, such as emitting an
event only once the condition it reports is really in the object. ("Finalizer" here is the
spec's post-update hook, unrelated to ``metadata.finalizers``.)
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
class Finalizer(Protocol[StateT_contra]):
    """Optional post-update hook of a handler; runs only after a successful update, and only for
    handlers whose ``handle`` ran in this reconcile."""

    def finalize(self, state: StateT_contra) -> None: ...


class StopHandlerChain(Exception):  # noqa: N818 - the spec's ErrStopHandlerChain; a signal, not an error
    """Ends the chain early without failing the reconcile; the update is still written."""

    def __init__(self, result: Result | None = None, *, reason: str = "") -> None:
        super().__init__(reason or "handler chain stopped")
        self.result = result
        self.reason = reason
