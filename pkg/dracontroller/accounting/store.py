"""Where the allocation ledger lives: ConfigMaps in the controller's namespace, a head and its parts.

``<name>`` (the head) holds ``as_of`` and the shard count; ``<name>-<i>`` holds part ``i``
(:mod:`.ledger`). Why ConfigMaps: they are what every cluster has, what the controller's Role can
grant by name, and what an administrator can read and back up with the rest of the namespace; the
ledger needs no query, only "load everything once per leadership, then write what changed".
One ConfigMap holds at most 1 MiB, and one ledger document held about 9,000 open allocations;
parts multiply that by :data:`~.ledger.SHARDS`, and a pass writes only the parts it changed plus
the small head, so the bytes written per pass follow the claims that changed, not the cluster.

Every write carries the resourceVersion read (optimistic concurrency): if two processes ever both
believe they lead, the second write of any document fails with a conflict instead of overwriting
the other's, and the accountant reloads and re-derives from the claims. The head is written first
on every save, so a process that lost the lead is stopped before it writes a part. The accountant
exports only after every write of the pass succeeded; a pass that fails half-way leaves a head
and parts that together still hold at least what was exported (see :mod:`.ledger`), at worst
charging the allocations it had closed up to the head's newer ``as_of`` (one period at most).
Parts are stored zlib-compressed (binaryData): what a pass writes is then about a quarter of the
JSON. A part over :data:`MAX_BYTES` is refused with an error that names it rather than rejected by the
server.

How many ConfigMaps: at most ``shards + 1`` (257), whatever the cluster's size or age. The names
are fixed (the head, ``<name>-0`` … ``<name>-255``: what the chart's Role grants), and a part is
created the first time an allocation of a claim hashing there is opened, so a young cluster shows
the head and about one part per claim allocated so far, until every part exists (after about
1,500 claims on average: each new claim lands in a random part). None is ever deleted: every part
holds released seconds and allocation counts, and removing one would make exported counters drop,
the very reset the ledger is there to prevent.
"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kubernetes.client import V1ConfigMap, V1ObjectMeta

from pkg.dracontroller.accounting.ledger import SHARDS, Ledger, head_format
from pkg.framework.client import NotFoundError, ResourceKind
from pkg.framework.client.builtin_kinds import CONFIG_MAP
from pkg.framework.reconcile.resource_builder import ResourceBuilder

DATA_KEY = "ledger.json"  # the head (and the whole ledger in format 1): JSON text
PART_KEY = "ledger.json.zlib"  # a part: its JSON, zlib-compressed, in binaryData
MAX_BYTES = 900_000  # below the API server's 1 MiB object limit, with room for metadata

Versions = Mapping[str, str | None]
"""ConfigMap name -> the resourceVersion read or written last (None: it does not exist)."""


class LedgerTooLargeError(RuntimeError):
    pass


class ConfigMapClient(Protocol):
    def get(
        self, kind: ResourceKind[V1ConfigMap], name: str, namespace: str | None = None
    ) -> V1ConfigMap: ...

    def create(
        self, kind: ResourceKind[V1ConfigMap], obj: V1ConfigMap, namespace: str | None = None
    ) -> V1ConfigMap: ...

    def update(
        self, kind: ResourceKind[V1ConfigMap], obj: V1ConfigMap, *, subresource: str | None = None
    ) -> V1ConfigMap: ...


@dataclass(frozen=True)
class Loaded:
    ledger: Ledger | None  # None: no ledger yet
    versions: Versions = field(default_factory=dict)


class LedgerStore:
    def __init__(self, *, client: ConfigMapClient, namespace: str, name: str, shards: int = SHARDS) -> None:
        self._client = client
        self.namespace = namespace
        self.name = name
        self.shards = shards
        self._parts_first = False  # the head read was format 1 (see save)

    def part_name(self, i: int) -> str:
        return f"{self.name}-{i}"

    def names(self) -> list[str]:
        """Every ConfigMap of the ledger: the head, then the parts (what the Role must grant). The
        store writes no other, so this is also the bound on what it leaves in the namespace."""
        return [self.name, *(self.part_name(i) for i in range(self.shards))]

    def load(self) -> Loaded:
        """The stored ledger; raises ValueError (naming the ConfigMap) if it cannot be read.

        Parts are read even without a head: a first save that wrote parts and failed before the
        head left them, and they hold allocations already opened (nothing of them was exported:
        that waits for the head), so they are taken as they are rather than created again."""
        head, version = self._read(self.name)
        versions: dict[str, str | None] = {self.name: version}
        self._parts_first = head is not None and head_format(head) == 1
        parts: list[str | None] = []
        for name in self.names()[1:]:
            text, versions[name] = self._read(name)
            parts.append(text)
        if head is None:
            if not any(parts):
                return Loaded(None, versions)
            head = Ledger(as_of=0.0, shards=len(parts)).head_json()
        try:
            ledger = Ledger.from_parts(head, parts, shards=self.shards)
        except ValueError as exc:
            raise ValueError(f"ConfigMaps {self.namespace}/{self.name}(-N): {exc}") from exc
        return Loaded(ledger, versions)

    def save(self, ledger: Ledger, versions: Versions) -> dict[str, str | None]:
        """Writes the head, then the parts changed since the last save, each over the version read
        (creating what does not exist); returns the versions now. Raises ConflictError or
        AlreadyExistsError if someone else wrote, LedgerTooLargeError for a part over the limit and
        ValueError for a ledger of another shard count (both before anything is written).

        The head goes first because it is written on every save: a process that lost the lead
        fails there, before it touches a part. A ledger read in format 1 is the exception: its head
        holds everything until the parts exist, so they are written first that one time."""
        if ledger.shards != self.shards:  # its parts would be written under names nobody reads
            raise ValueError(
                f"ConfigMaps {self.namespace}/{self.name}(-N): a ledger of {ledger.shards} parts "
                f"for a store of {self.shards}"
            )
        texts = {i: _pack(ledger.part_json(i)) for i in sorted(ledger.dirty)}
        for i, text in texts.items():
            if len(text) > MAX_BYTES:
                raise LedgerTooLargeError(
                    f"ConfigMap {self.namespace}/{self.part_name(i)}: ledger part of "
                    f"{len(ledger.parts[i].open)} open allocations is {len(text)} bytes compressed, "
                    f"over the {MAX_BYTES}-byte limit"
                )
        now = dict(versions)
        head = {DATA_KEY: ledger.head_json()}
        if not self._parts_first:
            now[self.name] = self._write(self.name, now.get(self.name), data=head)
        for i, text in texts.items():
            name = self.part_name(i)
            now[name] = self._write(name, now.get(name), binary_data={PART_KEY: text})
            ledger.dirty.discard(i)
        if self._parts_first:
            now[self.name] = self._write(self.name, now.get(self.name), data=head)
            self._parts_first = False
        return now

    def _read(self, name: str) -> tuple[str | None, str | None]:
        """The document in ConfigMap ``name`` (a head's text, a part's unpacked) and its version."""
        try:
            cm = self._client.get(CONFIG_MAP, name, self.namespace)
        except NotFoundError:
            return None, None
        version = (cm.metadata or V1ObjectMeta()).resource_version
        packed = (cm.binary_data or {}).get(PART_KEY)
        if packed is not None:
            try:
                return _unpack(packed), version
            except (ValueError, zlib.error) as exc:
                raise ValueError(f"ConfigMap {self.namespace}/{name}: unreadable part: {exc!r}") from exc
        return (cm.data or {}).get(DATA_KEY), version

    def _write(
        self,
        name: str,
        resource_version: str | None,
        *,
        data: dict[str, str] | None = None,
        binary_data: dict[str, str] | None = None,
    ) -> str:
        cm = V1ConfigMap(
            metadata=(
                ResourceBuilder(
                    name, namespace=self.namespace, resource_version=resource_version, kind=CONFIG_MAP
                )
                .labels({"app.kubernetes.io/component": "gpu-dra-controller"})
                .meta()
            ),
            data=data,
            binary_data=binary_data,
        )
        if resource_version is None:
            written = self._client.create(CONFIG_MAP, cm, self.namespace)
        else:
            written = self._client.update(CONFIG_MAP, cm)
        return str((written.metadata or V1ObjectMeta()).resource_version)


def stored_bytes(cm: V1ConfigMap) -> int:
    """What the ledger's document takes in ``cm`` as sent (base64 of a part, the head's text)."""
    return sum(len(v) for v in (cm.data or {}).values()) + sum(
        len(v) for v in (cm.binary_data or {}).values()
    )


def _pack(text: str) -> str:
    """A part as stored: zlib (names of nodes, classes and namespaces repeat: ~4x smaller), base64
    as binaryData travels in JSON."""
    return base64.b64encode(zlib.compress(text.encode(), 6)).decode()


def _unpack(packed: str | bytes) -> str:
    raw = packed if isinstance(packed, bytes) else base64.b64decode(packed, validate=True)
    return zlib.decompress(raw).decode()


__all__ = [
    "DATA_KEY",
    "MAX_BYTES",
    "ConfigMapClient",
    "LedgerStore",
    "LedgerTooLargeError",
    "Loaded",
    "Versions",
]
