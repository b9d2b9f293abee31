"""The singleton reconciler: one request stands for a whole unit (a node's sync, a node's pool).

Some controllers have no object per request: the node agent's desired state is a function of the
whole node (every card, the host), and the publisher's pool is one unit with one generation. Their
events carry nothing a level-based pass needs, so every source maps to the same single request,
and the queue does the rest: a burst of events costs one pass, an event during a pass one more
pass, and a failed pass is retried with the queue's backoff.

That only works with **one worker**: two passes of the unit at once would compute the same next
generation, or race their writes, and the state some handlers keep between passes (what was
published last, which cards were withheld) is not locked. So the template declares it:
:attr:`SingletonReconciler.max_workers` is 1, the
:class:`~pkg.framework.controller.builder.ControllerBuilder` gives it one worker, and the
:class:`~pkg.framework.controller.controller.Controller` refuses more. The invariant is stated
where it is relied on, not in a setup module far away.

A pass is the object reconciler's (:mod:`~pkg.framework.reconcile.object_reconciler`) with the
"object" being the snapshot ``state()`` takes from the caches: handlers, the writer, ``conclude``
and the ``after_write`` hooks behave the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar, Generic, TypeVar

from pkg.framework.reconcile.contract import Request, Result
from pkg.framework.reconcile.handler import Handler
from pkg.framework.reconcile.object_reconciler import (
    Conclude,
    ObjectReconciler,
    StateWriter,
)

StateT = TypeVar("StateT")


class SingletonReconciler(Generic[StateT]):
    """Runs the chain over a fresh ``state()`` for its one ``request``; one worker only."""

    max_workers: ClassVar[int] = 1
    """Passes of the unit must never overlap (see the module docs)."""

    def __init__(
        self,
        *,
        request: Request,
        state: Callable[[], StateT],
        handlers: Sequence[Handler[StateT]],
        writer: StateWriter[StateT, StateT] | None = None,
        conclude: Conclude[StateT] | None = None,
    ) -> None:
        self.request = request
        self._state = state
        self._inner: ObjectReconciler[StateT, StateT] = ObjectReconciler(
            get=lambda _request: state(),
            state=lambda s: s,
            handlers=handlers,
            writer=writer,
            conclude=conclude,
        )

    def reconcile(self, request: Request) -> Result:
        """Every request is a pass of the unit (sources map to :attr:`request`; nothing else exists)."""
        return self._inner.reconcile(request)


__all__ = ["SingletonReconciler"]
