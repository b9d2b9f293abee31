"""gpu-handler enrichment's readiness handler alone: the first step of a card's pass, which decides
whether the card is the backend's and may be read now. A card of another vendor (or without
``pciInfo`` yet) ends the chain: nothing is read or written for it. Otherwise the verdict (ready,
not ready, or held for a claim's VFIO pass-through) goes into the state for the later steps.

The state is the real one the reconciler builds (``EnrichmentState(gpu=...)``) over real
PhysicalGPUs; the vendor backend and the VFIO holds are autospecced.
"""

from __future__ import annotations

import pytest
from pytest_mock import MockerFixture, MockType
from testutil.unit.gpuhandler.gpuhandler_fakes import A30_FIRST, gpu

from api.gpu.v1alpha1 import DriverType, PhysicalGPU
from pkg.backends.amd.backend import AmdBackend
from pkg.backends.amd.identity import IDENTITY as AMD
from pkg.backends.nvidia.backend import NvidiaBackend
from pkg.backends.nvidia.identity import IDENTITY as NVIDIA
from pkg.framework.reconcile import StopHandlerChain
from pkg.gpuhandler.enrichment.handler.readiness import ReadinessHandler
from pkg.gpuhandler.enrichment.readiness import Readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState
from pkg.gpuhandler.preparation.kinds.vm.holds import VfioHolds


@pytest.fixture
def backend(mocker: MockerFixture) -> MockType:
    """The NVIDIA backend: vendor ``10de``, reading cards bound to the ``nvidia`` driver."""
    b = mocker.create_autospec(NvidiaBackend, instance=True)
    b.identity = NVIDIA
    b.driver_type = DriverType.NVIDIA
    return b


@pytest.fixture
def holds(mocker: MockerFixture) -> MockType:
    h = mocker.create_autospec(VfioHolds, instance=True)
    h.held.return_value = False
    return h


@pytest.fixture
def handler(backend: MockType, holds: MockType) -> ReadinessHandler:
    return ReadinessHandler(backend=backend, holds=holds)


def without_pci_info() -> PhysicalGPU:
    card = gpu()
    assert card.status is not None
    return card.model_copy(update={"status": card.status.model_copy(update={"pci_info": None})})


def test_a_readable_card_of_this_backend_is_ready(handler: ReadinessHandler, holds: MockType) -> None:
    state = EnrichmentState(gpu=gpu())

    assert handler.handle(state) is None

    assert state.readiness is Readiness.READY
    holds.held.assert_called_once_with(A30_FIRST, reported_vfio=False)


@pytest.mark.parametrize(
    "card",
    [
        gpu(driver_ready="False"),
        gpu(driver_ready=None),
        gpu(driver_type=None),
        gpu(driver_type=DriverType.VFIO),
    ],
    ids=["driver-not-ready", "never-validated", "no-driver-bound", "bound-to-vfio"],
)
def test_a_card_of_this_backend_that_cannot_be_read_now_goes_on_as_not_ready(
    handler: ReadinessHandler, card: PhysicalGPU
) -> None:
    state = EnrichmentState(gpu=card)

    assert handler.handle(state) is None  # the apply step still withdraws its live driver state

    assert state.readiness is Readiness.NOT_READY


@pytest.mark.parametrize(
    "card",
    [gpu(vendor_id="1002", device_id="74a1"), without_pci_info()],
    ids=["another-vendor", "no-pci-info-yet"],
)
def test_a_card_that_is_not_this_backends_stops_the_chain(
    handler: ReadinessHandler, holds: MockType, card: PhysicalGPU
) -> None:
    state = EnrichmentState(gpu=card)

    with pytest.raises(StopHandlerChain, match="not a card of this backend") as stop:
        handler.handle(state)

    assert stop.value.result is None
    assert state.readiness is Readiness.FOREIGN
    holds.held.assert_not_called()


def test_a_card_passed_through_for_a_claim_is_held(handler: ReadinessHandler, holds: MockType) -> None:
    holds.held.return_value = True
    state = EnrichmentState(gpu=gpu(driver_type=DriverType.VFIO, driver_ready="False"))

    assert handler.handle(state) is None

    assert state.readiness is Readiness.HELD
    holds.held.assert_called_once_with(A30_FIRST, reported_vfio=True)


def test_without_holds_no_card_is_held(backend: MockType) -> None:
    state = EnrichmentState(gpu=gpu(driver_type=DriverType.VFIO))

    ReadinessHandler(backend=backend).handle(state)

    assert state.readiness is Readiness.NOT_READY


def test_the_verdict_follows_the_backends_vendor_and_driver(mocker: MockerFixture) -> None:
    amd = mocker.create_autospec(AmdBackend, instance=True)
    amd.identity = AMD
    amd.driver_type = DriverType.ROCM
    handler = ReadinessHandler(backend=amd)
    rocm_card = EnrichmentState(gpu=gpu(vendor_id="1002", device_id="74a1", driver_type=DriverType.ROCM))
    nvidia_card = EnrichmentState(gpu=gpu())

    handler.handle(rocm_card)
    with pytest.raises(StopHandlerChain):
        handler.handle(nvidia_card)

    assert rocm_card.readiness is Readiness.READY
    assert nvidia_card.readiness is Readiness.FOREIGN


def test_a_failing_hold_lookup_propagates(handler: ReadinessHandler, holds: MockType) -> None:
    holds.held.side_effect = RuntimeError("lock poisoned")
    state = EnrichmentState(gpu=gpu())

    with pytest.raises(RuntimeError, match="lock poisoned"):
        handler.handle(state)

    assert state.readiness is Readiness.FOREIGN  # no verdict was reached
