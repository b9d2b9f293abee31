"""The preparation port (MIG devices, shares, CDI edits): what NodePrepare asks of a vendor.

The gpu-handler's Prepare pipeline decides *what* a claim needs (which card, whole or which MIG
placement) and keeps the node's record; a :class:`CardPreparer` only does it to one card and says
what a container then needs (:class:`ContainerEdits`: device nodes and environment). Everything
here is idempotent, because a Prepare that died half-way is simply run again:

* a MIG device is identified by its card and **placement**, never by an ID the hardware picked:
  creating one where the same profile already sits (perhaps without its compute instance, if the
  previous attempt died between the two calls) completes and returns it; destroying one that is
  gone is success;
* switching MIG mode (or a card-wide partition mode) to the mode the card is in does nothing;
* setting the time slice a card already has, starting the MPS daemon that runs, stopping one that
  does not: nothing happens, successfully.

Failures are :class:`PreparationError` with a CamelCase ``reason`` (the prepare-failure metric's
label) and a message naming the card.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from api.gpu.v1alpha1 import TimeSlicingInterval
from pkg.backends.errors import BackendError

REASON_CARD_BUSY: Final = "CardBusy"
REASON_MIG_MODE: Final = "MigModeChangeFailed"
REASON_PLACEMENT: Final = "PlacementUnavailable"
REASON_DEVICE_NODE: Final = "DeviceNodeMissing"
REASON_NOT_SUPPORTED: Final = "NotSupported"
REASON_DRIVER: Final = "DriverError"
REASON_SHARING: Final = "SharingSetupFailed"


class PreparationError(BackendError):
    """Preparing (or releasing) a device on one card failed; nothing is left half-done by it."""


@dataclass(frozen=True)
class DeviceNode:
    """A device node inside the container at ``path``, taken from ``host_path`` on the host."""

    path: str
    host_path: str


READ_ONLY: Final = ("ro", "nosuid", "nodev", "bind")


@dataclass(frozen=True)
class Mount:
    """A host file or folder bind-mounted into the container (the MPS pipe and shared-memory
    folders read-write; the driver's libraries, binaries and firmware read-only)."""

    host_path: str
    container_path: str
    options: tuple[str, ...] = ("rw", "nosuid", "nodev", "bind")


@dataclass(frozen=True)
class Hook:
    """A program the runtime runs while it creates the container (OCI ``createContainer``): what a
    mount cannot do, such as links and the container's ld cache. ``path`` is on the host;
    ``args`` start with the program's name, as OCI hooks' do."""

    path: str
    args: tuple[str, ...]
    hook_name: str = "createContainer"


@dataclass(frozen=True)
class ContainerEdits:
    """What a container of one device needs: device nodes, environment variables, mounts and the
    hooks that finish the container's file system."""

    device_nodes: tuple[DeviceNode, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    hooks: tuple[Hook, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.device_nodes or self.env or self.mounts or self.hooks)


@dataclass(frozen=True)
class MpsFolders:
    """The folders of one card's MPS control daemon, under ``root`` (one per card).

    ``pipe`` holds the daemon's control pipe, sockets and PID file and is mounted into every client
    (``CUDA_MPS_PIPE_DIRECTORY``); ``shm`` is the daemon's ``/dev/shm`` and every client's, because
    the MPS server and its clients exchange shared memory there; ``log`` is the daemon's log.
    """

    root: Path

    @property
    def pipe(self) -> Path:
        return self.root / "pipe"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def shm(self) -> Path:
        return self.root / "shm"


@dataclass(frozen=True)
class MpsLimits:
    """What the MPS server enforces on one client: its share of the card's threads and memory."""

    thread_percentage: int
    memory_limit_mib: int


@dataclass(frozen=True, kw_only=True)
class MigDevice:
    """A MIG device: its GPU instance at a placement and, once made, its compute instance."""

    profile_id: int
    start: int
    size: int
    gpu_instance: int
    compute_instance: int | None = None
    uuid: str | None = None

    @property
    def complete(self) -> bool:
        return self.compute_instance is not None and self.uuid is not None

    def slices(self) -> set[int]:
        return set(range(self.start, self.start + self.size))


class CardPreparer(Protocol):
    """Changes one card for a claim. Must be safe to call from several threads at once (the
    gpu-handler serialises changes of one node anyway, with its node lock)."""

    def mig_enabled(self, address: str) -> bool:
        """Whether the card runs in MIG mode (False for a card without MIG)."""
        ...

    def set_mig_mode(self, address: str, *, enabled: bool) -> None:
        """Switches MIG mode; :data:`REASON_CARD_BUSY` while processes or instances exist."""
        ...

    def processes(self, address: str) -> Sequence[int]:
        """PIDs running on the card: a card with any is not free."""
        ...

    def mig_devices(self, address: str) -> list[MigDevice]:
        """Every GPU instance of the card, complete or not, by placement."""
        ...

    def create_mig_device(self, address: str, *, profile_id: int, start: int, size: int) -> MigDevice:
        """The MIG device of ``profile_id`` exactly at ``start`` (completing a half-made one)."""
        ...

    def destroy_mig_device(self, address: str, *, start: int) -> bool:
        """Destroys the MIG device placed at ``start``; returns whether there was one."""
        ...

    def card_edits(self, address: str) -> ContainerEdits:
        """What a container of the whole card needs."""
        ...

    def partition_mode(self, address: str) -> str | None:
        """The card-wide partition mode the card is in (:class:`~pkg.dra.model.card.PartitionMode`
        names); ``None`` for a card without such modes."""
        ...

    def set_partition_mode(self, address: str, mode: str | None) -> None:
        """Switches the card to partition ``mode`` (``None``: the mode of one partition, the whole
        card); nothing happens in the mode it is in; :data:`REASON_CARD_BUSY` while it is used,
        :data:`REASON_NOT_SUPPORTED` for a mode the card lacks."""
        ...

    def partition_edits(self, address: str, mode: str, index: int) -> ContainerEdits:
        """What a container of partition ``index`` of ``mode`` needs (the card is in ``mode``)."""
        ...

    def mig_edits(self, address: str, device: MigDevice) -> ContainerEdits:
        """What a container of one MIG device needs."""
        ...

    def set_time_slice(self, address: str, interval: TimeSlicingInterval) -> None:
        """Sets how long each process of the card runs before the next one's turn (card-wide)."""
        ...

    def start_mps(self, address: str, folders: MpsFolders) -> bool:
        """Starts the card's MPS control daemon in ``folders`` (and gives the card to it); returns
        False when it already runs there."""
        ...

    def stop_mps(self, address: str, folders: MpsFolders) -> bool:
        """Stops the card's MPS control daemon, gives the card back to every process and removes
        ``folders``; returns whether a daemon was running."""
        ...

    def mps_running(self, folders: MpsFolders) -> bool:
        """Whether an MPS control daemon runs in ``folders``."""
        ...

    def mps_edits(self, address: str, folders: MpsFolders, limits: MpsLimits) -> ContainerEdits:
        """What a container of one MPS share needs: the whole card's edits, the daemon's folders
        and the limits the MPS server enforces on it."""
        ...
