"""The vendor backend port: everything the node components ask of a GPU vendor.

A backend is the only code that talks to a vendor's management library (NVML for NVIDIA). The
node components call it through this Protocol and never import a vendor module, so a new vendor
is a package with an entry point (:mod:`pkg.backends.registry`), and tests run the real components
against a simulated backend (docs/architecture.md#hardware-behind-narrow-adapters).

The port is split by who asks:

* ``identity`` and ``discover``: which PCI functions are this vendor's GPUs (the node agent).
* ``enrich``: the capability snapshot and the vendor's live driver state for
  ``PhysicalGPU.status`` (gpu-handler's enrichment). The backend reads; the caller decides
  *whether* to write: only while ``DriverReady=True`` and the card is bound to the backend's
  ``driver_type`` (docs/architecture.md#a-field-without-a-source-is-left-out).
* ``health`` and ``validate``: the facts behind ``HardwareHealthy`` and ``DriverReady``;
  ``health_events``: what the vendor library reports the moment a card fails
  (:mod:`pkg.backends.health_events`), behind the device taints.
* ``offer_inputs``: what the DRA offer builder needs about one card (:class:`~pkg.dra.model.card.Card`),
  including per-profile engine counts, which the PhysicalGPU schema does not carry.

Every method takes the PhysicalGPU (its ``status.pciInfo.address`` names the card) and works on
that card only: a failure raises :class:`BackendError` naming it, and the caller carries on with
the other cards.

* ``preparer``: what the DRA kubelet plugin's Prepare/Unprepare do to a card (MIG mode and
  devices, what containers get), :class:`~pkg.backends.preparation.CardPreparer`.
* ``driver_files``: the driver's user space every container of the vendor's devices gets (the
  node's base CDI spec), :mod:`pkg.backends.driver_files`.
* ``usage``: the processes on a card and what they use of it (:mod:`pkg.backends.usage`), for
  gpu-handler's per-Pod attribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from api.gpu.v1alpha1 import AmdState, Capabilities, DriverType, NvidiaState, PhysicalGPU
from pkg.backends.driver_files import DEFAULT_DRIVER_ROOT, DriverFiles, DriverRootOptions
from pkg.backends.errors import BackendError
from pkg.hardware.pci import PciDevice

if TYPE_CHECKING:
    from pkg.backends.health_events import HealthEventSource
    from pkg.backends.identity import VendorIdentity
    from pkg.backends.preparation import CardPreparer
    from pkg.backends.usage import CardUsage
    from pkg.dra.model.card import Card


@dataclass(frozen=True)
class Enrichment:
    """What a backend reads for ``PhysicalGPU.status``.

    ``capabilities`` is ``None`` when the API has no ``Vendor`` value for the backend (the enum is
    closed); ``nvidia`` and ``amd`` are the ``currentState.nvidia`` and ``currentState.amd`` blocks,
    each ``None`` for the other vendors (a field without a source is left out). Optional fields inside
    are ``None`` where the library or sysfs did not answer, so they are left out.
    """

    capabilities: Capabilities | None
    nvidia: NvidiaState | None = None
    amd: AmdState | None = None


class VerdictStatus(StrEnum):
    """The answer of a verdict; the values are a Kubernetes condition's, so the component that turns a
    verdict into a condition copies the value (a backend knows nothing of conditions)."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


@dataclass(frozen=True, kw_only=True)
class CardVerdict:
    """A backend's verdict on one question about the card (is it healthy; is its driver ready).

    A backend never builds Kubernetes conditions: the gpu-handler turns a verdict into
    ``HardwareHealthy`` (or, later, ``DriverReady``) with the condition rules of the framework.
    """

    status: VerdictStatus
    reason: str
    message: str = ""

    @classmethod
    def true(cls, reason: str, message: str = "") -> CardVerdict:
        return cls(status=VerdictStatus.TRUE, reason=reason, message=message)

    @classmethod
    def false(cls, reason: str, message: str = "") -> CardVerdict:
        return cls(status=VerdictStatus.FALSE, reason=reason, message=message)

    @classmethod
    def unknown(cls, reason: str, message: str = "") -> CardVerdict:
        return cls(status=VerdictStatus.UNKNOWN, reason=reason, message=message)


@dataclass(frozen=True, kw_only=True)
class BackendOptions:
    """What a plugin may need to build its backend on this node.

    ``sysfs_root`` is where the host's sysfs is mounted; ``dev_root`` and ``proc_root`` the host's
    ``/dev`` and ``/proc`` (device nodes, the driver's proc files); ``state_dir`` holds a simulated
    backend's state (health overrides, the simulated driver); real backends ignore it.
    ``daemons_on_host``: daemons a share needs (NVIDIA's MPS control daemon) are started on the
    host, outside this container's cgroups, so they outlive it (:mod:`pkg.backends.host_daemons`;
    the process must be in the host's PID namespace). ``driver_root``: where the driver's user
    space is and what containers get of it. ``processes_proc``: the ``/proc`` of the PID namespace
    the process IDs a vendor library reports belong to (gpu-handler runs in the host's), where a
    simulated backend finds the real processes that use its cards.
    """

    node_name: str
    sysfs_root: Path = Path("/sys")
    dev_root: Path = Path("/dev")
    proc_root: Path = Path("/proc")
    state_dir: Path | None = None
    daemons_on_host: bool = False
    driver_root: DriverRootOptions = DEFAULT_DRIVER_ROOT
    processes_proc: Path = Path("/proc")


class VendorBackend(Protocol):
    """One vendor's access to its cards. Must be safe to call from several threads at once."""

    @property
    def identity(self) -> VendorIdentity: ...

    @property
    def driver_type(self) -> DriverType:
        """The ``currentState.driverType`` under which the backend can read a card (Nvidia)."""
        ...

    def discover(self, devices: Sequence[PciDevice]) -> list[PciDevice]:
        """The GPUs among ``devices`` this backend drives, in the given order."""
        ...

    def enrich(self, gpu: PhysicalGPU) -> Enrichment:
        """Reads capabilities and driver state of the card; raises :class:`BackendError`."""
        ...

    def health(self, gpu: PhysicalGPU) -> CardVerdict:
        """``HardwareHealthy`` of the card; a check that could not run says ``Unknown``."""
        ...

    def health_events(self, addresses: Sequence[str]) -> HealthEventSource:
        """A source of the health events of the cards at ``addresses`` (PCI addresses), opened
        lazily on the first wait; the caller closes it and opens a new one when the set of cards
        changes."""
        ...

    def offer_inputs(self, gpu: PhysicalGPU) -> Card:
        """The offer builder's input for the card; raises :class:`BackendError`."""
        ...

    @property
    def preparer(self) -> CardPreparer:
        """What NodePrepare/NodeUnprepare do to this vendor's cards."""
        ...

    def driver_files(self, capabilities: frozenset[str] | None = None) -> DriverFiles:
        """The driver's user space for the loaded driver version and ``capabilities`` (None: the
        configured ones; a vendor without capabilities answers the same for every set), found
        again whenever that version changes; raises
        :class:`~pkg.backends.driver_files.DriverFilesError`."""
        ...

    def usage(self, address: str) -> CardUsage:
        """One read of the processes on the card at ``address`` (a PCI address) and what they use;
        raises :class:`BackendError`."""
        ...

    def close(self) -> None:
        """Releases the library (once, at process exit)."""
        ...


class VendorPlugin(Protocol):
    """What an entry point of group ``gpu_control_plane.vendors`` names.

    ``identity`` is all the node agent reads, so it must be cheap; ``create`` builds the backend
    (and loads the vendor library) only in the process that uses it, the gpu-handler.
    """

    @property
    def identity(self) -> VendorIdentity: ...

    def create(self, options: BackendOptions) -> VendorBackend: ...


def claimed_gpus(identity: VendorIdentity, devices: Sequence[PciDevice]) -> list[PciDevice]:
    """The functions of ``devices`` that are GPUs (a class of ``identity``) of ``identity``'s vendor."""
    return [
        d for d in devices if d.class_code in identity.class_codes and d.vendor_id == identity.pci_vendor_id
    ]


def pci_address(gpu: PhysicalGPU) -> str:
    """The card's PCI address from ``status.pciInfo``; :class:`BackendError` when not reported."""
    info = gpu.status.pci_info if gpu.status else None
    if info is None:
        raise BackendError(
            address=str(gpu.metadata.name),
            reason="NoPciAddress",
            message="status.pciInfo is not reported yet",
        )
    return info.address


__all__ = [  # BackendError lives in pkg.backends.errors, which every port and vendor can import
    "BackendError",
    "BackendOptions",
    "CardVerdict",
    "Enrichment",
    "VendorBackend",
    "VendorPlugin",
    "VerdictStatus",
    "claimed_gpus",
    "pci_address",
]
