"""``gpu-handler offers``: what a node would publish, computed from its sysfs without a cluster.

Operators use it to see what a node will offer before (or instead of) installing anything: it
runs the production code paths end to end on one host tree and prints multi-document YAML.

1. **The node agent's part**: its discovery (:class:`~pkg.inventory.discovery.Discoverer` over the
   sysfs root, the host root and pci.ids) and its desired-state builders give each card's
   PhysicalGPU name, labels and ``pciInfo``/``nodeInfo``/``currentState.driverType``, named as the
   agent names the cards of a fresh node.
2. **The validator's part is assumed**: every card bound to the backend's driver gets
   ``DriverReady=True``. On a real node the validator decides; cards on another driver (vfio-pci,
   none) get no ``DriverReady`` and are not read.
3. **The handler's part**: its enrichment chain, unchanged, over an in-memory status writer that
   merges what the handler would apply the way the API server merges an apply. So capabilities,
   ``currentState.nvidia`` and ``HardwareHealthy`` (the backend's health check, now) are exactly
   what the handler would write, and the card specs receive the offer builder's input.
4. **The publisher's part**: the same card selection as the publishing loop, the offers, and the
   slices at generation 1 in the layout of the requested API server version. The owner reference
   to the Node is left out: its uid exists only in a cluster.

Nothing here talks to an API server. Bad input — a sysfs root whose devices folder is missing or
cannot be listed, an unknown backend, an old server version — raises :class:`OfflineInputError`,
which the command turns into exit code 2. A PCI function that is listed but cannot be read is a
failure in the result (exit code 1), named with the reason, never a card that silently vanishes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import yaml
from kubernetes.client import V1Condition, V1ResourceSlice

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUConditionType, PhysicalGPUStatus
from pkg.backends import BackendOptions, VendorBackend, VendorRegistry, default_registry
from pkg.dra.model.offers import with_taints
from pkg.dra.model.slices import Layout, ServerVersion, UnsupportedServerError, build_slices
from pkg.framework.reconcile import HandlerChain
from pkg.framework.reconcile.conditions import now_utc
from pkg.framework.reconcile.resource_builder import ResourceBuilder
from pkg.gpuhandler.enrichment.card_specs import CardSpecs
from pkg.gpuhandler.enrichment.chain import enrichment_handlers
from pkg.gpuhandler.enrichment.owned import OwnedStatus
from pkg.gpuhandler.enrichment.readiness import Readiness, readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState
from pkg.gpuhandler.health import HealthTracker
from pkg.gpuhandler.health.taints import device_taints
from pkg.gpuhandler.publishing.selection import LABEL_ALLOW_MIG, build_card_offers, select_cards
from pkg.hardware.labels import to_label_value
from pkg.hardware.pci_topology import SysfsPciTopology
from pkg.hardware.pciids import PciIds
from pkg.inventory.desired import gpu_labels, gpu_status, node_info
from pkg.inventory.discovery import Discoverer
from pkg.inventory.host_info import FileHostInfoReader
from pkg.inventory.naming import allocate_name
from pkg.inventory.pci_scanner import SysfsPciScanner

NEWEST_SERVER_VERSION: Final = ServerVersion(1, 37)
ASSUMED_REASON: Final = "AssumedOffline"


class OfflineInputError(ValueError):
    """The command's input cannot describe a node (missing sysfs, unknown backend, old server)."""


@dataclass(frozen=True, kw_only=True)
class OfflineRequest:
    node_name: str
    sysfs_root: Path
    backend: str = "nvidia"
    host_root: Path = Path("/")
    pci_ids: Path | None = None  # None: the system's pci.ids
    state_dir: Path | None = None  # the simulated backend's health overrides
    server_version: ServerVersion = NEWEST_SERVER_VERSION
    allow_mig: bool = True


@dataclass(frozen=True)
class OfflineResult:
    """The PhysicalGPUs as written, the slices, why each unoffered card is not, and read failures."""

    gpus: tuple[PhysicalGPU, ...]
    slices: tuple[V1ResourceSlice, ...]
    not_offered: Mapping[str, str] = field(default_factory=dict)
    failures: tuple[str, ...] = ()


def compute_offers(
    request: OfflineRequest,
    *,
    vendors: VendorRegistry | None = None,
    now: Callable[[], datetime] = now_utc,
) -> OfflineResult:
    """Everything the node's agent and handler would write for ``request``; see the module docs."""
    vendors = vendors or default_registry()
    layout = _layout(request.server_version)
    if not (request.sysfs_root / "bus" / "pci" / "devices").is_dir():
        raise OfflineInputError(
            f"--sysfs-root {request.sysfs_root}: no bus/pci/devices there; pass the host's sysfs (/sys)"
        )
    try:
        plugin = vendors.plugin(request.backend)
    except KeyError as exc:
        raise OfflineInputError(str(exc.args[0])) from None
    agent_gpus, failures = _node_agent_objects(request, vendors)
    options = BackendOptions(
        node_name=request.node_name, sysfs_root=request.sysfs_root, state_dir=request.state_dir
    )
    backend = plugin.create(options)
    health = HealthTracker(quiet_period=0)  # no events offline: the probe alone decides
    try:
        gpus, cards, read_failures = _enrich(
            agent_gpus, backend, health, now(), topology=SysfsPciTopology(request.sysfs_root)
        )
    finally:
        backend.close()
    by_name = {str(g.metadata.name): g for g in gpus}
    selection = select_cards(
        entries=cards.snapshot(),
        gpus=by_name,
        pci_vendor_id=backend.identity.pci_vendor_id,
        driver_type=backend.driver_type,
        allow_mig=request.allow_mig,
    )
    offered = {c.physical_gpu for c in selection.cards}
    not_offered = {
        name: selection.withheld.get(name) or _unread_reason(gpu, backend, read_failures.get(name))
        for name, gpu in by_name.items()
        if name not in offered
    }
    tainted = [
        with_taints(
            o, device_taints(health.verdict(o.card.pci_address), health.fabric.fault(o.card.pci_address))
        )
        for o in build_card_offers(selection.cards)
    ]
    slices = build_slices(node=request.node_name, cards=tainted, generation=1, layout=layout)
    return OfflineResult(
        gpus=tuple(gpus),
        slices=tuple(slices),
        not_offered=not_offered,
        failures=(*failures, *(f"{name}: {msg}" for name, msg in sorted(read_failures.items()))),
    )


def _layout(version: ServerVersion) -> Layout:
    try:
        return version.layout
    except UnsupportedServerError as exc:
        raise OfflineInputError(f"--server-version: {exc}; resource.k8s.io/v1 needs 1.34 or newer") from None


def _node_agent_objects(
    request: OfflineRequest, vendors: VendorRegistry
) -> tuple[list[PhysicalGPU], list[str]]:
    """The PhysicalGPUs the node agent would create on a fresh node, with its status fields."""
    node_label = to_label_value(request.node_name)
    discoverer = Discoverer(
        scanner=SysfsPciScanner(request.sysfs_root),
        host_info=FileHostInfoReader(host_root=request.host_root, sysfs_root=request.sysfs_root),
        vendors=vendors,
        names=PciIds.load(request.pci_ids),
    )
    try:
        found = discoverer.discover()
    except OSError as exc:  # the devices folder itself: nothing can be said about any card
        devices = request.sysfs_root / "bus" / "pci" / "devices"
        raise OfflineInputError(f"--sysfs-root {request.sysfs_root}: cannot list {devices}: {exc}") from None
    node = node_info(request.node_name, found.host)
    taken: set[str] = set()
    objects = []
    for position, card in enumerate(sorted(found.gpus, key=lambda g: g.key)):
        name = allocate_name(
            node_name=request.node_name,
            position=position,
            vendor_id=card.pci_info.vendor.id,
            device_id=card.pci_info.device.id,
            taken=taken,
        )
        taken.add(name)
        labels = gpu_labels(
            node_label=node_label, vendor=card.vendor.name, device=card.device_label, address=card.address
        )
        status = gpu_status(info=card.pci_info, node=node, driver_type=card.driver_type)
        objects.append(PhysicalGPU(metadata=ResourceBuilder(name).labels(labels).meta(), status=status))
    # Worded as the node agent words a failure of its discover step.
    failures = [f"discover: {p.subject}: {p.error}" for p in found.problems]
    failures += [
        f"discover: PCI device {address}: not read: {why}" for address, why in sorted(found.unread.items())
    ]
    failures += [f"host: {source}: {why}" for source, why in found.host.failed]
    return objects, failures


def _enrich(
    gpus: Sequence[PhysicalGPU],
    backend: VendorBackend,
    health: HealthTracker,
    at: datetime,
    *,
    topology: SysfsPciTopology,
) -> tuple[list[PhysicalGPU], CardSpecs, dict[str, str]]:
    """Runs the handler's enrichment chain over each card with ``DriverReady`` assumed."""
    writer, cards = _MergingWriter(), CardSpecs()
    chain = HandlerChain(
        enrichment_handlers(
            backend=backend,
            tracker=health,
            writer=writer,
            card_specs=cards,
            topology=topology,
            now=lambda: at,
        )
    )
    result: list[PhysicalGPU] = []
    failures: dict[str, str] = {}
    for found in gpus:
        state = EnrichmentState(gpu=_assume_driver_ready(found, backend, at))
        outcome = chain.handle(state)
        if outcome.error is not None:
            raise outcome.error
        if state.failures:
            failures[state.name] = "; ".join(str(f) for f in state.failures)
        result.append(writer.objects.get(state.name, state.gpu))
    return result, cards, failures


def _assume_driver_ready(gpu: PhysicalGPU, backend: VendorBackend, at: datetime) -> PhysicalGPU:
    status = gpu.status or PhysicalGPUStatus()
    bound = status.current_state.driver_type if status.current_state else None
    if bound is not backend.driver_type:
        return gpu
    ready = V1Condition(
        type=PhysicalGPUConditionType.DRIVER_READY,
        status="True",
        reason=ASSUMED_REASON,
        message="assumed by gpu-handler offers; on a node the validator sets it",
        last_transition_time=at,
    )
    return gpu.model_copy(update={"status": status.model_copy(update={"conditions": [ready]})})


def _unread_reason(gpu: PhysicalGPU, backend: VendorBackend, failure: str | None) -> str:
    verdict = readiness(gpu, pci_vendor_id=backend.identity.pci_vendor_id, driver_type=backend.driver_type)
    if verdict is Readiness.FOREIGN:
        return f"not a card of the {backend.identity.name} backend"
    if verdict is Readiness.NOT_READY:
        return f"not bound to the {backend.driver_type} driver, so not validated or read"
    return "could not be read (see Failed)" if failure else "could not be described for offers"


class _MergingWriter:
    """The handler's :class:`~pkg.gpuhandler.enrichment.status_writer.StatusWriter`, in memory: merges an
    apply into the object as the API server would (conditions by type, ``currentState`` by key)."""

    def __init__(self) -> None:
        self.objects: dict[str, PhysicalGPU] = {}

    def apply(self, gpu: PhysicalGPU, owned: OwnedStatus) -> PhysicalGPU:
        data = gpu.status.to_api_dict() if gpu.status else {}
        sent = owned.apply_status()
        if "capabilities" in sent:
            data["capabilities"] = sent["capabilities"]
        if "currentState" in sent:
            data["currentState"] = {**data.get("currentState", {}), **sent["currentState"]}
        if "conditions" in sent:
            by_type = {c["type"]: c for c in [*data.get("conditions", []), *sent["conditions"]]}
            data["conditions"] = list(by_type.values())
        return self._keep(gpu, data)

    def withdraw_nvidia(self, gpu: PhysicalGPU) -> PhysicalGPU | None:
        return self._withdraw(gpu, "nvidia")

    def withdraw_amd(self, gpu: PhysicalGPU) -> PhysicalGPU | None:
        return self._withdraw(gpu, "amd")

    def _withdraw(self, gpu: PhysicalGPU, block: str) -> PhysicalGPU | None:
        data = gpu.status.to_api_dict() if gpu.status else {}
        if block not in data.get("currentState", {}):
            return None
        del data["currentState"][block]
        return self._keep(gpu, data)

    def _keep(self, gpu: PhysicalGPU, status: dict[str, Any]) -> PhysicalGPU:
        merged = gpu.model_copy(update={"status": PhysicalGPUStatus.from_api_dict(status)})
        self.objects[str(gpu.metadata.name)] = merged
        return merged


def render_yaml(request: OfflineRequest, result: OfflineResult) -> str:
    """A commented header, then the PhysicalGPUs, then the ResourceSlices, as YAML documents."""
    version = request.server_version
    lines = [
        f"What gpu-handler would publish on node {request.node_name}, computed offline (no cluster).",
        f"backend {request.backend}; sysfs {request.sysfs_root}; host root {request.host_root};",
        f"Kubernetes {version.major}.{version.minor} ({version.layout.value} layout);"
        f" Node label {LABEL_ALLOW_MIG}={'true' if request.allow_mig else 'false'}.",
        "Assumed: DriverReady=True on every card bound to the backend's driver (on a node the",
        "validator decides); HardwareHealthy is the backend's health check now. Statuses are what",
        "gpu-node-agent and gpu-handler would write; ResourceSlices are at generation 1 and lack",
        "their ownerReference to the Node, whose uid exists only in a cluster.",
    ]
    lines += [f"Not offered: {name}: {why}" for name, why in sorted(result.not_offered.items())]
    lines += [f"Failed: {failure}" for failure in result.failures]
    if not result.slices:
        lines.append("No ResourceSlices: no card is offered.")
    docs: list[dict[str, Any]] = [gpu.to_api_dict() for gpu in result.gpus]
    docs += [rs.model_dump(by_alias=True, exclude_none=True, mode="json") for rs in result.slices]
    for doc in docs:  # the name first, as kubectl prints objects
        meta = doc["metadata"]
        doc["metadata"] = {"name": meta.pop("name"), **meta}
    header = "".join(f"# {line}\n" for line in lines)
    return header + yaml.safe_dump_all(docs, sort_keys=False, explicit_start=True, width=110)
