"""gpu-handler enrichment's enrich handler alone: the step that reads a readable card's capability
snapshot and live driver state through the vendor backend into the state, for the apply step. A
card that may not be read now is not read. A read failure of the card is recorded in the state
(and logged), not raised, so the apply step still writes the health verdict and keeps the fields
as they are; the reconciler raises afterwards.

The state is the real one the reconciler builds, as the readiness step leaves it; the vendor
backend is autospecced.
"""

from __future__ import annotations

import logging

import pytest
from pytest_mock import MockerFixture, MockType
from testutil.unit.gpuhandler.gpuhandler_fakes import A30_FIRST, gpu

from api.gpu.v1alpha1 import Capabilities, NvidiaState, Vendor
from pkg.backends import Enrichment
from pkg.backends.backend import BackendError
from pkg.backends.nvidia.backend import NvidiaBackend
from pkg.gpuhandler.enrichment.handler.enrich import EnrichHandler
from pkg.gpuhandler.enrichment.readiness import Readiness
from pkg.gpuhandler.enrichment.state import EnrichmentState

READ = Enrichment(
    capabilities=Capabilities(vendor=Vendor.NVIDIA, product_name="NVIDIA A30", memory_mib=24576),
    nvidia=NvidiaState(gpu_uuid="GPU-a30-0", driver_version="580.76.05"),
)
LOST = BackendError(address=A30_FIRST, reason="GpuIsLost", message="the GPU has fallen off the bus")


@pytest.fixture
def backend(mocker: MockerFixture) -> MockType:
    b = mocker.create_autospec(NvidiaBackend, instance=True)
    b.enrich.return_value = READ
    return b


@pytest.fixture
def handler(backend: MockType) -> EnrichHandler:
    return EnrichHandler(backend=backend)


def judged(readiness: Readiness) -> EnrichmentState:
    """The state as the readiness step leaves it."""
    return EnrichmentState(gpu=gpu(), readiness=readiness)


def test_a_readable_card_is_read_into_the_state(handler: EnrichHandler, backend: MockType) -> None:
    state = judged(Readiness.READY)

    assert handler.handle(state) is None

    backend.enrich.assert_called_once_with(state.gpu)
    assert state.enrichment is READ
    assert state.failures == []
    assert state.writes == 0  # writing is the apply step's


@pytest.mark.parametrize("readiness", [Readiness.NOT_READY, Readiness.HELD, Readiness.FOREIGN])
def test_a_card_that_may_not_be_read_is_not_read(
    handler: EnrichHandler, backend: MockType, readiness: Readiness
) -> None:
    state = judged(readiness)

    assert handler.handle(state) is None

    backend.enrich.assert_not_called()
    assert state.enrichment is None
    assert state.failures == []


def test_a_read_failure_is_recorded_and_logged_not_raised(
    handler: EnrichHandler, backend: MockType, caplog: pytest.LogCaptureFixture
) -> None:
    backend.enrich.side_effect = LOST
    state = judged(Readiness.READY)

    with caplog.at_level(logging.WARNING, logger="pkg.gpuhandler.enrichment.handler.enrich"):
        assert handler.handle(state) is None

    assert state.failures == [LOST]
    assert state.enrichment is None  # the apply step keeps the object's fields
    [record] = caplog.records
    assert "keeping its last snapshot" in record.getMessage()
    assert record.__dict__["physical_gpu"] == state.name
    assert (record.__dict__["pci_address"], record.__dict__["reason"]) == (A30_FIRST, "GpuIsLost")


def test_a_failure_adds_to_those_recorded_before(handler: EnrichHandler, backend: MockType) -> None:
    earlier = BackendError(address=A30_FIRST, reason="Timeout", message="earlier step")
    backend.enrich.side_effect = LOST
    state = judged(Readiness.READY)
    state.failures.append(earlier)

    handler.handle(state)

    assert state.failures == [earlier, LOST]


def test_an_error_that_is_not_a_read_failure_propagates(handler: EnrichHandler, backend: MockType) -> None:
    backend.enrich.side_effect = ValueError("a bug in the backend")
    state = judged(Readiness.READY)

    with pytest.raises(ValueError, match="a bug in the backend"):
        handler.handle(state)

    assert state.failures == []
    assert state.enrichment is None
