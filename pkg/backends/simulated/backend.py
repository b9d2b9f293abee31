"""The simulated NVIDIA backend: the real NVIDIA backend over the simulated NVML, plus a health
override, registered as the entry point ``simulated-nvidia``.

Everything a card reports comes from :class:`~pkg.backends.simulated.fake_nvml.SimulatedNvml`, so
the enrichment, the MIG fallback and the filling rules under test are the production code. The
one addition is a way for tests and the demo to make a card sick without real faults: a file
``<state-dir>/<pci-address>.health`` whose content is ``<status> <Reason> <message...>``, e.g.
``False RowRemappingFailed row remapping failed on bank 3``. While it exists it *is* the card's
``HardwareHealthy`` verdict; removing it returns the card to what the simulated NVML reports
(healthy). A malformed file says ``Unknown`` with reason ``InvalidHealthFile``, never healthy.

Driver binding (VFIO) runs the production sysfs writes; :mod:`~pkg.backends.simulated.pci_kernel`
plays the kernel's part on the fixture tree (``sysfs_kernel``).
Sharing runs the production code too: the time slice is recorded in the simulated driver state
and the MPS control daemon is a real process (:mod:`pkg.backends.simulated.sharing`).

The identity is NVIDIA's: the simulated cards are NVIDIA cards, labelled ``nvidia``; the registry
accepts two plugins that share one identity.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Final

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.backends.backend import BackendOptions, CardVerdict, VendorBackend, VerdictStatus, pci_address
from pkg.backends.driver_files import DEFAULT_DRIVER_ROOT, DriverRootOptions
from pkg.backends.identity import VendorIdentity
from pkg.backends.nvidia.backend import NvidiaBackend
from pkg.backends.nvidia.identity import IDENTITY
from pkg.backends.simulated.driver_memory import SimulatedDriverMemory
from pkg.backends.simulated.fabric import FABRIC_FILE
from pkg.backends.simulated.fake_nvml import SimulatedNvml
from pkg.backends.simulated.host_changes import DRIVER_VERSION_FILE, LOST_CARDS_FILE
from pkg.backends.simulated.pci_kernel import SimulatedPciKernel
from pkg.backends.simulated.sharing import SimulatedTimeSlicer, simulated_mps_control
from pkg.hardware.pci_binding import SysfsKernel

logger = logging.getLogger(__name__)

HEALTH_FILE_SUFFIX: Final = ".health"
REASON_INVALID_FILE: Final = "InvalidHealthFile"
_REASON = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


class SimulatedBackend(NvidiaBackend):
    """:class:`NvidiaBackend` over :class:`SimulatedNvml`; ``state_dir`` holds health overrides and
    the simulated driver's host tools."""

    def __init__(
        self,
        *,
        nvml: SimulatedNvml,
        state_dir: Path | None = None,
        dev_root: Path = Path("/dev"),
        proc_root: Path = Path("/proc"),
        sysfs_root: Path | None = None,
        daemons_on_host: bool = False,
        driver_root: DriverRootOptions = DEFAULT_DRIVER_ROOT,
    ) -> None:
        super().__init__(
            nvml=nvml,
            dev_root=dev_root,
            proc_root=proc_root,
            driver_root=driver_root,
            sysfs_root=sysfs_root,
            time_slicer=SimulatedTimeSlicer(nvml.state),
            mps=simulated_mps_control(state_dir=state_dir, on_host=daemons_on_host),
        )
        self._state_dir = state_dir
        self._pci_kernel = (
            SimulatedPciKernel(sysfs_root=sysfs_root, dev_root=dev_root) if sysfs_root is not None else None
        )

    @property
    def sysfs_kernel(self) -> SysfsKernel | None:
        """What the kernel does after a sysfs write to the simulated host (driver binding)."""
        return self._pci_kernel

    def health(self, gpu: PhysicalGPU) -> CardVerdict:
        if self._state_dir is not None:
            override = read_health_file(self._state_dir / f"{pci_address(gpu)}{HEALTH_FILE_SUFFIX}")
            if override is not None:
                return override
        return super().health(gpu)


def read_health_file(path: Path) -> CardVerdict | None:
    """The verdict in ``path``; ``None`` when there is no such file."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return CardVerdict.unknown(REASON_INVALID_FILE, f"{path}: {exc}")
    status, _, rest = text.partition(" ")
    reason, _, message = rest.strip().partition(" ")
    if status not in {s.value for s in VerdictStatus} or not _REASON.match(reason):
        logger.warning("ignoring malformed health file", extra={"path": str(path), "content": text[:200]})
        return CardVerdict.unknown(
            REASON_INVALID_FILE,
            f"{path}: expected '<True|False|Unknown> <Reason> <message>', got {text[:100]!r}",
        )
    return CardVerdict(status=VerdictStatus(status), reason=reason, message=message.strip())


class SimulatedNvidiaPlugin:
    """Builds :class:`SimulatedBackend` for ``options.node_name`` over ``options.sysfs_root``."""

    @property
    def identity(self) -> VendorIdentity:
        return IDENTITY

    def create(self, options: BackendOptions) -> VendorBackend:
        # The driver's state is the node's: kept in the state folder, shared by every process there.
        driver = SimulatedDriverMemory(options.state_dir / "driver" if options.state_dir else None)
        nvml = SimulatedNvml(
            node_name=options.node_name,
            sysfs_root=options.sysfs_root,
            state=driver,
            processes_proc=options.processes_proc,
            fabric_file=options.state_dir / FABRIC_FILE if options.state_dir else None,
            lost_file=options.state_dir / LOST_CARDS_FILE if options.state_dir else None,
            driver_version_file=options.state_dir / DRIVER_VERSION_FILE if options.state_dir else None,
        )
        return SimulatedBackend(
            nvml=nvml,
            state_dir=options.state_dir,
            dev_root=options.dev_root,
            proc_root=options.proc_root,
            sysfs_root=options.sysfs_root,
            daemons_on_host=options.daemons_on_host,
            driver_root=options.driver_root,
        )


SIMULATED_NVIDIA: Final = SimulatedNvidiaPlugin()
