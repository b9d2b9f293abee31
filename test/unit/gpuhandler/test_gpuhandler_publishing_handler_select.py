"""gpu-handler publishing's select handler alone: the step that decides which of the node's described
cards are offered (and whether with MIG offers, by the Node's ``allow-mig`` label) and puts the
selection into the state for the publish step. Why a card is withheld is logged once per change of
reason, and once when it is offered again; the reasons are remembered across passes.

The state is the real scratch state the reconciler builds over real PhysicalGPUs and card specs
(described by the simulated NVIDIA backend); the VFIO holds are autospecced.
"""

from __future__ import annotations

import logging

import pytest
from kubernetes.client import V1Node, V1ObjectMeta
from pytest_mock import MockerFixture, MockType
from testutil.unit.gpuhandler.gpuhandler_fakes import A30_FIRST, gpu, simulated

from api.gpu.v1alpha1 import DriverType, PhysicalGPU
from pkg.gpuhandler.enrichment.card_specs import CardEntry
from pkg.gpuhandler.preparation.kinds.vm.holds import VfioHolds
from pkg.gpuhandler.publishing.handler.select import SelectHandler
from pkg.gpuhandler.publishing.state import PassMemory, PublishState

NODE = "node-1"
LOGGER = "pkg.gpuhandler.publishing.reconciler"
A30_SECOND = "0000:d8:00.0"
FIRST, SECOND = gpu(A30_FIRST, name="gpu-a"), gpu(A30_SECOND, name="gpu-b")
THIRD = gpu("0000:5e:00.0", name="gpu-c")
NOT_READABLE = "not readable: DriverReady is not True or the card is not bound to the Nvidia driver"


def node(labels: dict[str, str] | None = None) -> V1Node:
    return V1Node(metadata=V1ObjectMeta(name=NODE, uid="node-uid", labels=labels))


def described(*cards: PhysicalGPU, ready: bool = True) -> dict[str, CardEntry]:
    backend = simulated("a30-x3")
    return {str(c.metadata.name): CardEntry(card=backend.offer_inputs(c), ready=ready) for c in cards}


def pass_over(
    gpus: list[PhysicalGPU],
    entries: dict[str, CardEntry],
    *,
    memory: PassMemory | None = None,
    n: V1Node | None = None,
) -> PublishState:
    return PublishState(
        node_name=NODE,
        node=n if n is not None else node(),
        gpus={str(g.metadata.name): g for g in gpus},
        entries=entries,
        memory=memory if memory is not None else PassMemory(),
    )


@pytest.fixture
def holds(mocker: MockerFixture) -> MockType:
    h = mocker.create_autospec(VfioHolds, instance=True)
    h.held.return_value = False
    return h


@pytest.fixture
def handler(holds: MockType) -> SelectHandler:
    return SelectHandler(pci_vendor_id="10de", driver_type=DriverType.NVIDIA, holds=holds)


def offered(state: PublishState) -> dict[str, bool]:
    """The selection: each offered card's PhysicalGPU and whether it gets MIG offers."""
    assert state.selection is not None
    return {c.physical_gpu: c.mig_allowed for c in state.selection.cards}


def test_readable_described_cards_are_offered_with_mig(handler: SelectHandler) -> None:
    state = pass_over([FIRST, SECOND], described(FIRST, SECOND))

    assert handler.handle(state) is None

    assert offered(state) == {"gpu-a": True, "gpu-b": True}  # an A30 supports MIG, the Node allows it
    assert state.selection is not None
    assert state.selection.withheld == {}
    assert state.memory.withheld == {}


@pytest.mark.parametrize("value", ["false", " False "])
def test_a_node_that_refuses_mig_gets_the_cards_without_mig(handler: SelectHandler, value: str) -> None:
    state = pass_over([FIRST], described(FIRST), n=node({"gpu.deckhouse.io/allow-mig": value}))

    handler.handle(state)

    assert offered(state) == {"gpu-a": False}


def test_cards_that_may_not_be_offered_are_withheld_with_their_reasons(handler: SelectHandler) -> None:
    stale = gpu(A30_SECOND, name="gpu-b", driver_ready="False")
    state = pass_over([FIRST, stale, THIRD], described(FIRST, SECOND) | described(THIRD, ready=False))

    handler.handle(state)

    assert offered(state) == {"gpu-a": True}
    expected = {"gpu-b": NOT_READABLE, "gpu-c": "the enrichment has not read it since it became ready"}
    assert state.selection is not None
    assert state.selection.withheld == expected
    assert state.memory.withheld == expected


def test_a_described_card_gone_from_the_cache_is_withheld(handler: SelectHandler) -> None:
    state = pass_over([FIRST], described(FIRST, SECOND))

    handler.handle(state)

    assert state.memory.withheld == {"gpu-b": "its PhysicalGPU is not in the cache"}


def test_a_card_passed_through_for_a_claim_stays_offered(handler: SelectHandler, holds: MockType) -> None:
    passed_through = gpu(A30_SECOND, name="gpu-b", driver_type=DriverType.VFIO, driver_ready="False")
    holds.held.side_effect = lambda address, *, reported_vfio: address == A30_SECOND
    state = pass_over([FIRST, passed_through], described(FIRST, SECOND))

    handler.handle(state)

    assert offered(state) == {"gpu-a": True, "gpu-b": True}
    holds.held.assert_any_call(A30_SECOND, reported_vfio=True)


def test_without_holds_a_passed_through_card_is_withheld() -> None:
    passed_through = gpu(A30_SECOND, name="gpu-b", driver_type=DriverType.VFIO, driver_ready="False")
    state = pass_over([passed_through], described(SECOND))

    SelectHandler(pci_vendor_id="10de", driver_type=DriverType.NVIDIA).handle(state)

    assert offered(state) == {}
    assert state.memory.withheld == {"gpu-b": NOT_READABLE}


def test_a_withheld_card_is_logged_once_per_reason_and_once_when_offered_again(
    handler: SelectHandler, caplog: pytest.LogCaptureFixture
) -> None:
    memory = PassMemory()
    stale = gpu(A30_SECOND, name="gpu-b", driver_ready="False")

    def messages(gpus: list[PhysicalGPU], entries: dict[str, CardEntry]) -> list[tuple[str, str]]:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=LOGGER):
            handler.handle(pass_over(gpus, entries, memory=memory))
        return [(r.__dict__["physicalgpu"], r.getMessage()) for r in caplog.records]

    assert messages([FIRST, stale], described(FIRST, SECOND)) == [
        ("gpu-b", f"card not offered: {NOT_READABLE}")
    ]
    assert messages([FIRST, stale], described(FIRST, SECOND)) == []  # same reason: said already
    assert messages([FIRST], described(FIRST, SECOND)) == [
        ("gpu-b", "card not offered: its PhysicalGPU is not in the cache")
    ]
    assert messages([FIRST, SECOND], described(FIRST, SECOND)) == [("gpu-b", "card offered again")]
    assert memory.withheld == {}


def test_a_pass_without_a_node_is_a_bug_of_the_chain(handler: SelectHandler) -> None:
    state = pass_over([FIRST], described(FIRST))
    state.node = None

    with pytest.raises(LookupError, match="node step"):
        handler.handle(state)

    assert state.selection is None
