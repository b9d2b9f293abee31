"""GPUClass model: the wire form, defaults and the rules tying deviceType and sharing together."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from api.gpu.v1alpha1 import (
    GPU_CLASS_KIND,
    DeviceType,
    GPUClass,
    GPUClassSpec,
    MigClass,
    NvidiaClass,
    Sharing,
    SharingStrategy,
    TimeSlicing,
    TimeSlicingInterval,
    Vendor,
)
from api.gpu.v1alpha1.gpuclass import DriverCapability
from pkg.backends.driver_files import CAPABILITIES


def mig_class() -> dict[str, Any]:
    return {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "GPUClass",
        "metadata": {"name": "nvidia-a30-mig-2g.12gb"},
        "spec": {
            "vendor": "Nvidia",
            "deviceType": "MIG",
            "requirements": {"minMemory": "12Gi", "minComputeCapability": "8.0"},
            "nvidia": {"mig": {"profile": "2g.12gb"}},
            "sharing": {"strategy": "Exclusive"},
            "selector": {"matchLabels": {"gpu.deckhouse.io/device": "a30-pcie"}},
            "names": ["node1-0-10de-20b7"],
            "extendedResourceName": "example.com/a30-2g",
        },
        "status": {
            "valid": True,
            "message": "ok",
            "generated": {
                "deviceClassName": "gpuclass.nvidia-a30-mig-2g.12gb",
                "extendedResourceName": "gpu.deckhouse.io/nvidia-a30-mig-2g.12gb",
            },
            "observedGeneration": 2,
        },
    }


def test_round_trip_keeps_the_wire_form_exactly() -> None:
    data = mig_class()
    parsed = GPUClass.from_api_dict(data)
    assert parsed.kind == GPU_CLASS_KIND
    assert parsed.spec.extended_resource_name == "example.com/a30-2g"
    assert parsed.to_api_dict() == data


def test_time_slicing_round_trips_on_a_physical_class() -> None:
    data = mig_class()
    data["spec"] = {
        "vendor": "Nvidia",
        "deviceType": "Physical",
        "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": "Short"}},
    }
    parsed = GPUClass.from_api_dict(data)
    assert parsed.spec.sharing is not None
    assert parsed.spec.sharing.time_slicing is not None
    assert parsed.spec.sharing.time_slicing.interval is TimeSlicingInterval.SHORT
    assert parsed.to_api_dict() == data


@pytest.mark.parametrize("strategy", ["TimeSlicing", "MPS"])
def test_shares_need_a_physical_device_type(strategy: str) -> None:
    data = mig_class()
    data["spec"]["sharing"] = {"strategy": strategy}
    with pytest.raises(
        ValidationError, match=rf"strategy {strategy} requires spec.deviceType Physical, not MIG"
    ):
        GPUClass.from_api_dict(data)


def test_nvidia_settings_need_the_nvidia_vendor() -> None:
    data = mig_class()
    data["spec"]["vendor"] = "Amd"
    with pytest.raises(ValidationError, match=r"spec.nvidia requires spec.vendor Nvidia, not Amd"):
        GPUClass.from_api_dict(data)


@pytest.mark.parametrize(
    ("labels", "error"),
    [
        ({"gpu.deckhouse.io/node": "n1"}, r"not gpu.deckhouse.io/node; use spec.names"),
        ({"team": "a"}, r"may name only gpu.deckhouse.io/vendor and gpu.deckhouse.io/device"),
        ({"gpu.deckhouse.io/device": "a30 pcie"}, r"should match pattern"),
    ],
)
def test_selector_names_only_labels_that_are_attributes(labels: dict[str, str], error: str) -> None:
    data = mig_class()
    data["spec"]["selector"] = {"matchLabels": labels}
    with pytest.raises(ValidationError, match=error):
        GPUClass.from_api_dict(data)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("names", ["Node_1"]),
        ("names", [f"n{i}" for i in range(65)]),
        ("extendedResourceName", "no-domain"),
        ("extendedResourceName", "example.com/" + "x" * 64),
    ],
)
def test_names_and_extended_resource_name_formats(field: str, value: object) -> None:
    data = mig_class()
    data["spec"][field] = value
    with pytest.raises(ValidationError, match=field):
        GPUClass.from_api_dict(data)


@pytest.mark.parametrize(
    ("profile", "accepted"), [("1g.6gb+me", True), ("7g.141gb", True), ('1g" || true', False)]
)
def test_mig_profile_format(profile: str, accepted: bool) -> None:
    data = mig_class()
    data["spec"]["nvidia"]["mig"]["profile"] = profile
    if accepted:
        assert GPUClass.from_api_dict(data).spec.nvidia is not None
    else:
        with pytest.raises(ValidationError, match=r"profile"):
            GPUClass.from_api_dict(data)


def test_sharing_defaults_to_exclusive_and_time_slicing_to_default() -> None:
    assert Sharing().strategy is SharingStrategy.EXCLUSIVE
    sharing = Sharing(strategy=SharingStrategy.TIME_SLICING, time_slicing=TimeSlicing())
    assert sharing.to_api_dict() == {"strategy": "TimeSlicing", "timeSlicing": {"interval": "Default"}}


def test_mig_device_type_requires_a_profile() -> None:
    with pytest.raises(
        ValidationError, match=r"spec.nvidia.mig.profile is required when spec.deviceType is MIG"
    ):
        GPUClassSpec(vendor=Vendor.NVIDIA, device_type=DeviceType.MIG)
    with pytest.raises(ValidationError, match=r"profile is required"):
        GPUClassSpec(vendor=Vendor.NVIDIA, device_type=DeviceType.MIG, nvidia=NvidiaClass())


def test_physical_device_type_forbids_a_profile() -> None:
    with pytest.raises(
        ValidationError, match=r"spec.nvidia.mig is allowed only when spec.deviceType is MIG, not Physical"
    ):
        GPUClassSpec(
            vendor=Vendor.NVIDIA,
            device_type=DeviceType.PHYSICAL,
            nvidia=NvidiaClass(mig=MigClass(profile="1g.6gb")),
        )
    assert GPUClassSpec(vendor=Vendor.NVIDIA, device_type=DeviceType.PHYSICAL).nvidia is None


def test_strategy_settings_must_match_the_strategy() -> None:
    with pytest.raises(ValidationError, match=r"sharing.timeSlicing requires strategy TimeSlicing, not MPS"):
        Sharing.from_api_dict({"strategy": "MPS", "timeSlicing": {}})
    with pytest.raises(ValidationError, match=r"sharing.mps requires strategy MPS, not Exclusive"):
        Sharing.from_api_dict({"mps": {"defaultActiveThreadPercentage": 50}})
    assert (
        Sharing.from_api_dict({"strategy": "MPS", "mps": {"defaultActiveThreadPercentage": 50}}).mps
        is not None
    )


@pytest.mark.parametrize("percentage", [0, 101])
def test_mps_thread_percentage_is_bounded(percentage: int) -> None:
    with pytest.raises(ValidationError, match=r"defaultActiveThreadPercentage"):
        Sharing.from_api_dict({"strategy": "MPS", "mps": {"defaultActiveThreadPercentage": percentage}})


@pytest.mark.parametrize(
    ("field", "value", "accepted"),
    [
        ("minComputeCapability", "8.0", True),
        ("minComputeCapability", "10.12", True),
        ("minComputeCapability", "8", False),
        ("minComputeCapability", "v8.0", False),
        ("minMemory", "12Gi", True),
        ("minMemory", "500M", True),
        ("minMemory", "1.5e3", True),
        ("minMemory", "12GB", False),
        ("minMemory", "lots", False),
    ],
)
def test_requirement_formats(field: str, value: str, accepted: bool) -> None:
    data = mig_class()
    data["spec"]["requirements"] = {field: value}
    if accepted:
        assert GPUClass.from_api_dict(data).to_api_dict()["spec"]["requirements"] == {field: value}
    else:
        with pytest.raises(ValidationError, match=field):
            GPUClass.from_api_dict(data)


def test_spec_is_required() -> None:
    with pytest.raises(ValidationError, match=r"spec"):
        GPUClass.from_api_dict({"metadata": {"name": "x"}})


def test_driver_capabilities_are_named_from_nvidias_list_and_need_the_nvidia_vendor() -> None:
    data = mig_class()
    data["spec"]["driverCapabilities"] = ["compute", "utility"]
    assert GPUClass.from_api_dict(data).to_api_dict() == data
    data["spec"]["driverCapabilities"] = ["compute", "raytracing"]
    with pytest.raises(ValidationError, match=r"driverCapabilities.1"):
        GPUClass.from_api_dict(data)
    data["spec"]["driverCapabilities"] = []
    with pytest.raises(ValidationError, match=r"driverCapabilities"):
        GPUClass.from_api_dict(data)
    data["spec"]["driverCapabilities"] = ["video"]
    data["spec"]["vendor"] = "Amd"
    del data["spec"]["nvidia"]
    data["spec"]["deviceType"] = "Physical"
    with pytest.raises(
        ValidationError, match=r"spec.driverCapabilities requires spec.vendor Nvidia, not Amd"
    ):
        GPUClass.from_api_dict(data)


def test_the_api_names_the_same_driver_capabilities_as_the_driver_discovery() -> None:
    assert tuple(DriverCapability) == CAPABILITIES
