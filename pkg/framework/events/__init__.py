"""Events for humans: each one is logged and, asynchronously, recorded as a Kubernetes Event.

Reconcilers call :meth:`EventRecorderLogger.event` for state changes worth a ``kubectl describe``
line (a card became ready, a prepare failed), never for routine heartbeats.
"""

from pkg.framework.events.recorder import EventClient, EventRecorderLogger, EventType, object_reference

__all__ = ["EventClient", "EventRecorderLogger", "EventType", "object_reference"]
