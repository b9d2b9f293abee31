"""The cleanup step: deletes exactly the objects of gone cards, duplicates and unidentified ones."""

from __future__ import annotations

from pytest_mock import MockerFixture
from testutil.unit.nodeagent.nodeagent_fakes import RecordingWriter, agent_handler, gpu_object, sync_state

from api.gpu.v1alpha1 import PciClass, PciId, PciInfo
from pkg.backends.nvidia.identity import IDENTITY as NVIDIA
from pkg.framework.client import ApiError
from pkg.nodeagent.internal.handler import CleanupHandler
from pkg.nodeagent.internal.state import DiscoveredGPU, SyncState


def _present(state: SyncState, *addresses: str) -> SyncState:
    state.known_vendors = frozenset({"nvidia"})
    for address in addresses:
        info = PciInfo(
            address=address, class_=PciClass(code="0302"), vendor=PciId(id="10de"), device=PciId(id="20b7")
        )
        state.gpus.append(
            DiscoveredGPU(vendor=NVIDIA, pci_info=info, driver_type=None, device_label="a30-pcie")
        )
    return state


def test_objects_of_gone_cards_are_deleted_with_their_uid(
    writer: RecordingWriter, mocker: MockerFixture
) -> None:
    kept = gpu_object("node-1-0-10de-20b7", "0000:3b:00.0")
    gone = gpu_object("node-1-1-10de-20b7", "0000:d8:00.0", uid="uid-gone")
    state = _present(sync_state(existing=[kept, gone]), "0000:3b:00.0")
    agent_handler(mocker, CleanupHandler, writer=writer).handle(state)
    assert writer.calls == [("delete", ("node-1-1-10de-20b7", "uid-gone"))]


def test_unreadable_terminating_and_unknown_vendor_objects_are_kept(
    writer: RecordingWriter, mocker: MockerFixture
) -> None:
    unreadable = gpu_object("node-1-0-10de-20b7", "0000:3b:00.0")
    terminating = gpu_object("node-1-1-10de-20b7", "0000:d8:00.0", deleting=True)
    amd_labels = {
        "gpu.deckhouse.io/node": "node-1",
        "gpu.deckhouse.io/vendor": "amd",
        "gpu.deckhouse.io/pci-address": "0000-80-00.0",
    }
    amd = gpu_object("node-1-2-1002-740f", "0000:80:00.0", labels=amd_labels)
    state = _present(sync_state(existing=[unreadable, terminating, amd]))
    state.unreadable.add("0000-3b-00.0")
    agent_handler(mocker, CleanupHandler, writer=writer).handle(state)
    assert writer.calls == []


def test_duplicates_and_unidentified_objects_are_deleted(
    writer: RecordingWriter, mocker: MockerFixture
) -> None:
    kept = gpu_object("node-1-0-10de-20b7", "0000:3b:00.0", age=0)
    twin = gpu_object("node-1-3-10de-20b7", "0000:3b:00.0", age=5)
    stray = gpu_object("node-1-9-10de-20b7", None, labels={"gpu.deckhouse.io/node": "node-1"})
    state = _present(sync_state(existing=[twin, stray, kept]), "0000:3b:00.0")
    agent_handler(mocker, CleanupHandler, writer=writer).handle(state)
    assert [name for _, (name, _uid) in writer.calls] == ["node-1-3-10de-20b7", "node-1-9-10de-20b7"]


def test_a_failed_delete_is_recorded_and_the_rest_go_on(
    writer: RecordingWriter, mocker: MockerFixture
) -> None:
    first = gpu_object("node-1-0-10de-20b7", "0000:3b:00.0")
    second = gpu_object("node-1-1-10de-20b7", "0000:d8:00.0")
    writer.fail_on["delete:node-1-0-10de-20b7"] = ApiError(status=500, reason="InternalError", message="etcd")
    state = _present(sync_state(existing=[first, second]))
    agent_handler(mocker, CleanupHandler, writer=writer).handle(state)
    assert writer.verbs() == ["delete"]
    assert [f.subject for f in state.failures] == [
        "PhysicalGPU node-1-0-10de-20b7 (card 0000-3b-00.0 is gone)"
    ]
