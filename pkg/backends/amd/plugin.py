"""The AMD entry points' plugins (``amd`` and ``simulated-amd`` of group
``gpu_control_plane.vendors``): the backend over the real driver and over the simulated one
(:mod:`.simulated`).

The registry loads this module in every process that recognises cards (the node agent), so at
import it reads only the identity (:mod:`~pkg.backends.amd.identity`); the backend is imported by
``create``, which only the gpu-handler calls. That import waits for cost alone: the backend
imports the identity module, never this one.
"""

from __future__ import annotations

from typing import Final

from pkg.backends.amd.identity import IDENTITY
from pkg.backends.backend import BackendOptions, VendorBackend
from pkg.backends.identity import VendorIdentity


class AmdPlugin:
    """Builds the AMD backend over the host's sysfs; the driver is the real one."""

    @property
    def identity(self) -> VendorIdentity:
        return IDENTITY

    def create(self, options: BackendOptions) -> VendorBackend:
        # Imported here so that recognising cards (the node agent) loads no backend code.
        from pkg.backends.amd.backend import AmdBackend  # noqa: PLC0415
        from pkg.backends.amd.driver import SysfsDriver  # noqa: PLC0415

        driver = SysfsDriver(sysfs_root=options.sysfs_root, proc_root=options.proc_root)
        return AmdBackend(sysfs_root=options.sysfs_root, dev_root=options.dev_root, driver=driver)


class SimulatedAmdPlugin:
    """The AMD backend over a fixture tree, with :class:`~.simulated.SimulatedAmdgpu` switching
    modes in it (its busy cards listed under ``state_dir``)."""

    @property
    def identity(self) -> VendorIdentity:
        return IDENTITY

    def create(self, options: BackendOptions) -> VendorBackend:
        # As the real plugin: recognising cards loads no backend code (not an import cycle).
        from pkg.backends.amd.backend import AmdBackend  # noqa: PLC0415
        from pkg.backends.amd.simulated import SimulatedAmdgpu  # noqa: PLC0415

        driver = SimulatedAmdgpu(
            sysfs_root=options.sysfs_root, dev_root=options.dev_root, state_dir=options.state_dir
        )
        return AmdBackend(sysfs_root=options.sysfs_root, dev_root=options.dev_root, driver=driver)


AMD: Final = AmdPlugin()
SIMULATED_AMD: Final = SimulatedAmdPlugin()
