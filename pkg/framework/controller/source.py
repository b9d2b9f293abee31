"""Sources: where a controller's events come from besides informers (controller-runtime's ``source``).

An informer tells a controller that an *object* changed. Some controllers must also wake for things
that are not objects: a timer (the node agent's safety resync), a kernel uevent, an operator's
SIGHUP, an in-process store that changed (the gpu-handler's card descriptions), or simply the
start. Each of these is a :class:`Source`: it emits *generic events* that enter the controller
through :meth:`Controller.watch <pkg.framework.controller.controller.Controller.watch>` exactly
like an informer's, so predicates (their ``generic`` method) and a
:class:`~pkg.framework.controller.enqueue.RequestMapper` decide which requests they wake. Nothing
outside a controller ever adds to its queue.

Contract of :meth:`Source.start`: it runs on a thread of its own, started by the controller when
it runs (before the caches sync: an early event is queued and taken once they have), calls
``emit(obj)`` for every event (``obj`` is what the event is about, ``None`` when nothing), and
returns soon after ``stop`` is set. ``emit`` only filters, maps and adds to the queue, so it never
blocks. A source's failures are its own: it logs and degrades (the udev source falls back on the
periodic resync) rather than raising.

The sources here need nothing but the standard library; one that needs a platform library (the
node agent's udev source, pyudev) lives with its component and implements the same protocol.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from pkg.framework.jitter import Jitter

logger = logging.getLogger(__name__)

Emit = Callable[[object], None]
"""Hands one generic event (about ``obj``, ``None`` when about nothing) to the controller."""

# How often a channel's drain loop looks at ``stop``: the latency of stopping, not of events.
_STOP_POLL_SECONDS = 0.2


@runtime_checkable
class Source(Protocol):
    """Emits generic events until stopped; see the module docs for the contract."""

    @property
    def name(self) -> str: ...

    def start(self, emit: Emit, stop: threading.Event) -> None: ...


class StartSource:
    """One event when the controller starts: the start-up pass of a level-based controller whose
    informer events alone would not wake it (its objects may all be unchanged)."""

    def __init__(self, *, name: str = "start") -> None:
        self.name = name

    def start(self, emit: Emit, stop: threading.Event) -> None:
        if not stop.is_set():
            emit(None)


class PeriodicSource:
    """One event every jittered period (:class:`~pkg.framework.jitter.Jitter`) until stopped; the
    first after one period, not at start."""

    def __init__(self, *, name: str, every: Jitter) -> None:
        self.name = name
        self.every = every

    def start(self, emit: Emit, stop: threading.Event) -> None:
        logger.info(
            "periodic source",
            extra={"source": self.name, "period_seconds": self.every.period, "jitter": self.every.jitter},
        )
        while not stop.wait(self.every.next()):
            logger.debug("periodic event due", extra={"source": self.name})
            emit(None)


class ChannelSource:
    """Events sent from anywhere in the process: :meth:`send` is thread-safe, never blocks, and is
    safe in a signal handler (``queue.SimpleQueue.put`` is reentrant). The events are emitted on the
    source's own thread, in order."""

    def __init__(self, *, name: str) -> None:
        self.name = name
        self._events: queue.SimpleQueue[object] = queue.SimpleQueue()

    def send(self, obj: object = None) -> None:
        self._events.put(obj)

    def start(self, emit: Emit, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                obj = self._events.get(timeout=_STOP_POLL_SECONDS)
            except queue.Empty:
                continue
            self._on_event(obj)
            emit(obj)

    def _on_event(self, obj: object) -> None:
        """A hook for subclasses, called on the source's thread before each emit."""


class SignalSource(ChannelSource):
    """One event per delivery of ``signum`` (e.g. SIGHUP: "sync now").

    The handler is installed when the source is built, which must happen on the main thread (a
    Python restriction); it only puts into the channel, because a Python signal handler runs
    between two bytecodes of the main thread, which might hold a lock that logging or the queue
    needs. ``message`` is logged, on the source's thread, for each signal received.
    """

    def __init__(self, signum: signal.Signals, *, name: str, message: str) -> None:
        super().__init__(name=name)
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("signal handlers can only be installed from the main thread")
        self._message = message
        signal.signal(signum, lambda _signum, _frame: self.send())

    def _on_event(self, obj: object) -> None:
        logger.info(self._message)


__all__ = ["ChannelSource", "Emit", "PeriodicSource", "SignalSource", "Source", "StartSource"]
