"""Mapping sysfs + pci.ids + host facts to the agent's fields, and change detection on them."""

from __future__ import annotations

from pathlib import Path

from kubernetes.client import V1Condition
from testutil.unit.nodeagent.nodeagent_fakes import LABEL_VALUE_PATTERN, T0, device, host

from api.gpu.v1alpha1 import (
    Capabilities,
    CurrentState,
    DriverType,
    NvidiaState,
    PhysicalGPUStatus,
    Vendor,
)
from pkg.hardware.pciids import PciIds
from pkg.inventory.desired import (
    LABEL_BAREMETAL,
    LABEL_KERNEL_VERSION,
    LABEL_OS_ID,
    LABEL_OS_VERSION,
    device_label,
    gpu_labels,
    gpu_status,
    label_changes,
    node_info,
    node_labels,
    owned_status,
    pci_info,
    stale_vendor_state,
    status_differs,
)


def test_pci_info_takes_names_from_pci_ids(pci_ids: PciIds) -> None:
    info = pci_info(device(), pci_ids)
    assert info.to_api_dict() == {
        "address": "0000:3b:00.0",
        "class": {"code": "0302", "name": "3D controller"},
        "vendor": {"id": "10de", "name": "NVIDIA Corporation"},
        "device": {"id": "20b7", "name": "GA100GL [A30 PCIe]"},
    }
    assert device_label(info) == "a30-pcie"


def test_names_missing_from_pci_ids_are_left_out(pci_ids: PciIds, tmp_path: Path) -> None:
    info = pci_info(device(device_id="ffff"), pci_ids)
    assert "name" not in info.to_api_dict()["device"]
    assert device_label(info) == "ffff"  # the device label falls back to the ID
    no_file = pci_info(device(), PciIds.load(tmp_path / "missing-pci.ids"))
    assert no_file.to_api_dict()["vendor"] == {"id": "10de"}
    assert no_file.to_api_dict()["class"] == {"code": "0302"}


def test_unreadable_host_sources_leave_fields_out() -> None:
    info = node_info(
        "n1", host(os_id=None, os_version=None, os_name=None, kernel_release=None, bare_metal=False)
    )
    assert info.to_api_dict() == {"nodeName": "n1", "bareMetal": False}
    partial = node_info("n1", host(os_name=None))
    assert partial.to_api_dict()["os"] == {"id": "ubuntu", "version": "22.04"}


def test_driver_type_absent_without_a_driver(pci_ids: PciIds) -> None:
    status = gpu_status(info=pci_info(device(), pci_ids), node=node_info("n1", host()), driver_type=None)
    assert "currentState" not in status.to_api_dict()


def _stored(desired: PhysicalGPUStatus, **others: object) -> PhysicalGPUStatus:
    return PhysicalGPUStatus.model_validate(desired.to_api_dict() | others)


def test_fields_of_other_writers_are_not_differences(pci_ids: PciIds) -> None:
    desired = gpu_status(
        info=pci_info(device(), pci_ids), node=node_info("n1", host()), driver_type=DriverType.NVIDIA
    )
    stored = desired.model_copy(deep=True)
    stored.conditions = [
        V1Condition(type="DriverReady", status="True", reason="Ok", message="", last_transition_time=T0)
    ]
    stored.capabilities = Capabilities(vendor=Vendor.NVIDIA, product_name="NVIDIA A30")
    stored.current_state = CurrentState(
        driver_type=DriverType.NVIDIA, nvidia=NvidiaState(driver_version="580")
    )
    stored.observed_generation = 4
    assert not status_differs(stored, desired)
    assert owned_status(stored).to_api_dict() == desired.to_api_dict()


def test_changes_in_owned_fields_are_differences(pci_ids: PciIds) -> None:
    desired = gpu_status(
        info=pci_info(device(), pci_ids), node=node_info("n1", host()), driver_type=DriverType.VFIO
    )
    assert status_differs(None, desired)
    nvidia = gpu_status(info=desired.pci_info, node=desired.node_info, driver_type=DriverType.NVIDIA)
    assert status_differs(nvidia, desired)
    old_kernel = gpu_status(
        info=desired.pci_info, node=node_info("n1", host(kernel_release="5.4")), driver_type=DriverType.VFIO
    )
    assert status_differs(old_kernel, desired)


def test_an_empty_stored_current_state_equals_none(pci_ids: PciIds) -> None:
    desired = gpu_status(info=pci_info(device(), pci_ids), node=node_info("n1", host()), driver_type=None)
    stored = _stored(desired, currentState={})  # what the server keeps after driverType is dropped
    assert not status_differs(stored, desired)


def test_stale_vendor_state_must_go_when_the_driver_changes(pci_ids: PciIds) -> None:
    info, node = pci_info(device(), pci_ids), node_info("n1", host())
    stored = gpu_status(info=info, node=node, driver_type=DriverType.NVIDIA)
    stored.current_state = CurrentState(
        driver_type=DriverType.NVIDIA, nvidia=NvidiaState(driver_version="580")
    )
    assert stale_vendor_state(stored, gpu_status(info=info, node=node, driver_type=DriverType.VFIO)) == [
        "nvidia"
    ]
    assert stale_vendor_state(stored, gpu_status(info=info, node=node, driver_type=None)) == ["nvidia"]
    assert stale_vendor_state(stored, gpu_status(info=info, node=node, driver_type=DriverType.NVIDIA)) == []
    assert stale_vendor_state(None, gpu_status(info=info, node=node, driver_type=None)) == []


def test_gpu_labels() -> None:
    labels = gpu_labels(node_label="n1", vendor="nvidia", device="a30-pcie", address="0000:3b:00.0")
    assert labels == {
        "gpu.deckhouse.io/node": "n1",
        "gpu.deckhouse.io/vendor": "nvidia",
        "gpu.deckhouse.io/device": "a30-pcie",
        "gpu.deckhouse.io/pci-address": "0000-3b-00.0",
    }
    assert all(LABEL_VALUE_PATTERN.match(value) for value in labels.values())


def test_node_labels_map_host_facts_to_valid_values() -> None:
    labels = node_labels(
        host(os_id="rhel", os_version="9.4", kernel_release="5.14.0-427.13.1.el9_4.x86_64+debug")
    )
    assert labels == {
        LABEL_BAREMETAL: "true",
        LABEL_OS_ID: "rhel",
        LABEL_OS_VERSION: "9.4",
        LABEL_KERNEL_VERSION: "5.14.0-427.13.1.el9_4.x86_64-debug",
    }
    assert all(LABEL_VALUE_PATTERN.match(value) for value in labels.values() if value)


def test_bare_metal_false_and_unreadable_sources_remove_labels() -> None:
    labels = node_labels(host(bare_metal=False, os_id=None, os_version=None, kernel_release=None))
    assert labels == {
        LABEL_BAREMETAL: "false",
        LABEL_OS_ID: None,
        LABEL_OS_VERSION: None,
        LABEL_KERNEL_VERSION: None,
    }


def test_a_long_kernel_release_is_shortened_deterministically() -> None:
    release = "6.8.0-" + "x" * 80
    first, second = node_labels(host(kernel_release=release)), node_labels(host(kernel_release=release))
    value = first[LABEL_KERNEL_VERSION]
    assert value == second[LABEL_KERNEL_VERSION]
    assert value is not None
    assert len(value) <= 63
    assert LABEL_VALUE_PATTERN.match(value)


def test_label_changes_lists_only_differences() -> None:
    current = {"a": "1", "b": "2", "other": "x"}
    assert label_changes(current, {"a": "1", "b": "3", "c": None}) == {"b": "3"}
    assert label_changes(current, {"a": None}) == {"a": None}
    assert label_changes(None, {"a": "1"}) == {"a": "1"}
