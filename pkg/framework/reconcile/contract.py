"""The reconcile contract: requests in, results out.

Reconciliation is level-based: a reconciler receives only the *name* of an object whose state may
have changed, reads the current state from the cache, and drives the world toward it. It never
trusts an event's payload, so a missed or coalesced event costs nothing but latency.

Contract of :meth:`Reconciler.reconcile` (mirrors controller-runtime's):

- returns a :class:`Result`: ``Result()`` means done; ``requeue_after`` schedules another pass after
  that delay (and forgets the backoff); ``requeue=True`` requeues with the per-item backoff;
- raises an exception: the request is requeued with exponential backoff, the Result is ignored;
- raises :class:`TerminalError`: the error is logged and counted but the request is not retried,
  because retrying cannot help (bad input that only a new event can fix).

Why the contract keeps :class:`TerminalError` although no controller raises it today: every
failure the current controllers know is either transient (API, I/O, a backend read), or fixed
only by a change that arrives as an event anyway (a broken device class or claim: the claim
controller then ends the pass *successfully* and without a requeue, and says why in an event, so
it needs no error), or a bug, for which a retry with backoff is the safe default. The kubelet
plugin's Prepare, where a claim can name a device this node cannot serve, is the expected first
user; the controller already handles it (logged, counted, backoff forgotten, not requeued).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from pkg.framework.keys import namespaced_key


@dataclass(frozen=True, order=True)
class Request:
    """Names one object. Cluster-scoped objects have ``namespace=""``."""

    name: str
    namespace: str = ""

    def __str__(self) -> str:
        return namespaced_key(self.namespace, self.name)


@dataclass(frozen=True)
class Result:
    """What the controller does with a request after a successful reconcile."""

    requeue: bool = False
    requeue_after: timedelta | None = None


class TerminalError(Exception):
    """An error that retrying cannot fix; the request is dropped until the next event."""


class Reconciler(Protocol):
    """Drives one object toward its desired state. Must be safe to call concurrently for
    *different* requests; the controller never runs two reconciles of the same request at once."""

    def reconcile(self, request: Request) -> Result: ...
