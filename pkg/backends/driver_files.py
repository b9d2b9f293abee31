"""The driver's user space: what every container of a vendor's devices needs besides its devices.

A device node alone is not a usable GPU: a CUDA program loads the driver's libraries
(``libcuda.so.1``, ``libnvidia-ml.so.1``, ...), runs its tools (``nvidia-smi``) and, on newer
cards, the driver reads its firmware. Those files belong to the installed driver, change with
it, and live wherever the node's driver was installed (the host's ``/``, a containerised driver's
``/run/nvidia/driver``, a vendor folder such as ``/usr/local/nvidia``). A backend finds them under
the configured driver root (:class:`DriverRootOptions`) and answers with :class:`DriverFiles`:
the version they belong to and the container edits (read-only mounts, hooks, the control device
nodes) the gpu-handler writes into the node's base CDI spec
(docs/kubelet-plugin.md#the-drivers-user-space-the-base-spec).

A root that is missing, holds another version than the loaded kernel module or lacks what the
asked capabilities require is a :class:`DriverFilesError`: never a spec that silently lacks a
library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pkg.backends.preparation import ContainerEdits

REASON_ROOT_MISSING: Final = "DriverRootMissing"
REASON_ROOT_INCOMPLETE: Final = "DriverRootIncomplete"
REASON_VERSION_MISMATCH: Final = "DriverVersionMismatch"
REASON_HOOK_MISSING: Final = "CdiHookMissing"
REASON_DRIVER_UNREADABLE: Final = "DriverUnreadable"

COMPUTE: Final = "compute"
UTILITY: Final = "utility"
GRAPHICS: Final = "graphics"
VIDEO: Final = "video"
DISPLAY: Final = "display"
CAPABILITIES: Final = (COMPUTE, UTILITY, GRAPHICS, VIDEO, DISPLAY)
# Every capability: a capability the root lacks adds nothing (its libraries are optional), so the
# default is what the root has, as NVIDIA's CDI spec gives a container (docs/kubelet-plugin.md).
DEFAULT_CAPABILITIES: Final = frozenset(CAPABILITIES)


class DriverFilesError(Exception):
    """The driver's user space cannot be given to containers; ``reason`` is a CamelCase word."""

    def __init__(self, *, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


@dataclass(frozen=True, kw_only=True)
class DriverRootOptions:
    """Where the node's driver is and what containers get of it.

    ``root`` is the driver root as this process reads it; ``root_on_host`` the same folder's path on
    the host, which the runtime resolves the spec's mounts against (the gpu-handler's Pod mounts
    the host's root elsewhere); ``host_run`` the host's ``/run`` as this process reads it (the
    driver daemons' sockets); ``capabilities`` the driver capabilities containers get
    (:data:`CAPABILITIES`); ``cdi_hook`` the host path of the program the spec's hooks run, or None
    where none is installed (then the spec cannot make the links and ld cache a container needs,
    which is a :data:`REASON_HOOK_MISSING` failure).
    """

    root: Path = Path("/")
    root_on_host: Path | None = None
    host_run: Path = Path("/run")
    capabilities: frozenset[str] = DEFAULT_CAPABILITIES
    cdi_hook: Path | None = None

    @property
    def host_root(self) -> Path:
        return self.root_on_host if self.root_on_host is not None else self.root

    def on_host(self, path: Path) -> str:
        """``path`` (under :attr:`root` or :attr:`host_run`) as the host names it."""
        if path.is_relative_to(self.root):
            return str(self.host_root / path.relative_to(self.root))
        if path.is_relative_to(self.host_run):
            return str(Path("/run") / path.relative_to(self.host_run))
        raise ValueError(f"{path} is neither under the driver root {self.root} nor under {self.host_run}")


@dataclass(frozen=True)
class SuppliedFile:
    """A loader's file the driver root lacks but whose whole content discovery knows (an OpenCL ICD
    file is one line naming the library): the plugin writes it on the host, under ``name`` in a
    folder of its own, and mounts it read-only at ``container_path``. Discovery never writes: a
    mount needs a host path, which only the plugin that owns the folder knows
    (docs/kubelet-plugin.md#the-drivers-user-space-the-base-spec)."""

    name: str
    container_path: str
    content: str


@dataclass(frozen=True)
class DriverFiles:
    """The driver's user space for containers: its ``version`` and the ``edits`` every container of
    the vendor's devices gets, plus the ``supplied`` files the plugin writes and mounts besides;
    ``found`` says what was found, for logs and events."""

    version: str
    edits: ContainerEdits
    found: dict[str, int] = field(default_factory=dict)
    supplied: tuple[SuppliedFile, ...] = ()


DEFAULT_DRIVER_ROOT: Final = DriverRootOptions()
