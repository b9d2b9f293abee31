"""Builders and fakes for the gpu-handler's unit tests: objects, a recording writer, a chain.

The backend in most tests is the real simulated one on a fixture host, so the enrichment rules
are checked against the production NVIDIA code; :class:`CountingBackend` wraps it to show that a
card that may not be read is not read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kubernetes.client import V1Condition, V1ObjectMeta
from pytest_mock import MockerFixture

from api.gpu.v1alpha1 import (
    LABEL_NODE,
    CurrentState,
    DriverType,
    PciClass,
    PciId,
    PciInfo,
    PhysicalGPU,
    PhysicalGPUStatus,
)
from pkg.backends import BackendOptions, CardVerdict, Enrichment, VendorBackend
from pkg.backends.simulated.backend import SIMULATED_NVIDIA
from pkg.dra.model.card import Card
from pkg.gpuhandler.enrichment.card_specs import CardSpecs
from pkg.gpuhandler.enrichment.owned import OwnedStatus
from pkg.gpuhandler.enrichment.reconciler import EnrichmentReconciler

ROOT = Path(__file__).resolve().parents[4]
SYSFS = ROOT / "test" / "fixtures" / "sysfs"
NODE = "node-1"
T0 = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
T1 = datetime(2026, 11, 21, 12, 5, 0, tzinfo=UTC)
A30_FIRST = "0000:3b:00.0"


def condition(type_: str, status: str, reason: str = "Validated", at: datetime = T0) -> V1Condition:
    return V1Condition(type=type_, status=status, reason=reason, message="", last_transition_time=at)


def gpu(
    address: str = A30_FIRST,
    *,
    name: str = "node-1-0-10de-20b7",
    vendor_id: str = "10de",
    device_id: str = "20b7",
    driver_type: DriverType | None = DriverType.NVIDIA,
    driver_ready: str | None = "True",
    extra_conditions: Sequence[V1Condition] = (),
    status_updates: dict[str, Any] | None = None,
) -> PhysicalGPU:
    """A PhysicalGPU as the node agent and the validator leave it; ``status_updates`` adds fields."""
    conditions = [condition("DriverReady", driver_ready)] if driver_ready else []
    conditions += list(extra_conditions)
    status = PhysicalGPUStatus(
        pci_info=PciInfo(
            address=address,
            class_=PciClass(code="0302"),
            vendor=PciId(id=vendor_id),
            device=PciId(id=device_id),
        ),
        current_state=CurrentState(driver_type=driver_type) if driver_type else None,
        conditions=conditions or None,
    )
    if status_updates:
        status = status.model_copy(update=status_updates)
    return PhysicalGPU(
        metadata=V1ObjectMeta(
            name=name, uid=f"uid-{name}", generation=1, resource_version="1", labels={LABEL_NODE: NODE}
        ),
        status=status,
    )


def simulated(scenario: str = "a30-x2", state_dir: Path | None = None) -> VendorBackend:
    return SIMULATED_NVIDIA.create(
        BackendOptions(node_name=NODE, sysfs_root=SYSFS / scenario, state_dir=state_dir)
    )


@dataclass
class RecordingWriter:
    """:class:`~pkg.gpuhandler.enrichment.status_writer.StatusWriter` that records instead of writing."""

    applied: list[tuple[str, OwnedStatus]] = field(default_factory=list)
    withdrawn: list[str] = field(default_factory=list)
    withdrawn_amd: list[str] = field(default_factory=list)

    def apply(self, gpu: PhysicalGPU, owned: OwnedStatus) -> PhysicalGPU:
        self.applied.append((str(gpu.metadata.name), owned))
        return gpu

    def withdraw_nvidia(self, gpu: PhysicalGPU) -> PhysicalGPU | None:
        self.withdrawn.append(str(gpu.metadata.name))
        return gpu

    def withdraw_amd(self, gpu: PhysicalGPU) -> PhysicalGPU | None:
        self.withdrawn_amd.append(str(gpu.metadata.name))
        return gpu


@dataclass
class CountingBackend:
    """Delegates to ``inner``, counting reads; ``enrichment`` replaces what ``enrich`` returns."""

    inner: VendorBackend
    enrichment: Enrichment | None = None
    reads: int = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def enrich(self, gpu: PhysicalGPU) -> Enrichment:
        self.reads += 1
        return self.enrichment if self.enrichment is not None else self.inner.enrich(gpu)

    def health(self, gpu: PhysicalGPU) -> CardVerdict:
        self.reads += 1
        return self.inner.health(gpu)

    def offer_inputs(self, gpu: PhysicalGPU) -> Card:
        self.reads += 1
        return self.inner.offer_inputs(gpu)


@dataclass
class Harness:
    reconciler: EnrichmentReconciler
    writer: RecordingWriter
    cards: CardSpecs
    objects: dict[str, PhysicalGPU]


def harness(
    mocker: MockerFixture,
    backend: Any,
    *objects: PhysicalGPU,
    now: datetime = T1,
    period: float = 60.0,
    holds: Any = None,
) -> Harness:
    """The enrichment of the real container (:mod:`pkg.gpuhandler.setup`) with its backend, status
    writer, cache, clock and jitter overridden: a recording writer and a dict cache."""
    from dependency_injector import providers

    from pkg.framework.cache.informer_factory import InformerFactory
    from pkg.framework.client import KubeClient
    from pkg.gpuhandler.setup import GpuHandlerContainer, HandlerSettings

    writer, cards = RecordingWriter(), CardSpecs()
    store = {str(o.metadata.name): o for o in objects}
    container = GpuHandlerContainer(
        settings=HandlerSettings(node_name=NODE, enrich_period=period),
        client=mocker.MagicMock(spec=KubeClient),
        informers=mocker.MagicMock(spec=InformerFactory),
    )
    container.backend.override(providers.Object(backend))
    container.status_writer.override(providers.Object(writer))
    container.card_specs.override(providers.Object(cards))
    container.gpu_informer.override(
        providers.Object(SimpleNamespace(store=SimpleNamespace(get_by_key=store.get)))
    )
    container.now.override(providers.Object(lambda: now))
    container.rand.override(providers.Object(lambda low, high: 1.0))
    if holds is not None:
        container.vfio_holds.override(providers.Object(holds))
    return Harness(reconciler=container.reconciler(), writer=writer, cards=cards, objects=store)


def stored(before: PhysicalGPU, owned: OwnedStatus) -> PhysicalGPU:
    """What the API server would hold after applying ``owned`` to ``before`` (our fields replaced)."""
    status = before.status.model_copy(deep=True) if before.status else PhysicalGPUStatus()
    status.capabilities = owned.capabilities
    ours = ("HardwareHealthy", "ComputeDomainsReady")
    conditions = [c for c in status.conditions or [] if c.type not in ours]
    applied = [c for c in (owned.health, owned.compute_domains) if c is not None]
    status.conditions = conditions + applied or None
    state = status.current_state or CurrentState()
    status.current_state = CurrentState(driver_type=state.driver_type, nvidia=owned.nvidia, amd=owned.amd)
    return before.model_copy(update={"status": status})
