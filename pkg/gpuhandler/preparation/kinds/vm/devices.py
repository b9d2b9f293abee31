"""What the kinds of a VM's devices (passed-through cards and vGPUs) share: the VFIO device nodes
a launcher opens, and the claim's VM files, written by whichever kind prepares one of them.

One metadata file per request lists every VM device of that request, so each kind writes the
files for all of the claim's VM devices from their records (a vGPU's UUID is recorded before its
mdev exists) and takes the mounts that fall to its own device
(:meth:`~.files.VmFiles.write`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from kubernetes.client import V1Device

from pkg.backends.preparation import DeviceNode, Mount
from pkg.gpuhandler.preparation.checkpoint import DeviceRecord
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.kinds import ClaimWork
from pkg.gpuhandler.preparation.kinds.vm.files import VmFiles
from pkg.gpuhandler.preparation.kinds.vm.records import for_vm
from pkg.gpuhandler.preparation.services import OfferIndex


def vm_mounts(files: VmFiles, offers: OfferIndex, device: DeviceRecord, work: ClaimWork) -> tuple[Mount, ...]:
    """Writes the claim's VM files and returns the mounts ``device``'s container carries."""
    resource = work.resource
    if resource is None:
        raise ValueError(f"claim {work.record}: the VM files need the claim as read from the API server")
    requests: dict[str, list[tuple[DeviceRecord, V1Device | None]]] = {}
    for recorded in work.record.devices:
        if for_vm(recorded):
            offer = offers.device(recorded.pool, recorded.device)
            requests.setdefault(recorded.requests[0], []).append((recorded, offer))
    return files.write(resource, requests).get(device.device, ())


def vfio_nodes(
    dev_root: Path, group: str, *, timeout: float, clock: Callable[[], float], what: str
) -> tuple[DeviceNode, ...]:
    """``/dev/vfio/vfio`` and ``/dev/vfio/<group>`` for a container, once both exist (udev may lag
    the kernel by a moment); ``DeviceNodeMissing`` after ``timeout`` seconds."""
    node = dev_root / "vfio" / group
    control = dev_root / "vfio" / "vfio"
    deadline = clock() + timeout
    while not (node.is_char_device() and control.is_char_device()):
        if clock() >= deadline:
            raise PrepareFailedError("DeviceNodeMissing", f"{what}: {node} or {control} is missing")
        time.sleep(0.05)
    return (
        DeviceNode(path="/dev/vfio/vfio", host_path=str(control)),
        DeviceNode(path=f"/dev/vfio/{group}", host_path=str(node)),
    )
