"""Built-in kinds that only tests read or write: the components never touch ServiceAccounts or
core/v1 Events, so these are not in :mod:`pkg.framework.client.builtin_kinds`. (``test/`` is on
``sys.path`` through its conftest, so tests import this module by bare name.)"""

from __future__ import annotations

from kubernetes.client import CoreV1Event, V1ServiceAccount

from pkg.framework.client.kinds import ResourceKind

SERVICE_ACCOUNT = ResourceKind(
    group="",
    version="v1",
    kind="ServiceAccount",
    plural="serviceaccounts",
    namespaced=True,
    model=V1ServiceAccount,
)
CORE_EVENT = ResourceKind(
    group="", version="v1", kind="Event", plural="events", namespaced=True, model=CoreV1Event
)
