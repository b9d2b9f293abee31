"""A card passed through to a VM for a claim is allocated, not broken.

While gpu-handler's checkpoint says a card is bound to vfio-pci for a claim, the enrichment reads
nothing (NVML cannot see it), writes no health verdict, keeps the card's offer description, and
the publisher keeps offering it — also after the release, until gpu-node-agent reports the NVIDIA
driver again. The real enrichment chain and the publisher's selection, with the simulated backend.
"""

from __future__ import annotations

from pathlib import Path

from pytest_mock import MockerFixture
from testutil.k8s_fields import status_of
from testutil.unit.gpuhandler.gpuhandler_fakes import (
    A30_FIRST,
    CountingBackend,
    condition,
    gpu,
    harness,
    simulated,
    stored,
)

from api.gpu.v1alpha1 import CurrentState, DriverType, PhysicalGPU
from pkg.framework.reconcile.contract import Request
from pkg.gpuhandler.enrichment.card_specs import CardEntry
from pkg.gpuhandler.preparation.checkpoint import (
    CheckpointData,
    CheckpointFile,
    CheckpointStore,
    ClaimRecord,
    DeviceRecord,
    PreparePhase,
)
from pkg.gpuhandler.preparation.kinds.vm.holds import VfioHolds
from pkg.gpuhandler.preparation.kinds.vm.records import VfioFunctionRecord, VfioRecord
from pkg.gpuhandler.preparation.setup import RECORD_TYPES
from pkg.gpuhandler.publishing.selection import select_cards

NAME = "node-1-0-10de-20b7"


def _passed_through(*cards: str) -> CheckpointData:
    devices = [
        DeviceRecord(
            pool="gpus/node-1",
            device=f"gpu-{i}",
            card=card,
            device_type="Physical",
            vfio=VfioRecord(iommu_group="40", functions=[VfioFunctionRecord(address=card, driver="nvidia")]),
        )
        for i, card in enumerate(cards)
    ]
    claim = ClaimRecord(
        uid="5b0c1d2e-3f40-4a5b-8c6d-7e8f90a1b2c3",
        namespace="vms",
        name="vm",
        state=PreparePhase.PREPARE_COMPLETED,
        devices=devices,
    )
    return CheckpointData(
        boot_id="b", claims={"5b0c1d2e-3f40-4a5b-8c6d-7e8f90a1b2c3": claim} if cards else {}
    )


def _on_vfio(ready: PhysicalGPU) -> PhysicalGPU:
    """``ready`` after gpu-node-agent saw the card on vfio-pci (it removes the NVIDIA block the CRD
    forbids under ``VFIO`` itself)."""
    status = status_of(ready).model_copy(deep=True)
    status.current_state = CurrentState(driver_type=DriverType.VFIO)
    return ready.model_copy(update={"status": status})


def test_a_held_card_keeps_its_health_and_offer_and_nvml_is_not_asked(mocker: MockerFixture) -> None:
    holds = VfioHolds()
    backend = CountingBackend(simulated())
    h = harness(mocker, backend, gpu(), holds=holds)
    h.reconciler.reconcile(Request(NAME))
    [(_, owned)] = h.writer.applied
    ready = stored(h.objects[NAME], owned)
    described = h.cards.snapshot()[NAME]
    assert described.ready

    holds.update(_passed_through(A30_FIRST))
    h.objects[NAME] = _on_vfio(ready)
    reads = backend.reads
    h.reconciler.reconcile(Request(NAME))

    assert backend.reads == reads  # NVML cannot see a card on vfio-pci: nothing is asked
    assert len(h.writer.applied) == 1  # no HardwareHealthy=False, no other write
    assert h.writer.withdrawn == []
    assert h.cards.snapshot()[NAME] == described  # still described and ready for the publisher


def test_without_a_hold_a_card_on_vfio_is_not_readable_and_not_offered(mocker: MockerFixture) -> None:
    h = harness(mocker, simulated(), gpu(), holds=VfioHolds())
    h.reconciler.reconcile(Request(NAME))
    [(_, owned)] = h.writer.applied
    h.objects[NAME] = _on_vfio(stored(h.objects[NAME], owned))
    h.reconciler.reconcile(Request(NAME))
    assert h.cards.snapshot()[NAME].ready is False  # bound to vfio-pci by somebody else


def _offered(obj: PhysicalGPU, holds: VfioHolds) -> bool:
    entry = CardEntry(card=simulated().offer_inputs(gpu()), ready=True)
    selection = select_cards(
        entries={NAME: entry},
        gpus={NAME: obj},
        pci_vendor_id="10de",
        driver_type=DriverType.NVIDIA,
        allow_mig=True,
        holds=holds,
    )
    return [c.physical_gpu for c in selection.cards] == [NAME]


def test_the_publisher_keeps_a_held_card_until_the_agent_reports_it_back_on_nvidia() -> None:
    healthy = gpu(extra_conditions=[condition("HardwareHealthy", "True", reason="Healthy")])
    on_vfio = _on_vfio(healthy)
    holds = VfioHolds()
    assert _offered(healthy, holds)
    assert not _offered(on_vfio, holds)  # nobody's claim: not this backend's card now

    holds.update(_passed_through(A30_FIRST))
    assert _offered(on_vfio, holds)

    holds.update(_passed_through())  # Unprepare gave the card back; the agent has not looked yet
    assert _offered(on_vfio, holds)
    assert _offered(healthy, holds)  # the agent reports the NVIDIA driver: an ordinary card again
    assert not _offered(on_vfio, holds)  # and the hold is over


def test_holds_follow_the_checkpoint_they_are_told_and_read_nothing(tmp_path: Path) -> None:
    holds = VfioHolds()
    CheckpointFile(tmp_path / "checkpoint.json", RECORD_TYPES).save(
        _passed_through(A30_FIRST)
    )  # an earlier instance
    store = CheckpointStore(tmp_path / "checkpoint.json", boot_id=lambda: "b", records=RECORD_TYPES)
    data = store.load()
    assert holds.cards() == frozenset()  # nothing is read by the holds themselves

    holds.update(data)  # start-up, after its reconciliation (and each Prepare/Unprepare, at its end)
    assert holds.cards() == {A30_FIRST}
    assert holds.held(A30_FIRST, reported_vfio=True)

    data.claims.clear()
    store.save(data)  # Unprepare forgot the claim after the functions went back
    assert holds.cards() == {A30_FIRST}  # the store tells no one: the driver does, once per call
    holds.update(data)
    assert holds.cards() == frozenset()
    assert holds.held(A30_FIRST, reported_vfio=True)  # returning, while the agent still says VFIO
