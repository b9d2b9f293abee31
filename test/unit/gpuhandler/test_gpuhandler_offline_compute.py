"""``gpu-handler offers`` computed on fixture hosts: the agent's, the handler's and the publisher's
parts, each by the production code, without a cluster."""

from __future__ import annotations

import dataclasses
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from testutil.k8s_fields import meta, name_of, present
from testutil.unit.gpuhandler.gpuhandler_fakes import SYSFS

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.dra.model.slices import Layout, ServerVersion
from pkg.gpuhandler.offline import (
    OfflineInputError,
    OfflineRequest,
    OfflineResult,
    compute_offers,
    render_yaml,
)

ROOT = Path(__file__).resolve().parents[3]
PCI_IDS = ROOT / "test" / "fixtures" / "pci.ids"
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def request(scenario: str = "a30-x2", **changes: object) -> OfflineRequest:
    base = OfflineRequest(
        node_name="worker-1",
        sysfs_root=SYSFS / scenario,
        host_root=SYSFS / scenario,
        backend="simulated-nvidia",
        pci_ids=PCI_IDS,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def offers(req: OfflineRequest) -> OfflineResult:
    return compute_offers(req, now=lambda: NOW)


def conditions(gpu: PhysicalGPU) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in (gpu.status.conditions if gpu.status else None) or []}


def devices(result: OfflineResult) -> list[str]:
    return [d.name for rs in result.slices for d in rs.spec.devices or []]


def test_two_a30s_as_the_agent_names_them_and_the_handler_enriches_them() -> None:
    result = offers(request())
    assert [g.metadata.name for g in result.gpus] == ["worker-1-0-10de-20b7", "worker-1-1-10de-20b7"]
    first = result.gpus[0]
    assert first.metadata.labels == {
        "gpu.deckhouse.io/node": "worker-1",
        "gpu.deckhouse.io/vendor": "nvidia",
        "gpu.deckhouse.io/device": "a30-pcie",
        "gpu.deckhouse.io/pci-address": "0000-3b-00.0",
    }
    status = first.status
    assert status is not None
    assert status.pci_info is not None
    assert status.pci_info.address == "0000:3b:00.0"
    assert status.node_info is not None
    assert status.node_info.node_name == "worker-1"
    assert status.capabilities is not None
    assert (status.capabilities.product_name, status.capabilities.memory_mib) == ("NVIDIA A30", 24576)
    assert status.current_state is not None
    assert status.current_state.nvidia is not None
    assert status.current_state.nvidia.driver_version == "580.76.05"
    assert conditions(first) == {
        "DriverReady": ("True", "AssumedOffline"),
        "HardwareHealthy": ("True", "Healthy"),
    }
    assert result.not_offered == {}
    assert result.failures == ()


def test_the_slices_are_the_newest_layout_at_generation_one_without_an_owner() -> None:
    result = offers(request())
    names = [name_of(rs) for rs in result.slices]
    assert names == ["gpu-worker-1-counters-00", "gpu-worker-1-devices-00"]
    assert {rs.spec.pool.name for rs in result.slices} == {"gpus/worker-1"}
    assert {rs.spec.pool.generation for rs in result.slices} == {1}
    assert all(meta(rs).owner_references is None for rs in result.slices)
    # Per A30: 13 MIG placements (1g x4, 1g+me x4, 2g x2, 2g+me x2, 4g), 2 shared, 1 whole.
    assert len(devices(result)) == 2 * 16
    assert sum("-mig-" in name for name in devices(result)) == 2 * 13


def test_the_1_34_layout_keeps_counters_beside_the_devices() -> None:
    result = offers(request(server_version=ServerVersion(1, 34)))
    (inline,) = result.slices
    assert inline.spec.shared_counters
    assert inline.spec.devices
    assert ServerVersion(1, 34).layout is Layout.INLINE


def test_allow_mig_false_keeps_only_the_whole_card_offers() -> None:
    result = offers(request(allow_mig=False))
    assert devices(result)
    assert not [name for name in devices(result) if "-mig-" in name]


def test_a_sick_card_is_offered_with_a_noschedule_taint_on_every_offer(tmp_path: Path) -> None:
    (tmp_path / "0000:d8:00.0.health").write_text("False RowRemappingFailed row remapping failed\n")
    result = offers(request(state_dir=tmp_path))
    sick = result.gpus[1]
    assert conditions(sick)["HardwareHealthy"] == ("False", "RowRemappingFailed")
    assert result.not_offered == {}
    all_devices = [d for s in result.slices for d in s.spec.devices or []]
    tainted = {d.name for d in all_devices if d.taints}
    assert tainted == {d.name for d in all_devices if d.name.startswith("gpu-0000-d8-00-0")}
    assert tainted
    for device in all_devices:
        if device.name in tainted:
            [taint] = present(device.taints)
            assert (taint.key, taint.value, taint.effect) == (
                "gpu.deckhouse.io/unhealthy",
                "RowRemappingFailed",
                "NoSchedule",
            )


def test_a_card_on_no_driver_is_listed_but_neither_validated_nor_read() -> None:
    result = offers(request("unbound"))
    (card,) = result.gpus
    assert card.status is not None
    assert card.status.capabilities is None
    assert conditions(card) == {}
    assert result.slices == ()
    assert "not bound to the Nvidia driver" in result.not_offered["worker-1-0-10de-20b7"]


def test_a_host_without_gpus_has_nothing_to_offer() -> None:
    result = offers(request("no-gpu"))
    assert (result.gpus, result.slices) == ((), ())


def test_bad_input_names_the_problem(tmp_path: Path) -> None:
    with pytest.raises(OfflineInputError, match="no bus/pci/devices"):
        offers(request(sysfs_root=tmp_path / "missing"))
    with pytest.raises(OfflineInputError, match=r"no vendor backend 'intel'; installed: .*simulated-nvidia"):
        offers(request(backend="intel"))
    with pytest.raises(OfflineInputError, match=r"older than 1\.34"):
        offers(request(server_version=ServerVersion(1, 33)))


def test_the_yaml_has_a_header_then_the_objects_in_order(tmp_path: Path) -> None:
    root = tmp_path / "host"
    shutil.copytree(SYSFS / "a30-x2", root, symlinks=True)
    req = request(sysfs_root=root, host_root=root)
    text = render_yaml(req, offers(req))
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert any("DriverReady=True" in line for line in header)
    assert any("HardwareHealthy is the backend's health check" in line for line in header)
    docs = [d for d in yaml.safe_load_all(text) if d]
    assert [d["kind"] for d in docs] == ["PhysicalGPU", "PhysicalGPU", "ResourceSlice", "ResourceSlice"]
    assert next(iter(docs[0]["metadata"])) == "name"
    assert PhysicalGPU.from_api_dict(docs[0]).status is not None
    assert docs[3]["spec"]["pool"] == {"name": "gpus/worker-1", "generation": 1, "resourceSliceCount": 2}
