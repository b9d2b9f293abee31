"""Leader election settings, callbacks and the seams the elector is tested through.

Kept apart from :mod:`pkg.framework.manager.leaderelection` so the protocol there reads as one piece:
what to configure and what to inject lives here.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from kubernetes.client import V1Lease

from pkg.framework.client import ResourceKind

JITTER_FACTOR = 1.2
"""Acquire retries wait ``retry_period * (1 + random() * JITTER_FACTOR)``, like client-go."""

Sleep = Callable[[threading.Event, float], bool]
"""Waits up to ``seconds`` or until the event is set; returns whether it was set."""


class LeaseClient(Protocol):
    """The part of :class:`~pkg.framework.client.KubeClient` the elector uses."""

    def get(self, kind: ResourceKind[V1Lease], name: str, namespace: str | None = None) -> V1Lease: ...

    def create(self, kind: ResourceKind[V1Lease], obj: V1Lease, namespace: str | None = None) -> V1Lease: ...

    def update(self, kind: ResourceKind[V1Lease], obj: V1Lease) -> V1Lease: ...


def default_identity() -> str:
    """``<hostname>_<uuid>``: unique even when a restarted Pod keeps its hostname."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True, kw_only=True)
class LeaderElectionConfig:
    lease_name: str
    lease_namespace: str
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election identity must not be empty")
        if self.retry_period <= 0:
            raise ValueError("retry_period must be positive")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError("renew_deadline must exceed JITTER_FACTOR * retry_period")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("lease_duration must exceed renew_deadline")


@dataclass(frozen=True, kw_only=True)
class LeaderCallbacks:
    on_started_leading: Callable[[threading.Event], None]
    on_stopped_leading: Callable[[], None]
    on_new_leader: Callable[[str], None] | None = None
