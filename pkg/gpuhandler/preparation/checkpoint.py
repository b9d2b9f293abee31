"""The node's record of prepared claims: what was done to the hardware, and for whom.

Every Prepare and Unprepare reads and writes it under the node lock; start-up reconciles the
hardware against it. Its rules come from how such files fail in practice:

* **Atomic and durable** (:mod:`atomic_file`): a crash leaves the old or the new file, never half.
* **Checksummed over the bytes that were written**, not over what this version understands: the
  checksum covers the canonical JSON of the ``data`` object as stored, so a newer release may add
  fields and an older one still verifies and keeps them (unknown fields are carried along on
  rewrite). NVIDIA's driver checksummed its own struct, so every upgrade that added a field
  declared the old checkpoint corrupt (their #1080, #1100).
* **Versioned for readers**: ``version`` is the writer's format, ``minReaderVersion`` the oldest
  reader that may use the file; a reader older than that refuses instead of misreading. Format 2
  added shares (``sharing`` on a device); a file holding one needs a reader of format 2, because
  an older one would not stop the card's MPS daemon or restore its time slice. Format 3 added VFIO
  passthrough (``vfio`` on a device: the IOMMU group and each function's original driver); a
  file holding one needs a reader of format 3, because an older one would leave the functions on
  ``vfio-pci``. A file without shares or VFIO is still readable by format 1 readers, so a
  downgrade without them keeps working.
* **Bound to one boot** (``bootID``): MIG instances and files under /run do not survive a reboot,
  so entries written in an earlier boot describe hardware state that no longer exists.

A file that fails its checksum or a reader-version check is never overwritten: Prepare and
Unprepare fail with an error naming the file until an operator looks (docs/kubelet-plugin.md), so
the record of which MIG instances belong to running workloads is not lost.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pkg.gpuhandler.preparation.atomic_file import write_atomically

FORMAT_VERSION: Final = 3
MIN_READER_VERSION: Final = 1
SHARES_READER_VERSION: Final = 2
VFIO_READER_VERSION: Final = 3


class CheckpointError(Exception):
    """The checkpoint cannot be trusted or read; nothing may change the node until it is fixed."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"checkpoint {path}: {problem}")
        self.path = path


class _Record(BaseModel):
    """Records keep fields they do not know (written by a newer release) and write them back."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class PrepareState(enum.StrEnum):
    """How far a claim's Prepare got on this node (the record's ``state``)."""

    PREPARE_STARTED = "PrepareStarted"
    PREPARE_COMPLETED = "PrepareCompleted"


class MigRecord(_Record):
    """A MIG device made for a claim: the GPU instance at the offer's placement and its compute
    instance. ``gpu_instance`` is ``None`` until created (the placement alone then identifies it)."""

    profile_id: int = Field(alias="profileID")
    placement_start: int = Field(alias="placementStart")
    placement_size: int = Field(alias="placementSize")
    gpu_instance: int | None = Field(default=None, alias="gpuInstance")
    compute_instance: int | None = Field(default=None, alias="computeInstance")
    uuid: str | None = None


class SharingRecord(_Record):
    """A share of a whole card: its strategy and what the node set up and enforces for it."""

    strategy: str  # TimeSlicing | MPS
    share_percent: int = Field(alias="sharePercent")
    memory_mib: int = Field(alias="memoryMiB")
    interval: str = "Default"  # TimeSlicing: the card's time slice while it is shared


class VfioFunctionRecord(_Record):
    """A function bound to ``vfio-pci`` for a claim, and the driver to give it back to."""

    address: str
    driver: str | None = None  # None: it was unbound


class VfioRecord(_Record):
    """VFIO passthrough of a card: its IOMMU group and every function bound with it (card first)."""

    iommu_group: str = Field(alias="iommuGroup")
    functions: list[VfioFunctionRecord] = Field(default_factory=list)


class DeviceRecord(_Record):
    """One allocated device of a claim, as prepared on this node."""

    pool: str
    device: str
    requests: list[str] = Field(default_factory=list)
    card: str  # PCI address of the physical card
    device_type: str = Field(alias="deviceType")  # Physical | MIG
    share_id: str | None = Field(default=None, alias="shareID")
    mig: MigRecord | None = None
    sharing: SharingRecord | None = None
    vfio: VfioRecord | None = None
    cdi_device_ids: list[str] = Field(default_factory=list, alias="cdiDeviceIDs")


class ClaimRecord(_Record):
    uid: str
    namespace: str
    name: str
    state: PrepareState
    devices: list[DeviceRecord] = Field(default_factory=list)
    updated: datetime = Field(default_factory=lambda: datetime.now(UTC))

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.uid})"


class CheckpointData(_Record):
    boot_id: str = Field(alias="bootID")
    claims: dict[str, ClaimRecord] = Field(default_factory=dict)

    def claims_on_card(self, card: str) -> list[ClaimRecord]:
        return [c for c in self.claims.values() if any(d.card == card for d in c.devices)]

    def shares(self) -> list[DeviceRecord]:
        """Every recorded share, of every claim."""
        return [d for c in self.claims.values() for d in c.devices if d.sharing is not None]

    def vfio_cards(self) -> set[str]:
        """Cards bound (or being bound) to ``vfio-pci`` for a claim, in any state."""
        return {d.card for c in self.claims.values() for d in c.devices if d.vfio is not None}


def _canonical(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def checksum(data: Any) -> str:
    return "sha256:" + hashlib.sha256(_canonical(data)).hexdigest()


class CheckpointFile:
    """Reads and writes the checkpoint at ``path``; call only while holding the node lock."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self, *, boot_id: str) -> CheckpointData:
        """The stored data; an empty checkpoint for this boot when there is no file yet."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return CheckpointData(boot_id=boot_id)
        except OSError as exc:
            raise CheckpointError(self.path, f"cannot be read: {exc}") from exc
        return self.parse(raw)

    def parse(self, raw: bytes) -> CheckpointData:
        try:
            envelope = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CheckpointError(self.path, f"is not JSON ({exc})") from exc
        if not isinstance(envelope, dict) or not isinstance(envelope.get("data"), dict):
            raise CheckpointError(self.path, "has no data object")
        min_reader = envelope.get("minReaderVersion")
        if not isinstance(min_reader, int) or min_reader > FORMAT_VERSION:
            raise CheckpointError(
                self.path,
                f"needs a reader of format version {min_reader!r}; this release reads up to {FORMAT_VERSION}",
            )
        if envelope.get("checksum") != checksum(envelope["data"]):
            raise CheckpointError(self.path, "checksum mismatch: the file was changed or damaged")
        try:
            return CheckpointData.model_validate(envelope["data"])
        except ValidationError as exc:
            raise CheckpointError(self.path, f"has invalid content: {exc}") from exc

    def save(self, data: CheckpointData) -> None:
        body = data.model_dump(mode="json", by_alias=True)
        envelope = {
            "version": FORMAT_VERSION,
            "minReaderVersion": _min_reader(data),
            "checksum": checksum(body),
            "data": body,
        }
        write_atomically(self.path, json.dumps(envelope, indent=1, sort_keys=True).encode() + b"\n")


class CheckpointStore:
    """The checkpoint file bound to this boot's ID: the one reader and writer of the node's record
    (Prepare, Unprepare, start-up, the health feed and the MPS watchdog), under the node lock."""

    def __init__(self, path: Path, boot_id: Callable[[], str]) -> None:
        self.file = CheckpointFile(path)
        self._boot_id = boot_id

    @property
    def boot_id(self) -> str:
        return self._boot_id()

    def load(self) -> CheckpointData:
        return self.file.load(boot_id=self._boot_id())

    def save(self, data: CheckpointData) -> None:
        self.file.save(data)


def _min_reader(data: CheckpointData) -> int:
    if data.vfio_cards():
        return VFIO_READER_VERSION
    return SHARES_READER_VERSION if data.shares() else MIN_READER_VERSION


def read_boot_id(path: Path = Path("/proc/sys/kernel/random/boot_id")) -> str:
    """This boot's ID; the kernel makes a new one at every boot."""
    return path.read_text().strip()
