"""VFIO passthrough in Prepare and Unprepare, on simulated hosts (fixture sysfs + simulated kernel).

The real pipelines bind through the real sysfs writes; :mod:`pkg.backends.simulated.pci_kernel`
moves the driver links and makes ``/dev/vfio/<group>`` as the kernel would. Each test checks the
promise in the places that must agree: the sysfs tree (who is bound, the override), ``/dev/vfio``,
the CDI spec, the VM files and the checkpoint.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture
from testutil.k8s_fields import present
from testutil.unit.gpuhandler.preparation.preparation_fakes import (
    A30,
    POOL,
    Node,
    kill_at,
    mig_offer,
    node,
    prepare_failures,
    whole_offer,
)

from pkg.framework.kubeletplugin.types import ClaimRef
from pkg.gpuhandler.preparation.checkpoint import PreparePhase
from pkg.gpuhandler.preparation.kinds import VFIO_ANNOTATION
from pkg.gpuhandler.preparation.kinds.vm.files import (
    HOOK_ROOT,
    METADATA_ROOT,
    PCI_BUS_ID,
    VEP10_METADATA_ROOT,
)
from pkg.gpuhandler.preparation.kinds.vm.records import vfio_of
from pkg.gpuhandler.preparation.kinds.vm.vfio import VfioKind
from pkg.gpuhandler.preparation.setup import PREPARE_POINTS, UNPREPARE_POINTS

RTX = "0000:65:00.0"
RTX_AUDIO = "0000:65:00.1"
ASK = {VFIO_ANNOTATION: "true"}


def _driver(n: Node, address: str) -> str | None:
    link = n.host.root / "bus" / "pci" / "devices" / address / "driver"
    return os.path.basename(os.readlink(link)) if link.is_symlink() else None


def _override(n: Node, address: str) -> str:
    return (n.host.root / "bus" / "pci" / "devices" / address / "driver_override").read_text().strip()


def _vfio_claim(
    n: Node, device: Any, *, annotations: dict[str, str] | None = None, name: str = "vm"
) -> ClaimRef:
    pod = n.pods.add(f"virt-launcher-{name}", annotations if annotations is not None else ASK)
    return n.claims.allocate(name, [device], reserved_for=[pod])


def _spec(n: Node, claim: ClaimRef) -> dict[str, Any]:
    return dict(json.loads(n.container.cdi().path_of(claim.uid).read_text()))


def _back_to_original(n: Node) -> bool:
    return (
        _driver(n, RTX) == "nvidia"
        and _driver(n, RTX_AUDIO) == "snd_hda_intel"
        and _override(n, RTX) in ("", "(null)")
        and _override(n, RTX_AUDIO) in ("", "(null)")
        and not (n.host.dev / "vfio" / "28").exists()
    )


def _nothing_left(n: Node) -> bool:
    vm_dir = n.container.settings().vm_dir
    return (
        _back_to_original(n)
        and not n.container.store().load().claims
        and not n.container.cdi().claims()
        and not (vm_dir.exists() and any(vm_dir.iterdir()))
    )


def test_a_vfio_claim_binds_the_whole_iommu_group_and_unprepare_gives_it_back(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="rtx-workstation")
    [offer] = n.offers.publish(whole_offer(RTX))
    claim = _vfio_claim(n, offer)

    outcome = n.driver.prepare([claim])[claim.uid]

    assert outcome.error == ""
    assert (_driver(n, RTX), _driver(n, RTX_AUDIO)) == ("vfio-pci", "vfio-pci")  # the HDMI audio too
    assert _override(n, RTX) == "vfio-pci"
    assert (n.host.dev / "vfio" / "28").is_char_device()
    record = n.container.store().load().claims[claim.uid]
    assert record.state is PreparePhase.PREPARE_COMPLETED
    vfio = vfio_of(record.devices[0])
    assert vfio is not None
    assert vfio.iommu_group == "28"
    assert [(f.address, f.driver) for f in vfio.functions] == [(RTX, "nvidia"), (RTX_AUDIO, "snd_hda_intel")]
    stored = json.loads(n.container.store().file.path.read_text())
    assert stored["minReaderVersion"] == VfioKind.reader_version  # an older reader would not rebind

    [device] = _spec(n, claim)["devices"]
    edits = device["containerEdits"]
    assert edits["deviceNodes"] == [
        {"path": "/dev/vfio/vfio", "hostPath": str(n.host.dev / "vfio" / "vfio")},
        {"path": "/dev/vfio/28", "hostPath": str(n.host.dev / "vfio" / "28")},
    ]
    assert "env" not in edits  # no NVIDIA device: the card is not on the nvidia driver
    mounts = {m["containerPath"]: m for m in edits["mounts"]}
    kep = f"{METADATA_ROOT}/resourceclaims/vm/gpu/gpu.deckhouse.io-metadata.json"
    assert set(mounts) == {
        kep,
        f"{VEP10_METADATA_ROOT}/gpu.deckhouse.io/vm/metadata.json",
        f"{HOOK_ROOT}/vm.json",
    }
    assert all("ro" in m["options"] for m in mounts.values())
    metadata = json.loads(Path(mounts[kep]["hostPath"]).read_text())
    assert metadata["apiVersion"] == "metadata.resource.k8s.io/v1alpha1"
    assert metadata["kind"] == "DeviceMetadata"
    assert metadata["metadata"]["uid"] == claim.uid
    [request] = metadata["requests"]
    [meta_device] = request["devices"]
    assert (request["name"], meta_device["pool"], meta_device["name"]) == ("gpu", POOL, offer.name)
    assert meta_device["attributes"][PCI_BUS_ID] == {"string": RTX}
    assert meta_device["attributes"]["gpu.deckhouse.io/deviceType"] == {"string": "Physical"}
    hook = json.loads(Path(mounts[f"{HOOK_ROOT}/vm.json"]["hostPath"]).read_text())
    assert hook["kind"] == "VfioHookInput"
    assert hook["onRelease"] == "KeepBound"
    [hooked] = hook["devices"]
    assert (hooked["pciBusID"], hooked["iommuGroup"], hooked["vfioDevice"]) == (RTX, "28", "/dev/vfio/28")
    assert [f["originalDriver"] for f in hooked["functions"]] == ["nvidia", "snd_hda_intel"]
    assert RTX in n.container.holds().cards()  # allocated, not broken: the enrichment leaves it be

    assert n.driver.unprepare([claim]) == {claim.uid: ""}
    assert _nothing_left(n)
    assert n.container.holds().cards() == frozenset()
    assert n.driver.unprepare([claim]) == {claim.uid: ""}  # idempotent


def test_the_card_is_held_before_it_leaves_its_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="rtx-workstation")
    [offer] = n.offers.publish(whole_offer(RTX))
    claim = _vfio_claim(n, offer)
    binding = n.container.binding()
    bind = binding.bind
    held_at_bind: list[bool] = []

    def watched(address: str, driver: str) -> None:
        held_at_bind.append(RTX in n.container.holds().cards())
        bind(address, driver)

    monkeypatch.setattr(binding, "bind", watched)

    assert n.driver.prepare([claim])[claim.uid].error == ""
    assert held_at_bind == [True, True]  # the card and its audio function: both after the hold


def test_a_pod_without_the_annotation_gets_the_card_on_its_driver(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="rtx-workstation")
    [offer] = n.offers.publish(whole_offer(RTX))
    claim = _vfio_claim(n, offer, annotations={VFIO_ANNOTATION: "false"})

    assert n.driver.prepare([claim])[claim.uid].error == ""

    assert _driver(n, RTX) == "nvidia"
    env = _spec(n, claim)["devices"][0]["containerEdits"]["env"]
    assert env[0].startswith("NVIDIA_VISIBLE_DEVICES=GPU-")
    assert vfio_of(n.container.store().load().claims[claim.uid].devices[0]) is None


def _refused(n: Node, claim: ClaimRef, reason: str, *words: str) -> str:
    before = prepare_failures(reason)
    outcome = n.driver.prepare([claim])[claim.uid]
    assert outcome.error.endswith(f"(reason {reason})"), outcome.error
    for word in words:
        assert word in outcome.error, outcome.error
    assert prepare_failures(reason) == before + 1
    n.events.warning.assert_called_with(claim, reason="PrepareFailed", message=outcome.error)
    assert not n.container.store().load().claims
    assert not n.container.cdi().claims()
    return outcome.error


def test_vfio_is_refused_for_a_mig_device_or_a_share(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    [mig] = n.offers.publish(mig_offer(A30, start=0))
    _refused(n, _vfio_claim(n, mig, name="mig"), "VfioNotAllowed", "whole card allocated exclusively", "MIG")
    [share] = n.offers.publish(whole_offer(A30, sharing="TimeSlicing"))
    pod = n.pods.add("shared", ASK)
    claim = n.claims.allocate("ts", [share], consumed={"sharePercent": "50"}, reserved_for=[pod])
    _refused(n, claim, "VfioNotAllowed", "TimeSlicing share")
    assert _driver(n, A30) == "nvidia"


def test_vfio_is_refused_on_a_vm_and_when_bare_metal_is_not_proven(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="vm-dmi")
    [offer] = n.offers.publish(whole_offer("0000:01:00.0"))
    _refused(n, _vfio_claim(n, offer), "VfioNotAllowed", "only on bare metal", "QEMU")

    m = node(mocker, tmp_path / "unknown", fixture="rtx-workstation")
    (m.host.root / "class" / "dmi" / "id" / "sys_vendor").unlink()  # no DMI: unknown counts as a VM
    [offer] = m.offers.publish(whole_offer(RTX))
    _refused(m, _vfio_claim(m, offer), "VfioNotAllowed", "only on bare metal", "counted as a VM")
    assert _driver(m, RTX) == "nvidia"


def test_vfio_is_refused_with_sriov_functions_enabled_or_without_an_iommu_group(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="rtx-workstation")
    device = n.host.root / "bus" / "pci" / "devices" / RTX
    (device / "sriov_totalvfs").write_text("4\n")
    (device / "sriov_numvfs").write_text("2\n")
    [offer] = n.offers.publish(whole_offer(RTX))
    _refused(n, _vfio_claim(n, offer, name="vfs"), "VfioNotAllowed", "2 SR-IOV virtual functions")

    (device / "sriov_numvfs").write_text("0\n")
    (device / "iommu_group").unlink()
    _refused(n, _vfio_claim(n, offer, name="noiommu"), "VfioNotAllowed", "no IOMMU group", "intel_iommu=on")
    assert _driver(n, RTX) == "nvidia"


def test_vfio_is_refused_when_the_group_holds_what_cannot_go_with_the_card(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="a30-x2")
    groups = n.host.root / "kernel" / "iommu_groups"
    # The host bridge in the first A30's group (no ACS): binding the group would take the host's bridge.
    os.symlink("../../../../devices/pci0000:00/0000:00:00.0", groups / "40" / "devices" / "0000:00:00.0")
    [offer] = n.offers.publish(whole_offer(A30))
    _refused(n, _vfio_claim(n, offer), "VfioNotAllowed", "shares IOMMU group 40 with bridge 0000:00:00.0")
    os.unlink(groups / "40" / "devices" / "0000:00:00.0")
    # Both A30s in one group: passing one through would take the other.
    os.symlink("../../../../devices/pci0000:d8/0000:d8:00.0", groups / "40" / "devices" / "0000:d8:00.0")
    _refused(n, _vfio_claim(n, offer, name="two"), "VfioNotAllowed", "another GPU, 0000:d8:00.0")
    assert _driver(n, A30) == "nvidia"


def test_a_bad_annotation_or_disagreeing_pods_are_refused_by_name(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="rtx-workstation")
    [offer] = n.offers.publish(whole_offer(RTX))
    _refused(n, _vfio_claim(n, offer, annotations={VFIO_ANNOTATION: "yes"}), "InvalidAllocation", '"yes"')
    vm, plain = n.pods.add("vm", ASK), n.pods.add("plain")
    claim = n.claims.allocate("both", [offer], reserved_for=[vm, plain])
    _refused(n, claim, "VfioNotAllowed", "['vm']", "['plain']")


def test_a_failed_bind_gives_back_what_was_bound(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path, fixture="rtx-workstation")
    (n.host.root / "bus" / "pci" / "drivers" / "vfio-pci").rename(n.host.root / "vfio-pci-unloaded")
    [offer] = n.offers.publish(whole_offer(RTX))
    error = _refused(n, _vfio_claim(n, offer), "VfioBindFailed", "vfio-pci is not loaded", RTX)
    assert "binding" in error
    assert _driver(n, RTX) == "nvidia"
    assert _driver(n, RTX_AUDIO) == "snd_hda_intel"
    assert _override(n, RTX) in ("", "(null)")


# -- kill -9 at every crash point ----------------------------------------------------------------------------


@pytest.mark.parametrize("step", PREPARE_POINTS)
def test_a_crash_after_each_prepare_step_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="rtx-workstation")
    [offer] = n.offers.publish(whole_offer(RTX))
    claim = _vfio_claim(n, offer)
    kill_at(n, monkeypatch, f"prepare:{step}:after", claim)

    restarted = n.another_instance()
    restarted.reconcile(cards=[RTX])
    if step != "record-completed":  # a completed record is kept: its claim still exists
        assert _nothing_left(restarted)
    assert restarted.driver.prepare([claim])[claim.uid].error == ""  # the kubelet's retry
    assert (_driver(restarted, RTX), _driver(restarted, RTX_AUDIO)) == ("vfio-pci", "vfio-pci")
    [record] = restarted.container.store().load().claims.values()
    assert [f.driver for f in present(vfio_of(record.devices[0])).functions] == ["nvidia", "snd_hda_intel"]

    assert restarted.driver.unprepare([claim]) == {claim.uid: ""}
    assert _nothing_left(restarted)


@pytest.mark.parametrize("step", UNPREPARE_POINTS)
def test_a_crash_after_each_unprepare_step_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="rtx-workstation")
    [offer] = n.offers.publish(whole_offer(RTX))
    claim = _vfio_claim(n, offer)
    assert n.driver.prepare([claim])[claim.uid].error == ""
    kill_at(n, monkeypatch, f"unprepare:{step}:after", claim)

    restarted = n.another_instance()
    restarted.reconcile(cards=[RTX])
    assert restarted.driver.unprepare([claim]) == {claim.uid: ""}  # the kubelet's retry
    assert _nothing_left(restarted)


def test_a_claim_deleted_while_the_plugin_was_down_gets_its_drivers_back_at_startup(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="rtx-workstation")
    [offer] = n.offers.publish(whole_offer(RTX))
    claim = _vfio_claim(n, offer)
    assert n.driver.prepare([claim])[claim.uid].error == ""
    n.claims.delete(claim)

    report = n.another_instance().reconcile(cards=[RTX])

    assert report.unprepared == [claim.uid]
    assert RTX in report.changed_cards
    assert _nothing_left(n)


def test_a_record_is_kept_until_its_functions_are_back_and_a_retry_uses_its_drivers(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path, fixture="rtx-workstation")
    [offer] = n.offers.publish(whole_offer(RTX))
    claim = _vfio_claim(n, offer)
    cdi = n.container.cdi().folder
    cdi.write_text("not a folder")  # write-cdi-spec fails after the bind ...
    bind = n.host.root / "bus" / "pci" / "drivers" / "nvidia" / "bind"
    bind.unlink()
    bind.mkdir()  # ... and the card cannot go back to nvidia: its bind attribute refuses the write

    assert n.driver.prepare([claim])[claim.uid].error
    [record] = n.container.store().load().claims.values()  # the only memory of the drivers: kept
    assert record.state is PreparePhase.PREPARE_STARTED
    assert _driver(n, RTX) is None  # out of vfio-pci, not yet back on nvidia

    cdi.unlink()
    bind.rmdir()
    bind.write_text("")
    retry = n.driver.prepare([claim])[claim.uid]  # sysfs says unbound now; the record says nvidia
    if retry.error:  # NVML cannot see a card off its driver: this attempt gives it back first
        assert _back_to_original(n)
        retry = n.driver.prepare([claim])[claim.uid]
    assert retry.error == ""
    [record] = n.container.store().load().claims.values()
    assert [f.driver for f in present(vfio_of(record.devices[0])).functions] == ["nvidia", "snd_hda_intel"]
    assert n.driver.unprepare([claim]) == {claim.uid: ""}
    assert _nothing_left(n)
