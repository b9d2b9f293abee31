"""NVIDIA's plugin: the entry point ``nvidia`` of group ``gpu_control_plane.vendors``.

Declared in ``pyproject.toml``, so the registry finds it the same way it would find a third-party
backend. The registry loads this module in every process that recognises cards (the node agent),
so at import it reads only the identity (:mod:`~pkg.backends.nvidia.identity`); the backend and
NVML are imported by :meth:`NvidiaPlugin.create`, which only the gpu-handler calls. That import
waits for cost alone: the backend imports the identity module, never this one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from pkg.backends.nvidia.identity import IDENTITY

if TYPE_CHECKING:
    from pkg.backends.backend import BackendOptions, VendorBackend
    from pkg.backends.identity import VendorIdentity


class NvidiaPlugin:
    """Builds the NVIDIA backend over the real NVML library."""

    @property
    def identity(self) -> VendorIdentity:
        return IDENTITY

    def create(self, options: BackendOptions) -> VendorBackend:
        # Imported here so that recognising cards (the node agent) never loads NVML code.
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
