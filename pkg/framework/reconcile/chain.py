"""The thin reconciler: fetch, build state, run handlers, write, finalize (spec §10.4 item 2).

:class:`BaseReconciler` runs a handler chain over a state snapshot; :class:`ResourceReconciler` is
the template every controller instantiates instead of writing its own ``reconcile``:

1. ``Resource.fetch``; a missing object calls ``on_missing(request)`` (cleanup of things keyed by
   the name, if any) and ends the reconcile;
2. ``state_factory(resource)`` builds the snapshot handlers read (the resource plus readers);
3. the handler chain runs; see :mod:`~pkg.framework.reconcile.handler` for stop and error rules;
4. ``Resource.update`` writes what handlers changed, even when a handler failed, so a condition
   saying why is not lost; the handler's exception is raised afterwards;
5. ``finalize`` hooks of the handlers that ran, only if the chain succeeded and the write did;
6. the merged Result. A write conflict is ``Result(requeue=True)``, logged at debug: it only means
   somebody wrote first, and the next pass works from their version.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

from pkg.framework.reconcile.contract import Request, Result
from pkg.framework.reconcile.handler import Finalizer, Handler, StopHandlerChain
from pkg.framework.reconcile.resource import ConflictRequeue, Resource

logger = logging.getLogger(__name__)

StateT = TypeVar("StateT")
ObjT = TypeVar("ObjT", bound=BaseModel)
StatusT = TypeVar("StatusT", bound=BaseModel)


def merge_results(first: Result, second: Result) -> Result:
    """Requeue if either asks; the sooner ``requeue_after`` wins."""
    delays = [d for d in (first.requeue_after, second.requeue_after) if d is not None]
    return Result(requeue=first.requeue or second.requeue, requeue_after=min(delays) if delays else None)


@dataclass(frozen=True)
class ChainOutcome(Generic[StateT]):
    """What a chain run produced: the merged Result, the handlers whose ``handle`` ran (in order),
    and the exception that stopped it, if one did (:class:`StopHandlerChain` is not an error)."""

    result: Result
    ran: tuple[Handler[StateT], ...]
    error: Exception | None = None


class BaseReconciler(Generic[StateT]):
    """Runs handlers in order over one state. Stateless, so one instance serves every worker."""

    def __init__(self, handlers: Sequence[Handler[StateT]]) -> None:
        self._handlers = tuple(handlers)

    def handle(self, state: StateT) -> ChainOutcome[StateT]:
        """Runs the chain; never raises for a handler's exception, it is returned in the outcome."""
        result, ran = Result(), []
        for handler in self._handlers:
            ran.append(handler)
            try:
                result = merge_results(result, handler.handle(state) or Result())
            except StopHandlerChain as stop:
                logger.debug("handler chain stopped by %s: %s", handler.name, stop)
                return ChainOutcome(merge_results(result, stop.result or Result()), tuple(ran))
            except Exception as exc:
                exc.add_note(f"raised by handler {handler.name!r}")
                return ChainOutcome(result, tuple(ran), exc)
        return ChainOutcome(result, tuple(ran))

    def finalize(self, state: StateT, ran: Sequence[Handler[StateT]]) -> None:
        """Calls ``finalize`` of the handlers that ran and implement it; the first error propagates."""
        for handler in ran:
            if isinstance(handler, Finalizer):
                handler.finalize(state)


class ResourceReconciler(Generic[ObjT, StatusT, StateT]):
    """``Reconciler`` for one kind, assembled from parts (see the module docs for the algorithm).

    ``resource_factory`` makes a fresh :class:`Resource` per request, because reconciles of
    different objects run concurrently and a resource holds per-call state.
    """

    def __init__(
        self,
        *,
        resource_factory: Callable[[Request], Resource[ObjT, StatusT]],
        state_factory: Callable[[Resource[ObjT, StatusT]], StateT],
        handlers: Sequence[Handler[StateT]],
        on_missing: Callable[[Request], Result | None] | None = None,
    ) -> None:
        self._resource_factory = resource_factory
        self._state_factory = state_factory
        self._chain = BaseReconciler(handlers)
        self._on_missing = on_missing

    def reconcile(self, request: Request) -> Result:
        resource = self._resource_factory(request)
        if resource.fetch() is None:
            logger.debug("object not found", extra={"object": str(request)})
            return (self._on_missing(request) if self._on_missing else None) or Result()
        state = self._state_factory(resource)
        outcome = self._chain.handle(state)
        try:
            resource.update()
        except ConflictRequeue as conflict:
            if outcome.error is not None:
                raise outcome.error from conflict
            logger.debug("requeue after a write conflict: %s", conflict, extra={"object": str(request)})
            return Result(requeue=True)
        except Exception as exc:
            if outcome.error is not None:
                # The handler's failure is the root cause; the failed write rides along as context.
                outcome.error.add_note(f"writing the changes made before the failure also failed: {exc!r}")
                raise outcome.error from exc
            raise
        if outcome.error is not None:
            raise outcome.error
        self._chain.finalize(state, outcome.ran)
        return outcome.result
