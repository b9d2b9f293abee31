"""The dev cluster's host faults on one real node, each shown to do what the soak relies on: a card
falling off the bus takes its offers out of use and brings them back when it returns; a full plugin
folder fails a Prepare with a clear error, keeps the checkpoint whole, and the Prepare succeeds
once there is room; a driver upgrade under the running gpu-handler reaches the CDI specs; the
supervisor starts a killed gpu-handler again after its backoff and counts the restart.

The node is its own (``e2e-node-hf``, the ``h100-and-l4`` host) because its kubelet plugin folder
is a small tmpfs (``NodeConfig.plugin_folder_mib``) and its driver changes version.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from testutil.e2e.gpu_nodes import SHOW_DEVICES, gpu_pod, retire, run_and_show

from pkg.backends.simulated.data import DRIVER_VERSION
from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents, wait_for_offers
from pkg.devcluster.gpuhost import nvidia_cards
from pkg.devcluster.node import NodeConfig
from pkg.devcluster.processes import wait_until
from pkg.devcluster.supervisor import Supervisor
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD, RESOURCE_SLICE

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "test" / "fixtures" / "sysfs" / "h100-and-l4"
PCI_IDS = ROOT / "test" / "fixtures" / "pci.ids"
SAMPLE_CLASSES = ROOT / "config" / "samples" / "deviceclasses.yaml"
NEW_DRIVER = "590.10.01"
BACKOFF = 3.0


@pytest.fixture(scope="module")
def node(control_plane: ControlPlane, node_pool: Any) -> Iterator[GpuComponents]:
    """The node with our components; its plugin folder a 32 MiB tmpfs (the CDI hook copied there
    takes about 8)."""
    real = node_pool.get(NodeConfig(name="e2e-node-hf", gpu_fixture=FIXTURE, plugin_folder_mib=32))
    components = GpuComponents(node=real, plane=control_plane, pci_ids=PCI_IDS, driver_version=DRIVER_VERSION)
    components.start()
    try:
        control_plane.kubectl("apply", "-f", str(SAMPLE_CLASSES))
        wait_for_offers(control_plane, real.name, cards=2)
        components.wait_registered()
        yield components
    finally:
        real.free_plugin_folder()
        components.stop()
        retire(control_plane, real.name)


def _pool(kube: KubeClient, node: str) -> list[Any] | None:
    """The devices of the node's newest *complete* pool generation, or None while no generation is
    complete: gpu-handler writes a pool's slices one after another, so for a moment the newest
    generation holds only some of them and the one before only the rest (the fresh clone's run of
    2026-11-29 read that moment as "the other card's offers are gone")."""
    slices, _ = kube.list(RESOURCE_SLICE, field_selector=f"spec.nodeName={node}")
    by_generation: dict[int, list[Any]] = {}
    for found in slices:
        by_generation.setdefault(found.spec.pool.generation, []).append(found)
    complete = [
        generation
        for generation, written in by_generation.items()
        if len(written) == written[0].spec.pool.resource_slice_count
    ]
    if not complete:
        return None
    return [d for s in by_generation[max(complete)] for d in s.spec.devices or []]


def _usable(devices: list[Any], card: str) -> bool:
    """Whether the card has offers among ``devices`` and none carries a taint that keeps new claims
    off it."""
    base = "gpu-" + card.replace(":", "-").replace(".", "-")
    offers = [d for d in devices if d.name == base or d.name.startswith(base + "-")]
    return bool(offers) and not any(
        t.effect in ("NoSchedule", "NoExecute") for d in offers for t in d.taints or []
    )


def _pool_where(
    kube: KubeClient, node: str, wanted: Callable[[list[Any]], bool], *, timeout: float, what: str
) -> list[Any]:
    """The first complete pool of the node for which ``wanted`` holds, so that a test judges every
    card by one whole generation."""
    found: list[list[Any]] = []

    def check() -> bool:
        devices = _pool(kube, node)
        if devices is not None and wanted(devices):
            found.append(devices)
            return True
        return False

    wait_until(check, timeout=timeout, what=what)
    return found[-1]


def test_a_card_off_the_bus_is_taken_out_of_use_and_comes_back(node: GpuComponents, kube: KubeClient) -> None:
    name = node.node.name
    card = nvidia_cards(node.node.host.root)[-1]
    other = nvidia_cards(node.node.host.root)[0]
    _pool_where(kube, name, lambda d: _usable(d, card), timeout=30, what=f"the offers of {card}")
    node.node.host.unplug_card(card)
    try:
        lost = _pool_where(
            kube, name, lambda d: not _usable(d, card), timeout=60, what=f"the offers of {card} to go"
        )
        assert _usable(lost, other), "only the lost card's offers go"
    finally:
        node.node.host.replug_card(card)
    _pool_where(kube, name, lambda d: _usable(d, card), timeout=90, what=f"the offers of {card} to return")
    assert node.handler.running()
    assert node.agent.running()


def _events(plane: ControlPlane, namespace: str, pod: str) -> str:
    return plane.kubectl(
        "get", "events", "-n", namespace, f"--field-selector=involvedObject.name={pod}",
        "-o", "jsonpath={.items[*].message}", check=False,
    )  # fmt: skip


def test_a_full_plugin_folder_fails_a_prepare_clearly_until_it_is_freed(
    node: GpuComponents, kube: KubeClient, control_plane: ControlPlane, namespace: str
) -> None:
    real = node.node
    before = (real.plugin_folder / "checkpoint.json").read_bytes()
    real.fill_plugin_folder()
    try:
        kube.create(POD, gpu_pod("full", "gpu", node=real.name), namespace=namespace)
        wait_until(
            lambda: "No space left on device" in _events(control_plane, namespace, "full"),
            timeout=90,
            what="the Prepare to fail for want of room",
        )
        assert node.handler.running(), "a full folder is no reason to crash"
        assert (real.plugin_folder / "checkpoint.json").read_bytes() == before, "the checkpoint is as it was"
    finally:
        real.free_plugin_folder()
    wait_until(
        lambda: "shown" in control_plane.kubectl("logs", "-n", namespace, "full", check=False),
        timeout=120,
        what="the Pod to run once the folder has room",
    )
    assert json.loads((real.plugin_folder / "checkpoint.json").read_text())["data"]["claims"]
    kube.delete(POD, "full", namespace)


def test_a_driver_upgrade_reaches_the_cdi_specs(
    node: GpuComponents, kube: KubeClient, control_plane: ControlPlane, namespace: str
) -> None:
    node.reload_driver(NEW_DRIVER)
    run_and_show(
        kube, control_plane, namespace, gpu_pod("upgraded", "gpu", node=node.node.name, script=SHOW_DEVICES)
    )
    specs = {p.name: p.read_text() for p in node.node.cdi_dir.glob("k8s.gpu.deckhouse.io-driver_*.json")}
    assert specs, "the driver's CDI specs exist"
    assert all(DRIVER_VERSION not in text for text in specs.values()), "no spec names the old driver"
    assert any(f"libcuda.so.{NEW_DRIVER}" in text for text in specs.values())


def test_the_supervisor_starts_a_killed_handler_again_after_its_backoff(node: GpuComponents) -> None:
    supervisor = Supervisor(initial_backoff=BACKOFF)
    supervisor.supervise(node.handler)
    supervisor.start()
    name = node.handler.name
    try:
        since = node.handler_log_size()
        supervisor.kill(name)
        wait_until(lambda: len(supervisor.restarts(name)) == 1 and node.handler.running(), timeout=30,
                   what="the supervisor to start gpu-handler again")  # fmt: skip
        node.wait_registered(since=since)
    finally:
        supervisor.stop(processes=False)
    [restart] = supervisor.restarts(name)
    assert (restart.signal, restart.ours) == ("SIGKILL", True)
    assert restart.started_at is not None
    assert restart.started_at - restart.exited_at >= BACKOFF
