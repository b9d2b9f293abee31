"""How AMD cards are recognised (PCI vendor ``1002``, driver ``amdgpu``) and the entry points'
plugins: the backend over the real driver and over the simulated one (:mod:`.simulated`)."""

from __future__ import annotations

from typing import Final

from api.gpu.v1alpha1 import DriverType
from pkg.backends.backend import BackendOptions, VendorBackend
from pkg.backends.registry import GPU_CLASS_CODES, VendorIdentity

IDENTITY: Final = VendorIdentity(
    name="amd",
    pci_vendor_id="1002",
    driver_types={"amdgpu": DriverType.ROCM, "vfio-pci": DriverType.VFIO},
    # MI200 cards are display controllers, MI300 cards processing accelerators.
    class_codes=GPU_CLASS_CODES | {"0380", "1200"},
)


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
        from pkg.backends.amd.backend import AmdBackend  # noqa: PLC0415
        from pkg.backends.amd.simulated import SimulatedAmdgpu  # noqa: PLC0415

        driver = SimulatedAmdgpu(
            sysfs_root=options.sysfs_root, dev_root=options.dev_root, state_dir=options.state_dir
        )
        return AmdBackend(sysfs_root=options.sysfs_root, dev_root=options.dev_root, driver=driver)


AMD: Final = AmdPlugin()
SIMULATED_AMD: Final = SimulatedAmdPlugin()
