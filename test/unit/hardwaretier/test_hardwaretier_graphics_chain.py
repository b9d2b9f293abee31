"""The graphics checks' chain over a simulated host and a stand-in driver, without a GPU: the real
Prepare with per-claim capabilities, ``cdi-validate inject``, NVIDIA's hooks and runc, in a root of
busybox, glibc, a probe and the loaders' Debian packages. A claim with graphics and video gets the
loaders' ICD and vendor files where the image's loaders look and resolves NVIDIA's graphics and
video libraries through its own dynamic loader; a compute-only claim resolves neither, and the
Vulkan probe says so in its line. (The stand-ins have the driver's sonames but not its code, so the
lines the hardware tier quotes — a device, a context — need the real card.)"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from kubernetes.client import V1Device
from testutil.tools import require, require_file, require_program

from pkg.backends import BackendOptions
from pkg.backends.driver_files import DriverRootOptions
from pkg.backends.simulated.backend import SIMULATED_NVIDIA
from pkg.backends.simulated.data import DRIVER_VERSION
from pkg.backends.simulated.sharing import stop_simulated_daemons
from pkg.devcluster.cluster import default_bin_dir
from pkg.devcluster.driverroot import Layout, build_driver_root
from pkg.devcluster.gpuhost import SimulatedGpuHost
from pkg.gpuhandler.offline import OfflineRequest, compute_offers
from pkg.gpuhandler.preparation.cdi_hook import install_cdi_hook
from pkg.hardwaretier.cdi_mounts import mounted_paths
from pkg.hardwaretier.claims import PreparationNode, PreparedClaim, capabilities_config
from pkg.hardwaretier.container import cdi_bundle, run_with_cdi
from pkg.hardwaretier.loader_packages import (
    LoaderPackageError,
    default_debs_dir,
    ensure_debs,
    extract_debs,
    read_pins,
)
from pkg.hardwaretier.offer_checks import OffersOutput, attribute
from pkg.hardwaretier.probes import DLOPEN, VULKAN, build_probes, find_compiler, probe_line
from pkg.hardwaretier.rootfs import BUSYBOX
from pkg.hardwaretier.runc import ContainerRun

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="runc runs the container as root")

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
GRAPHICS = Path(__file__).resolve().parents[2] / "hardware" / "graphics"
NODE = "node-a"
H100 = "0000:18:00.0"


@pytest.fixture(scope="module")
def probes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    compiler = find_compiler()
    require(compiler is not None, "no gcc (install gcc and libc6-dev)")
    assert compiler is not None
    return build_probes(compiler, source_dir=GRAPHICS, output_dir=tmp_path_factory.mktemp("probes"))


@pytest.fixture(scope="module")
def loaders(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_program("dpkg-deb", "Debian's dpkg")
    try:
        debs = ensure_debs(default_debs_dir(), read_pins(GRAPHICS / "loader-packages.txt"))
    except LoaderPackageError as exc:
        require(False, f"the loader packages cannot be had here: {exc}")
        raise
    return extract_debs(debs, tmp_path_factory.mktemp("loaders") / "root")


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[PreparationNode, V1Device]]:
    """As the hardware tier builds it, over a simulated H100 host and a stand-in driver in
    NVIDIA's own folder layout (graphics, video and OpenCL files among them); with the card's
    exclusive offer."""
    host = SimulatedGpuHost.create(tmp_path / "host", FIXTURES / "h100-sxm")
    driver = build_driver_root(tmp_path / "driver", layout=Layout.VENDOR_FOLDER, version=DRIVER_VERSION)
    request = OfflineRequest(
        node_name=NODE, sysfs_root=host.root, backend="simulated-nvidia", state_dir=host.nvml_state
    )
    result = compute_offers(request)
    offers = OffersOutput(gpus=result.gpus, slices=result.slices)
    whole = next(
        d
        for d in offers.devices_of(H100)
        if attribute(d, "deviceType") == "Physical" and attribute(d, "sharingStrategy") == "Exclusive"
    )
    hook = install_cdi_hook(default_bin_dir() / "nvidia-cdi-hook", tmp_path / "bin")
    backend = SIMULATED_NVIDIA.create(
        BackendOptions(
            node_name=NODE,
            sysfs_root=host.root,
            dev_root=host.dev,
            proc_root=host.root / "proc",
            state_dir=host.nvml_state,
            driver_root=DriverRootOptions(root=driver.root, cdi_hook=hook),
        )
    )
    prepared = PreparationNode(
        backend=backend,
        node_name=NODE,
        workdir=tmp_path / "work",
        slices=offers.slices,
        sysfs_root=host.root,
        dev_root=host.dev,
        proc_root=host.root / "proc",
    )
    yield prepared, whole
    stop_simulated_daemons(tmp_path)


def _run(
    node: PreparationNode,
    claim: PreparedClaim,
    probes: dict[str, Path],
    loaders: Path,
    tmp_path: Path,
    name: str,
    *args: str,
    command: Sequence[str] | None = None,
) -> ContainerRun:
    runc = require_program("runc", "make host-packages installs it")
    require_file(BUSYBOX, "make host-packages installs busybox-static")
    container_id = f"unit-{name.replace('_', '-')}-{uuid.uuid4().hex[:8]}"
    bundle = cdi_bundle(
        runc=runc,
        cdi_tool=default_bin_dir() / "cdi-validate",
        bundle=tmp_path / "bundles" / container_id,
        container_id=container_id,
        program=probes[name],
        args=args,
        spec_dirs=[node.cdi_dir],
        devices=claim.cdi_device_ids,
        extra_roots=[loaders],
        command=command,
    )
    return run_with_cdi(runc, bundle, state_root=tmp_path / "runc")


def test_a_graphics_and_video_claim_resolves_nvidias_libraries_through_the_images_loader(
    node: tuple[PreparationNode, V1Device], probes: dict[str, Path], loaders: Path, tmp_path: Path
) -> None:
    preparation, whole = node
    claim = preparation.prepare(
        "graphics", whole, config=capabilities_config(["compute", "utility", "graphics", "video"])
    )

    for soname in ("libGLX_nvidia.so.0", "libEGL_nvidia.so.0", "libnvidia-encode.so.1", "libnvcuvid.so.1"):
        run = _run(preparation, claim, probes, loaders, tmp_path, DLOPEN, soname)
        assert run.returncode == 0, run.describe()
        assert probe_line(run.stdout) == f"LOADED {soname}", run.describe()
    listing = _run(
        preparation,
        claim,
        probes,
        loaders,
        tmp_path,
        DLOPEN,
        command=[
            "/bin/busybox",
            "ls",
            "/etc/vulkan/icd.d",
            "/usr/share/glvnd/egl_vendor.d",
            "/etc/OpenCL/vendors",
        ],
    )
    assert listing.returncode == 0, listing.describe()
    assert {"nvidia_icd.json", "10_nvidia.json", "nvidia.icd"} <= set(listing.stdout.split()), (
        listing.describe()
    )
    preparation.unprepare(claim)


def test_a_compute_only_claim_resolves_no_graphics_library_and_vulkan_finds_no_icd(
    node: tuple[PreparationNode, V1Device], probes: dict[str, Path], loaders: Path, tmp_path: Path
) -> None:
    preparation, whole = node
    claim = preparation.prepare("compute-only", whole, config=capabilities_config(["compute", "utility"]))

    mounted = {Path(p).name for p in mounted_paths([preparation.cdi_dir], claim.cdi_device_ids)}
    assert f"libcuda.so.{DRIVER_VERSION}" in mounted
    graphics = {"nvidia_icd.json", "10_nvidia.json", "nvidia_layers.json"}
    assert not {
        name for name in mounted if name.startswith(("libGLX_nvidia", "libEGL_nvidia")) or name in graphics
    }
    assert "nvidia.icd" in mounted, "OpenCL is compute's, as NVIDIA files it"
    run = _run(preparation, claim, probes, loaders, tmp_path, DLOPEN, "libGLX_nvidia.so.0")
    assert run.returncode == 1, run.describe()
    assert (probe_line(run.stdout) or "").startswith("NOT LOADED libGLX_nvidia.so.0: "), run.describe()
    vulkan = _run(preparation, claim, probes, loaders, tmp_path, VULKAN)
    assert vulkan.returncode == 1, vulkan.describe()
    assert probe_line(vulkan.stdout) == (
        "VULKAN FAIL vkCreateInstance -9 (VK_ERROR_INCOMPATIBLE_DRIVER: no ICD found)"
    ), vulkan.describe()
    preparation.unprepare(claim)
