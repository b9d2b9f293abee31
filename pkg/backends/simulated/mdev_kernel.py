"""The kernel's side of mediated devices on a simulated vGPU host: what a write to sysfs would do.

A fixture card in vGPU mode (``test/fixtures/sysfs/t4-vgpu``) lists its types under
``<card>/mdev_supported_types/<type>/`` with ``create`` files, so the real writes of
:class:`~pkg.hardware.mdev.MdevHost` land somewhere; :class:`SimulatedMdevKernel` then changes the
tree as the mdev core and NVIDIA's vGPU manager would have inside the write:

* ``<type>/create`` ← UUID: refused like the kernel refuses it — ``EINVAL`` for a value that is not
  a UUID, ``EEXIST`` for a UUID in use, ``EUSERS`` when the type's ``available_instances`` is 0 —
  otherwise ``<card>/<uuid>/`` is made with ``mdev_type``, ``remove`` and ``iommu_group`` (a new
  group of its own), linked from ``bus/mdev/devices`` and the type's ``devices/``, and
  ``/dev/vfio/<group>`` and ``/dev/vfio/vfio`` are made with mknod (the vendor's vfio driver binds
  the new mdev at once);
* ``<card>/<uuid>/remove`` ← ``1``: all of it goes again, ``ENODEV`` for an mdev that is gone;
* after each, every type's ``available_instances`` follows the equal-size rule the manager applies
  by default: a card without vGPUs can take ``max_instance`` of any type; a card with vGPUs only
  more of the type already there.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path
from typing import Final

from pkg.backends.simulated.device_nodes import make_device_node
from pkg.hardware.mdev import TYPES_DIR

_MAX_INSTANCE: Final = re.compile(r"max_instance=(\d+)")
_UUID: Final = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class SimulatedMdevKernel:
    def __init__(self, *, sysfs_root: Path, dev_root: Path) -> None:
        self._root = sysfs_root
        self._dev = dev_root

    def written(self, path: Path, value: str) -> None:
        real = Path(os.path.realpath(path))
        if real.name == "create" and real.parent.parent.name == TYPES_DIR:
            self._create(real.parent.parent.parent, real.parent.name, value.strip(), path)
        elif real.name == "remove" and (real.parent / "mdev_type").is_symlink():
            self._remove(real.parent, value.strip(), path)

    def _create(self, card: Path, type_id: str, uuid: str, path: Path) -> None:
        if not _UUID.fullmatch(uuid):
            raise OSError(errno.EINVAL, f"{uuid!r} is not a UUID", str(path))
        mdevs = self._root / "bus" / "mdev" / "devices"
        if (mdevs / uuid).exists() or (mdevs / uuid).is_symlink():
            raise OSError(errno.EEXIST, f"mdev {uuid} exists", str(path))
        type_dir = card / TYPES_DIR / type_id
        if int((type_dir / "available_instances").read_text().strip()) <= 0:
            raise OSError(errno.EUSERS, f"no instance of {type_id} is available on {card.name}", str(path))
        groups = self._root / "kernel" / "iommu_groups"
        group = str(max((int(g.name) for g in groups.iterdir() if g.name.isdigit()), default=-1) + 1)
        (groups / group / "devices").mkdir(parents=True)
        device = card / uuid
        device.mkdir()
        (device / "remove").write_text("")
        os.symlink(os.path.relpath(type_dir, device), device / "mdev_type")
        os.symlink(os.path.relpath(groups / group, device), device / "iommu_group")
        os.symlink(os.path.relpath(device, groups / group / "devices"), groups / group / "devices" / uuid)
        mdevs.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(device, mdevs), mdevs / uuid)
        (type_dir / "devices").mkdir(exist_ok=True)
        os.symlink(os.path.relpath(device, type_dir / "devices"), type_dir / "devices" / uuid)
        make_device_node(self._dev / "vfio" / "vfio")
        make_device_node(self._dev / "vfio" / group)
        self._recount(card)

    def _remove(self, device: Path, value: str, path: Path) -> None:
        if value != "1":
            raise OSError(errno.EINVAL, "write 1 to remove an mdev", str(path))
        if not device.is_dir():
            raise OSError(errno.ENODEV, f"mdev {device.name} is gone", str(path))
        uuid, card = device.name, device.parent
        group_link = device / "iommu_group"
        group = os.path.basename(os.readlink(group_link))
        type_dir = Path(os.path.realpath(device / "mdev_type"))
        (type_dir / "devices" / uuid).unlink(missing_ok=True)
        (self._root / "bus" / "mdev" / "devices" / uuid).unlink(missing_ok=True)
        shutil.rmtree(self._root / "kernel" / "iommu_groups" / group, ignore_errors=True)
        shutil.rmtree(device)
        (self._dev / "vfio" / group).unlink(missing_ok=True)
        self._recount(card)

    def _recount(self, card: Path) -> None:
        """Every type's ``available_instances`` after a change (equal-size: one type per card)."""
        present: dict[str, int] = {}
        for entry in card.iterdir():
            if (entry / "mdev_type").is_symlink():
                kind = os.path.basename(os.readlink(entry / "mdev_type"))
                present[kind] = present.get(kind, 0) + 1
        for type_dir in (card / TYPES_DIR).iterdir():
            match = _MAX_INSTANCE.search((type_dir / "description").read_text())
            most = int(match.group(1)) if match else 0
            if not present:
                available = most
            elif set(present) == {type_dir.name}:
                available = most - present[type_dir.name]
            else:
                available = 0
            (type_dir / "available_instances").write_text(f"{max(available, 0)}\n")
