"""The e2e tier: a real control plane with real nodes (kubelet + containerd) on this machine.

One control plane and one node (``real_node``, with the simulated GPUs of the ``a30-x2`` fixture
host) are started per session; ``second_node`` (``h100-and-l4``), ``workstation_node``
(``rtx-workstation``) and ``vm_node`` (``vm-dmi``) start on first use. Nodes stop
at the end of the session, and the session fails if a node left anything on the machine (a
mount, a process, its bridge, a host-wide file). Fixtures shared with the integration tier
(``kube``, ``namespace``, failure logs in ``test-artifacts/``) are in ``test/conftest.py``.

Needs root (mknod, mounts, network namespaces, cgroups), overlayfs and the Debian packages of
``make host-packages``; ``make test-e2e`` provides the rest.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from testutil.e2e.chart_release import TAGS

from pkg.backends.simulated.data import DRIVER_VERSION
from pkg.devcluster.cluster import (
    CONTROLLERS,
    NODE_CONTROLLERS,
    ControlPlane,
    ControlPlaneConfig,
    default_bin_dir,
)
from pkg.devcluster.footprint import Footprint
from pkg.devcluster.gpucomponents import GpuComponents, wait_for_offers
from pkg.devcluster.hostlock import exclusive_host
from pkg.devcluster.images import ImageArchive, build_archive
from pkg.devcluster.node import NodeConfig, RealNode
from pkg.devcluster.projectimage import PROJECT_REPOSITORY, build_project_image

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "test" / "fixtures" / "sysfs"
PCI_IDS = ROOT / "test" / "fixtures" / "pci.ids"
SAMPLE_CLASSES = ROOT / "config" / "samples" / "deviceclasses.yaml"
_HOST_LOCK = pytest.StashKey[contextlib.ExitStack]()


def _hold_host_lock(config: pytest.Config) -> None:
    if _HOST_LOCK in config.stash:
        return
    hold = contextlib.ExitStack()
    hold.enter_context(exclusive_host(on_wait=lambda message: print(message, file=sys.stderr, flush=True)))
    config.stash[_HOST_LOCK] = hold


def pytest_sessionstart(session: pytest.Session) -> None:
    """Takes the machine's real-node lock for the whole session, before any test's timeout runs.

    Taken here rather than in a fixture, so the wait for another run's nodes (another checkout's
    e2e tier, a demo) does not count against the first test's pytest-timeout. (pytest calls this
    hook only when this folder is named on the command line; :func:`node_pool` takes the lock
    otherwise.)
    """
    _hold_host_lock(session.config)


def pytest_sessionfinish(session: pytest.Session) -> None:
    hold = session.config.stash.get(_HOST_LOCK, None)
    if hold is not None:
        hold.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "test/e2e" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def work_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gpu-e2e-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def control_plane(work_dir: Path) -> Iterator[ControlPlane]:
    plane = ControlPlane(
        ControlPlaneConfig(
            bin_dir=default_bin_dir(),
            work_dir=work_dir / "cluster",
            controllers=CONTROLLERS + NODE_CONTROLLERS,
        )
    )
    plane.start()
    try:
        plane.kubectl("apply", "--server-side", "-f", str(ROOT / "config" / "crd"))
        plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def images(work_dir: Path) -> ImageArchive:
    return build_archive(work_dir / "images.tar")


@pytest.fixture(scope="session")
def project_image(work_dir: Path) -> ImageArchive:
    """The project's image (:mod:`pkg.devcluster.projectimage`), built once per session under the
    chart test's tags: the chart's release runs it, and the compute-domain tests run the stand-in
    IMEX daemon from it. Minutes on a cold cache (debootstrap, a venv), seconds when cached."""
    return build_project_image(
        work_dir / "project-image.tar",
        tags=[f"{PROJECT_REPOSITORY}:{tag}" for tag in TAGS],
        source=ROOT,
        cache_dir=default_bin_dir().parents[1],
        pip=ROOT / ".venv" / "bin" / "pip",
        tools=default_bin_dir(),
    )


class NodePool:
    """Nodes started on demand, stopped together; remembers what each left behind."""

    def __init__(self, plane: ControlPlane, images: ImageArchive, work_dir: Path) -> None:
        self._plane, self._images, self._work_dir = plane, images, work_dir
        self._nodes: dict[str, RealNode] = {}
        self._footprint = Footprint.take()

    def get(self, config: NodeConfig) -> RealNode:
        node = self._nodes.get(config.name)
        if node is None:
            node = RealNode(
                config=config,
                plane=self._plane,
                index=len(self._nodes),
                images=self._images,
                work_dir=self._work_dir / "nodes",
            )
            node.start()
            self._nodes[config.name] = node
        return node

    def stop_all(self) -> list[str]:
        leftovers = []
        for node in reversed(self._nodes.values()):
            node.stop()
            leftovers += [f"{node.name}: {item}" for item in node.leftovers()]
            node.remove_files()
        return leftovers + [f"host entry {path}" for path in self._footprint.new_entries()]


@pytest.fixture(scope="session")
def node_pool(
    request: pytest.FixtureRequest, control_plane: ControlPlane, images: ImageArchive, work_dir: Path
) -> Iterator[NodePool]:
    _hold_host_lock(request.config)
    pool = NodePool(control_plane, images, work_dir)
    yield pool
    leftovers = pool.stop_all()
    assert not leftovers, f"real nodes left things behind: {leftovers}"


@pytest.fixture(scope="session")
def real_node(node_pool: NodePool) -> RealNode:
    return node_pool.get(NodeConfig(name="e2e-node-a", gpu_fixture=FIXTURES / "a30-x2"))


@pytest.fixture(scope="session")
def second_node(node_pool: NodePool) -> RealNode:
    return node_pool.get(NodeConfig(name="e2e-node-b", gpu_fixture=FIXTURES / "h100-and-l4"))


@pytest.fixture(scope="session")
def workstation_node(node_pool: NodePool) -> RealNode:
    """Bare metal with an RTX A6000 whose HDMI audio function shares its IOMMU group (VFIO)."""
    return node_pool.get(NodeConfig(name="e2e-node-ws", gpu_fixture=FIXTURES / "rtx-workstation"))


@pytest.fixture(scope="session")
def vm_node(node_pool: NodePool) -> RealNode:
    """A QEMU guest (DMI and the CPU's hypervisor flag say so) with an L4 passed into it."""
    return node_pool.get(NodeConfig(name="e2e-node-vm", gpu_fixture=FIXTURES / "vm-dmi"))


@pytest.fixture(scope="session")
def vgpu_node(node_pool: NodePool) -> RealNode:
    """Bare metal with two Tesla T4s under NVIDIA's vGPU manager (mdev types in sysfs)."""
    return node_pool.get(NodeConfig(name="e2e-node-vg", gpu_fixture=FIXTURES / "t4-vgpu"))


def _components(plane: ControlPlane, node: RealNode, cards: int) -> Iterator[GpuComponents]:
    components = GpuComponents(node=node, plane=plane, pci_ids=PCI_IDS, driver_version=DRIVER_VERSION)
    components.start()
    try:
        try:
            plane.kubectl("apply", "-f", str(SAMPLE_CLASSES))
            wait_for_offers(plane, node.name, cards=cards)
            components.wait_registered()
        except Exception as exc:
            tails = "\n".join(f"--- {p.name}:\n{p.tail(30)}" for p in components.processes)
            raise RuntimeError(f"our components on {node.name} did not come up: {exc}\n{tails}") from exc
        yield components
    finally:
        components.stop()


@pytest.fixture(scope="session")
def gpu_node(control_plane: ControlPlane, real_node: RealNode) -> Iterator[GpuComponents]:
    """The first real node with gpu-node-agent and gpu-handler running: 2 x A30, offers published."""
    yield from _components(control_plane, real_node, cards=2)


@pytest.fixture(scope="session")
def gpu_node_b(control_plane: ControlPlane, second_node: RealNode) -> Iterator[GpuComponents]:
    """The second real node with our components: an H100 and an L4."""
    yield from _components(control_plane, second_node, cards=2)


@pytest.fixture(scope="session")
def gpu_node_ws(control_plane: ControlPlane, workstation_node: RealNode) -> Iterator[GpuComponents]:
    """The workstation node with our components: one RTX A6000 (VGA + HDMI audio, IOMMU group 28)."""
    yield from _components(control_plane, workstation_node, cards=1)


@pytest.fixture(scope="session")
def gpu_node_vgpu(control_plane: ControlPlane, vgpu_node: RealNode) -> Iterator[GpuComponents]:
    """The vGPU node with our components: two T4s offered as vGPUs and whole cards."""
    yield from _components(control_plane, vgpu_node, cards=2)


@pytest.fixture(scope="session")
def gpu_node_vm(control_plane: ControlPlane, vm_node: RealNode) -> Iterator[GpuComponents]:
    """The VM node with our components: one L4."""
    yield from _components(control_plane, vm_node, cards=1)
