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
  reader that may use the file; a reader older than that refuses instead of misreading. Each
  device kind (:mod:`.kinds`) stores its part of a device's record under a field of its own and
  declares the first format that understood it (shares 2, VFIO passthrough 3, partitions 4,
  vGPUs 5): a file holding such a record asks for that reader, because an older one would take
  the device for a whole card and leave behind what the kind made (an MPS daemon, functions on
  ``vfio-pci``, an mdev). A file with whole cards and MIG devices only is still readable by
  format 1 readers, so a downgrade without the newer kinds keeps working. This model validates a
  kind's record through the model the kind registered (:class:`RecordTypes`) and names no kind.
* **Bound to one boot** (``bootID``): MIG instances and files under /run do not survive a reboot,
  so entries written in an earlier boot describe hardware state that no longer exists.

A file that fails its checksum or a reader-version check is never overwritten: Prepare and
Unprepare fail with an error naming the file until an operator looks (docs/kubelet-plugin.md), so
the record of which MIG instances belong to running workloads is not lost.
"""

from __future__ import annotations

import enum
import errno
import hashlib
import json
import os
import re
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pkg.gpuhandler.preparation.atomic_file import write_atomically
from pkg.gpuhandler.preparation.claim_ref import InvalidClaimRefError, checked_uid

# The format of a file with whole cards and MIG devices only; each kind record raises it (RecordTypes).
MIN_READER_VERSION: Final = 1

K = TypeVar("K", bound="KindRecord")


class CheckpointError(Exception):
    """The checkpoint cannot be trusted or read; nothing may change the node until it is fixed."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"checkpoint {path}: {problem}")
        self.path = path


class CheckpointUnreadable(CheckpointError):  # noqa: N818 (the documented name of the condition)
    """The checkpoint exists but cannot be used: not a regular file, too large, unreadable, not
    JSON, too deep, numbers too large, a failed checksum or reader version, invalid content. The
    message names the file, and the claim when one record is at fault (``claim``). It is never
    taken for "no checkpoint" and never overwritten."""

    def __init__(self, path: Path, problem: str, *, claim: str | None = None) -> None:
        shown = claim if claim is None or len(claim) <= 80 else claim[:77] + "..."
        super().__init__(path, problem if claim is None else f"claim {shown!r}: {problem}")
        self.claim = claim


# Bounds on what the reader accepts (docs/kubelet-plugin.md, "The checkpoint"). A record is
# about a kilobyte; a node's checkpoint of even thousands of claims is a few megabytes, nested
# about ten deep, and holds no number beyond 64 bits.
MAX_BYTES: Final = 16 << 20
MAX_DEPTH: Final = 32
MAX_NUMBER_CHARS: Final = 24
_STRINGS: Final = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")
_PCI_ADDRESS: Final = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")


class _Record(BaseModel):
    """Records keep fields they do not know (written by a newer release) and write them back."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class PreparePhase(enum.StrEnum):
    """How far a claim's Prepare got on this node (the record's ``state``)."""

    PREPARE_STARTED = "PrepareStarted"
    PREPARE_COMPLETED = "PrepareCompleted"


class KindRecord(_Record):
    """A device kind's part of a device's record (:mod:`.kinds`): the kind declares its model, the
    field it is stored under and the oldest reader that understands it."""


class RecordTypes:
    """The kinds' record models by field, and the reader version each needs: how the checkpoint
    validates and versions what the kinds store, without knowing one of them."""

    def __init__(
        self, types: dict[str, tuple[type[KindRecord], int]], *, device_types: Iterable[str]
    ) -> None:
        self._types = dict(types)
        self.device_types = frozenset(device_types)  # the deviceType values the kinds record
        # The newest format this release writes and reads: the newest any of its kinds needs.
        self.format_version = max(
            (version for _, version in self._types.values()), default=MIN_READER_VERSION
        )

    def __iter__(self) -> Iterator[tuple[str, type[KindRecord], int]]:
        for name, (model, version) in self._types.items():
            yield name, model, version

    def validate(self, device: DeviceRecord) -> None:
        """Turns every kind record of ``device`` into its model (ValidationError when damaged)."""
        for name, model, _ in self:
            device.kind_record(name, model)

    def min_reader(self, data: CheckpointData) -> int:
        """The oldest reader that understands every record in ``data``."""
        found = MIN_READER_VERSION
        for claim in data.claims.values():
            for device in claim.devices:
                for name, _, version in self:
                    if version > found and device.has_kind_record(name):
                        found = version
        return found


class DeviceRecord(_Record):
    """One allocated device of a claim, as prepared on this node: what every kind has; the kind's
    own part (a MIG placement, a share's limits, ...) is an extra field named by the kind
    (:meth:`kind_record`), so this model never names a kind and keeps what it does not know."""

    pool: str
    device: str
    requests: list[str] = Field(default_factory=list)
    # The PCI address of the physical card; a device on no card (an IMEX channel) has its own key
    # here (``imex-channel-<N>``), so conflicts, locks and the records keyed by card still work.
    card: str
    device_type: str = Field(alias="deviceType")  # Physical | MIG | Partition | VGPU
    share_id: str | None = Field(default=None, alias="shareID")
    cdi_device_ids: list[str] = Field(default_factory=list, alias="cdiDeviceIDs")

    @property
    def pci_address(self) -> str | None:
        """The card's PCI address, or None for a device on no card."""
        return self.card if _PCI_ADDRESS.fullmatch(self.card) else None

    def has_kind_record(self, name: str) -> bool:
        return (self.__pydantic_extra__ or {}).get(name) is not None

    def kind_record(self, name: str, model: type[K]) -> K | None:
        """The kind record stored under ``name`` as ``model`` (validated once, then kept as the
        model, so a kind's changes to it are saved), or None when the device has none."""
        extra = self.__pydantic_extra__
        if extra is None:
            return None
        value = extra.get(name)
        if value is None or isinstance(value, model):
            return value
        typed = model.model_validate(value)
        extra[name] = typed
        return typed

    def set_kind_record(self, name: str, record: KindRecord) -> None:
        assert self.__pydantic_extra__ is not None
        self.__pydantic_extra__[name] = record


class ClaimRecord(_Record):
    uid: str
    namespace: str
    name: str
    state: PreparePhase
    devices: list[DeviceRecord] = Field(default_factory=list)
    updated: datetime = Field(default_factory=lambda: datetime.now(UTC))

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.uid})"


class CheckpointData(_Record):
    boot_id: str = Field(alias="bootID")
    claims: dict[str, ClaimRecord] = Field(default_factory=dict)

    def claims_on_card(self, card: str) -> list[ClaimRecord]:
        return [c for c in self.claims.values() if any(d.card == card for d in c.devices)]

    def devices_in_use(self, pool: str) -> set[str]:
        """Names of the devices of ``pool`` recorded for a claim, in any state."""
        return {d.device for c in self.claims.values() for d in c.devices if d.pool == pool}


def _canonical(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def checksum(data: Any) -> str:
    return "sha256:" + hashlib.sha256(_canonical(data)).hexdigest()


class CheckpointFile:
    """Reads and writes the checkpoint at ``path``; call only while holding the node lock."""

    def __init__(self, path: Path, records: RecordTypes) -> None:
        self.path = path
        self.records = records

    def load(self, *, boot_id: str) -> CheckpointData:
        """The stored data; an empty checkpoint for this boot when there is no file yet.

        "No file" is only a path that does not exist: a link (dangling or not), a folder, a FIFO,
        a device, a file over :data:`MAX_BYTES` or one that cannot be read is
        :class:`CheckpointUnreadable`. The checkpoint is only ever written by renaming a regular
        file over the path, so a link there was put by someone else; following it would read (and
        a dangling one would hide) a record that is not ours."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return CheckpointData(boot_id=boot_id)
        except OSError as exc:
            problem = (
                "is a symbolic link" if exc.errno == errno.ELOOP else f"cannot be opened: {exc.strerror}"
            )
            raise CheckpointUnreadable(self.path, problem) from exc
        try:
            raw = self._read(fd)
        finally:
            os.close(fd)
        return self.parse(raw)

    def _read(self, fd: int) -> bytes:
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise CheckpointUnreadable(self.path, f"is not a regular file ({_kind(info.st_mode)})")
            if info.st_size > MAX_BYTES:
                raise CheckpointUnreadable(
                    self.path, f"is {info.st_size} bytes, over the limit of {MAX_BYTES}"
                )
            chunks, size = [], 0
            while chunk := os.read(fd, min(1 << 20, MAX_BYTES + 1 - size)):
                chunks.append(chunk)
                size += len(chunk)
                if size > MAX_BYTES:
                    raise CheckpointUnreadable(self.path, f"is over the limit of {MAX_BYTES} bytes")
        except OSError as exc:
            raise CheckpointUnreadable(self.path, f"cannot be read: {exc.strerror or exc}") from exc
        return b"".join(chunks)

    def parse(self, raw: bytes) -> CheckpointData:
        """The data of the checkpoint ``raw``; :class:`CheckpointUnreadable` for anything else."""
        if len(raw) > MAX_BYTES:
            raise CheckpointUnreadable(self.path, f"is {len(raw)} bytes, over the limit of {MAX_BYTES}")
        if (depth := _depth(raw)) > MAX_DEPTH:
            raise CheckpointUnreadable(self.path, f"nests deeper than {MAX_DEPTH} levels ({depth} or more)")
        try:
            envelope = json.loads(
                raw, parse_int=self._int, parse_float=self._float, parse_constant=self._constant
            )
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CheckpointUnreadable(self.path, f"is not JSON ({exc})") from exc
        except RecursionError:
            raise CheckpointUnreadable(self.path, "nests too deep") from None
        if not isinstance(envelope, dict) or not isinstance(envelope.get("data"), dict):
            raise CheckpointUnreadable(self.path, "has no data object")
        min_reader = envelope.get("minReaderVersion")
        if type(min_reader) is not int or min_reader > self.records.format_version:
            raise CheckpointUnreadable(
                self.path,
                f"needs a reader of format version {min_reader!r}; this release reads up to "
                f"{self.records.format_version}",
            )
        if envelope.get("checksum") != checksum(envelope["data"]):
            raise CheckpointUnreadable(self.path, "checksum mismatch: the file was changed or damaged")
        claims = envelope["data"].get("claims")
        if isinstance(claims, dict):
            for key, record in claims.items():
                self._check_record(key, record)
        try:
            data = CheckpointData.model_validate(envelope["data"])
        except ValidationError as exc:
            raise CheckpointUnreadable(self.path, f"has invalid content: {exc}") from exc
        for uid, claim in data.claims.items():
            for device in claim.devices:
                try:
                    self.records.validate(device)
                except ValidationError as exc:
                    # A value a newer release added needs its minReaderVersion, so here it means
                    # damage, refused rather than misread (an unknown strategy taken for MPS).
                    problems = "; ".join(
                        f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
                    )
                    raise CheckpointUnreadable(
                        self.path, f"device {device.device} has invalid content: {problems}", claim=uid
                    ) from exc
        return data

    def _check_record(self, key: str, record: Any) -> None:
        """A record is filed under its own UID, a UID of the API server's form, and holds only
        values this release acts on; a value a newer release added needs its ``minReaderVersion``,
        so here it means damage, refused rather than misread (an unknown strategy taken for MPS)."""
        try:
            checked_uid(key)
        except InvalidClaimRefError as exc:
            raise CheckpointUnreadable(self.path, f"a record's key: {exc}", claim=key) from None
        if not isinstance(record, dict) or record.get("uid") != key:
            uid = record.get("uid") if isinstance(record, dict) else None
            raise CheckpointUnreadable(self.path, f"the record under it is of claim {uid!r}", claim=key)
        devices = record.get("devices")
        for device in devices if isinstance(devices, list) else []:  # the model refuses the rest
            value = device.get("deviceType") if isinstance(device, dict) else None
            if value is not None and value not in self.records.device_types:
                raise CheckpointUnreadable(
                    self.path,
                    f"deviceType {value!r} is unknown to this release "
                    "(a newer one must raise minReaderVersion)",
                    claim=key,
                )

    def _int(self, text: str) -> int:
        if len(text) > MAX_NUMBER_CHARS:
            raise CheckpointUnreadable(self.path, f"holds a number of {len(text)} digits: {text[:20]}...")
        return int(text)

    def _float(self, text: str) -> float:
        if len(text) > MAX_NUMBER_CHARS:
            raise CheckpointUnreadable(self.path, f"holds a number of {len(text)} characters: {text[:20]}...")
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise CheckpointUnreadable(self.path, f"holds the number {text}, too large")
        return value

    def _constant(self, text: str) -> Any:
        raise CheckpointUnreadable(self.path, f"holds {text}, which is not JSON")

    def save(self, data: CheckpointData) -> None:
        body = data.model_dump(mode="json", by_alias=True)
        envelope = {
            "version": self.records.format_version,
            "minReaderVersion": self.records.min_reader(data),
            "checksum": checksum(body),
            "data": body,
        }
        write_atomically(self.path, json.dumps(envelope, indent=1, sort_keys=True).encode() + b"\n")


class CheckpointStore:
    """The checkpoint file bound to this boot's ID: the one reader and writer of the node's record
    (Prepare, Unprepare, start-up, the health feed and the MPS watchdog), under the node lock."""

    def __init__(self, path: Path, boot_id: Callable[[], str], records: RecordTypes) -> None:
        self.file = CheckpointFile(path, records)
        self._boot_id = boot_id

    @property
    def boot_id(self) -> str:
        return self._boot_id()

    def load(self) -> CheckpointData:
        return self.file.load(boot_id=self._boot_id())

    def save(self, data: CheckpointData) -> None:
        self.file.save(data)


def _depth(raw: bytes) -> int:
    """How deep ``raw`` nests, counting up to :data:`MAX_DEPTH` + 1 (brackets in strings do not count)."""
    depth = deepest = 0
    for bracket in _STRINGS.sub(b'""', raw).translate(None, _NOT_BRACKETS):
        depth += 1 if bracket in b"[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > MAX_DEPTH:
                break
    return deepest


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_boot_id(path: Path = Path("/proc/sys/kernel/random/boot_id")) -> str:
    """This boot's ID; the kernel makes a new one at every boot."""
    return path.read_text().strip()


class CheckpointFeed:
    """The checkpoint as each Prepare, Unprepare, start-up and periodic round leaves it, told to
    whoever listens (the publisher's devices in use). Listeners are told under the node lock, in
    the order they subscribed, and must be quick."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[CheckpointData], None]] = []

    def subscribe(self, listener: Callable[[CheckpointData], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def publish(self, checkpoint: CheckpointData) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(checkpoint)
