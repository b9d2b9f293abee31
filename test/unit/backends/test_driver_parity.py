"""Our base spec holds what NVIDIA's ``nvidia-ctk cdi generate`` found on the same driver root.

The root is rebuilt from the recorded listing of an H200 node (driver 580.159.04 under
``/usr/local/nvidia``, its Vulkan ICD and EGL vendor files under ``/usr/share``), and compared
with the spec NVIDIA's tool wrote on that node: every file NVIDIA mounts is mounted by us (from
the same host file, at the same container path unless a placement below says why not), every link
it makes we make, every hook it runs we run, minus the exceptions named here, each with its
reason, and what ours has beyond NVIDIA's is named too
(docs/kubelet-plugin.md#the-drivers-user-space-the-base-spec says the same). Our spec is built as
gpu-handler builds it, the files the root lacks and the plugin writes included.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from testutil.unit.backends.recorded_driver_root import H200_NVIDIA_CTK_SPEC, build_recorded_root

from pkg.backends.driver_files import (
    CAPABILITIES,
    COMPUTE,
    DISPLAY,
    GRAPHICS,
    UTILITY,
    VIDEO,
    DriverRootOptions,
)
from pkg.backends.nvidia import driver_libraries
from pkg.backends.nvidia.driver_root import discover_driver_files
from pkg.gpuhandler.preparation.cdi import build_driver_spec
from pkg.gpuhandler.preparation.supplied_files import SuppliedFiles

VERSION: Final = "580.159.04"
HOOK: Final = "/var/lib/kubelet/plugins/gpu.deckhouse.io/bin/nvidia-cdi-hook-0123456789ab"
# Mounts of NVIDIA's spec we leave out, by container path.
MOUNT_EXCEPTIONS: Final = {
    # The legacy runtime's marker that NVIDIA_VISIBLE_DEVICES=void: a CDI spec of ours never asks
    # NVIDIA's legacy runtime for anything.
    "/var/run/nvidia-container-devices/void": "NVIDIA's legacy-runtime marker",
}
# NVIDIA mounts every file at its host path; we place these where the image looks for them.
PLACEMENTS: Final = (
    # Tools on every image's PATH, wherever the host keeps them.
    (re.compile(r"^/usr/local/nvidia/bin/(?P<name>[^/]+)$"), "/usr/bin/{name}"),
    # GSP firmware where the driver's own path for it is, wherever the host keeps it.
    (
        re.compile(r"^/usr/local/nvidia/firmware/nvidia/(?P<version>[^/]+)/(?P<name>[^/]+)$"),
        "/lib/firmware/nvidia/{version}/{name}",
    ),
)
# Mounts of ours that NVIDIA's spec lacks, by container path.
EXTRAS: Final = {
    # NVIDIA's search looks in the host's configuration folders only; the driver's own share
    # folder has this file.
    "/etc/vulkan/implicit_layer.d/nvidia_layers.json": "found beside the driver's libraries",
    # The root has libnvidia-opencl but no ICD file, so OpenCL fails through NVIDIA's spec; the
    # plugin writes the file's one line and mounts it.
    "/etc/OpenCL/vendors/nvidia.icd": "written by the plugin where the root lacks it",
}
# Hooks of NVIDIA's spec we do not run.
HOOK_EXCEPTIONS: Final = {
    # Writes a driver application profile that limits EGL/Vulkan to the GPUs the container has;
    # left out until a claim's EGL device numbering is checked on hardware (docs).
    "update-application-profile": "not yet proven on hardware",
}
# NVIDIA's split of its libraries by capability (libnvidia-container's lists), for what the spec
# above holds; libnvidia-fbc is also ours under display.
NVIDIA_SPLIT: Final = {
    COMPUTE: {
        "libcuda",
        "libcudadebugger",
        "libnvidia-ptxjitcompiler",
        "libnvidia-nvvm",
        "libnvidia-gpucomp",
        "libnvidia-opencl",
        "libnvidia-allocator",
        "libnvidia-pkcs11-openssl3",
    },
    UTILITY: {"libnvidia-ml", "libnvidia-cfg"},
    VIDEO: {"libnvcuvid", "libnvidia-encode", "libnvidia-opticalflow", "libvdpau_nvidia"},
    GRAPHICS: {
        "libGLX_nvidia",
        "libEGL_nvidia",
        "libGLESv2_nvidia",
        "libGLESv1_CM_nvidia",
        "libnvidia-eglcore",
        "libnvidia-glcore",
        "libnvidia-tls",
        "libnvidia-glsi",
        "libnvidia-fbc",
        "libnvidia-rtcore",
        "libnvoptix",
        "libnvidia-glvkspirv",
        "libnvidia-allocator",
    },
    DISPLAY: {"libnvidia-fbc"},
}
CONFIG_SPLIT: Final = {
    GRAPHICS: {"/etc/vulkan/icd.d/nvidia_icd.json", "/usr/share/glvnd/egl_vendor.d/10_nvidia.json"},
}


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = build_recorded_root(tmp_path_factory.mktemp("h200"))
    dev = root / "dev"
    dev.mkdir(exist_ok=True)
    for node in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
        (dev / node).touch()
    return root


@pytest.fixture(scope="module")
def supplied(tmp_path_factory: pytest.TempPathFactory) -> SuppliedFiles:
    return SuppliedFiles(tmp_path_factory.mktemp("supplied"))


@pytest.fixture(scope="module")
def nvidia() -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load(H200_NVIDIA_CTK_SPEC.read_text())
    return spec


def _ours(host: Path, capabilities: frozenset[str], supplied: SuppliedFiles) -> dict[str, Any]:
    """Our spec as gpu-handler writes it: discovery, then the files the root lacks written and mounted."""
    options = DriverRootOptions(
        root=host,
        root_on_host=Path("/"),
        host_run=host / "run",
        capabilities=capabilities,
        cdi_hook=Path(HOOK),
    )
    files = discover_driver_files(options, version=VERSION, dev_root=host / "dev")
    return build_driver_spec("nvidia", supplied.mounted("nvidia", files))


def _expected_container_path(nvidia_path: str) -> str:
    for pattern, ours in PLACEMENTS:
        if match := pattern.match(nvidia_path):
            return ours.format(**match.groupdict())
    return nvidia_path


def _links(edits: dict[str, Any]) -> set[str]:
    return {
        arg
        for hook in edits.get("hooks", [])
        if hook["args"][1] == "create-symlinks"
        for arg in hook["args"][2:]
        if arg != "--link"
    }


def _hooks(edits: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    return {hook["args"][1]: tuple(hook["args"][2:]) for hook in edits.get("hooks", [])}


def differences(nvidia: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    """What NVIDIA's spec has that ours lacks, minus the exceptions; empty when at parity."""
    theirs, mine = nvidia["containerEdits"], ours["containerEdits"]
    by_host = {m["hostPath"]: m["containerPath"] for m in mine.get("mounts", [])}
    problems = []
    for mount in theirs["mounts"]:
        if mount["containerPath"] in MOUNT_EXCEPTIONS:
            continue
        expected = _expected_container_path(mount["containerPath"])
        if by_host.get(mount["hostPath"]) != expected:
            problems.append(f"mount {mount['hostPath']} -> {expected}: ours {by_host.get(mount['hostPath'])}")
    problems += [f"link {link}" for link in sorted(_links(theirs) - _links(mine))]
    our_hooks = _hooks(mine)
    for name, args in _hooks(theirs).items():
        if name not in HOOK_EXCEPTIONS and name != "create-symlinks" and our_hooks.get(name) != args:
            problems.append(f"hook {name} {args}: ours {our_hooks.get(name)}")
    our_nodes = {
        node["path"] for device in ours["devices"] for node in device["containerEdits"]["deviceNodes"]
    }
    problems += [f"device node {n['path']}" for n in theirs["deviceNodes"] if n["path"] not in our_nodes]
    return problems


def extras(nvidia: dict[str, Any], ours: dict[str, Any]) -> set[str]:
    """The container paths ours mounts that NVIDIA's spec does not (after our placements)."""
    theirs = {_expected_container_path(m["containerPath"]) for m in nvidia["containerEdits"]["mounts"]}
    return {m["containerPath"] for m in ours["containerEdits"]["mounts"]} - theirs


def test_with_every_capability_our_spec_holds_what_nvidia_ctk_found_on_the_same_root(
    host: Path, nvidia: dict[str, Any], supplied: SuppliedFiles
) -> None:
    assert differences(nvidia, _ours(host, frozenset(CAPABILITIES), supplied)) == []


def test_a_library_nvidia_mounts_that_we_would_miss_is_reported(
    host: Path, nvidia: dict[str, Any], supplied: SuppliedFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    required, optional = driver_libraries.LIBRARIES[VIDEO]
    monkeypatch.setitem(driver_libraries.LIBRARIES, VIDEO, (required, optional[:-1]))  # no vdpau

    problems = differences(nvidia, _ours(host, frozenset(CAPABILITIES), supplied))

    assert any(f"libvdpau_nvidia.so.{VERSION}" in p for p in problems)
    assert any("libvdpau_nvidia.so.1" in p for p in problems)  # its links too


@pytest.mark.parametrize("capability", [COMPUTE, UTILITY, VIDEO, GRAPHICS, DISPLAY])
def test_each_capability_gives_nvidias_libraries_of_that_capability_and_no_other(
    host: Path, supplied: SuppliedFiles, capability: str
) -> None:
    spec = _ours(host, frozenset({capability}), supplied)
    mounts = {m["containerPath"] for m in spec["containerEdits"]["mounts"]}
    libraries = {
        Path(p).name.partition(".so.")[0] for p in mounts if p.startswith("/usr/local/nvidia/lib64/")
    }

    assert libraries == NVIDIA_SPLIT[capability]
    assert CONFIG_SPLIT.get(capability, set()) <= mounts
    if capability != GRAPHICS:
        assert not any(p.startswith(("/etc/vulkan", "/usr/share/glvnd")) for p in mounts)


def test_the_driver_folders_own_layers_file_and_firmware_are_found_beside_its_libraries(
    host: Path, supplied: SuppliedFiles
) -> None:
    """Beyond NVIDIA's: the Vulkan layers file only the driver's own share folder has."""
    mounts = {
        m["containerPath"]: m["hostPath"]
        for m in _ours(host, frozenset(CAPABILITIES), supplied)["containerEdits"]["mounts"]
    }
    assert (
        mounts["/etc/vulkan/implicit_layer.d/nvidia_layers.json"]
        == "/usr/local/nvidia/share/vulkan/implicit_layer.d/nvidia_layers.json"
    )
    assert mounts[f"/lib/firmware/nvidia/{VERSION}/gsp_ga10x.bin"] == (
        f"/usr/local/nvidia/firmware/nvidia/{VERSION}/gsp_ga10x.bin"
    )


def test_what_ours_mounts_beyond_nvidias_is_exactly_the_named_extras(
    host: Path, nvidia: dict[str, Any], supplied: SuppliedFiles
) -> None:
    assert extras(nvidia, _ours(host, frozenset(CAPABILITIES), supplied)) == set(EXTRAS)


def test_the_opencl_icd_file_the_root_lacks_reaches_the_container_naming_the_library(
    host: Path, nvidia: dict[str, Any], supplied: SuppliedFiles
) -> None:
    """The H200 node has libnvidia-opencl but no nvidia.icd: NVIDIA's spec gives the library alone
    (OpenCL finds no platform); ours gives the file too, with the line NVIDIA's own file has."""
    assert not list(host.glob("**/OpenCL/vendors/nvidia.icd"))  # the recorded root lacks it
    assert not any("OpenCL/vendors" in m["containerPath"] for m in nvidia["containerEdits"]["mounts"])

    for capabilities in (frozenset(CAPABILITIES), frozenset({COMPUTE})):
        mounts = {
            m["containerPath"]: m for m in _ours(host, capabilities, supplied)["containerEdits"]["mounts"]
        }
        icd = mounts["/etc/OpenCL/vendors/nvidia.icd"]
        assert icd["options"][0] == "ro"
        assert Path(icd["hostPath"]).read_text() == "libnvidia-opencl.so.1\n"
        assert "/usr/local/nvidia/lib64/libnvidia-opencl.so.1" not in mounts  # a link the hook makes
        assert f"/usr/local/nvidia/lib64/libnvidia-opencl.so.{VERSION}" in mounts
    graphics_only = _ours(host, frozenset({GRAPHICS}), supplied)["containerEdits"]["mounts"]
    assert not any("OpenCL" in m["containerPath"] for m in graphics_only)  # OpenCL is compute
