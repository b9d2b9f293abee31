"""The loaders' files a driver root lacks, written on the host so the base spec can mount them.

Discovery may find a driver library whose loader's file is missing but whose content it knows: an
OpenCL ICD file is one line naming ``libnvidia-opencl``, and the H200 node's driver ships the
library without it, so OpenCL fails in a container even through NVIDIA's own spec
(:class:`~pkg.backends.driver_files.SuppliedFile`). A CDI mount names a file on the host, so the
plugin writes each such file into a folder of its own, one per vendor:
``<kubelet root>/plugins/gpu.deckhouse.io/supplied/<vendor>/<name>``. The chart mounts the kubelet's
plugins folder at its host path, as it does for the hook program beside it, so the path written here
is the path the runtime mounts.

Written before the spec that mounts it (:meth:`SuppliedFiles.mounted`), atomically (a runtime
never mounts half a file) and only when its content differs, so every Prepare may ask. Removed with
the base spec when the plugin leaves the node (:meth:`SuppliedFiles.remove`); a file no longer
supplied because a driver upgrade brought its own stays until then: a container created from the
earlier spec may still mount it, and it is one line of text.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path, PurePosixPath

from pkg.backends.driver_files import DriverFiles, SuppliedFile
from pkg.backends.preparation import READ_ONLY, Mount
from pkg.gpuhandler.preparation.atomic_file import write_atomically


class SuppliedFiles:
    """The supplied files of each vendor below ``folder`` (a host path, read and written as such)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, vendor: str, file: SuppliedFile) -> Path:
        """Where ``file`` of ``vendor`` lives; ``ValueError`` for a name that would leave the folder."""
        name = PurePosixPath(file.name)
        if name.is_absolute() or not name.parts or ".." in name.parts:
            raise ValueError(f"supplied file {file.name!r} of {vendor}: not a name below the plugin's folder")
        return self._vendor_folder(vendor) / name

    def in_place(self, vendor: str, files: DriverFiles) -> bool:
        """Whether every supplied file of ``files`` is on the host with its content."""
        return all(self._holds(self.path(vendor, file), file.content) for file in files.supplied)

    def mounted(self, vendor: str, files: DriverFiles) -> DriverFiles:
        """``files`` with its supplied files written (where their content differs) and mounted
        read-only at their container paths; ``OSError`` when one cannot be written."""
        if not files.supplied:
            return files
        mounts = []
        for file in files.supplied:
            path = self.path(vendor, file)
            if not self._holds(path, file.content):
                write_atomically(path, file.content.encode(), mode=0o644, durable=False)
            mounts.append(Mount(str(path), file.container_path, READ_ONLY))
        edits = dataclasses.replace(files.edits, mounts=(*files.edits.mounts, *mounts))
        return dataclasses.replace(files, edits=edits, supplied=())

    def remove(self, vendor: str) -> bool:
        """Removes ``vendor``'s supplied files (the plugin leaves the node); whether there were any."""
        try:
            shutil.rmtree(self._vendor_folder(vendor))
        except FileNotFoundError:
            return False
        return True

    def _vendor_folder(self, vendor: str) -> Path:
        if "/" in vendor or vendor in ("", ".", ".."):
            raise ValueError(f"{vendor!r} is not a vendor's folder name")
        return self.folder / vendor

    @staticmethod
    def _holds(path: Path, content: str) -> bool:
        try:
            return path.read_bytes() == content.encode()
        except OSError:
            return False
