"""A failed prepare is also told on the PhysicalGPU of its card, found by PCI address."""

from __future__ import annotations

from kubernetes.client import V1ObjectMeta
from pytest_mock import MockerFixture

from api.gpu.v1alpha1 import PhysicalGPU
from api.gpu.v1alpha1.hardware import PciInfo
from api.gpu.v1alpha1.physicalgpu import PhysicalGPUStatus
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.gpuhandler.preparation.services import RecorderClaimEvents


def _gpu(name: str, address: str) -> PhysicalGPU:
    pci = PciInfo.model_validate(
        {"address": address, "class": {"code": "0302"}, "vendor": {"id": "10de"}, "device": {"id": "20b7"}}
    )
    return PhysicalGPU(metadata=V1ObjectMeta(name=name), status=PhysicalGPUStatus(pci_info=pci))


def test_the_warning_lands_on_the_physicalgpu_at_that_address_only(mocker: MockerFixture) -> None:
    recorder = mocker.MagicMock()
    gpus = [_gpu("n1-0-10de-20b7", "0000:3b:00.0"), _gpu("n1-1-10de-20b7", "0000:d8:00.0")]
    events = RecorderClaimEvents(recorder, gpus=lambda: gpus)
    events.card_warning("0000:d8:00.0", reason="PrepareFailed", message="claim ns/c: card busy")
    [call] = recorder.event.call_args_list
    assert call.args[0].metadata.name == "n1-1-10de-20b7"
    assert call.kwargs == {
        "type_": "Warning",
        "reason": "PrepareFailed",
        "message": "claim ns/c: card busy",
        "kind": PHYSICAL_GPU,
    }
    events.card_warning("0000:00:00.0", reason="PrepareFailed", message="unknown card")
    assert recorder.event.call_count == 1
