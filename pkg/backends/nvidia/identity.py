"""NVIDIA's identity and its plugin: PCI vendor ``10de``, what its drivers mean, how to build it.

Declared in ``pyproject.toml`` as the entry point ``nvidia`` of group ``gpu_control_plane.vendors``,
so the registry finds it the same way it would find a third-party backend. Importing this module
is cheap (the node agent does it to recognise cards); NVML is imported only by
:meth:`NvidiaPlugin.create`, which only the gpu-handler calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from api.gpu.v1alpha1 import DriverType
from pkg.backends.registry import VendorIdentity

if TYPE_CHECKING:
    from pkg.backends.backend import BackendOptions, VendorBackend

IDENTITY: Final = VendorIdentity(
    name="nvidia",
    pci_vendor_id="10de",
    driver_types={"nvidia": DriverType.NVIDIA, "vfio-pci": DriverType.VFIO},
)


class NvidiaPlugin:
    """Builds the NVIDIA backend over the real NVML library."""

    @property
    def identity(self) -> VendorIdentity:
        return IDENTITY

    def create(self, options: BackendOptions) -> VendorBackend:
        # Imported here so that recognising cards (the node agent) never loads NVML code, and
        # because the backend module itself imports IDENTITY from this one.
        from pkg.backends.nvidia.backend import NvidiaBackend  # noqa: PLC0415
        from pkg.backends.nvidia.nvml import PynvmlAdapter  # noqa: PLC0415
        from pkg.backends.nvidia.sharing import NvidiaMpsControl  # noqa: PLC0415

        return NvidiaBackend(
            nvml=PynvmlAdapter(),
            dev_root=options.dev_root,
            proc_root=options.proc_root,
            mps=NvidiaMpsControl(on_host=options.daemons_on_host),
            driver_root=options.driver_root,
            sysfs_root=options.sysfs_root,
        )


NVIDIA: Final = NvidiaPlugin()
