"""Kubernetes Events that are also log lines, sent without ever blocking a reconcile.

Every :meth:`EventRecorderLogger.event` is logged at once (structured, with the object's kind,
name and namespace) and queued for an ``events.k8s.io/v1`` Event. One sender thread drains a
bounded queue: a reconcile never waits for the API server, and when the queue is full the event is
dropped and logged, because an Event is a courtesy to humans, never a correctness mechanism.

Two defences against event storms, after client-go:

* Correlation: the same (object, type, reason, action, message) seen again within
  ``correlation_window`` (10 min) patches the first Event's ``series`` (``count``,
  ``lastObservedTime``) instead of creating another object. An Event the API server has already
  expired (404) simply starts a new series.
* Spam filter: each object has a token bucket (burst 25, one token per 5 min, like client-go's
  ``EventSourceObjectSpamFilter``); every API write takes a token, so a flapping object cannot
  flood the API. A repeat dropped by it still counts: the next allowed patch carries the total.

The correlation and spam state live on the sender thread only, so they need no locks; both are
LRU-bounded so that many short-lived objects cannot grow them without end.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from kubernetes.client import EventsV1Event, EventsV1EventSeries, V1ObjectMeta, V1ObjectReference
from pydantic import BaseModel

from pkg.framework.client import ApiError, NotFoundError, PatchType, ResourceKind
from pkg.framework.client.builtin_kinds import EVENT
from pkg.framework.client.times import micro_time

logger = logging.getLogger(__name__)

EventType = Literal["Normal", "Warning"]

_MAX_NOTE_BYTES = 1024  # events.k8s.io/v1 validation limit of ``note``
_MAX_FIELD = 128  # limit of reason, action, reportingController and reportingInstance


class EventClient(Protocol):
    """The part of :class:`~pkg.framework.client.KubeClient` the recorder uses."""

    def create(
        self, kind: ResourceKind[EventsV1Event], obj: EventsV1Event, namespace: str | None = None
    ) -> EventsV1Event: ...

    def patch(
        self,
        kind: ResourceKind[EventsV1Event],
        name: str,
        patch: Any,
        *,
        patch_type: PatchType,
        namespace: str | None = None,
    ) -> EventsV1Event: ...


def object_reference(obj: BaseModel, kind: ResourceKind[Any] | None = None) -> V1ObjectReference:
    """The ``regarding`` reference of an object: apiVersion/kind from ``kind`` or the model."""
    meta = getattr(obj, "metadata", None)
    api_version = kind.api_version if kind else getattr(obj, "api_version", None)
    kind_name = kind.kind if kind else getattr(obj, "kind", None)
    if not (api_version and kind_name and meta is not None and meta.name):
        raise ValueError(f"{type(obj).__name__} lacks apiVersion, kind or metadata.name: pass kind=")
    return V1ObjectReference(
        api_version=api_version,
        kind=kind_name,
        name=meta.name,
        namespace=meta.namespace,
        uid=meta.uid,
        resource_version=meta.resource_version,
    )


@dataclass(frozen=True, kw_only=True)
class _Request:
    regarding: V1ObjectReference
    type: str
    reason: str
    action: str
    note: str
    at: datetime  # wall time, for the Event
    seen: float  # monotonic time, for correlation and the spam filter


@dataclass
class _Series:
    name: str
    namespace: str
    count: int
    last_seen: float


@dataclass
class _Bucket:
    tokens: float
    updated: float


class EventRecorderLogger:
    """Logs events and records them as Kubernetes Events, asynchronously. Thread-safe."""

    def __init__(
        self,
        *,
        client: EventClient,
        reporting_controller: str,
        reporting_instance: str,
        queue_size: int = 1024,
        correlation_window: float = 600.0,
        burst: int = 25,
        refill_interval: float = 300.0,
        cache_size: int = 4096,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self._client = client
        self._controller = reporting_controller[:_MAX_FIELD]
        self._instance = reporting_instance[:_MAX_FIELD]
        self._queue: queue.Queue[_Request] = queue.Queue(maxsize=queue_size)
        self._window = correlation_window
        self._burst = burst
        self._refill = refill_interval
        self._cache_size = cache_size
        self._clock = clock
        self._now = now
        self._series: OrderedDict[tuple[str, ...], _Series] = OrderedDict()
        self._buckets: OrderedDict[tuple[str, ...], _Bucket] = OrderedDict()
        self._stopping = threading.Event()
        self._abandon = threading.Event()
        self._sender = threading.Thread(target=self._loop, name="event-recorder", daemon=True)
        self._sender.start()

    def event(
        self,
        obj: BaseModel,
        *,
        type_: EventType,
        reason: str,
        message: str,
        action: str | None = None,
        kind: ResourceKind[Any] | None = None,
    ) -> None:
        """Logs the event and queues it for the API. Never blocks and never raises."""
        try:
            ref = object_reference(obj, kind)
        except ValueError:
            logger.exception("cannot record event", extra={"reason": reason, "note": message})
            return
        extra = {"object_kind": ref.kind, "object_name": ref.name, "object_namespace": ref.namespace}
        level = logging.WARNING if type_ == "Warning" else logging.INFO
        logger.log(level, message, extra={**extra, "reason": reason, "type": type_})
        if self._stopping.is_set():
            logger.warning("event recorder stopped: event not sent", extra={**extra, "reason": reason})
            return
        request = _Request(
            regarding=ref,
            type=type_,
            reason=reason[:_MAX_FIELD],
            action=(action or reason)[:_MAX_FIELD],
            note=message.encode()[:_MAX_NOTE_BYTES].decode(errors="ignore"),
            at=micro_time(self._now()),
            seen=self._clock(),
        )
        try:
            self._queue.put_nowait(request)
        except queue.Full:
            logger.warning("event queue full: event dropped", extra={**extra, "reason": reason})

    def stop(self, timeout: float = 2.0) -> None:
        """Sends what is queued for up to ``timeout`` seconds, then gives up on the rest."""
        self._stopping.set()
        self._sender.join(timeout)
        if self._sender.is_alive():
            self._abandon.set()
            logger.warning("event recorder stopped with events unsent", extra={"unsent": self._queue.qsize()})

    def flush(self, timeout: float = 2.0) -> bool:
        """Waits until every queued event was handled (sent, correlated or dropped); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._queue.all_tasks_done.wait(remaining)
        return True

    def _loop(self) -> None:
        while not self._abandon.is_set():
            try:
                request = self._queue.get(timeout=0.1)
            except queue.Empty:
                if self._stopping.is_set():
                    return
                continue
            try:
                self._send(request)
            except Exception as exc:  # an API refusal is one line; anything else, a bug, gets a trace
                extra = {"object_name": request.regarding.name, "reason": request.reason}
                logger.warning(
                    "sending event failed: %s", exc, extra=extra, exc_info=not isinstance(exc, ApiError)
                )
            finally:
                self._queue.task_done()

    def _send(self, request: _Request) -> None:
        ref = request.regarding
        obj_key = (ref.api_version or "", ref.kind or "", ref.namespace or "", ref.name or "", ref.uid or "")
        key = (*obj_key, request.type, request.reason, request.action, request.note)
        now = request.seen
        series = self._series.get(key)
        if series is not None and now - series.last_seen <= self._window:
            self._series.move_to_end(key)
            series.count += 1
            series.last_seen = now
            if not self._take_token(obj_key, now):
                return  # counted; the next allowed patch carries the total
            observed = EventsV1EventSeries(count=series.count, last_observed_time=request.at)
            patch = {"series": observed.model_dump(by_alias=True, exclude_none=True, mode="json")}
            try:
                self._client.patch(
                    EVENT, series.name, patch, patch_type=PatchType.MERGE, namespace=series.namespace
                )
                return
            except NotFoundError:
                del self._series[key]  # expired by the API server's TTL: start a new series
        elif not self._take_token(obj_key, now):
            logger.debug("event dropped by the spam filter", extra={"object_name": ref.name})
            return
        created = self._client.create(EVENT, self._build(request), self._namespace(ref))
        name = created.metadata.name if created.metadata and created.metadata.name else ""
        self._series[key] = _Series(name=name, namespace=self._namespace(ref), count=1, last_seen=now)
        self._trim(self._series)

    def _build(self, request: _Request) -> EventsV1Event:
        ref = request.regarding
        suffix = f".{time.time_ns():x}"
        meta = V1ObjectMeta(
            name=(ref.name or "")[: 253 - len(suffix)] + suffix, namespace=self._namespace(ref)
        )
        return EventsV1Event(
            metadata=meta,
            event_time=request.at,
            type=request.type,
            reason=request.reason,
            action=request.action,
            note=request.note,
            regarding=ref,
            reporting_controller=self._controller,
            reporting_instance=self._instance,
        )

    def _take_token(self, obj_key: tuple[str, ...], now: float) -> bool:
        bucket = self._buckets.get(obj_key)
        if bucket is None:
            bucket = self._buckets[obj_key] = _Bucket(tokens=float(self._burst), updated=now)
            self._trim(self._buckets)
        self._buckets.move_to_end(obj_key)
        bucket.tokens = min(float(self._burst), bucket.tokens + (now - bucket.updated) / self._refill)
        bucket.updated = now
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True

    def _trim(self, cache: OrderedDict[tuple[str, ...], Any]) -> None:
        while len(cache) > self._cache_size:
            cache.popitem(last=False)

    @staticmethod
    def _namespace(ref: V1ObjectReference) -> str:
        return ref.namespace or "default"  # events of cluster-scoped objects live in "default"
