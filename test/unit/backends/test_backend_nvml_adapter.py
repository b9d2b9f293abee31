"""The pynvml adapter against a mocked pynvml: lifecycle, conversions, errors confined to one card."""

from __future__ import annotations

from dataclasses import replace

import pynvml
import pytest
from pytest_mock import MockerFixture
from testutil.unit.backends.backend_fakes import FakeCard, install

from pkg.backends.nvidia.nvml import PynvmlAdapter
from pkg.backends.nvidia.nvml_port import (
    ComputeInstanceInfo,
    GpuInstanceInfo,
    GpuInstanceProfileInfo,
    NvmlError,
    NvmlReturn,
    RemappedRows,
)

A, B = "0000:3b:00.0", "0000:d8:00.0"


def test_initialises_once_lazily_and_shuts_down_once(mocker: MockerFixture) -> None:
    mocks = install(mocker, {A: FakeCard()})
    nvml = PynvmlAdapter()
    mocks["nvmlInit"].assert_not_called()
    assert nvml.driver_version() == "580.76.05"
    assert nvml.name(A) == "NVIDIA A100-SXM4-40GB"
    assert mocks["nvmlInit"].call_count == 1
    nvml.close()
    nvml.close()
    assert mocks["nvmlShutdown"].call_count == 1


def test_a_failed_init_is_reported_and_retried_by_the_next_call(mocker: MockerFixture) -> None:
    mocks = install(mocker, {A: FakeCard()}, init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    nvml = PynvmlAdapter()
    with pytest.raises(NvmlError) as caught:
        nvml.name(A)
    assert caught.value.call == "nvmlInit"
    assert caught.value.code == NvmlReturn.DRIVER_NOT_LOADED
    assert caught.value.reason == "NvmlDriverNotLoaded"
    mocks["nvmlInit"].side_effect = None  # the driver came up
    assert nvml.name(A) == "NVIDIA A100-SXM4-40GB"
    nvml.close()
    mocks["nvmlShutdown"].assert_called_once()


def test_an_error_on_one_card_names_it_and_the_other_card_is_served(mocker: MockerFixture) -> None:
    lost = FakeCard(errors={"nvmlDeviceGetUUID": pynvml.NVML_ERROR_GPU_IS_LOST})
    install(mocker, {A: lost, B: FakeCard(uuid="GPU-other")})
    nvml = PynvmlAdapter()
    with pytest.raises(NvmlError) as caught:
        nvml.uuid(A)
    assert (caught.value.call, caught.value.address, caught.value.code) == (
        "nvmlDeviceGetUUID",
        A,
        NvmlReturn.GPU_IS_LOST,
    )
    assert A in str(caught.value)
    assert nvml.uuid(B) == "GPU-other"
    with pytest.raises(NvmlError) as missing:
        nvml.name("0000:ff:00.0")
    assert missing.value.code == NvmlReturn.NOT_FOUND


def test_values_keep_nvml_units(mocker: MockerFixture) -> None:
    install(mocker, {A: FakeCard(remapped_rows=(2, 1, 0, 1))}, cuda=12040)
    nvml = PynvmlAdapter()
    assert nvml.cuda_driver_version() == 12040
    assert nvml.memory_total_bytes(A) == 40960 * 1024 * 1024
    assert nvml.cuda_compute_capability(A) == (8, 0)
    assert nvml.architecture(A) == pynvml.NVML_DEVICE_ARCH_AMPERE
    assert nvml.board_part_number(A) == "692-2G506-0200-002"
    assert nvml.power_limit_constraints_mw(A) == (100000, 400000)
    assert nvml.power_limit_mw(A) == 400000
    assert nvml.enforced_power_limit_mw(A) == 350500
    assert nvml.mig_mode(A) == (0, 0)
    assert nvml.retired_pages_pending(A) is False
    assert nvml.remapped_rows(A) == RemappedRows(correctable=2, uncorrectable=1, pending=False, failure=True)
    assert nvml.clocks_event_reasons(A) == 0x1


def test_profile_info_drops_the_mig_prefix_and_placements_come_from_the_ctypes_array(
    mocker: MockerFixture,
) -> None:
    install(mocker, {A: FakeCard()})
    nvml = PynvmlAdapter()
    info = nvml.gpu_instance_profile_info(A, 9)  # NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2
    assert info == GpuInstanceProfileInfo(
        id=15,
        name="1g.10gb",
        slice_count=1,
        instance_count=4,
        memory_mib=9984,
        multiprocessor_count=14,
        copy_engine_count=1,
        decoder_count=1,
        encoder_count=0,
        jpeg_count=0,
        ofa_count=0,
    )
    assert nvml.gpu_instance_possible_placements(A, 15) == [(0, 2), (2, 2), (4, 2), (6, 2)]
    assert nvml.gpu_instance_possible_placements(A, 0) == [(0, 8)]
    with pytest.raises(NvmlError) as caught:
        nvml.gpu_instance_profile_info(A, 13)  # no "-me" profile on an A100
    assert caught.value.code == NvmlReturn.INVALID_ARGUMENT


def test_a_card_without_mig_answers_not_supported(mocker: MockerFixture) -> None:
    install(mocker, {A: replace(FakeCard(), mig_mode=None, profiles=())})
    with pytest.raises(NvmlError) as caught:
        PynvmlAdapter().mig_mode(A)
    assert caught.value.not_supported


# -- the calls NodePrepare makes ------------------------------------------------------------------


def test_mig_mode_instances_and_uuids_through_the_library(mocker: MockerFixture) -> None:
    card = FakeCard(minor=3)
    install(mocker, {A: card})
    nvml = PynvmlAdapter()

    nvml.set_mig_mode(A, pynvml.NVML_DEVICE_MIG_ENABLE)
    gi = nvml.create_gpu_instance(A, profile_id=15, start=2, size=2)
    ci = nvml.create_compute_instance(A, gi.id)

    assert nvml.mig_mode(A) == (1, 1)
    assert nvml.minor_number(A) == 3
    assert nvml.gpu_instances(A) == [GpuInstanceInfo(id=gi.id, profile_id=15, start=2, size=2)]
    # The compute instance spans the whole 2-slice GPU instance: the 2-slice CI profile, not 1-slice.
    assert nvml.compute_instances(A, gi.id) == [ComputeInstanceInfo(id=ci.id, profile_id=1)]
    assert nvml.mig_device_uuid(A, gi.id, ci.id) == f"MIG-fake-{gi.id}-0"
    with pytest.raises(NvmlError) as caught:
        nvml.create_gpu_instance(A, profile_id=15, start=2, size=2)
    assert caught.value.code == NvmlReturn.INSUFFICIENT_RESOURCES

    nvml.destroy_compute_instance(A, gi.id, ci.id)
    nvml.destroy_gpu_instance(A, gi.id)
    assert nvml.gpu_instances(A) == []
    assert card.gpu_instances == []


def test_a_missing_mig_device_and_a_busy_card_keep_their_nvml_codes(mocker: MockerFixture) -> None:
    install(mocker, {A: FakeCard(compute_pids=(11, 12), graphics_pids=(12, 13))})
    nvml = PynvmlAdapter()

    assert nvml.running_processes(A) == [11, 12, 13]
    with pytest.raises(NvmlError) as busy:
        nvml.set_mig_mode(A, pynvml.NVML_DEVICE_MIG_ENABLE)
    assert (busy.value.code, busy.value.call) == (NvmlReturn.IN_USE, "nvmlDeviceSetMigMode")
    with pytest.raises(NvmlError) as missing:
        nvml.mig_device_uuid(A, 4, 0)
    assert missing.value.code == NvmlReturn.NOT_FOUND
    with pytest.raises(NvmlError) as gone:
        nvml.destroy_gpu_instance(A, 9)
    assert (gone.value.code, gone.value.address) == (NvmlReturn.NOT_FOUND, A)
