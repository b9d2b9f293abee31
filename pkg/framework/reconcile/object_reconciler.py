"""The object reconciler: fetch -> state -> handlers -> write -> conclude.

Every controller of the project reconciles this way; what differs is *how* it writes, so the
write is a plug (:class:`StateWriter`) rather than a second template:

1. ``get(request)`` reads the object (from a cache, never the event). ``None`` means gone:
   ``on_missing(request)`` cleans up what is keyed by the name, if anything, and the pass ends;
2. ``state(obj)`` builds the state the handlers share (a read-only
   :class:`~pkg.framework.reconcile.handler.Snapshot` or a
   :class:`~pkg.framework.reconcile.handler.Scratch` blackboard);
3. the :class:`~pkg.framework.reconcile.chain.HandlerChain` runs;
4. the ``writer`` stores what the handlers changed, *even when a handler failed*, so a condition
   saying why is not lost; the handler's exception is raised afterwards. PhysicalGPUs use
   :class:`ResourceUpdate` (a guarded metadata patch, then a status PUT, see
   :mod:`~pkg.framework.reconcile.resource`); controllers whose handlers write through services
   (server-side apply of owned fields, a claim's ordered writes under a lock) have no writer, or one
   that waits for the cache to catch up with those writes;
5. ``conclude(state, outcome)`` turns the outcome into the Result: by default a write conflict
   (:class:`~pkg.framework.reconcile.resource.ConflictRequeue`, raised by the writer or by a
   handler's service) is ``Result(requeue=True)`` logged at debug, any other error is raised (the
   controller retries with backoff), otherwise the chain's merged Result. A controller replaces it
   to raise on failures its state recorded, to count metrics or to come back periodically;
6. the ``after_write`` hooks of the handlers that ran, only once everything above succeeded.

Thread safety: the template holds no per-call state; ``get``, ``state`` and the writer must be
safe to call concurrently for *different* requests (the controller never runs one request twice
at once).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel

from pkg.framework.reconcile.chain import ChainOutcome, HandlerChain
from pkg.framework.reconcile.contract import Request, Result
from pkg.framework.reconcile.handler import Handler
from pkg.framework.reconcile.resource import ConflictRequeue, Resource
from pkg.framework.reconcile.writer import ResourceWriter

logger = logging.getLogger(__name__)

ObjT = TypeVar("ObjT")
ObjT_contra = TypeVar("ObjT_contra", contravariant=True)
ObjT_co = TypeVar("ObjT_co", covariant=True)
StateT = TypeVar("StateT")
StateT_contra = TypeVar("StateT_contra", contravariant=True)
ModelT = TypeVar("ModelT", bound=BaseModel)
StatusT = TypeVar("StatusT", bound=BaseModel)

Conclude = Callable[[StateT, ChainOutcome[StateT]], Result]
"""Turns a chain's outcome into the pass's Result (or raises); see step 5 of the module docs."""


class CacheReader(Protocol[ObjT_co]):
    """What :meth:`ResourceReconciler.over_cache` needs of an informer's store."""

    def get_by_key(self, key: str) -> ObjT_co | None: ...


class StateWriter(Protocol[ObjT_contra, StateT_contra]):
    """Stores what the handlers changed; called after the chain, whether or not a handler failed.
    Raises :class:`~pkg.framework.reconcile.resource.ConflictRequeue` on a stale version."""

    def write(self, obj: ObjT_contra, state: StateT_contra) -> None: ...


class ResourceUpdate:
    """The writer of a :class:`~pkg.framework.reconcile.resource.Resource`: :meth:`Resource.update`."""

    def write(self, obj: Resource[ModelT, StatusT], state: object) -> None:
        obj.update()


def raise_or_result(state: StateT, outcome: ChainOutcome[StateT]) -> Result:
    """The default ``conclude``: a conflict requeues, another error is raised, else the Result."""
    if isinstance(outcome.error, ConflictRequeue):
        return Result(requeue=True)
    if outcome.error is not None:
        raise outcome.error
    return outcome.result


class ObjectReconciler(Generic[ObjT, StateT]):
    """``Reconciler`` assembled from parts (see the module docs for the algorithm)."""

    def __init__(
        self,
        *,
        get: Callable[[Request], ObjT | None],
        state: Callable[[ObjT], StateT],
        handlers: Sequence[Handler[StateT]],
        writer: StateWriter[ObjT, StateT] | None = None,
        conclude: Conclude[StateT] | None = None,
        on_missing: Callable[[Request], Result | None] | None = None,
    ) -> None:
        self._get = get
        self._state = state
        self._chain = HandlerChain(handlers)
        self._writer = writer
        self._conclude: Conclude[StateT] = conclude or raise_or_result
        self._on_missing = on_missing

    def reconcile(self, request: Request) -> Result:
        obj = self._get(request)
        if obj is None:
            logger.debug("object not found", extra={"object": str(request)})
            return (self._on_missing(request) if self._on_missing else None) or Result()
        return self.run(request, obj, self._state(obj))

    def run(self, request: Request, obj: ObjT, state: StateT) -> Result:
        """Steps 3 to 6 over an object already read and its state."""
        outcome = self._chain.handle(state)
        if self._writer is not None:
            try:
                self._writer.write(obj, state)
            except ConflictRequeue as conflict:
                if outcome.error is not None:
                    raise outcome.error from conflict
                outcome = ChainOutcome(outcome.result, outcome.ran, conflict)
            except Exception as exc:
                if outcome.error is not None:
                    # The handler's failure is the root cause; the failed write rides along as context.
                    outcome.error.add_note(
                        f"writing the changes made before the failure also failed: {exc!r}"
                    )
                    raise outcome.error from exc
                raise
        if isinstance(outcome.error, ConflictRequeue):
            # Routine, not an error: somebody wrote first, and the next pass works from their version.
            extra = {"object": str(request)}
            logger.debug("requeue after a write conflict: %s", outcome.error, extra=extra)
        result = self._conclude(state, outcome)
        if outcome.error is None:
            self._chain.after_write(state, outcome.ran)
        return result


class ResourceReconciler(ObjectReconciler[Resource[ModelT, StatusT], StateT]):
    """The object reconciler of a kind with a status subresource: the object is a
    :class:`~pkg.framework.reconcile.resource.Resource` (fetched baseline + working copy) and the
    writer is :class:`ResourceUpdate`.

    ``resource_factory`` makes a fresh :class:`Resource` per request, because reconciles of
    different objects run concurrently and a resource holds per-call state.
    """

    def __init__(
        self,
        *,
        resource_factory: Callable[[Request], Resource[ModelT, StatusT]],
        state_factory: Callable[[Resource[ModelT, StatusT]], StateT],
        handlers: Sequence[Handler[StateT]],
        on_missing: Callable[[Request], Result | None] | None = None,
        conclude: Conclude[StateT] | None = None,
    ) -> None:
        def fetched(request: Request) -> Resource[ModelT, StatusT] | None:
            resource = resource_factory(request)
            return resource if resource.fetch() is not None else None

        super().__init__(
            get=fetched,
            state=state_factory,
            handlers=handlers,
            writer=ResourceUpdate(),
            conclude=conclude,
            on_missing=on_missing,
        )

    @classmethod
    def over_cache(
        cls,
        *,
        cache: CacheReader[ModelT],
        writer: ResourceWriter[ModelT],
        status_type: type[StatusT],
        state_factory: Callable[[Resource[ModelT, StatusT]], StateT],
        handlers: Sequence[Handler[StateT]],
        on_missing: Callable[[Request], Result | None] | None = None,
        conclude: Conclude[StateT] | None = None,
    ) -> ResourceReconciler[ModelT, StatusT, StateT]:
        """The usual case: each request's object is read from an informer's store (keys are
        ``namespace/name``, as ``str(request)`` prints them), never from the API server."""

        def resource(request: Request) -> Resource[ModelT, StatusT]:
            return Resource(
                request, getter=lambda r: cache.get_by_key(str(r)), writer=writer, status_type=status_type
            )

        return cls(
            resource_factory=resource,
            state_factory=state_factory,
            handlers=handlers,
            on_missing=on_missing,
            conclude=conclude,
        )


__all__ = [
    "CacheReader",
    "Conclude",
    "ObjectReconciler",
    "ResourceReconciler",
    "ResourceUpdate",
    "StateWriter",
    "raise_or_result",
]
