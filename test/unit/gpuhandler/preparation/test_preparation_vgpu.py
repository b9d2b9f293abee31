"""vGPUs in Prepare and Unprepare, on a simulated vGPU host (fixture sysfs + simulated kernel).

The real pipelines create and remove mediated devices through the real sysfs writes;
:mod:`pkg.backends.simulated.mdev_kernel` makes the mdev, its IOMMU group and ``/dev/vfio/<group>``
as the kernel would, and refuses as it would. Each test checks the places that must agree: the
mdevs in sysfs, the checkpoint, the CDI spec and the device metadata.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import V1Device, V1DeviceCapacity
from pytest_mock import MockerFixture
from testutil.unit.gpuhandler.preparation.preparation_fakes import (
    POOL,
    Node,
    attrs,
    kill_at,
    node,
    prepare_failures,
)

from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.preparation.checkpoint import PreparePhase
from pkg.gpuhandler.preparation.kinds import VFIO_ANNOTATION
from pkg.gpuhandler.preparation.kinds.vm.files import (
    MDEV_UUID,
    METADATA_ROOT,
    PCI_BUS_ID,
    read_device_metadata,
)
from pkg.gpuhandler.preparation.kinds.vm.records import vgpu_of
from pkg.gpuhandler.preparation.kinds.vm.vgpu import VgpuKind
from pkg.gpuhandler.preparation.setup import PREPARE_POINTS, UNPREPARE_POINTS
from pkg.hardware.mdev import MdevHost, mdev_types, new_mdev_uuid

T4 = "0000:3b:00.0"
ASK = {VFIO_ANNOTATION: "true"}


def vgpu_offer(
    card: str = T4, *, type_id: str = "nvidia-232", name: str = "GRID T4-4Q", index: int = 0
) -> V1Device:
    base = "gpu-" + card.replace(":", "-").replace(".", "-")
    number = type_id.rsplit("-", 1)[-1]
    return V1Device(
        name=f"{base}-vgpu-{number}-{index}",
        attributes=attrs(
            deviceType="VGPU", pciAddress=card, sharingStrategy="Exclusive", mdevType=type_id, vgpuType=name
        ),
        capacity={"memory": V1DeviceCapacity(value="4Gi")},
    )


def _claim(n: Node, device: Any, *, annotations: dict[str, str] | None = None, name: str = "vm") -> ClaimRef:
    pod = n.pods.add(f"virt-launcher-{name}", annotations if annotations is not None else ASK)
    return n.claims.allocate(name, [device], reserved_for=[pod])


def _mdevs(n: Node) -> list[str]:
    folder = n.host.root / "bus" / "mdev" / "devices"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def _available(n: Node, type_id: str = "nvidia-232") -> int:
    return {t.type_id: t.available_instances for t in mdev_types(n.host.root, T4)}[type_id]


def _nothing_left(n: Node) -> bool:
    vm_dir = n.container.settings().vm_dir
    return (
        _mdevs(n) == []
        and _available(n) == 4
        and not n.container.store().load().claims
        and not n.container.cdi().claims()
        and not (vm_dir.exists() and any(vm_dir.iterdir()))
    )


def test_a_vgpu_is_created_with_the_recorded_uuid_handed_over_and_removed(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="t4-vgpu")
    [offer] = n.offers.publish(vgpu_offer())
    claim = _claim(n, offer)

    outcome = n.driver.prepare([claim])[claim.uid]

    assert outcome.error == ""
    record = n.container.store().load().claims[claim.uid]
    assert record.state is PreparePhase.PREPARE_COMPLETED
    vgpu = vgpu_of(record.devices[0])
    assert vgpu is not None
    assert vgpu.mdev_type == "nvidia-232"
    assert _mdevs(n) == [vgpu.mdev_uuid]  # the mdev is the recorded one
    assert MdevHost(n.host.root).parent_and_type(vgpu.mdev_uuid) == (T4, "nvidia-232")
    assert _available(n) == 3
    assert _available(n, "nvidia-233") == 0
    stored = json.loads(n.container.store().file.path.read_text())
    assert stored["minReaderVersion"] == VgpuKind.reader_version  # an older reader would leave the mdev

    group = MdevHost(n.host.root).iommu_group(vgpu.mdev_uuid)
    [device] = json.loads(n.container.cdi().path_of(claim.uid).read_text())["devices"]
    edits = device["containerEdits"]
    assert edits["deviceNodes"] == [
        {"path": "/dev/vfio/vfio", "hostPath": str(n.host.dev / "vfio" / "vfio")},
        {"path": f"/dev/vfio/{group}", "hostPath": str(n.host.dev / "vfio" / group)},
    ]
    assert (n.host.dev / "vfio" / group).is_char_device()
    assert "env" not in edits  # no NVIDIA device node, no driver files: the VM's guest drives it
    assert len(record.devices[0].cdi_device_ids) == 1
    mounts = {m["containerPath"]: m for m in edits["mounts"]}
    kep = f"{METADATA_ROOT}/resourceclaims/vm/gpu/gpu.deckhouse.io-metadata.json"
    assert kep in mounts
    assert not any("/vfio/" in path for path in mounts)  # no QEMU hook input for a vGPU
    [request] = json.loads(Path(mounts[kep]["hostPath"]).read_text())["requests"]
    [meta_device] = request["devices"]
    assert (meta_device["pool"], meta_device["name"]) == (POOL, offer.name)
    assert meta_device["attributes"][MDEV_UUID] == {"string": vgpu.mdev_uuid}
    assert PCI_BUS_ID not in meta_device["attributes"]
    assert meta_device["attributes"]["gpu.deckhouse.io/deviceType"] == {"string": "VGPU"}
    [read] = read_device_metadata(Path(mounts[kep]["hostPath"]).read_text())  # as a launcher reads it
    assert (read.request, read.name, read.mdev_uuid, read.pci_bus_id) == (
        "gpu",
        offer.name,
        vgpu.mdev_uuid,
        None,
    )

    assert n.driver.prepare([claim])[claim.uid].error == ""  # idempotent: the recorded answer
    assert _mdevs(n) == [vgpu.mdev_uuid]
    assert n.driver.unprepare([claim]) == {claim.uid: ""}
    assert _nothing_left(n)
    assert not (n.host.dev / "vfio" / group).exists()
    assert n.driver.unprepare([claim]) == {claim.uid: ""}  # idempotent


def test_two_vgpus_of_one_type_share_a_card(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path, fixture="t4-vgpu")
    first, second = n.offers.publish(vgpu_offer(index=0), vgpu_offer(index=1))
    a, b = _claim(n, first, name="vm-a"), _claim(n, second, name="vm-b")
    outcomes = n.driver.prepare([a, b])
    assert [outcomes[a.uid].error, outcomes[b.uid].error] == ["", ""]
    assert len(_mdevs(n)) == 2
    assert _available(n) == 2


def test_a_vgpu_for_a_plain_container_is_refused_and_nothing_is_made(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="t4-vgpu")
    [offer] = n.offers.publish(vgpu_offer())
    claim = _claim(n, offer, annotations={})
    before = prepare_failures("VgpuNotAllowed")

    error = n.driver.prepare([claim])[claim.uid].error

    assert "only a VM can use" in error
    assert prepare_failures("VgpuNotAllowed") == before + 1
    assert _nothing_left(n)


def test_a_type_the_card_cannot_take_next_to_its_vgpus_is_refused(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="t4-vgpu")
    q4, q8 = n.offers.publish(vgpu_offer(), vgpu_offer(type_id="nvidia-233", name="GRID T4-8Q"))
    first, second = _claim(n, q4, name="vm-a"), _claim(n, q8, name="vm-b")
    assert n.driver.prepare([first])[first.uid].error == ""
    before = prepare_failures("VgpuTypeConflict")

    error = n.driver.prepare([second])[second.uid].error

    assert "cannot take another vGPU of type nvidia-233" in error
    assert prepare_failures("VgpuTypeConflict") == before + 1
    assert len(_mdevs(n)) == 1  # the first claim's, untouched
    assert second.uid not in n.container.store().load().claims


# -- kill -9 at every crash point ----------------------------------------------------------------------------


@pytest.mark.parametrize("step", PREPARE_POINTS)
def test_a_crash_after_each_prepare_step_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="t4-vgpu")
    [offer] = n.offers.publish(vgpu_offer())
    claim = _claim(n, offer)
    kill_at(n, monkeypatch, f"prepare:{step}:after", claim)

    restarted = n.another_instance()
    restarted.reconcile(cards=[T4])
    if step != "record-completed":  # a completed record is kept: its claim still exists
        assert _nothing_left(restarted)
    assert restarted.driver.prepare([claim])[claim.uid].error == ""  # the kubelet's retry
    [record] = restarted.container.store().load().claims.values()
    assert (vgpu := vgpu_of(record.devices[0])) is not None
    assert _mdevs(restarted) == [vgpu.mdev_uuid]

    assert restarted.driver.unprepare([claim]) == {claim.uid: ""}
    assert _nothing_left(restarted)


def test_a_crash_between_create_and_the_next_step_leaves_an_owned_mdev(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="t4-vgpu")
    [offer] = n.offers.publish(vgpu_offer())
    claim = _claim(n, offer)
    kill_at(n, monkeypatch, "prepare:prepare-devices:after", claim)
    [record] = n.container.store().load().claims.values()
    assert record.state is PreparePhase.PREPARE_STARTED
    assert (vgpu := vgpu_of(record.devices[0])) is not None
    assert _mdevs(n) == [vgpu.mdev_uuid]  # recorded before it was made


@pytest.mark.parametrize("step", UNPREPARE_POINTS)
def test_a_crash_after_each_unprepare_step_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="t4-vgpu")
    [offer] = n.offers.publish(vgpu_offer())
    claim = _claim(n, offer)
    assert n.driver.prepare([claim])[claim.uid].error == ""
    kill_at(n, monkeypatch, f"unprepare:{step}:after", claim)

    restarted = n.another_instance()
    restarted.reconcile(cards=[T4])
    assert restarted.driver.unprepare([claim]) == {claim.uid: ""}  # the kubelet's retry
    assert _nothing_left(restarted)


def test_startup_removes_the_mdevs_of_deleted_claims_and_never_one_it_did_not_make(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="t4-vgpu")
    foreign = new_mdev_uuid()
    MdevHost(n.host.root, kernel=n.backend.sysfs_kernel).create(T4, "nvidia-232", foreign)
    [offer] = n.offers.publish(vgpu_offer())
    claim = _claim(n, offer)
    assert n.driver.prepare([claim])[claim.uid].error == ""
    n.claims.delete(claim)

    report = n.another_instance().reconcile(cards=[T4])

    assert report.unprepared == [claim.uid]
    assert _mdevs(n) == [foreign]  # someone else's mdev stays


def test_the_metadata_reader_refuses_other_documents() -> None:
    with pytest.raises(ValueError, match="DeviceMetadata document"):
        read_device_metadata('{"apiVersion": "v1", "kind": "ConfigMap"}')


def test_a_vgpu_offer_without_its_mdev_type_is_an_invalid_allocation(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="t4-vgpu")
    broken = vgpu_offer()
    assert broken.attributes is not None
    del broken.attributes["gpu.deckhouse.io/mdevType"]
    [offer] = n.offers.publish(broken)
    claim = _claim(n, offer)

    error = n.driver.prepare([claim])[claim.uid].error

    assert "has no str attribute gpu.deckhouse.io/mdevType" in error
    assert _nothing_left(n)
