"""CDI specs: how a prepared claim's devices, and the driver they need, reach its containers.

The node's base spec, ``<cdi dir>/k8s.gpu.deckhouse.io-driver_<vendor>.json``, kind
``k8s.gpu.deckhouse.io/driver``, one device named for the vendor: the driver's user space every
container of the vendor's devices needs for the node's default driver capabilities (its libraries,
tools and firmware mounted read-only, the hooks that make the soname links and the ld cache, the
control device nodes; :mod:`pkg.backends.driver_files`). Beside it, one capability spec per driver
capability the driver root has, ``...-driver_<vendor>-<capability>.json`` with the device
``<vendor>-<capability>``: what that capability alone needs. A device configured with
``driverCapabilities`` names the capability specs it asks for instead of the base spec
(docs/kubelet-plugin.md#driver-capabilities-per-claim). They are written at start-up and whenever
the driver version changes, and each prepared device's CDI device IDs name them after the claim's
own device, so a driver upgrade reaches every container created afterwards without touching a
claim's spec.

Why a spec file per capability and not one spec with a device per capability: CDI applies a spec's
own ``containerEdits`` once per container however many of its devices the container is given,
but a device's edits once per time it is named, and the kubelet names a base device once per claim.
With the mounts and hooks in the spec's edits, a container of two claims runs each hook once; two
capability specs that share a library mount it at the same container path, which CDI replaces
rather than repeats, and their hooks make the same links, which the hook leaves as they are.

One spec file per claim, ``<cdi dir>/k8s.gpu.deckhouse.io-claim_<claim UID>.json``, kind
``k8s.gpu.deckhouse.io/claim``, one CDI device per allocated device named ``<claim UID>-<device>``,
so a claim's devices can never be confused with another claim's and start-up can tell which
files are ours and whom they belong to. The kubelet receives the CDI device IDs from
NodePrepareResources and the runtime (containerd) applies the edits: the device nodes and the
environment a container of the device needs, and the folders it mounts (an MPS share's daemon
folders).

:class:`DriverSpec` keeps the base spec and the capability specs in step with the loaded driver: it
asks the backend for the driver's user space (:meth:`~pkg.backends.backend.VendorBackend.driver_files`:
one NVML call per capability set while the driver version is unchanged, a new discovery when it
changed) and writes a spec when its content changed. A capability is on the node when its files
mount something of its own (:func:`_adds_files`); one the root lacks has no spec, and a device
asking for it fails its Prepare with :data:`REASON_CAPABILITY_MISSING`. Prepare asks it before
it changes anything on the node, so a driver upgrade rewrites the specs before any new Prepare
answers, and a driver root that is missing or incomplete fails the Prepare with the reason,
instead of handing out a spec that lacks ``libcuda``. Start-up and the plugin's periodic round
ask too, so the specs exist before the first claim and the state (:mod:`.driver_files_status`) is
visible while no claim comes.

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

from pkg.backends.driver_files import CAPABILITIES, COMPUTE, UTILITY, DriverFiles, DriverFilesError
from pkg.backends.preparation import ContainerEdits
from pkg.gpuhandler.preparation.atomic_file import remove_file, write_atomically
from pkg.gpuhandler.preparation.claim_ref import checked_uid
from pkg.gpuhandler.preparation.driver_files_status import REASON_FOUND, DriverFilesFinding, DriverFilesStatus
from pkg.gpuhandler.preparation.failures import PrepareFailedError
from pkg.gpuhandler.preparation.supplied_files import SuppliedFiles

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
REASON_CAPABILITY_MISSING: Final = "DriverCapabilityMissing"
# Every driver root has them: discovery refuses one that lacks their libraries.
REQUIRED_CAPABILITIES: Final = frozenset({COMPUTE, UTILITY})


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


def build_driver_spec(vendor: str, files: DriverFiles, capability: str | None = None) -> dict[str, Any]:
    """The node's base spec for ``vendor``'s driver (``capability`` None) or one capability's spec:
    the control device nodes and variables as the device's own edits (a device must have some), the
    mounts and hooks as the spec's, applied once per container however many of its devices name it."""
    edits = files.edits
    device = ContainerEdits(device_nodes=edits.device_nodes, env=edits.env)
    if device.empty:
        raise ValueError(f"the {vendor} driver's edits name no control device node or variable")
    annotations = {f"{CDI_VENDOR}/driver-version": files.version}
    if capability is not None:
        annotations[f"{CDI_VENDOR}/driver-capability"] = capability
    spec: dict[str, Any] = {
        "kind": DRIVER_KIND,
        "annotations": annotations,
        "containerEdits": container_edits(ContainerEdits(mounts=edits.mounts, hooks=edits.hooks)),
        "devices": [
            {"name": driver_device_name(vendor, capability), "containerEdits": container_edits(device)}
        ],
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


def driver_device_name(vendor: str, capability: str | None = None) -> str:
    """``vendor`` for the base spec's device, ``<vendor>-<capability>`` for a capability's."""
    return vendor if capability is None else f"{vendor}-{capability}"


def driver_device_id(vendor: str, capability: str | None = None) -> str:
    """The CDI device ID of ``vendor``'s base spec (or of one capability's spec), which a prepared
    device's IDs end with."""
    return f"{DRIVER_KIND}={driver_device_name(vendor, capability)}"


class CdiSpecs:
    """The spec files in the node's CDI folder (the runtime's ``cdi_spec_dirs``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def driver_path(self, vendor: str, capability: str | None = None) -> Path:
        return self.folder / f"{CDI_VENDOR}-{DRIVER_CLASS}_{driver_device_name(vendor, capability)}.json"

    def write_driver(self, vendor: str, files: DriverFiles, capability: str | None = None) -> str:
        """Writes ``vendor``'s base spec (or one capability's) when its content changed; returns its
        CDI device ID."""
        path = self.driver_path(vendor, capability)
        body = json.dumps(build_driver_spec(vendor, files, capability), indent=1).encode() + b"\n"
        try:
            current = path.read_bytes()
        except OSError:
            current = None
        if current != body:
            write_atomically(path, body, mode=0o644, durable=False)
        return driver_device_id(vendor, capability)

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


DriverFilesSource = Callable[[frozenset[str] | None], DriverFiles]
"""The backend's driver files for a set of driver capabilities (None: the node's default set)."""


class DriverSpec:
    """Writes ``vendor``'s base spec and its capability specs from the backend's driver files;
    answers the CDI device IDs a device asking for a set of capabilities names. The files the driver
    root lacks and the plugin writes (``supplied``) are on the host before a spec that mounts them."""

    def __init__(
        self,
        *,
        files: DriverFilesSource,
        cdi: CdiSpecs,
        supplied: SuppliedFiles,
        vendor: str,
        status: DriverFilesStatus,
    ) -> None:
        self._files = files
        self._cdi = cdi
        self._supplied = supplied
        self._vendor = vendor
        self._status = status
        # What the files hold, as this instance wrote them: the base spec (None) and each capability.
        self._written: dict[str | None, DriverFiles] = {}
        self._reported: DriverFilesFinding | None = None  # told once per change, not per Prepare

    def device_ids(
        self, capabilities: frozenset[str] | None = None, *, asker: str = "a device"
    ) -> tuple[str, ...]:
        """The CDI device IDs of the driver's files for ``capabilities`` (None: the node's default,
        the base spec), the specs current; :class:`PrepareFailedError` when the driver's user space
        cannot be given to containers, or when ``asker`` asks for a capability the driver root
        lacks (never a spec that silently gives less). The state is reported when it changed."""
        present = self._current()
        if capabilities is None:
            return (driver_device_id(self._vendor),)
        missing = sorted(capabilities - present)
        if missing:
            has = ", ".join(c for c in CAPABILITIES if c in present) or "none"
            raise PrepareFailedError(
                REASON_CAPABILITY_MISSING,
                f"{asker} asks for driver capabilities {', '.join(missing)}, which the {self._vendor} "
                f"driver on this node does not have (its driver root has: {has})",
            )
        return tuple(driver_device_id(self._vendor, c) for c in CAPABILITIES if c in capabilities)

    def _current(self) -> frozenset[str]:
        """Writes what changed; returns the capabilities the driver root has."""
        try:
            base = self._files(None)
            bare, required = self._files(frozenset()), self._files(REQUIRED_CAPABILITIES)
            present: dict[str | None, DriverFiles] = {
                capability: files
                for capability in CAPABILITIES
                if _adds_files(
                    files := self._files(frozenset({capability})),
                    bare if capability in REQUIRED_CAPABILITIES else required,
                )
            }
            wanted = {None: base, **present}
            changed = [
                capability
                for capability, files in wanted.items()
                # The same files already written and the file in place: nothing to read or write.
                if files is not self._written.get(capability)
                or not self._cdi.driver_path(self._vendor, capability).exists()
                or not self._supplied.in_place(self._vendor, files)
            ]
            for capability in changed:
                with_supplied = self._supplied.mounted(self._vendor, wanted[capability])
                self._cdi.write_driver(self._vendor, with_supplied, capability)
            if changed:
                for capability in CAPABILITIES:  # a capability the driver no longer has
                    if capability not in present:
                        remove_file(self._cdi.driver_path(self._vendor, capability), durable=False)
                logger.info(
                    "base CDI spec current",
                    extra={
                        "driver_version": base.version,
                        "path": str(self._cdi.driver_path(self._vendor)),
                        "capabilities": ",".join(c for c in present if c is not None),
                        **base.found,
                    },
                )
            self._written = wanted
        except DriverFilesError as exc:
            self._report(DriverFilesFinding(ready=False, reason=exc.reason, message=exc.message))
            raise PrepareFailedError(
                exc.reason, f"the {self._vendor} driver's files cannot be given to containers: {exc.message}"
            ) from exc
        except (OSError, ValueError) as exc:
            self._report(DriverFilesFinding(ready=False, reason="DriverSpecUnwritable", message=str(exc)))
            raise PrepareFailedError("DriverSpecUnwritable", f"the base CDI spec: {exc}") from exc
        found = ", ".join(f"{count} {what}" for what, count in base.found.items())
        names = [c for c in CAPABILITIES if c in present]
        capabilities = f"; capabilities {', '.join(names)}" if names else ""
        ready = DriverFilesFinding(
            ready=True, reason=REASON_FOUND, message=f"driver {base.version}: {found}{capabilities}"
        )
        if ready != self._reported:
            self._report(ready)
        return frozenset(names)

    def _report(self, finding: DriverFilesFinding) -> None:
        self._reported = finding
        self._status.report(finding)

    def withdraw(self) -> bool:
        """Removes the base spec and the capability specs (the plugin leaves the node for good);
        whether there was a base spec. The supplied files go after the specs that mount them."""
        self._written = {}
        for capability in CAPABILITIES:
            remove_file(self._cdi.driver_path(self._vendor, capability), durable=False)
        had_spec = remove_file(self._cdi.driver_path(self._vendor), durable=False)
        self._supplied.remove(self._vendor)
        return had_spec

    def refresh(self) -> None:
        """The specs made current for the periodic round: a failure is reported, not raised."""
        try:
            self._current()
        except PrepareFailedError as exc:
            logger.warning("driver files unavailable: %s", exc)


def _adds_files(files: DriverFiles, below: DriverFiles) -> bool:
    """Whether a capability's ``files`` mount anything ``below`` does not: whether the root has the
    capability. A required capability is compared with the files of no capability (the firmware
    and the daemons' sockets come with every set); any other with the required ones' files, since
    a library it shares with compute (NVIDIA files the allocator under both) is not its own."""
    return bool(set(files.edits.mounts) - set(below.edits.mounts))
