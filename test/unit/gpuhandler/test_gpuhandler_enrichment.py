"""The enrichment rules (when a card is read, what is written, what is kept) through the real chain,
with the simulated backend."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pytest_mock import MockerFixture
from testutil.k8s_fields import status_of
from testutil.unit.gpuhandler.gpuhandler_fakes import (
    T0,
    T1,
    CountingBackend,
    condition,
    gpu,
    harness,
    simulated,
    stored,
)

from api.gpu.v1alpha1 import AmdCapabilities, AmdState, Capabilities, DriverType, NvidiaState, Vendor
from pkg.backends import BackendError, Enrichment
from pkg.framework.reconcile.contract import Request, Result
from pkg.gpuhandler.enrichment.reconciler import EnrichmentFailedError

NAME = "node-1-0-10de-20b7"


@pytest.mark.parametrize("driver_ready", [None, "Unknown", "False"])
def test_nothing_is_read_or_written_until_driver_ready_is_true(
    driver_ready: str | None, mocker: MockerFixture
) -> None:
    backend = CountingBackend(simulated())
    h = harness(mocker, backend, gpu(driver_ready=driver_ready))
    assert h.reconciler.reconcile(Request(NAME)) == Result()  # waits for the next event
    assert backend.reads == 0
    assert h.writer.applied == []
    assert h.writer.withdrawn == []
    assert h.cards.snapshot() == {}


@pytest.mark.parametrize("driver_type", [None, DriverType.VFIO, DriverType.UNKNOWN])
def test_a_card_not_bound_to_nvidia_is_not_read(
    driver_type: DriverType | None, mocker: MockerFixture
) -> None:
    backend = CountingBackend(simulated())
    h = harness(mocker, backend, gpu(driver_type=driver_type))
    h.reconciler.reconcile(Request(NAME))
    assert backend.reads == 0
    assert h.writer.applied == []


def test_a_ready_card_gets_capabilities_state_and_health_then_no_write_while_unchanged(
    mocker: MockerFixture,
) -> None:
    h = harness(mocker, simulated(), gpu())
    result = h.reconciler.reconcile(Request(NAME))
    assert result.requeue_after == timedelta(seconds=60)  # periodic re-enrichment
    [(name, owned)] = h.writer.applied
    assert name == NAME
    body = owned.apply_status()
    assert set(body) == {"capabilities", "currentState", "conditions"}
    assert body["capabilities"]["productName"] == "NVIDIA A30"
    assert body["capabilities"]["nvidia"]["mig"]["totalSlices"] == 4
    assert set(body["currentState"]) == {"nvidia"}  # never driverType: the node agent owns it
    assert body["currentState"]["nvidia"]["mig"] == {"mode": "Disabled"}
    assert body["conditions"] == [
        {
            "type": "HardwareHealthy",
            "status": "True",
            "reason": "Healthy",
            "message": "no pending page retirement, row remapping failure or thermal slowdown",
            "lastTransitionTime": "2026-11-21T12:05:00Z",
            "observedGeneration": 1,
        }
    ]
    assert h.cards.snapshot()[NAME].ready
    assert h.cards.snapshot()[NAME].card.product_name == "NVIDIA A30"

    h.objects[NAME] = stored(h.objects[NAME], owned)
    h.reconciler.reconcile(Request(NAME))
    assert len(h.writer.applied) == 1  # the object already says it all


def test_a_card_without_mig_gets_no_mig_blocks(mocker: MockerFixture) -> None:
    l4 = gpu("0000:ce:00.0", name="node-1-1-10de-27b8", device_id="27b8")
    h = harness(mocker, simulated("h100-and-l4"), l4)
    h.reconciler.reconcile(Request("node-1-1-10de-27b8"))
    body = h.writer.applied[0][1].apply_status()
    assert body["capabilities"]["nvidia"]["migSupported"] is False
    assert "mig" not in body["capabilities"]["nvidia"]
    assert "mig" not in body["currentState"]["nvidia"]


def test_a_card_of_another_vendor_is_left_alone(mocker: MockerFixture) -> None:
    backend = CountingBackend(simulated())
    h = harness(mocker, backend, gpu(vendor_id="1002"))
    h.reconciler.reconcile(Request(NAME))
    assert backend.reads == 0
    assert h.writer.applied == []
    assert h.writer.withdrawn == []


class _RocmBackend(CountingBackend):
    """A backend that reads cards bound to amdgpu, and wrongly returns an NVIDIA block too."""

    @property
    def driver_type(self) -> DriverType:
        return DriverType.ROCM


def test_a_backend_of_another_driver_never_writes_nvidia_blocks(mocker: MockerFixture) -> None:
    confused = Enrichment(
        capabilities=Capabilities(product_name="X", vendor=Vendor.AMD),
        nvidia=NvidiaState(driver_version="1.0"),
    )
    h = harness(mocker, _RocmBackend(simulated(), enrichment=confused), gpu(driver_type=DriverType.ROCM))
    h.reconciler.reconcile(Request(NAME))
    body = h.writer.applied[0][1].apply_status()
    assert "currentState" not in body
    assert body["capabilities"] == {"productName": "X", "vendor": "Amd"}


def test_an_amd_card_gets_its_own_block_and_never_nvidias(mocker: MockerFixture) -> None:
    read = Enrichment(
        capabilities=Capabilities(
            product_name="AMD Instinct MI300X",
            vendor=Vendor.AMD,
            amd=AmdCapabilities(compute_partition_modes=["spx", "cpx"], memory_partition_modes=["nps1"]),
        ),
        nvidia=NvidiaState(driver_version="1.0"),
        amd=AmdState(compute_partition_mode="cpx", memory_partition_mode="nps1"),
    )
    h = harness(mocker, _RocmBackend(simulated(), enrichment=read), gpu(driver_type=DriverType.ROCM))
    h.reconciler.reconcile(Request(NAME))
    body = h.writer.applied[0][1].apply_status()
    assert body["currentState"] == {"amd": {"computePartitionMode": "cpx", "memoryPartitionMode": "nps1"}}
    assert body["capabilities"]["amd"] == {
        "computePartitionModes": ["spx", "cpx"],
        "memoryPartitionModes": ["nps1"],
    }


def test_an_amd_block_read_beside_another_driver_is_not_sent(mocker: MockerFixture) -> None:
    stray = Enrichment(capabilities=None, amd=AmdState(compute_partition_mode="spx"))
    h = harness(mocker, CountingBackend(simulated(), enrichment=stray), gpu())
    h.reconciler.reconcile(Request(NAME))
    assert "amd" not in h.writer.applied[0][1].apply_status().get("currentState", {})


def test_an_amd_card_no_longer_ready_withdraws_its_block(mocker: MockerFixture) -> None:
    read = Enrichment(
        capabilities=Capabilities(product_name="X", vendor=Vendor.AMD),
        amd=AmdState(compute_partition_mode="spx"),
    )
    h = harness(mocker, _RocmBackend(simulated(), enrichment=read), gpu(driver_type=DriverType.ROCM))
    h.reconciler.reconcile(Request(NAME))
    enriched = stored(h.objects[NAME], h.writer.applied[0][1])
    h.objects[NAME] = enriched.model_copy(
        update={
            "status": status_of(enriched).model_copy(
                update={"conditions": [condition("DriverReady", "False")]}
            )
        }
    )
    h.reconciler.reconcile(Request(NAME))
    assert h.writer.withdrawn_amd == [NAME]
    assert h.writer.withdrawn == []  # there was no NVIDIA block to withdraw


def test_driver_no_longer_ready_withdraws_the_live_state_and_keeps_the_rest(mocker: MockerFixture) -> None:
    h = harness(mocker, simulated(), gpu())
    h.reconciler.reconcile(Request(NAME))
    enriched = stored(h.objects[NAME], h.writer.applied[0][1])
    h.objects[NAME] = enriched.model_copy(
        update={
            "status": status_of(enriched).model_copy(
                update={"conditions": [condition("DriverReady", "False")]}
            )
        }
    )
    assert h.reconciler.reconcile(Request(NAME)) == Result()
    assert h.writer.withdrawn == [NAME]
    assert len(h.writer.applied) == 1  # no apply: capabilities and health stay as they are
    assert h.cards.snapshot()[NAME].ready is False  # kept, but not offerable


def test_a_read_failure_still_writes_health_keeps_the_snapshot_and_fails_the_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture
) -> None:
    state_dir = tmp_path
    (state_dir / "0000:3b:00.0.health").write_text("False GpuLost the GPU fell off the bus\n")
    backend = CountingBackend(simulated(state_dir=state_dir))
    h = harness(mocker, backend, gpu())
    h.reconciler.reconcile(Request(NAME))
    h.objects[NAME] = stored(h.objects[NAME], h.writer.applied[0][1])
    previous = h.writer.applied[0][1]

    def lost(_gpu: object) -> Enrichment:
        raise BackendError(address="0000:3b:00.0", reason="NvmlGpuIsLost", message="GPU is lost")

    monkeypatch.setattr(backend, "enrich", lost)
    (state_dir / "0000:3b:00.0.health").write_text("False GpuLost the GPU fell off the bus again\n")
    with pytest.raises(EnrichmentFailedError, match="GPU is lost"):
        h.reconciler.reconcile(Request(NAME))
    latest = h.writer.applied[-1][1]
    assert latest.capabilities == previous.capabilities
    assert latest.nvidia == previous.nvidia
    assert latest.health is not None
    assert latest.health.message == "the GPU fell off the bus again"


def test_health_keeps_its_transition_time_until_the_status_changes(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    healthy = condition("HardwareHealthy", "True", reason="Healthy", at=T0)
    h = harness(mocker, simulated(state_dir=tmp_path), gpu(extra_conditions=[healthy]))
    h.reconciler.reconcile(Request(NAME))
    health = h.writer.applied[0][1].health
    assert health is not None
    assert health.last_transition_time == T0
    (tmp_path / "0000:3b:00.0.health").write_text("False ThermalSlowdown too hot\n")
    h.reconciler.reconcile(Request(NAME))
    health = h.writer.applied[-1][1].health
    assert health is not None
    assert (health.status, health.reason) == ("False", "ThermalSlowdown")
    assert health.last_transition_time == T1


def test_other_conditions_are_never_sent(mocker: MockerFixture) -> None:
    other = condition("Validated", "True")
    h = harness(mocker, simulated(), gpu(extra_conditions=[other]))
    h.reconciler.reconcile(Request(NAME))
    sent = h.writer.applied[0][1].apply_status()["conditions"]
    assert [c["type"] for c in sent] == ["HardwareHealthy"]


def test_a_gone_card_is_forgotten(mocker: MockerFixture) -> None:
    h = harness(mocker, simulated(), gpu())
    h.reconciler.reconcile(Request(NAME))
    assert NAME in h.cards.snapshot()
    del h.objects[NAME]
    assert h.reconciler.reconcile(Request(NAME)) == Result()
    assert h.cards.snapshot() == {}


def test_a_card_of_another_node_in_the_cache_is_ignored(mocker: MockerFixture) -> None:
    foreign = gpu()
    foreign.metadata.labels = {"gpu.deckhouse.io/node": "node-2"}
    backend = CountingBackend(simulated())
    h = harness(mocker, backend, foreign)
    h.reconciler.reconcile(Request(NAME))
    assert backend.reads == 0
    assert h.writer.applied == []
