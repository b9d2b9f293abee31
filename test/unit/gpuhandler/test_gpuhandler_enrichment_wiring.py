"""The enrichment's one handler chain, used by the handler and by ``gpu-handler offers``; how the
kubelet plugin asks for a card to be read again; which cards the health monitor may watch."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from pytest_mock import MockerFixture
from testutil.unit.gpuhandler.gpuhandler_fakes import A30_FIRST, NODE, SYSFS, gpu, simulated

from api.gpu.v1alpha1 import DriverType, PhysicalGPU
from pkg.framework.cache.informer_factory import InformerFactory
from pkg.framework.client import KubeClient
from pkg.framework.controller.source import ChannelSource
from pkg.gpuhandler import offline
from pkg.gpuhandler.enrichment.card_changes import EnrichmentCardChanges
from pkg.gpuhandler.enrichment.card_specs import CardSpecs
from pkg.gpuhandler.enrichment.chain import enrichment_handlers
from pkg.gpuhandler.enrichment.readiness import readable_by
from pkg.gpuhandler.health import HealthTracker
from pkg.gpuhandler.setup import GpuHandlerContainer, HandlerSettings
from pkg.hardware.pci_topology import SysfsPciTopology

CHAIN = ["readiness", "health", "enrich", "fabric", "compute-domains", "apply", "card-specs"]


def test_the_chain_runs_its_steps_in_order(mocker: MockerFixture) -> None:
    handlers = enrichment_handlers(
        backend=simulated(),
        tracker=HealthTracker(quiet_period=0),
        writer=mocker.MagicMock(),
        card_specs=CardSpecs(),
        topology=SysfsPciTopology(SYSFS / "a30-x2"),
    )
    assert [h.name for h in handlers] == CHAIN


def test_the_handler_builds_the_declared_chain(mocker: MockerFixture) -> None:
    container = GpuHandlerContainer(
        settings=HandlerSettings(node_name=NODE, backend="simulated-nvidia", sysfs_root=SYSFS / "a30-x2"),
        client=mocker.MagicMock(spec=KubeClient),
        informers=mocker.MagicMock(spec=InformerFactory),
    )
    container.status_writer.override(mocker.MagicMock())
    assert [h.name for h in container.handlers()] == CHAIN


def test_gpu_handler_offers_runs_the_declared_chain(mocker: MockerFixture) -> None:
    built = mocker.patch.object(offline, "enrichment_handlers", wraps=enrichment_handlers)
    result = offline.compute_offers(
        offline.OfflineRequest(node_name=NODE, sysfs_root=SYSFS / "a30-x2", backend="simulated-nvidia")
    )
    built.assert_called_once()
    assert result.slices  # the chain described the cards for the offers


class RecordingChannel(ChannelSource):
    def __init__(self) -> None:
        super().__init__(name="card-changes")
        self.sent: list[object] = []

    def send(self, obj: object = None) -> None:
        self.sent.append(obj)


def _changes(*cards: PhysicalGPU) -> tuple[EnrichmentCardChanges, list[object]]:
    channel = RecordingChannel()
    informer: Any = SimpleNamespace(store=SimpleNamespace(list=lambda: list(cards)))
    return EnrichmentCardChanges(gpus=informer, channel=channel), channel.sent


def test_a_changed_card_is_read_again_by_its_physical_gpu_name() -> None:
    changes, sent = _changes(gpu(A30_FIRST, name="first"), gpu("0000:af:00.0", name="second"))
    changes.changed("0000:af:00.0")
    assert sent == ["second"]


def test_a_node_wide_change_reads_every_card_again() -> None:
    changes, sent = _changes(gpu(A30_FIRST, name="first"), gpu("0000:af:00.0", name="second"))
    changes.all_changed()
    assert sent == ["first", "second"]


def test_a_change_of_an_unknown_card_reads_nothing() -> None:
    bare = gpu(A30_FIRST, name="bare").model_copy(update={"status": None})  # not described yet
    changes, sent = _changes(gpu(A30_FIRST, name="first"), bare)
    changes.changed("0000:00:00.0")
    assert sent == []


@pytest.mark.parametrize(
    ("card", "readable"),
    [
        (gpu(), True),
        (gpu(driver_ready="Unknown"), False),
        (gpu(driver_type=DriverType.VFIO), False),
        (gpu(vendor_id="1002"), False),
    ],
)
def test_the_monitor_watches_only_cards_the_backend_may_read(card: PhysicalGPU, readable: bool) -> None:
    backend = simulated()
    check = readable_by(pci_vendor_id=backend.identity.pci_vendor_id, driver_type=backend.driver_type)
    assert check(card) is readable
