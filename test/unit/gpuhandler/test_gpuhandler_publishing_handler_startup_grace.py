"""gpu-handler publishing's start-up grace handler alone: the step that, right after start-up,
holds the first publish back (at most ``grace`` seconds) while a card the cache says is readable
has not been described by the enrichment yet, so a restart does not withdraw the node's offers
only to publish them again a moment later. It stops the chain and comes back when the grace ends;
once anything was published it never waits again.

The state is the real scratch state the reconciler builds over real PhysicalGPUs and card specs
(described by the simulated NVIDIA backend); the clock is the step's only service, a stub.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from kubernetes.client import V1Node, V1ObjectMeta
from testutil.unit.gpuhandler.gpuhandler_fakes import A30_FIRST, gpu, simulated

from api.gpu.v1alpha1 import DriverType, PhysicalGPU
from pkg.framework.reconcile import Result, StopHandlerChain
from pkg.gpuhandler.enrichment.card_specs import CardEntry
from pkg.gpuhandler.publishing.handler.startup_grace import StartupGraceHandler
from pkg.gpuhandler.publishing.state import PassMemory, PublishState

NODE = "node-1"
A30_SECOND = "0000:d8:00.0"
GRACE = 30.0


class Clock:
    """The monotonic clock the step reads, set by the test."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now


FIRST, SECOND = gpu(A30_FIRST, name="gpu-a"), gpu(A30_SECOND, name="gpu-b")


def described(*cards: PhysicalGPU) -> dict[str, CardEntry]:
    backend = simulated()
    return {str(c.metadata.name): CardEntry(card=backend.offer_inputs(c), ready=True) for c in cards}


def pass_over(
    gpus: list[PhysicalGPU], entries: dict[str, CardEntry], memory: PassMemory | None = None
) -> PublishState:
    return PublishState(
        node_name=NODE,
        node=V1Node(metadata=V1ObjectMeta(name=NODE, uid="node-uid")),
        gpus={str(g.metadata.name): g for g in gpus},
        entries=entries,
        memory=memory if memory is not None else PassMemory(),
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def handler(clock: Clock) -> StartupGraceHandler:
    return StartupGraceHandler(grace=GRACE, pci_vendor_id="10de", driver_type=DriverType.NVIDIA, clock=clock)


def test_the_first_pass_waits_for_a_readable_card_not_yet_described(
    handler: StartupGraceHandler, clock: Clock
) -> None:
    state = pass_over([FIRST, SECOND], described(FIRST))

    with pytest.raises(StopHandlerChain, match="start-up grace") as stop:
        handler.handle(state)

    assert stop.value.result == Result(requeue_after=timedelta(seconds=GRACE))
    assert state.memory.first_pass == clock.now
    assert state.memory.published is False


def test_a_later_pass_waits_only_for_what_is_left_of_the_grace(
    handler: StartupGraceHandler, clock: Clock
) -> None:
    memory = PassMemory(first_pass=100.0)
    clock.now = 112.5

    with pytest.raises(StopHandlerChain) as stop:
        handler.handle(pass_over([FIRST, SECOND], described(FIRST), memory))

    assert stop.value.result == Result(requeue_after=timedelta(seconds=17.5))
    assert memory.first_pass == 100.0  # the grace counts from the first pass


def test_once_every_readable_card_is_described_the_pass_goes_on(
    handler: StartupGraceHandler, clock: Clock
) -> None:
    state = pass_over([FIRST, SECOND], described(FIRST, SECOND))

    assert handler.handle(state) is None

    assert state.memory.first_pass == clock.now


@pytest.mark.parametrize(
    "undescribed",
    [
        gpu(A30_SECOND, name="gpu-b", driver_ready="False"),
        gpu(A30_SECOND, name="gpu-b", driver_type=DriverType.VFIO),
        gpu(A30_SECOND, name="gpu-b", vendor_id="1002", device_id="74a1"),
    ],
    ids=["driver-not-ready", "bound-to-vfio", "another-vendor"],
)
def test_a_card_that_is_not_readable_is_not_waited_for(
    handler: StartupGraceHandler, undescribed: PhysicalGPU
) -> None:
    assert handler.handle(pass_over([FIRST, undescribed], described(FIRST))) is None


def test_when_the_grace_is_over_the_pass_goes_on_without_the_card(
    handler: StartupGraceHandler, clock: Clock
) -> None:
    memory = PassMemory(first_pass=100.0)
    clock.now = 100.0 + GRACE

    assert handler.handle(pass_over([FIRST, SECOND], described(FIRST), memory)) is None


def test_after_a_publish_it_never_waits_again(handler: StartupGraceHandler, clock: Clock) -> None:
    memory = PassMemory(published=True)

    assert handler.handle(pass_over([FIRST, SECOND], {}, memory)) is None

    assert clock.reads == 0
    assert memory.first_pass is None
