"""The apply step through a recording writer: creates, patches, applies only what differs."""

from __future__ import annotations

from pytest_mock import MockerFixture
from testutil.k8s_fields import labels_of, status_of
from testutil.unit.nodeagent.nodeagent_fakes import (
    NODE,
    RecordingWriter,
    agent_handler,
    device,
    gpu_object,
    host,
    sync_state,
)

from api.gpu.v1alpha1 import CurrentState, DriverType, NvidiaState, PhysicalGPU
from pkg.backends import VendorRegistry
from pkg.framework.client import AlreadyExistsError, ConflictError
from pkg.hardware.hostinfo import HostInfo
from pkg.hardware.pci import PciDevice
from pkg.hardware.pciids import PciIds
from pkg.inventory.desired import gpu_labels, gpu_status, node_info
from pkg.inventory.pci_scanner import PciScan
from pkg.nodeagent.internal.handler import ApplyHandler, DiscoverHandler
from pkg.nodeagent.internal.state import SyncState


class _Scanner:
    def __init__(self, devices: list[PciDevice]) -> None:
        self.devices = devices

    def scan(self) -> PciScan:
        return PciScan(devices=self.devices, unreadable=frozenset())


class _Host:
    def read(self) -> HostInfo:
        return host()


def _discovered(
    state: SyncState, devices: list[PciDevice], vendors: VendorRegistry, names: PciIds
) -> SyncState:
    DiscoverHandler(scanner=_Scanner(devices), host_info=_Host(), vendors=vendors, names=names).handle(state)
    return state


def _in_sync(gpu: PhysicalGPU, state: SyncState) -> PhysicalGPU:
    """The object as the server holds it after a previous sync wrote everything."""
    discovered = next(g for g in state.gpus if g.key == labels_of(gpu)["gpu.deckhouse.io/pci-address"])
    gpu.metadata.labels = gpu_labels(
        node_label=NODE, vendor="nvidia", device=discovered.device_label, address=discovered.address
    )
    gpu.status = gpu_status(
        info=discovered.pci_info, node=node_info(NODE, host()), driver_type=discovered.driver_type
    )
    return gpu


TWO_CARDS = [device("0000:3b:00.0"), device("0000:d8:00.0")]


def test_new_cards_are_created_with_labels_then_their_status_applied(
    writer: RecordingWriter, vendors: VendorRegistry, pci_ids: PciIds, mocker: MockerFixture
) -> None:
    state = _discovered(sync_state(), TWO_CARDS, vendors, pci_ids)
    agent_handler(mocker, ApplyHandler, writer=writer).handle(state)
    assert writer.verbs() == ["create", "apply_status", "create", "apply_status"]
    (_, (name, labels)), (_, (status_name, status)) = writer.calls[0], writer.calls[1]
    assert name == status_name == "node-1-0-10de-20b7"
    assert labels["gpu.deckhouse.io/pci-address"] == "0000-3b-00.0"
    assert status["currentState"] == {"driverType": "Nvidia"}
    assert status["pciInfo"]["device"]["name"] == "GA100GL [A30 PCIe]"
    assert writer.calls[2][1][0] == "node-1-1-10de-20b7"
    assert state.writes == 4


def test_an_unchanged_node_costs_no_write(
    writer: RecordingWriter, vendors: VendorRegistry, pci_ids: PciIds, mocker: MockerFixture
) -> None:
    probe = _discovered(sync_state(), TWO_CARDS, vendors, pci_ids)
    existing = [
        _in_sync(gpu_object("node-1-0-10de-20b7", "0000:3b:00.0"), probe),
        _in_sync(gpu_object("node-1-1-10de-20b7", "0000:d8:00.0"), probe),
    ]
    state = _discovered(sync_state(existing=existing), TWO_CARDS, vendors, pci_ids)
    agent_handler(mocker, ApplyHandler, writer=writer).handle(state)
    assert writer.calls == []
    assert state.writes == 0


def test_only_drifted_labels_are_patched(
    writer: RecordingWriter, vendors: VendorRegistry, pci_ids: PciIds, mocker: MockerFixture
) -> None:
    probe = _discovered(sync_state(), TWO_CARDS[:1], vendors, pci_ids)
    gpu = _in_sync(gpu_object("node-1-0-10de-20b7", "0000:3b:00.0"), probe)
    gpu.metadata.labels = {**labels_of(gpu), "gpu.deckhouse.io/device": "wrong", "team": "ml"}
    state = _discovered(sync_state(existing=[gpu]), TWO_CARDS[:1], vendors, pci_ids)
    agent_handler(mocker, ApplyHandler, writer=writer).handle(state)
    assert writer.calls == [("patch_labels", ("node-1-0-10de-20b7", {"gpu.deckhouse.io/device": "a30-pcie"}))]


def test_a_rebound_card_drops_stale_vendor_state_before_the_apply(
    writer: RecordingWriter, vendors: VendorRegistry, pci_ids: PciIds, mocker: MockerFixture
) -> None:
    probe = _discovered(sync_state(), TWO_CARDS[:1], vendors, pci_ids)
    gpu = _in_sync(gpu_object("node-1-0-10de-20b7", "0000:3b:00.0"), probe)
    status_of(gpu).current_state = CurrentState(
        driver_type=DriverType.NVIDIA, nvidia=NvidiaState(driver_version="580")
    )
    state = _discovered(
        sync_state(existing=[gpu]), [device("0000:3b:00.0", driver="vfio-pci")], vendors, pci_ids
    )
    agent_handler(mocker, ApplyHandler, writer=writer).handle(state)
    assert writer.verbs() == ["remove_current_state", "apply_status"]
    assert writer.calls[0][1] == ("node-1-0-10de-20b7", ["nvidia"])
    assert writer.calls[1][1][1]["currentState"] == {"driverType": "VFIO"}


def test_a_card_whose_object_is_being_deleted_waits(
    writer: RecordingWriter, vendors: VendorRegistry, pci_ids: PciIds, mocker: MockerFixture
) -> None:
    going = gpu_object("node-1-0-10de-20b7", "0000:3b:00.0", deleting=True)
    state = _discovered(sync_state(existing=[going]), TWO_CARDS, vendors, pci_ids)
    agent_handler(mocker, ApplyHandler, writer=writer).handle(state)
    # The other card avoids the terminating object's name.
    assert writer.calls[0] == ("create", ("node-1-1-10de-20b7", writer.calls[0][1][1]))
    assert writer.verbs() == ["create", "apply_status"]


def test_one_failing_card_does_not_stop_the_others(
    writer: RecordingWriter, vendors: VendorRegistry, pci_ids: PciIds, mocker: MockerFixture
) -> None:
    writer.fail_on["create:node-1-0-10de-20b7"] = AlreadyExistsError(
        status=409, reason="AlreadyExists", message="exists"
    )
    writer.fail_on["apply_status:node-1-1-10de-20b7"] = ConflictError(
        status=409, reason="Conflict", message="busy"
    )
    state = _discovered(sync_state(), [*TWO_CARDS, device("0000:e1:00.0")], vendors, pci_ids)
    agent_handler(mocker, ApplyHandler, writer=writer).handle(state)
    assert [(f.step, f.subject) for f in state.failures] == [
        ("apply", "PhysicalGPU node-1-0-10de-20b7 (PCI 0000:3b:00.0)"),
        ("apply", "PhysicalGPU node-1-1-10de-20b7 (PCI 0000:d8:00.0)"),
    ]
    assert "without this node's label" in str(state.failures[0].error)
    assert ("create", ("node-1-2-10de-20b7", writer.calls[-2][1][1])) in writer.calls
    assert writer.verbs()[-1] == "apply_status"


def test_an_object_deleted_by_hand_comes_back_under_its_name(
    writer: RecordingWriter, vendors: VendorRegistry, pci_ids: PciIds, mocker: MockerFixture
) -> None:
    handler = agent_handler(mocker, ApplyHandler, writer=writer)
    probe = _discovered(sync_state(), TWO_CARDS, vendors, pci_ids)
    # Only the second card is left in the cluster (the first was pulled earlier), named with index 1.
    second = _in_sync(gpu_object("node-1-1-10de-20b7", "0000:d8:00.0"), probe)
    handler.handle(_discovered(sync_state(existing=[second]), TWO_CARDS[1:], vendors, pci_ids))
    assert writer.calls == []
    # Someone deletes it: position 0 is free now, but the card gets its old name back.
    handler.handle(_discovered(sync_state(existing=[]), TWO_CARDS[1:], vendors, pci_ids))
    assert writer.calls[0][0:2] == ("create", ("node-1-1-10de-20b7", writer.calls[0][1][1]))
