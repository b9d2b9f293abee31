"""gpu-handler enrichment's apply handler alone: the step that writes the enrichment's own status
fields (capabilities, ``currentState.nvidia`` / ``.amd``, ``HardwareHealthy``) by server-side apply
when they differ from the cached object, and only then. Where the read failed, the object's
fields are restated; a vendor block goes only to a card bound to that vendor's driver. A card not
readable now, or held for a claim, only has its live driver state withdrawn. Every write is
counted in the state.

The state is the real one the reconciler builds, as the readiness, health and enrich steps leave
it; the status writer is autospecced.
"""

from __future__ import annotations

import pytest
from kubernetes.client import V1Condition
from pytest_mock import MockerFixture, MockType
from testutil.unit.gpuhandler.gpuhandler_fakes import T0, T1, condition, gpu, stored

from api.gpu.v1alpha1 import AmdState, Capabilities, DriverType, NvidiaState, PhysicalGPU, Vendor
from pkg.backends import Enrichment
from pkg.backends.backend import BackendError
from pkg.framework.client.errors import InvalidError
from pkg.gpuhandler.enrichment.handler.apply import ApplyHandler
from pkg.gpuhandler.enrichment.owned import OwnedStatus
from pkg.gpuhandler.enrichment.readiness import Readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState
from pkg.gpuhandler.enrichment.status_writer import KubeStatusWriter

A30 = Capabilities(vendor=Vendor.NVIDIA, product_name="NVIDIA A30", memory_mib=24576)
NVIDIA = NvidiaState(gpu_uuid="GPU-a30-0", driver_version="580.76.05")
MI300 = Capabilities(vendor=Vendor.AMD, product_name="AMD Instinct MI300X", memory_mib=196608)
AMD = AmdState(compute_partition_mode="spx", memory_partition_mode="nps1")
HEALTHY = condition("HardwareHealthy", "True", reason="Healthy", at=T1)
UNHEALTHY = condition("HardwareHealthy", "False", reason="GpuIsLost", at=T1)
LOST = BackendError(address="0000:3b:00.0", reason="GpuIsLost", message="fallen off the bus")


@pytest.fixture
def writer(mocker: MockerFixture) -> MockType:
    w = mocker.create_autospec(KubeStatusWriter, instance=True)
    w.apply.side_effect = stored
    w.withdraw_nvidia.side_effect = lambda card: card
    w.withdraw_amd.side_effect = lambda card: card
    return w


@pytest.fixture
def handler(writer: MockType) -> ApplyHandler:
    return ApplyHandler(writer=writer)


def enriched(
    card: PhysicalGPU,
    *,
    read: Enrichment | None,
    health: V1Condition | None = HEALTHY,
    readiness: Readiness = Readiness.READY,
) -> EnrichmentState:
    """The state as the steps before apply leave it (``read`` None: the read failed)."""
    state = EnrichmentState(gpu=card, readiness=readiness, health=health, enrichment=read)
    if read is None and readiness is Readiness.READY:
        state.failures.append(LOST)
    return state


def written(
    card: PhysicalGPU, *, capabilities: Capabilities | None, nvidia: NvidiaState | None
) -> PhysicalGPU:
    """``card`` as the API server holds it after an earlier pass wrote these fields."""
    return stored(card, OwnedStatus(capabilities=capabilities, nvidia=nvidia, health=HEALTHY))


def applied(writer: MockType) -> OwnedStatus:
    [(_, owned)] = [call.args for call in writer.apply.call_args_list]
    assert isinstance(owned, OwnedStatus)
    return owned


def test_a_first_read_is_applied_in_full(handler: ApplyHandler, writer: MockType) -> None:
    state = enriched(gpu(), read=Enrichment(capabilities=A30, nvidia=NVIDIA))

    assert handler.handle(state) is None

    writer.apply.assert_called_once_with(
        state.gpu, OwnedStatus(capabilities=A30, nvidia=NVIDIA, amd=None, health=HEALTHY)
    )
    writer.withdraw_nvidia.assert_not_called()
    assert state.writes == 1


def test_an_unchanged_card_costs_no_request(handler: ApplyHandler, writer: MockType) -> None:
    card = written(gpu(), capabilities=A30, nvidia=NVIDIA)
    # the same verdict with another transition time: conditions compare by meaning
    again = condition("HardwareHealthy", "True", reason="Healthy", at=T0)
    state = enriched(card, read=Enrichment(capabilities=A30, nvidia=NVIDIA), health=again)

    assert handler.handle(state) is None

    writer.apply.assert_not_called()
    assert state.writes == 0


def test_a_changed_field_restates_every_owned_field(handler: ApplyHandler, writer: MockType) -> None:
    card = written(gpu(), capabilities=A30, nvidia=NVIDIA)
    upgraded = NVIDIA.model_copy(update={"driver_version": "580.95.05"})

    handler.handle(enriched(card, read=Enrichment(capabilities=A30, nvidia=upgraded)))

    assert applied(writer) == OwnedStatus(capabilities=A30, nvidia=upgraded, health=HEALTHY)


def test_a_failed_read_keeps_the_objects_fields_and_still_writes_the_verdict(
    handler: ApplyHandler, writer: MockType
) -> None:
    card = written(gpu(), capabilities=A30, nvidia=NVIDIA)
    state = enriched(card, read=None, health=UNHEALTHY)

    handler.handle(state)

    assert applied(writer) == OwnedStatus(capabilities=A30, nvidia=NVIDIA, health=UNHEALTHY)
    assert state.writes == 1


def test_without_a_new_verdict_the_objects_verdict_is_restated(
    handler: ApplyHandler, writer: MockType
) -> None:
    card = written(gpu(), capabilities=A30, nvidia=None)

    handler.handle(enriched(card, read=Enrichment(capabilities=A30, nvidia=NVIDIA), health=None))

    owned = applied(writer)
    assert owned.health is not None
    assert (owned.health.status, owned.health.reason) == ("True", "Healthy")


def test_only_the_block_of_the_driver_the_card_is_bound_to_is_sent(
    handler: ApplyHandler, writer: MockType
) -> None:
    rocm = gpu(vendor_id="1002", device_id="74a1", driver_type=DriverType.ROCM)
    # a backend that returns both blocks: the CRD allows only amd next to driverType ROCm
    handler.handle(enriched(rocm, read=Enrichment(capabilities=MI300, nvidia=NVIDIA, amd=AMD)))

    assert applied(writer) == OwnedStatus(capabilities=MI300, nvidia=None, amd=AMD, health=HEALTHY)


@pytest.mark.parametrize("readiness", [Readiness.NOT_READY, Readiness.HELD])
def test_a_card_not_readable_now_only_loses_its_live_driver_state(
    handler: ApplyHandler, writer: MockType, readiness: Readiness
) -> None:
    card = written(gpu(driver_ready="False"), capabilities=A30, nvidia=NVIDIA)
    state = enriched(card, read=None, health=None, readiness=readiness)

    assert handler.handle(state) is None

    writer.withdraw_nvidia.assert_called_once_with(card)
    writer.withdraw_amd.assert_not_called()
    writer.apply.assert_not_called()  # capabilities and HardwareHealthy stay as they are
    assert state.writes == 1


def test_an_amd_card_not_readable_now_loses_its_amd_block(handler: ApplyHandler, writer: MockType) -> None:
    rocm = gpu(vendor_id="1002", device_id="74a1", driver_type=DriverType.ROCM, driver_ready="False")
    card = stored(rocm, OwnedStatus(capabilities=MI300, amd=AMD))
    state = enriched(card, read=None, health=None, readiness=Readiness.NOT_READY)

    handler.handle(state)

    writer.withdraw_amd.assert_called_once_with(card)
    writer.withdraw_nvidia.assert_not_called()
    assert state.writes == 1


def test_nothing_to_withdraw_costs_no_request(handler: ApplyHandler, writer: MockType) -> None:
    card = written(gpu(driver_ready="False"), capabilities=A30, nvidia=None)
    state = enriched(card, read=None, health=None, readiness=Readiness.NOT_READY)

    handler.handle(state)

    writer.withdraw_nvidia.assert_not_called()
    writer.withdraw_amd.assert_not_called()
    writer.apply.assert_not_called()
    assert state.writes == 0


def test_a_withdrawal_the_server_found_nothing_for_is_not_counted(
    handler: ApplyHandler, writer: MockType
) -> None:
    writer.withdraw_nvidia.side_effect = None
    writer.withdraw_nvidia.return_value = None  # already gone, or the object was replaced
    card = written(gpu(driver_ready="False"), capabilities=A30, nvidia=NVIDIA)
    state = enriched(card, read=None, health=None, readiness=Readiness.NOT_READY)

    handler.handle(state)

    writer.withdraw_nvidia.assert_called_once_with(card)
    assert state.writes == 0


def test_a_refused_apply_propagates_uncounted(handler: ApplyHandler, writer: MockType) -> None:
    writer.apply.side_effect = InvalidError(
        status=422, reason="Invalid", message="nvidia is allowed only when driverType is Nvidia"
    )
    state = enriched(gpu(), read=Enrichment(capabilities=A30, nvidia=NVIDIA))

    with pytest.raises(InvalidError, match="nvidia is allowed only"):
        handler.handle(state)

    assert state.writes == 0


def test_a_refused_withdrawal_propagates_uncounted(handler: ApplyHandler, writer: MockType) -> None:
    writer.withdraw_nvidia.side_effect = InvalidError(
        status=422, reason="Invalid", message="invalid", details={"causes": [{"field": "status"}]}
    )
    card = written(gpu(driver_ready="False"), capabilities=A30, nvidia=NVIDIA)
    state = enriched(card, read=None, health=None, readiness=Readiness.NOT_READY)

    with pytest.raises(InvalidError):
        handler.handle(state)

    assert state.writes == 0
