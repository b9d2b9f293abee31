"""The driver's side of the kubelet plugin: plain types, so drivers never see protobuf.

The kubelet batches the claims of one Pod per driver in one call. A driver answers for every claim
it was given: devices and their CDI IDs, or an error that names what went wrong (the kubelet shows
it in the Pod's events and retries). ``unprepare`` answers with an error string per claim, empty
when the claim is unprepared (or was never prepared: unprepare must be idempotent).
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class ClaimRef:
    """A ResourceClaim the kubelet asks about; ``uid`` identifies it, the rest is for messages."""

    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.uid})"


@dataclass(frozen=True)
class PreparedDevice:
    """One allocated device, ready for containers: the CDI devices the runtime injects."""

    pool: str
    device: str
    cdi_device_ids: tuple[str, ...]
    requests: tuple[str, ...] = ()  # the claim's requests it serves; empty: all
    share_id: str | None = None  # for devices allocated as a share (consumable capacity)


@dataclass(frozen=True)
class PrepareOutcome:
    """What became of one claim: its devices, or an error (then the devices are ignored)."""

    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""

    @classmethod
    def failed(cls, error: str) -> PrepareOutcome:
        return cls(error=error or "preparation failed")


class Driver(Protocol):
    """The work the kubelet's calls reach. Called from gRPC worker threads, possibly concurrently."""

    def prepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, PrepareOutcome]:
        """An outcome per claim UID (a claim missing from the answer counts as failed)."""
        ...

    def unprepare(self, claims: Sequence[ClaimRef]) -> Mapping[str, str]:
        """An error per claim UID; empty when the claim is unprepared."""
        ...


class HealthStatus(enum.IntEnum):
    """The kubelet's three health states, with the wire's numbers."""

    UNKNOWN = 0
    HEALTHY = 1
    UNHEALTHY = 2


@dataclass(frozen=True)
class DeviceHealth:
    pool: str
    device: str
    status: HealthStatus
    last_updated: int  # Unix seconds
    message: str = ""  # the kubelet keeps at most 1024 characters
    timeout_seconds: int = 0  # 0: the kubelet's default


class HealthBoard:
    """The current health of every device of the driver, and a way to follow it.

    ``publish`` replaces the whole list (the stream always carries complete lists: a device missing
    from one is the kubelet's cue to stop tracking it); every watcher gets the new list. Watchers
    see the latest list, not every intermediate one: health is level-based.
    """

    def __init__(self) -> None:
        self._devices: tuple[DeviceHealth, ...] = ()
        self._version = 0
        self._changed = threading.Condition()

    def publish(self, devices: Sequence[DeviceHealth]) -> None:
        with self._changed:
            if tuple(devices) == self._devices:
                return
            self._devices = tuple(devices)
            self._version += 1
            self._changed.notify_all()

    def current(self) -> tuple[DeviceHealth, ...]:
        with self._changed:
            return self._devices

    def watch(self, stopped: Callable[[], bool], *, poll: float = 0.5) -> Iterator[tuple[DeviceHealth, ...]]:
        """Yields the current list at once, then each newer one, until ``stopped()`` is true."""
        seen = -1
        while not stopped():
            with self._changed:
                if self._version == seen:
                    self._changed.wait(poll)
                    continue
                seen, devices = self._version, self._devices
            yield devices


@dataclass(frozen=True)
class PluginIdentity:
    """Who the plugin is to the kubelet."""

    driver: str
    instance: str  # unique per running copy (the Pod UID), so a rolling update can overlap
    services: tuple[str, ...] = field(
        default=("v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth")
    )
