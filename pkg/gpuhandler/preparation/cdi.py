"""CDI specs: how a prepared claim's devices, and the driver they need, reach its containers.

The node's base spec, ``<cdi dir>/k8s.gpu.deckhouse.io-driver_<vendor>.json``, kind
``k8s.gpu.deckhouse.io/driver``, one device named for the vendor: the driver's user space every
container of the vendor's devices needs (its libraries, tools and firmware mounted read-only, the
hooks that make the soname links and the ld cache, the control device nodes;
:mod:`pkg.backends.driver_files`). It is written at start-up and whenever the driver version
changes, and each prepared device's CDI device IDs name it after the claim's own device, so a
driver upgrade reaches every container created afterwards without touching a claim's spec.

One spec file per claim, ``<cdi dir>/k8s.gpu.deckhouse.io-claim_<claim UID>.json``, kind
``k8s.gpu.deckhouse.io/claim``, one CDI device per allocated device named ``<claim UID>-<device>``,
so a claim's devices can never be confused with another claim's and start-up can tell which
files are ours and whom they belong to. The kubelet receives the CDI device IDs from
NodePrepareResources and the runtime (containerd) applies the edits: the device nodes and the
environment a container of the device needs, and the folders it mounts (an MPS share's daemon
folders).

:class:`DriverSpec` keeps the base spec in step with the loaded driver: it asks the backend for the
driver's user space (:meth:`~pkg.backends.backend.VendorBackend.driver_files`: one NVML call while
the driver version is unchanged, a new discovery when it changed) and writes the base spec when its
content changed. Prepare asks it before it changes anything on the node, so a driver upgrade
rewrites the base spec before any new Prepare answers, and a driver root that is missing or
incomplete fails the Prepare with the reason, instead of handing out a spec that lacks
``libcuda``. Start-up and the plugin's periodic round ask too, so the spec exists before the first
claim and the state (:mod:`.driver_files_status`) is visible while no claim comes.

The spec's ``cdiVersion`` is the oldest version that has every field used (``hostPath`` needs
0.5.0), so older runtimes read the files too; the file is written atomically (a runtime never
reads half a spec).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from pkg.backends.driver_files import DriverFiles, DriverFilesError
from pkg.backends.preparation import ContainerEdits
from pkg.gpuhandler.preparation.atomic_file import remove_file, write_atomically
from pkg.gpuhandler.preparation.claim_ref import checked_uid
from pkg.gpuhandler.preparation.driver_files_status import REASON_FOUND, DriverFilesFinding, DriverFilesStatus
from pkg.gpuhandler.preparation.failures import PrepareFailedError

logger = logging.getLogger(__name__)

CDI_VENDOR: Final = "k8s.gpu.deckhouse.io"
CDI_CLASS: Final = "claim"
CDI_KIND: Final = f"{CDI_VENDOR}/{CDI_CLASS}"
DRIVER_CLASS: Final = "driver"
DRIVER_KIND: Final = f"{CDI_VENDOR}/{DRIVER_CLASS}"
_FILE = re.compile(rf"^{re.escape(CDI_VENDOR)}-{CDI_CLASS}_(?P<uid>[0-9a-f-]+)\.json$")
_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# The oldest CDI version that knows a field (CDI SPEC.md, "Released versions").
_FIELD_VERSIONS: Final = {"hostPath": (0, 5, 0), "annotations": (0, 6, 0), "additionalGids": (0, 7, 0)}
_BASE_VERSION: Final = (0, 3, 0)


def device_name(claim_uid: str, device: str) -> str:
    return f"{claim_uid}-{device}"


def device_id(claim_uid: str, device: str) -> str:
    """The fully qualified CDI device ID the kubelet hands to the runtime."""
    return f"{CDI_KIND}={device_name(claim_uid, device)}"


def build_spec(claim_uid: str, devices: Mapping[str, ContainerEdits]) -> dict[str, Any]:
    """The spec of one claim; ``devices`` maps DRA device names to their edits.

    A device without edits is refused here, as CDI loaders refuse it: it would give a container
    nothing, which is never what a prepared device means.
    """
    entries = []
    for name, edits in sorted(devices.items()):
        if edits.empty:
            raise ValueError(f"claim {claim_uid}: device {name} has no container edits")
        entries.append({"name": device_name(claim_uid, name), "containerEdits": container_edits(edits)})
    spec: dict[str, Any] = {"kind": CDI_KIND, "devices": entries}
    return {"cdiVersion": minimum_version(spec), **spec}


def build_driver_spec(vendor: str, files: DriverFiles) -> dict[str, Any]:
    """The node's base spec for ``vendor``'s driver: the control device nodes and variables as the
    device's own edits (a device must have some), the mounts and hooks as the spec's, applied once
    per container however many of its devices name it."""
    edits = files.edits
    device = ContainerEdits(device_nodes=edits.device_nodes, env=edits.env)
    if device.empty:
        raise ValueError(f"the {vendor} driver's edits name no control device node or variable")
    spec: dict[str, Any] = {
        "kind": DRIVER_KIND,
        "annotations": {f"{CDI_VENDOR}/driver-version": files.version},
        "containerEdits": container_edits(ContainerEdits(mounts=edits.mounts, hooks=edits.hooks)),
        "devices": [{"name": vendor, "containerEdits": container_edits(device)}],
    }
    return {"cdiVersion": minimum_version(spec), **spec}


def container_edits(edits: ContainerEdits) -> dict[str, Any]:
    """``edits`` as CDI's ``containerEdits``."""
    out: dict[str, Any] = {}
    if edits.env:
        out["env"] = [f"{key}={value}" for key, value in edits.env]
    if edits.device_nodes:
        out["deviceNodes"] = [{"path": node.path, "hostPath": node.host_path} for node in edits.device_nodes]
    if edits.mounts:
        out["mounts"] = [
            {"hostPath": m.host_path, "containerPath": m.container_path, "options": list(m.options)}
            for m in edits.mounts
        ]
    if edits.hooks:
        out["hooks"] = [{"hookName": h.hook_name, "path": h.path, "args": list(h.args)} for h in edits.hooks]
    return out


def minimum_version(spec: Mapping[str, Any]) -> str:
    """The oldest CDI version that has every field ``spec`` uses."""
    needed = _BASE_VERSION

    def visit(value: Any) -> None:
        nonlocal needed
        if isinstance(value, Mapping):
            for key, inner in value.items():
                needed = max(needed, _FIELD_VERSIONS.get(key, _BASE_VERSION))
                visit(inner)
        elif isinstance(value, list):
            for inner in value:
                visit(inner)

    visit(spec)
    return ".".join(str(part) for part in needed)


def driver_device_id(vendor: str) -> str:
    """The CDI device ID of ``vendor``'s base spec, which every prepared device's IDs end with."""
    return f"{DRIVER_KIND}={vendor}"


class CdiSpecs:
    """The spec files in the node's CDI folder (the runtime's ``cdi_spec_dirs``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def driver_path(self, vendor: str) -> Path:
        return self.folder / f"{CDI_VENDOR}-{DRIVER_CLASS}_{vendor}.json"

    def write_driver(self, vendor: str, files: DriverFiles) -> str:
        """Writes ``vendor``'s base spec when its content changed; returns its CDI device ID."""
        path = self.driver_path(vendor)
        body = json.dumps(build_driver_spec(vendor, files), indent=1).encode() + b"\n"
        try:
            current = path.read_bytes()
        except OSError:
            current = None
        if current != body:
            write_atomically(path, body, mode=0o644, durable=False)
        return driver_device_id(vendor)

    def path_of(self, claim_uid: str) -> Path:
        """The claim's spec file; :class:`~claim_ref.InvalidClaimRefError` (a ``ValueError``) for a
        UID not of the API server's form, which could name a file outside the folder."""
        checked_uid(claim_uid)
        return self.folder / f"{CDI_VENDOR}-{CDI_CLASS}_{claim_uid}.json"

    def write(self, claim_uid: str, devices: Mapping[str, ContainerEdits]) -> list[str]:
        """Writes the claim's spec; returns the CDI device IDs, in the order of ``devices``."""
        path = self.path_of(claim_uid)
        body = json.dumps(build_spec(claim_uid, devices), indent=1).encode() + b"\n"
        # Under /var/run: a reboot empties it, so power-loss durability buys nothing (atomic_file).
        write_atomically(path, body, mode=0o644, durable=False)
        return [device_id(claim_uid, name) for name in devices]

    def remove(self, claim_uid: str) -> bool:
        """Removes the claim's spec; returns whether there was one (without a folder there is none)."""
        try:
            return remove_file(self.path_of(claim_uid), durable=False)
        except NotADirectoryError:
            return False

    def claims(self) -> dict[str, Path]:
        """Claim UID → spec file, for every spec file of ours in the folder."""
        if not self.folder.is_dir():
            return {}
        found = {}
        for path in self.folder.iterdir():
            if (match := _FILE.match(path.name)) and _UID.fullmatch(match["uid"]):
                found[match["uid"]] = path
        return found

    def remove_all_but(self, keep: Sequence[str]) -> list[str]:
        """Removes the spec files of claims not in ``keep``; returns their claim UIDs."""
        removed = [uid for uid in self.claims() if uid not in set(keep)]
        for uid in removed:
            self.remove(uid)
        return removed


class DriverSpec:
    """Writes ``vendor``'s base spec from the backend's driver files; answers its CDI device ID."""

    def __init__(
        self, *, files: Callable[[], DriverFiles], cdi: CdiSpecs, vendor: str, status: DriverFilesStatus
    ) -> None:
        self._files = files
        self._cdi = cdi
        self._vendor = vendor
        self._status = status
        self._written: DriverFiles | None = None  # what the file holds, as this instance wrote it
        self._reported: DriverFilesFinding | None = None  # told once per change, not per Prepare

    def device_id(self) -> str:
        """The base spec's CDI device ID, the spec current; :class:`PrepareFailedError` when the
        driver's user space cannot be given to containers. The state is reported when it changed."""
        try:
            files = self._files()
            # The same files already written and the file in place: nothing to read or write.
            if files is not self._written or not self._cdi.driver_path(self._vendor).exists():
                self._cdi.write_driver(self._vendor, files)
                logger.info(
                    "base CDI spec current",
                    extra={
                        "driver_version": files.version,
                        "path": str(self._cdi.driver_path(self._vendor)),
                        **files.found,
                    },
                )
                self._written = files
        except DriverFilesError as exc:
            self._report(DriverFilesFinding(ready=False, reason=exc.reason, message=exc.message))
            raise PrepareFailedError(
                exc.reason, f"the {self._vendor} driver's files cannot be given to containers: {exc.message}"
            ) from exc
        except (OSError, ValueError) as exc:
            self._report(DriverFilesFinding(ready=False, reason="DriverSpecUnwritable", message=str(exc)))
            raise PrepareFailedError("DriverSpecUnwritable", f"the base CDI spec: {exc}") from exc
        found = ", ".join(f"{count} {what}" for what, count in files.found.items())
        ready = DriverFilesFinding(
            ready=True, reason=REASON_FOUND, message=f"driver {files.version}: {found}"
        )
        if ready != self._reported:
            self._report(ready)
        return driver_device_id(self._vendor)

    def _report(self, finding: DriverFilesFinding) -> None:
        self._reported = finding
        self._status.report(finding)

    def withdraw(self) -> bool:
        """Removes the base spec (the plugin leaves the node for good); whether there was one."""
        self._written = None
        return remove_file(self._cdi.driver_path(self._vendor), durable=False)

    def refresh(self) -> None:
        """:meth:`device_id` for the periodic round: a failure is reported, not raised."""
        try:
            self.device_id()
        except PrepareFailedError as exc:
            logger.warning("driver files unavailable: %s", exc)
