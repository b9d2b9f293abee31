"""The handler chain: run the steps of a reconcile in order over one state.

:class:`HandlerChain` is the engine both templates share
(:class:`~pkg.framework.reconcile.object_reconciler.ObjectReconciler`,
:class:`~pkg.framework.reconcile.singleton.SingletonReconciler`): it merges the steps' Results,
stops on :class:`~pkg.framework.reconcile.handler.StopHandlerChain` (not an error) and on the
first exception, which it *returns* in the :class:`ChainOutcome` instead of raising, so the
template can still write what the steps before it changed (see
:mod:`~pkg.framework.reconcile.handler` for why) and raise afterwards. The chain holds no per-call
state, so one instance serves every worker.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from pkg.framework.reconcile.contract import Result
from pkg.framework.reconcile.handler import AfterWrite, Handler, StopHandlerChain

logger = logging.getLogger(__name__)

StateT = TypeVar("StateT")


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

    @property
    def failed_step(self) -> str | None:
        """The name of the handler that raised, if one did."""
        return self.ran[-1].name if self.error is not None and self.ran else None


class HandlerChain(Generic[StateT]):
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

    def after_write(self, state: StateT, ran: Sequence[Handler[StateT]]) -> None:
        """Calls ``after_write`` of the handlers that ran and implement it; the first error propagates."""
        for handler in ran:
            if isinstance(handler, AfterWrite):
                handler.after_write(state)


__all__ = ["ChainOutcome", "HandlerChain", "merge_results"]
