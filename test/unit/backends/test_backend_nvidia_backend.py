"""The NVIDIA backend over the real adapter and a mocked pynvml: the filling rules
(docs/architecture.md#a-field-without-a-source-is-left-out)."""

from __future__ import annotations

from dataclasses import replace

import pynvml
import pytest
from pytest_mock import MockerFixture
from testutil.unit.backends.backend_fakes import FakeCard, install, physical_gpu

from api.gpu.v1alpha1 import MigMode
from pkg.backends import VerdictStatus
from pkg.backends.backend import BackendError
from pkg.backends.nvidia.backend import NvidiaBackend
from pkg.backends.nvidia.nvml import PynvmlAdapter
from pkg.backends.nvidia.profiles import model_for_pci_device
from pkg.backends.nvidia.reading import cuda_version, watts
from pkg.dra.model.card import Engines, Placement
from pkg.hardware.pci import PciDevice

A, B = "0000:3b:00.0", "0000:d8:00.0"
L4 = FakeCard(
    name="NVIDIA L4",
    memory_mib=23034,
    compute_capability=(8, 9),
    architecture=pynvml.NVML_DEVICE_ARCH_ADA,
    power_constraints_mw=(40000, 72000),
    power_limit_mw=72000,
    enforced_power_limit_mw=72000,
    mig_mode=None,
    profiles=(),
)


def backend() -> NvidiaBackend:
    return NvidiaBackend(nvml=PynvmlAdapter())


def test_a100_with_a_current_driver_reports_everything_nvml_answers(mocker: MockerFixture) -> None:
    install(mocker, {A: FakeCard()}, cuda=12040)
    enrichment = backend().enrich(physical_gpu(A))
    assert enrichment.capabilities is not None
    assert enrichment.nvidia is not None
    caps = enrichment.capabilities.to_api_dict()
    profiles = caps["nvidia"].pop("mig")
    assert caps == {
        "productName": "NVIDIA A100-SXM4-40GB",
        "memoryMiB": 40960,
        "vendor": "Nvidia",
        "nvidia": {
            "computeCap": "8.0",
            "productArchitecture": "Ampere",
            "boardPartNumber": "692-2G506-0200-002",
            "computeTypes": ["FP64", "FP32", "TF32", "BF16", "FP16", "INT8", "INT4"],
            "powerLimitMinW": 100,
            "powerLimitMaxW": 400,
            "migSupported": True,
        },
    }
    assert profiles["totalSlices"] == 7
    assert [(p["profileID"], p["name"]) for p in profiles["profiles"]] == [
        (19, "1g.5gb"),
        (20, "1g.5gb+me"),
        (15, "1g.10gb"),
        (14, "2g.10gb"),
        (9, "3g.20gb"),
        (5, "4g.20gb"),
        (0, "7g.40gb"),
    ]
    assert profiles["profiles"][-1]["placements"] == [{"start": 0, "size": 8}]
    assert enrichment.nvidia.to_api_dict() == {
        "gpuUUID": "GPU-1b724e78-eef5-4163-d43c-e4da15d41176",
        "driverVersion": "580.76.05",
        "cudaVersion": "12.4",
        "powerLimitCurrentW": 400,
        "powerLimitEnforcedW": 350,  # 350.5 W enforced, whole watts
        "mig": {"mode": "Disabled"},
    }


def test_without_mig_there_is_no_mig_block_at_all(mocker: MockerFixture) -> None:
    mocks = install(mocker, {A: L4})
    enrichment = backend().enrich(physical_gpu(A, device_id="27b8"))
    assert enrichment.capabilities is not None
    assert enrichment.nvidia is not None
    nvidia = enrichment.capabilities.to_api_dict()["nvidia"]
    assert nvidia["migSupported"] is False
    assert "mig" not in nvidia
    assert nvidia["productArchitecture"] == "Ada Lovelace"
    assert "mig" not in enrichment.nvidia.to_api_dict()
    mocks["nvmlDeviceGetGpuInstanceProfileInfo"].assert_not_called()


def test_driver_before_550_with_mig_disabled_uses_the_built_in_tables(mocker: MockerFixture) -> None:
    mocks = install(mocker, {A: FakeCard()}, driver="535.183.01")
    enrichment = backend().enrich(physical_gpu(A))
    mocks["nvmlDeviceGetGpuInstanceProfileInfo"].assert_not_called()
    assert enrichment.capabilities is not None
    assert enrichment.capabilities.nvidia is not None
    mig = enrichment.capabilities.nvidia.mig
    table = model_for_pci_device("20b0")
    assert mig is not None
    assert table is not None
    assert {p.profile_id for p in mig.profiles} == {p.info.id for p in table.profiles}


def test_driver_before_550_with_mig_enabled_asks_nvml(mocker: MockerFixture) -> None:
    mocks = install(mocker, {A: FakeCard(mig_mode=pynvml.NVML_DEVICE_MIG_ENABLE)}, driver="535.183.01")
    enrichment = backend().enrich(physical_gpu(A))
    assert mocks["nvmlDeviceGetGpuInstanceProfileInfo"].call_count == 18  # every profile index
    assert enrichment.nvidia is not None
    assert enrichment.nvidia.mig is not None
    assert enrichment.nvidia.mig.mode is MigMode.ENABLED


def test_a_failing_profile_query_falls_back_to_the_tables(mocker: MockerFixture) -> None:
    card = FakeCard(errors={"nvmlDeviceGetGpuInstanceProfileInfo": pynvml.NVML_ERROR_UNKNOWN})
    install(mocker, {A: card})
    caps = backend().enrich(physical_gpu(A)).capabilities
    assert caps is not None
    assert caps.nvidia is not None
    assert caps.nvidia.mig is not None
    assert len(caps.nvidia.mig.profiles) == 7


def test_a_mig_card_missing_from_the_tables_with_an_old_driver_has_no_mig_block(
    mocker: MockerFixture,
) -> None:
    install(mocker, {A: FakeCard()}, driver="535.183.01")
    caps = backend().enrich(physical_gpu(A, device_id="ffff")).capabilities
    assert caps is not None
    assert caps.nvidia is not None
    assert caps.nvidia.mig_supported is True
    assert caps.nvidia.mig is None


def test_power_limits_are_written_only_when_nvml_returns_them(mocker: MockerFixture) -> None:
    unsupported = pynvml.NVML_ERROR_NOT_SUPPORTED
    card = FakeCard(
        errors={
            "nvmlDeviceGetPowerManagementLimitConstraints": unsupported,
            "nvmlDeviceGetPowerManagementLimit": unsupported,
            "nvmlDeviceGetEnforcedPowerLimit": unsupported,
            "nvmlDeviceGetBoardPartNumber": unsupported,
        }
    )
    install(mocker, {A: card})
    enrichment = backend().enrich(physical_gpu(A))
    assert enrichment.capabilities is not None
    assert enrichment.nvidia is not None
    nvidia = enrichment.capabilities.to_api_dict()["nvidia"]
    assert not {"powerLimitMinW", "powerLimitMaxW", "boardPartNumber"} & set(nvidia)
    assert not {"powerLimitCurrentW", "powerLimitEnforcedW"} & set(enrichment.nvidia.to_api_dict())


def test_an_nvml_error_on_one_card_fails_that_card_only(mocker: MockerFixture) -> None:
    lost = FakeCard(errors={"nvmlDeviceGetName": pynvml.NVML_ERROR_GPU_IS_LOST})
    install(mocker, {A: lost, B: FakeCard(uuid="GPU-b")})
    nvidia = backend()
    with pytest.raises(BackendError) as caught:
        nvidia.enrich(physical_gpu(A))
    assert (caught.value.address, caught.value.reason) == (A, "NvmlGpuIsLost")
    assert nvidia.enrich(physical_gpu(B)).nvidia.gpu_uuid == "GPU-b"  # type: ignore[union-attr]
    health = nvidia.health(physical_gpu(A))
    assert health.status is VerdictStatus.TRUE  # the health checks themselves still answer


def test_a_transient_error_on_an_optional_value_fails_the_card_rather_than_dropping_the_field(
    mocker: MockerFixture,
) -> None:
    install(mocker, {A: FakeCard(errors={"nvmlDeviceGetPowerManagementLimit": pynvml.NVML_ERROR_TIMEOUT})})
    with pytest.raises(BackendError, match="nvmlDeviceGetPowerManagementLimit"):
        backend().enrich(physical_gpu(A))


@pytest.mark.parametrize(
    ("card", "status", "reason"),
    [
        (FakeCard(), VerdictStatus.TRUE, "Healthy"),
        (
            FakeCard(retired_pages_pending=pynvml.NVML_FEATURE_ENABLED),
            VerdictStatus.FALSE,
            "RetiredPagesPending",
        ),
        (FakeCard(remapped_rows=(0, 3, 0, 1)), VerdictStatus.FALSE, "RowRemappingFailed"),
        (FakeCard(clocks_event_reasons=0x40 | 0x1), VerdictStatus.FALSE, "ThermalSlowdown"),
        (FakeCard(clocks_event_reasons=0x20), VerdictStatus.FALSE, "ThermalSlowdown"),
        (
            FakeCard(errors={"nvmlDeviceGetRemappedRows": pynvml.NVML_ERROR_GPU_IS_LOST}),
            VerdictStatus.FALSE,
            "GpuLost",
        ),
        (
            FakeCard(errors={"nvmlDeviceGetRetiredPagesPendingStatus": pynvml.NVML_ERROR_NOT_SUPPORTED}),
            VerdictStatus.TRUE,
            "Healthy",
        ),
        (
            FakeCard(errors={"nvmlDeviceGetCurrentClocksEventReasons": pynvml.NVML_ERROR_UNKNOWN}),
            VerdictStatus.UNKNOWN,
            "HealthCheckFailed",
        ),
        (
            FakeCard(
                remapped_rows=(0, 3, 0, 1),
                errors={"nvmlDeviceGetCurrentClocksEventReasons": pynvml.NVML_ERROR_UNKNOWN},
            ),
            VerdictStatus.FALSE,
            "RowRemappingFailed",
        ),
    ],
)
def test_health(mocker: MockerFixture, card: FakeCard, status: VerdictStatus, reason: str) -> None:
    install(mocker, {A: card})
    report = backend().health(physical_gpu(A))
    assert (report.status, report.reason) == (status, reason)
    assert report.message


def test_offer_inputs_carry_placements_and_engine_counts(mocker: MockerFixture) -> None:
    install(mocker, {A: FakeCard()})
    gpu = physical_gpu(A, labels={"gpu.deckhouse.io/device": "a100-sxm4-40gb"})
    card = backend().offer_inputs(gpu)
    assert (card.physical_gpu, card.pci_address, card.device) == ("node-1-0-10de-20b0", A, "a100-sxm4-40gb")
    assert (card.memory_mib, card.architecture, card.compute_capability) == (40960, "Ampere", "8.0")
    assert card.uuid == "GPU-1b724e78-eef5-4163-d43c-e4da15d41176"
    assert card.memory_slices == 8
    seven = card.mig_profiles[-1]
    assert (seven.name, seven.placements) == ("7g.40gb", (Placement(0, 8),))
    assert seven.engines == Engines(
        multiprocessors=98, copy_engines=7, decoders=5, encoders=0, jpeg_engines=1, ofa_engines=1
    )


def test_offer_inputs_of_a_card_without_mig_have_no_profiles(mocker: MockerFixture) -> None:
    install(mocker, {A: replace(L4)})
    card = backend().offer_inputs(physical_gpu(A, device_id="27b8"))
    assert card.mig_profiles == ()
    assert card.device == "l4"


SWITCH, GPU_END = pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH, pynvml.NVML_NVLINK_DEVICE_TYPE_GPU
SWITCHES = ("00000000:05:00.0", "00000000:06:00.0")
ZERO_CLUSTER = bytes(16)
COMPLETED = pynvml.NVML_GPU_FABRIC_STATE_COMPLETED


def _domain(mocker: MockerFixture, **cards: FakeCard) -> dict[str, str | None]:
    addresses = {"a": A, "b": B}
    install(mocker, {addresses[k]: c for k, c in cards.items()})
    return {k: backend().offer_inputs(physical_gpu(addresses[k])).nvlink_domain for k in cards}


def test_cards_whose_links_all_reach_the_same_nvswitches_share_an_nvlink_domain(
    mocker: MockerFixture,
) -> None:
    links = tuple((SWITCH, SWITCHES[i % 2]) for i in range(12))
    fabric = (ZERO_CLUSTER, 0, COMPLETED, 0)  # one board, no multi-node fabric: the links decide
    domains = _domain(mocker, a=FakeCard(nvlinks=links, fabric=fabric), b=FakeCard(nvlinks=links[::-1]))
    assert domains["a"] == domains["b"]
    assert str(domains["a"]).startswith("nvswitch-")
    assert len(str(domains["a"])) <= 64


def test_cards_reaching_different_switches_are_in_different_domains(mocker: MockerFixture) -> None:
    """A board split into fabric partitions: each partition's cards reach their own switches."""
    domains = _domain(
        mocker,
        a=FakeCard(nvlinks=((SWITCH, SWITCHES[0]),) * 6),
        b=FakeCard(nvlinks=((SWITCH, SWITCHES[1]),) * 6),
    )
    assert domains["a"] != domains["b"]


def test_a_multi_node_fabric_clique_names_the_domain(mocker: MockerFixture) -> None:
    cluster = bytes(range(1, 17))
    card = FakeCard(nvlinks=((SWITCH, SWITCHES[0]),), fabric=(cluster, 7, COMPLETED, 0))
    domains = _domain(mocker, a=card)
    assert domains["a"] == "01020304-0506-0708-090a-0b0c0d0e0f10.7"


@pytest.mark.parametrize(
    "card",
    [
        FakeCard(),  # no NVLink, no fabric (NOT_SUPPORTED)
        FakeCard(nvlinks=()),  # NVLink hardware, no active link
        FakeCard(nvlinks=((GPU_END, "00000000:d8:00.0"),) * 4),  # a bridge to one other card
        FakeCard(nvlinks=((SWITCH, SWITCHES[0]), (GPU_END, "00000000:d8:00.0"))),  # mixed: not claimed
    ],
)
def test_no_nvlink_domain_is_guessed(mocker: MockerFixture, card: FakeCard) -> None:
    assert _domain(mocker, a=card) == {"a": None}


def test_a_fabric_still_being_joined_names_nothing_and_the_links_decide(mocker: MockerFixture) -> None:
    joining = (bytes(range(16)), 1, pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS, 0)
    links = ((SWITCH, SWITCHES[0]),)
    domains = _domain(mocker, a=FakeCard(nvlinks=links, fabric=joining), b=FakeCard(nvlinks=links))
    assert domains["a"] == domains["b"]
    assert str(domains["a"]).startswith("nvswitch-")


def test_a_failing_nvlink_query_fails_the_card_rather_than_dropping_the_domain(mocker: MockerFixture) -> None:
    card = FakeCard(
        nvlinks=((SWITCH, SWITCHES[0]),), errors={"nvmlDeviceGetNvLinkState": pynvml.NVML_ERROR_UNKNOWN}
    )
    install(mocker, {A: card})
    with pytest.raises(BackendError, match="nvmlDeviceGetNvLinkState"):
        backend().offer_inputs(physical_gpu(A))


def test_discover_claims_nvidia_display_and_3d_controllers_only() -> None:
    def device(address: str, vendor: str, class_code: str) -> PciDevice:
        return PciDevice(address, vendor, "20b7", class_code, None, None, "nvidia", None, None, None)

    devices = [
        device("0000:05:00.0", "10de", "0680"),  # NVSwitch
        device("0000:3b:00.0", "10de", "0302"),
        device("0000:65:00.0", "10de", "0300"),
        device("0000:65:00.1", "10de", "0403"),  # HDMI audio of the card above
        device("0000:ce:00.0", "1002", "0302"),  # another vendor's GPU
    ]
    found = NvidiaBackend(nvml=PynvmlAdapter()).discover(devices)
    assert [d.address for d in found] == ["0000:3b:00.0", "0000:65:00.0"]


@pytest.mark.parametrize(
    ("value", "text"), [(13000, "13.0"), (12040, "12.4"), (12090, "12.9"), (11080, "11.8")]
)
def test_cuda_version_formatting(value: int, text: str) -> None:
    assert cuda_version(value) == text


@pytest.mark.parametrize(
    ("milliwatts", "expected"), [(165000, 165), (72000, 72), (350500, 350), (299600, 300)]
)
def test_milliwatts_to_watts(milliwatts: int, expected: int) -> None:
    assert watts(milliwatts) == expected
