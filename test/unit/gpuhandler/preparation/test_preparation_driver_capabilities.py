"""A device's config may ask for a subset of the driver's capabilities: its containers get exactly
that subset, from the capability specs beside the base spec; a capability the driver root lacks,
or a config that names none properly, fails the Prepare naming the claim."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture
from testutil.unit.gpuhandler.preparation.preparation_fakes import (
    A30,
    CDI_HOOK,
    Node,
    node,
    stand_in_driver,
    whole_offer,
)

from pkg.backends.driver_files import GRAPHICS, DriverFiles, DriverRootOptions
from pkg.backends.nvidia.driver_libraries import LIBRARIES
from pkg.backends.preparation import READ_ONLY, ContainerEdits, DeviceNode, Mount
from pkg.gpuhandler.preparation.cdi import CdiSpecs, DriverSpec, driver_device_id
from pkg.gpuhandler.preparation.supplied_files import SuppliedFiles

GRAPHICS_CONFIGS = ("nvidia_icd.json", "nvidia_layers.json", "10_nvidia.json")
BASE = "k8s.gpu.deckhouse.io/driver=nvidia"
COMPUTE = "k8s.gpu.deckhouse.io/driver=nvidia-compute"
UTILITY = "k8s.gpu.deckhouse.io/driver=nvidia-utility"


def _config(capabilities: Any) -> dict[str, Any]:
    return {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "GpuConfig",
        "driverCapabilities": capabilities,
    }


def _mounted(n: Node, capability: str | None = None) -> set[str]:
    """The container paths a driver spec mounts, by file name."""
    spec = json.loads(n.container.cdi().driver_path("nvidia", capability).read_text())
    return {Path(m["containerPath"]).name for m in spec["containerEdits"]["mounts"]}


def _prepare(n: Node, config: dict[str, Any] | None) -> tuple[tuple[str, ...], str | None]:
    [offer] = n.offers.publish(whole_offer(A30))
    claim = n.claims.allocate("train", [offer], config=config)
    result = n.driver.prepare([claim])[claim.uid]
    if result.error:
        return (), result.error
    [device] = result.devices
    return device.cdi_device_ids[1:], None


def test_a_claim_without_driver_capabilities_gets_everything_the_driver_root_has(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    version = stand_in_driver().version

    ids, error = _prepare(n, None)

    assert error is None
    assert ids == (BASE,)
    mounted = _mounted(n)
    assert {
        f"libcuda.so.{version}",
        f"libGLX_nvidia.so.{version}",
        f"libnvidia-encode.so.{version}",
    } <= mounted
    assert {"nvidia_icd.json", "10_nvidia.json"} <= mounted  # what Vulkan's and glvnd's loaders read


def test_a_compute_only_claim_names_the_compute_and_utility_specs_which_hold_no_graphics_file(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    n = node(mocker, tmp_path)
    version = stand_in_driver().version

    ids, error = _prepare(n, _config(["utility", "compute"]))

    assert error is None
    assert ids == (COMPUTE, UTILITY)  # in the order of the capabilities, not of the config
    compute, utility = _mounted(n, "compute"), _mounted(n, "utility")
    assert f"libcuda.so.{version}" in compute
    assert {f"libnvidia-ml.so.{version}", "nvidia-smi"} <= utility
    graphics = {f"{stem}.so.{version}" for stem in LIBRARIES[GRAPHICS][1]} | {
        "nvidia_icd.json",
        "10_nvidia.json",
    }
    graphics -= {f"libnvidia-allocator.so.{version}"}  # compute's too, in NVIDIA's split
    assert not (compute | utility) & graphics
    assert f"libGLX_nvidia.so.{version}" in _mounted(n, "graphics")  # the root has it: its spec is there


def test_a_video_claim_gets_the_encoder_and_decoder(tmp_path: Path, mocker: MockerFixture) -> None:
    n = node(mocker, tmp_path)
    version = stand_in_driver().version

    ids, error = _prepare(n, _config(["video"]))

    assert error is None
    assert ids == (driver_device_id("nvidia", "video"),)
    assert {f"libnvidia-encode.so.{version}", f"libnvcuvid.so.{version}"} <= _mounted(n, "video")
    assert f"libGLX_nvidia.so.{version}" not in _mounted(n, "video")


def _root_without_graphics(tmp_path: Path) -> Path:
    """The stand-in driver with every graphics library and loader file taken away."""
    root = tmp_path / "driver"
    shutil.copytree(stand_in_driver().root, root, symlinks=True)
    stems = set(LIBRARIES[GRAPHICS][1]) - set(LIBRARIES["compute"][1])
    for path in sorted(root.rglob("*"), reverse=True):
        if path.name.partition(".so")[0] in stems or path.name in GRAPHICS_CONFIGS:
            path.unlink()
    return root


def test_a_capability_the_driver_root_lacks_fails_the_prepare_naming_the_claim(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    root = _root_without_graphics(tmp_path)
    n = node(mocker, tmp_path, driver_root=DriverRootOptions(root=root, cdi_hook=CDI_HOOK))

    _, error = _prepare(n, _config(["compute", "graphics"]))

    assert error is not None
    assert "claim team/train: device" in error
    assert "asks for driver capabilities graphics" in error
    assert n.container.store().load().claims == {}  # refused before anything changed
    assert not n.container.cdi().driver_path("nvidia", "graphics").exists()
    assert n.container.cdi().driver_path("nvidia", "compute").exists()


@pytest.mark.parametrize(
    ("capabilities", "expected"),
    [
        (["compute", "raytracing"], "driverCapabilities.1"),
        ("compute", "driverCapabilities"),
        ([], "driverCapabilities"),
    ],
)
def test_a_config_that_names_no_capability_properly_fails_naming_the_claim_and_the_field(
    tmp_path: Path, mocker: MockerFixture, capabilities: Any, expected: str
) -> None:
    n = node(mocker, tmp_path)

    _, error = _prepare(n, _config(capabilities))

    assert error is not None
    assert "claim team/train" in error
    assert "config for request gpu is invalid" in error
    assert expected in error
    assert n.container.store().load().claims == {}


def _files(version: str, *paths: str) -> DriverFiles:
    mounts = tuple(Mount(p, p, READ_ONLY) for p in paths)
    nodes = (DeviceNode(path="/dev/nvidiactl", host_path="/dev/nvidiactl"),)
    return DriverFiles(version=version, edits=ContainerEdits(device_nodes=nodes, mounts=mounts))


def test_a_capability_the_upgraded_driver_lacks_loses_its_spec(tmp_path: Path, mocker: MockerFixture) -> None:
    version = ["580"]

    def files(capabilities: frozenset[str] | None) -> DriverFiles:
        firmware = f"/lib/firmware/nvidia/{version[0]}/gsp.bin"  # every set's
        if capabilities is not None and capabilities == {GRAPHICS} and version[0] == "580":
            return _files(version[0], firmware, "/usr/local/nvidia/lib64/libGLX_nvidia.so")
        if capabilities is None or capabilities == {"compute"}:
            return _files(version[0], firmware, "/usr/local/nvidia/lib64/libcuda.so")
        return _files(version[0], firmware)

    cdi = CdiSpecs(tmp_path)
    supplied = SuppliedFiles(tmp_path / "supplied")
    spec = DriverSpec(files=files, cdi=cdi, supplied=supplied, vendor="nvidia", status=mocker.MagicMock())

    assert spec.device_ids(frozenset({GRAPHICS})) == (driver_device_id("nvidia", GRAPHICS),)
    assert cdi.driver_path("nvidia", GRAPHICS).exists()
    version[0] = "590"
    spec.refresh()

    assert not cdi.driver_path("nvidia", GRAPHICS).exists()
    assert cdi.driver_path("nvidia", "compute").exists()
    assert not cdi.driver_path("nvidia", "video").exists()  # never had any
    assert spec.withdraw()
    assert list(tmp_path.iterdir()) == []
