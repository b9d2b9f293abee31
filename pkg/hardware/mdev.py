"""Mediated devices (vGPUs) of a card, read and changed through the kernel's mdev sysfs interface.

A card whose host driver is NVIDIA's vGPU manager registers with the kernel's mediated-device
framework, which shows every vGPU type the card supports under
``<card>/mdev_supported_types/<type id>/``: ``name`` (``GRID T4-4Q``), ``description`` (the
manager writes ``num_heads=…, frl_config=…, framebuffer=4096M, max_resolution=…,
max_instance=4``), ``device_api`` (``vfio-pci``), ``available_instances`` (how many more the card
can take *now*: 0 for a type that cannot join the vGPUs already there) and ``create``. Writing a
UUID to ``create`` makes the mdev: ``<card>/<uuid>/`` with ``mdev_type``, ``iommu_group`` (a
group of its own, so ``/dev/vfio/<group>``) and ``remove`` (write ``1`` to destroy it), linked
from ``bus/mdev/devices/<uuid>``. docs/vgpu.md has the sources.

Only this layout is implemented. Cards that expose vGPUs as SR-IOV virtual functions with the
vendor-specific VFIO interface (``<VF>/nvidia/creatable_vgpu_types``, ``current_vgpu_type``;
Ada/Hopper and newer from vGPU 17) are recognised (:func:`vgpu_layout`) so they can be refused
with a reason, never mistaken for a card without vGPU.

Every change is idempotent, because Prepare and Unprepare are repeated after any crash: creating
a UUID that exists with the same parent and type is success, one that exists elsewhere is an
error; removing one that is gone is success. Writes go through the same
:class:`~pkg.hardware.pci_binding.SysfsKernel` port as driver binding, so the simulated kernel
(:mod:`pkg.backends.simulated.mdev_kernel`) acts on them in tests.
"""

from __future__ import annotations

import enum
import errno
import os
import re
import uuid as uuid_module
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pkg.hardware.pci_binding import RealKernel, SysfsKernel, write_attribute

TYPES_DIR: Final = "mdev_supported_types"
_ADDRESS = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_TYPE_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_FRAMEBUFFER = re.compile(r"framebuffer=(\d+)M")
_MAX_INSTANCE = re.compile(r"max_instance=(\d+)")


class VgpuLayout(enum.StrEnum):
    """How a card offers vGPUs to the host, as its sysfs shows it."""

    NONE = "None"  # no vGPU manager on this card
    MDEV = "Mdev"  # mdev types on the card itself (implemented)
    SRIOV_VF = "SriovVf"  # vGPU types per SR-IOV virtual function (refused, docs/vgpu.md)


@dataclass(frozen=True)
class MdevType:
    """One vGPU type of a card as the kernel lists it; ``framebuffer_mib`` and ``max_instances``
    come from the manager's ``description`` (``None`` when it does not say), ``created`` counts
    the mdevs of the type that exist (its ``devices/``)."""

    type_id: str
    name: str
    description: str
    device_api: str
    available_instances: int
    framebuffer_mib: int | None
    max_instances: int | None
    created: int = 0


def card_path(sysfs_root: Path, address: str) -> Path:
    if not _ADDRESS.fullmatch(address):
        raise ValueError(f"{address!r} is not a PCI address (dddd:bb:dd.f, lower-case)")
    return sysfs_root / "bus" / "pci" / "devices" / address


def vgpu_layout(sysfs_root: Path, address: str) -> VgpuLayout:
    """Which vGPU layout the card at ``address`` has: read from sysfs, never guessed from a model."""
    card = card_path(sysfs_root, address)
    types = card / TYPES_DIR
    if types.is_dir() and any(types.iterdir()):
        return VgpuLayout.MDEV
    for vf in sorted(card.glob("virtfn*")):
        if (vf / "nvidia" / "creatable_vgpu_types").exists():
            return VgpuLayout.SRIOV_VF
    return VgpuLayout.NONE


def mdev_types(sysfs_root: Path, address: str) -> list[MdevType]:
    """The card's vGPU types in type-ID order; a type whose files cannot be read is left out."""
    folder = card_path(sysfs_root, address) / TYPES_DIR
    if not folder.is_dir():
        return []
    found = []
    for entry in sorted(folder.iterdir(), key=lambda p: _natural(p.name)):
        try:
            description = _text(entry / "description")
            found.append(
                MdevType(
                    type_id=entry.name,
                    name=_text(entry / "name") or entry.name,
                    description=description,
                    device_api=_text(entry / "device_api"),
                    available_instances=int(_text(entry / "available_instances")),
                    framebuffer_mib=_number(_FRAMEBUFFER, description),
                    max_instances=_number(_MAX_INSTANCE, description),
                    created=len(list((entry / "devices").iterdir())) if (entry / "devices").is_dir() else 0,
                )
            )
        except (OSError, ValueError):
            continue
    return found


class MdevError(OSError):
    """A mediated device could not be made or is not what the record says."""


class MdevHost:
    """Creates and removes the mediated devices of cards under ``sysfs_root``."""

    def __init__(self, sysfs_root: Path, *, kernel: SysfsKernel | None = None) -> None:
        self._root = sysfs_root
        self._kernel = kernel or RealKernel()

    def types(self, address: str) -> list[MdevType]:
        return mdev_types(self._root, address)

    def device(self, mdev_uuid: str) -> Path:
        return self._root / "bus" / "mdev" / "devices" / _checked_uuid(mdev_uuid)

    def exists(self, mdev_uuid: str) -> bool:
        return self.device(mdev_uuid).exists()

    def parent_and_type(self, mdev_uuid: str) -> tuple[str, str] | None:
        """The card and type of an existing mdev; ``None`` when it does not exist."""
        device = self.device(mdev_uuid)
        if not device.exists():
            return None
        real = Path(os.path.realpath(device))
        return real.parent.name, os.path.basename(os.readlink(real / "mdev_type"))

    def of_card(self, address: str) -> list[str]:
        """UUIDs of the mdevs that exist on the card, whoever made them."""
        card = card_path(self._root, address)
        return sorted(p.name for p in card.iterdir() if _is_uuid(p.name) and (p / "mdev_type").exists())

    def create(self, address: str, type_id: str, mdev_uuid: str) -> None:
        """Makes the mdev ``mdev_uuid`` of ``type_id`` on the card; success if it already is."""
        if not _TYPE_ID.fullmatch(type_id):
            raise ValueError(f"{type_id!r} is not an mdev type ID")
        found = self.parent_and_type(mdev_uuid)
        if found == (address, type_id):
            return
        if found is not None:
            raise MdevError(
                errno.EEXIST,
                f"mdev {mdev_uuid} exists as type {found[1]} on {found[0]}, not {type_id} on {address}",
            )
        create = card_path(self._root, address) / TYPES_DIR / type_id / "create"
        if not create.exists():
            raise MdevError(errno.ENOENT, f"card {address} has no vGPU type {type_id}", str(create))
        write_attribute(create, _checked_uuid(mdev_uuid), self._kernel)

    def remove(self, mdev_uuid: str) -> bool:
        """Destroys the mdev; ``False`` when it was already gone."""
        device = self.device(mdev_uuid)
        if not device.exists():
            return False
        write_attribute(device / "remove", "1", self._kernel)
        return True

    def iommu_group(self, mdev_uuid: str) -> str:
        """The mdev's IOMMU group (its ``/dev/vfio/<group>``)."""
        link = self.device(mdev_uuid) / "iommu_group"
        try:
            return os.path.basename(os.readlink(link))
        except OSError as exc:
            raise MdevError(errno.ENODEV, f"mdev {mdev_uuid} has no IOMMU group", str(link)) from exc


def new_mdev_uuid() -> str:
    return str(uuid_module.uuid4())


def _checked_uuid(value: str) -> str:
    if not _is_uuid(value):
        raise ValueError(f"{value!r} is not an mdev UUID")
    return value


def _is_uuid(value: str) -> bool:
    try:
        return str(uuid_module.UUID(value)) == value
    except ValueError:
        return False


def _text(path: Path) -> str:
    return path.read_text(encoding="ascii").strip()


def _number(pattern: re.Pattern[str], text: str) -> int | None:
    match = pattern.search(text)
    return int(match.group(1)) if match else None


def _natural(name: str) -> tuple[str, int]:
    head, _, tail = name.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (name, -1)
