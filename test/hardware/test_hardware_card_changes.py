"""Steps that change the card's settings, run only with ``--allow-card-changes``.

Each prepares a device with the gpu-handler's real Prepare — a MIG device, a TimeSlicing share,
an MPS share — runs the CUDA program in a container given only the CDI devices Prepare answered,
and releases it with the real Unprepare. The card is left as it was found: the release restores
the time slice, stops the MPS daemon and sets the compute mode back to Default; MIG mode, which
the release keeps on for the next MIG claim, is switched back here. Each step needs an idle card
(no process on it), as Prepare itself does before it changes MIG mode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client import V1Device

from pkg.backends import VendorBackend
from pkg.backends.nvidia.nvml import PynvmlAdapter
from pkg.backends.nvidia.nvml_port import COMPUTE_MODE_DEFAULT
from pkg.hardwaretier.claims import PreparationNode, PreparedClaim
from pkg.hardwaretier.cuda_build import product_of
from pkg.hardwaretier.nvml_facts import CardFacts
from pkg.hardwaretier.offer_checks import OffersOutput, attribute
from pkg.hardwaretier.runc import ContainerRun

CudaInContainer = Callable[[PreparedClaim, str], ContainerRun]  # the conftest's cuda_in_container
GPU_CONFIG = {"apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "GpuConfig"}


@pytest.fixture
def idle_card(card_changes: None, nvml: PynvmlAdapter, card: str) -> str:
    processes = nvml.running_processes(card)
    if processes:
        pytest.skip(f"card {card} runs processes {processes}: the card-changing steps need it idle")
    return card


def _shared_offer(offers: OffersOutput, card: str, strategy: str) -> V1Device:
    for device in offers.devices_of(card):
        if attribute(device, "deviceType") == "Physical" and attribute(device, "sharingStrategy") == strategy:
            return device
    pytest.skip(f"card {card} has no {strategy} offer")


def _run_and_release(
    preparation: PreparationNode,
    cuda_in_container: CudaInContainer,
    name: str,
    offer: V1Device,
    **prepare: Any,
) -> ContainerRun:
    claim = preparation.prepare(name, offer, **prepare)
    try:
        return cuda_in_container(claim, name)
    finally:
        preparation.unprepare(claim)


def test_a_mig_device_runs_cuda_in_a_container(
    idle_card: str,
    offers: OffersOutput,
    preparation: PreparationNode,
    backend: VendorBackend,
    facts: dict[str, CardFacts],
    cuda_in_container: CudaInContainer,
) -> None:
    migs = [d for d in offers.devices_of(idle_card) if attribute(d, "deviceType") == "MIG"]
    if not migs:
        pytest.skip(f"card {idle_card} offers no MIG device")
    smallest = min(
        migs,
        key=lambda d: (
            attribute(d, "placementSize"),
            attribute(d, "profileID"),
            attribute(d, "placementStart"),
        ),
    )
    preparer = backend.preparer
    was_enabled = preparer.mig_enabled(idle_card)
    try:
        run = _run_and_release(preparation, cuda_in_container, "mig", smallest)
    finally:
        if preparer.mig_enabled(idle_card) != was_enabled:
            preparer.set_mig_mode(idle_card, enabled=was_enabled)

    assert run.returncode == 0, run.describe()
    product = product_of(run.stdout) or ""
    assert product.startswith(facts[idle_card].name), run.describe()  # CUDA adds "MIG <profile>"
    assert preparer.mig_enabled(idle_card) == was_enabled


def test_a_time_slicing_share_runs_cuda_in_a_container(
    idle_card: str,
    offers: OffersOutput,
    preparation: PreparationNode,
    facts: dict[str, CardFacts],
    cuda_in_container: CudaInContainer,
) -> None:
    offer = _shared_offer(offers, idle_card, "TimeSlicing")
    config = {**GPU_CONFIG, "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": "Short"}}}

    run = _run_and_release(
        preparation, cuda_in_container, "time-slicing", offer, consumed={"sharePercent": "50"}, config=config
    )

    assert run.returncode == 0, run.describe()
    assert product_of(run.stdout) == facts[idle_card].name, run.describe()


def test_an_mps_share_runs_cuda_in_a_container_through_its_daemon(
    idle_card: str,
    offers: OffersOutput,
    preparation: PreparationNode,
    nvml: PynvmlAdapter,
    facts: dict[str, CardFacts],
    cuda_in_container: CudaInContainer,
) -> None:
    offer = _shared_offer(offers, idle_card, "MPS")

    run = _run_and_release(preparation, cuda_in_container, "mps", offer, consumed={"sharePercent": "50"})

    assert run.returncode == 0, run.describe()
    assert product_of(run.stdout) == facts[idle_card].name, run.describe()
    assert nvml.compute_mode(idle_card) == COMPUTE_MODE_DEFAULT, "the last share's release restores it"
