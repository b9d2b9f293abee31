"""Over a simulated GPU host: a claim prepared by the real pipeline (:class:`PreparationNode`, the
hardware tier's way of running Prepare without an API server) reaches a runc container through
nothing but the CDI devices Prepare answered, applied by the CDI library."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import V1Device
from testutil.tools import require_file, require_program

from pkg.backends import BackendOptions
from pkg.backends.driver_files import DriverRootOptions
from pkg.backends.simulated.backend import SIMULATED_NVIDIA
from pkg.backends.simulated.data import DRIVER_VERSION
from pkg.backends.simulated.sharing import stop_simulated_daemons
from pkg.devcluster.cluster import default_bin_dir
from pkg.devcluster.driverroot import DriverRoot, Layout, build_driver_root
from pkg.devcluster.gpuhost import SimulatedGpuHost
from pkg.gpuhandler.offline import OfflineRequest, compute_offers
from pkg.gpuhandler.preparation.cdi import CdiSpecs
from pkg.gpuhandler.preparation.cdi_hook import install_cdi_hook
from pkg.hardwaretier.claims import PreparationNode, PrepareFailedError
from pkg.hardwaretier.container import cdi_bundle, run_with_cdi
from pkg.hardwaretier.offer_checks import OffersOutput, attribute
from pkg.hardwaretier.rootfs import BUSYBOX

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
NODE = "node-a"
H100 = "0000:18:00.0"
DRIVER_ID = "k8s.gpu.deckhouse.io/driver=nvidia"


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> DriverRoot:
    """A stand-in driver in NVIDIA's own folder layout (real shared objects with the driver's sonames)."""
    target = tmp_path_factory.mktemp("driver") / "usr-local-nvidia"
    return build_driver_root(target, layout=Layout.VENDOR_FOLDER, version=DRIVER_VERSION)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[SimulatedGpuHost]:
    simulated = SimulatedGpuHost.create(tmp_path / "host", FIXTURES / "h100-sxm")
    yield simulated
    stop_simulated_daemons(tmp_path)


@pytest.fixture
def offers(host: SimulatedGpuHost) -> OffersOutput:
    request = OfflineRequest(
        node_name=NODE, sysfs_root=host.root, backend="simulated-nvidia", state_dir=host.nvml_state
    )
    result = compute_offers(request)
    return OffersOutput(gpus=result.gpus, slices=result.slices)


@pytest.fixture
def node(host: SimulatedGpuHost, offers: OffersOutput, driver: DriverRoot, tmp_path: Path) -> PreparationNode:
    """Built as the hardware tier builds it; NVIDIA's real hook program, installed as gpu-handler does."""
    proc = host.root / "proc"
    hook = install_cdi_hook(default_bin_dir() / "nvidia-cdi-hook", tmp_path / "bin")
    backend = SIMULATED_NVIDIA.create(
        BackendOptions(
            node_name=NODE,
            sysfs_root=host.root,
            dev_root=host.dev,
            proc_root=proc,
            state_dir=host.nvml_state,
            driver_root=DriverRootOptions(root=driver.root, cdi_hook=hook),
        )
    )
    return PreparationNode(
        backend=backend,
        node_name=NODE,
        workdir=tmp_path / "work",
        slices=offers.slices,
        sysfs_root=host.root,
        dev_root=host.dev,
        proc_root=proc,
    )


def _offer(offers: OffersOutput, **wanted: object) -> V1Device:
    return next(
        d for d in offers.devices_of(H100) if all(attribute(d, key) == value for key, value in wanted.items())
    )


def test_a_whole_card_claim_is_answered_with_its_cdi_device(
    node: PreparationNode, offers: OffersOutput, tmp_path: Path
) -> None:
    claim = node.prepare("whole-card", _offer(offers, deviceType="Physical", sharingStrategy="Exclusive"))

    spec = CdiSpecs(node.cdi_dir).path_of(claim.ref.uid)
    assert claim.cdi_device_ids == (f"k8s.gpu.deckhouse.io/claim={claim.ref.uid}-gpu-0000-18-00-0", DRIVER_ID)
    assert spec.is_file()
    assert CdiSpecs(node.cdi_dir).driver_path("nvidia").is_file(), "the base spec beside the claim's"
    assert node.driver_files.findings[-1].ready
    assert tmp_path / "work" in spec.parents, "the tier's own folder, never the runtime's"
    assert tmp_path / "work" in node.settings.checkpoint_path.parents, "never the kubelet's"

    node.unprepare(claim)

    assert not spec.exists()


def test_mig_and_shared_claims_go_through_the_same_pipeline(
    node: PreparationNode, offers: OffersOutput
) -> None:
    mig = node.prepare("mig", _offer(offers, deviceType="MIG", profileID=19, placementStart=0))
    config = {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": "Short"}},
    }
    node.unprepare(mig)
    shared = node.prepare(
        "time-slicing",
        _offer(offers, deviceType="Physical", sharingStrategy="TimeSlicing"),
        consumed={"sharePercent": "50"},
        config=config,
    )

    share_id, driver_id = shared.cdi_device_ids
    assert driver_id == DRIVER_ID
    assert share_id.startswith(f"k8s.gpu.deckhouse.io/claim={shared.ref.uid}-gpu-0000-18-00-0-ts-")
    node.unprepare(shared)
    assert set(node.changed.cards) == {H100}, "MIG mode on for the MIG claim, off again for the share"


def test_a_claim_the_pipeline_refuses_is_an_error_naming_it(node: PreparationNode) -> None:
    unpublished = V1Device(name="gpu-0000-99-00-0")

    with pytest.raises(
        PrepareFailedError, match=r"claim hardware-tier/ghost \(.*\) on device gpu-0000-99-00-0: "
    ):
        node.prepare("ghost", unpublished)


@pytest.mark.skipif(os.geteuid() != 0, reason="runc runs the container as root")
def test_the_container_gets_the_card_and_the_driver_from_cdi_alone(
    node: PreparationNode, offers: OffersOutput, host: SimulatedGpuHost, tmp_path: Path
) -> None:
    runc = require_program("runc", "make host-packages installs it")
    require_file(BUSYBOX, "make host-packages installs busybox-static")
    claim = node.prepare("whole-card", _offer(offers, deviceType="Physical", sharingStrategy="Exclusive"))
    script = (
        "ls /dev; echo visible=$NVIDIA_VISIBLE_DEVICES; echo written > /dev/nvidia0 && echo nvidia0-writable;"
        " ls -l /usr/local/nvidia/lib64 /usr/bin /etc; cat /etc/ld.so.conf.d/*"
    )

    bundle = cdi_bundle(
        runc=runc,
        cdi_tool=default_bin_dir() / "cdi-validate",
        bundle=tmp_path / "bundle",
        container_id=f"unit-{claim.ref.uid[:8]}",
        program=BUSYBOX,
        args=["sh", "-c", script],
        spec_dirs=[node.cdi_dir],
        devices=claim.cdi_device_ids,
    )
    run = run_with_cdi(runc, bundle, state_root=tmp_path / "runc")

    assert run.returncode == 0, run.describe()
    listed = set(run.stdout.split())
    assert {"nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"} <= listed
    assert "nvidia1" not in listed, "the other card is not the claim's"
    uuid = json.loads(CdiSpecs(node.cdi_dir).path_of(claim.ref.uid).read_text())["devices"][0][
        "containerEdits"
    ]
    assert f"visible={uuid['env'][0].split('=', 1)[1]}" in run.stdout
    assert "nvidia0-writable" in run.stdout, "the device cgroup allows the injected node"
    # the base spec's mounts and NVIDIA's hooks ran in runc: the driver's files, soname links, ld cache
    assert f"libcuda.so.1 -> libcuda.so.{DRIVER_VERSION}" in run.stdout
    assert "nvidia-smi" in listed
    assert "ld.so.cache" in listed
    assert "/usr/local/nvidia/lib64" in listed
    assert bundle.cgroups_path == f"/gpu-cp-hardware-tier-unit-{claim.ref.uid[:8]}"
    node.unprepare(claim)
