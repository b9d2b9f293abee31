"""gpu-handler's ResourceSlice publishing as a process against the real control plane.

The real node agent and the real gpu-handler (backend ``simulated-nvidia``) run on a copy of the
``a30-x2`` fixture host, with a Ready Node that has no kubelet. The test plays the validator
(``DriverReady`` by server-side apply under its own field manager); the handler writes
``HardwareHealthy`` itself from the backend's health check. Then, step by step:

* the pool ``gpus/<node>`` appears in the layout of the server's version (1.35+: a counter slice and
  a device slice; 1.34: one device slice holding the counter sets), owned by the Node, holding both
  cards' offers, and the API server kept every field;
* the real kube-scheduler allocates a MIG 1g claim of a Pod from them;
* a card turned sick (the simulation's ``<pci-address>.health`` file) stays offered, but every
  one of its devices carries the ``NoSchedule`` device taint ``gpu.deckhouse.io/unhealthy`` with
  the fault as value (the API server keeps it, ``timeAdded`` included) and the generation moves,
  while the other card's devices carry none; healed, its taints go without a restart;
* the Node label ``gpu.deckhouse.io/allow-mig=false`` removes every MIG offer;
* over a quiet spell (with re-enrichment and the publisher's resync every second) nothing is written;
* the Node's deletion takes the slices with it (garbage collection of owned objects).
"""

from __future__ import annotations

import shutil
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kubernetes.client import (
    CoreV1ResourceClaim,
    ResourceV1ResourceClaim,
    V1CELDeviceSelector,
    V1Container,
    V1Device,
    V1DeviceClaim,
    V1DeviceRequest,
    V1DeviceSelector,
    V1ExactDeviceRequest,
    V1ObjectMeta,
    V1Pod,
    V1PodResourceClaim,
    V1PodSpec,
    V1ResourceClaimSpec,
    V1ResourceRequirements,
    V1ResourceSlice,
)
from testutil.integration.dra_objects import DRIVER, create_ready_node, device_class
from testutil.integration.process_helpers import eventually, node_components
from testutil.k8s_fields import allocation_results, meta, name_of, present, spec_of, uid_of

from pkg.devcluster.processes import free_port
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.dra.model.slices import Layout, read_server_version
from pkg.framework.client import KubeClient, NotFoundError, PatchType
from pkg.framework.client.builtin_kinds import DEVICE_CLASS, NODE, POD, RESOURCE_CLAIM, RESOURCE_SLICE

pytestmark = pytest.mark.dra_api

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "test" / "fixtures"
FIRST, SECOND = "0000:3b:00.0", "0000:d8:00.0"
FIRST_CARD, SECOND_CARD = "gpu-0000-3b-00-0", "gpu-0000-d8-00-0"
ATTR = f'device.attributes["{DRIVER}"]'
SELECT_LABEL = "gpu-test.deckhouse.io/node"
OFFERS_PER_A30 = 16  # 13 MIG placements, time slicing, MPS, the whole card


def _report_driver_ready(kube: KubeClient, name: str) -> None:
    """What the validator does: DriverReady by server-side apply under its own field manager."""
    validator = KubeClient(kube.api_client, field_manager="gpu-validator")
    condition = {
        "type": "DriverReady",
        "status": "True",
        "reason": "Validated",
        "message": "set by the test as the validator would",
        "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    body = {"metadata": {"name": name}, "status": {"conditions": [condition]}}
    validator.apply(PHYSICAL_GPU, body, subresource="status")


def _slices(kube: KubeClient, node: str) -> list[V1ResourceSlice]:
    items, _ = kube.list(RESOURCE_SLICE, field_selector=f"spec.nodeName={node},spec.driver={DRIVER}")
    return sorted(items, key=name_of)


def _devices(slices: list[V1ResourceSlice]) -> list[str]:
    return [d.name for rs in slices for d in rs.spec.devices or []]


def _card_devices(slices: list[V1ResourceSlice], card: str) -> list[V1Device]:
    return [
        d for rs in slices for d in rs.spec.devices or [] if d.name == card or d.name.startswith(f"{card}-")
    ]


def _taints(device: V1Device) -> list[tuple[str, str, str]]:
    return [(t.key, t.value or "", t.effect) for t in device.taints or []]


def _counter_sets(slices: list[V1ResourceSlice]) -> list[str]:
    return [c.name for rs in slices for c in rs.spec.shared_counters or []]


def _generation(slices: list[V1ResourceSlice]) -> int:
    (generation,) = {rs.spec.pool.generation for rs in slices}
    return int(generation)


def _pool_where(
    kube: KubeClient, node: str, check: Callable[[list[V1ResourceSlice]], bool], what: str
) -> list[V1ResourceSlice]:
    """The node's slices once a complete pool (one generation, every slice) satisfies ``check``."""

    def probe() -> list[V1ResourceSlice] | None:
        slices = _slices(kube, node)
        complete = (
            slices
            and len({rs.spec.pool.generation for rs in slices}) == 1
            and all(rs.spec.pool.resource_slice_count == len(slices) for rs in slices)
        )
        return slices if complete and check(slices) else None

    return eventually(probe, timeout=60, what=what)


def _allocate_mig_1g(kube: KubeClient, namespace: str, node: str, mig_class: str) -> str:
    """A Pod with a claim for one 1g MIG instance, placed by the real kube-scheduler; the device."""
    request = V1ExactDeviceRequest(
        device_class_name=mig_class,
        selectors=[V1DeviceSelector(cel=V1CELDeviceSelector(expression=f'{ATTR}.migProfile == "1g.6gb"'))],
    )
    claim = ResourceV1ResourceClaim(
        metadata=V1ObjectMeta(name="mig-1g", namespace=namespace),
        spec=V1ResourceClaimSpec(
            devices=V1DeviceClaim(requests=[V1DeviceRequest(name="gpu", exactly=request)])
        ),
    )
    kube.create(RESOURCE_CLAIM, claim)
    pod = V1Pod(
        metadata=V1ObjectMeta(name="mig-1g", namespace=namespace),
        spec=V1PodSpec(
            containers=[
                V1Container(
                    name="main",
                    image="registry.k8s.io/pause:3.10",
                    resources=V1ResourceRequirements(claims=[CoreV1ResourceClaim(name="gpu")]),
                )
            ],
            node_selector={SELECT_LABEL: node},
            resource_claims=[V1PodResourceClaim(name="gpu", resource_claim_name="mig-1g")],
        ),
    )
    kube.create(POD, pod)
    eventually(
        lambda: spec_of(kube.get(POD, "mig-1g", namespace)).node_name == node,
        timeout=60,
        what="the Pod bound",
    )
    allocated = kube.get(RESOURCE_CLAIM, "mig-1g", namespace)
    (result,) = allocation_results(allocated)
    assert (result.driver, result.pool) == (DRIVER, f"gpus/{node}")
    return str(result.device)


def _sick_card_is_tainted_then_healed(kube: KubeClient, node: str, state: Path, generation: int) -> int:
    """The second card turns sick and heals; returns the pool's generation afterwards."""
    # The second card turns sick: its offers stay, tainted; the first card's are untouched.
    (state / f"{SECOND}.health").write_text("False RowRemappingFailed row remapping failed\n")
    sick = [("gpu.deckhouse.io/unhealthy", "RowRemappingFailed", "NoSchedule")]
    pool = _pool_where(
        kube,
        node,
        lambda s: (
            bool(_card_devices(s, SECOND_CARD))
            and all(_taints(d) == sick for d in _card_devices(s, SECOND_CARD))
        ),
        "the sick card's offers tainted",
    )
    assert len(_card_devices(pool, SECOND_CARD)) == OFFERS_PER_A30
    assert all(_taints(d) == [] for d in _card_devices(pool, FIRST_CARD))
    assert all(t.time_added is not None for d in _card_devices(pool, SECOND_CARD) for t in d.taints or [])
    assert _counter_sets(pool) == [FIRST_CARD, SECOND_CARD]
    assert _generation(pool) > generation
    generation = _generation(pool)

    # Healed (the probe passes, no event episode): the taints go, nothing restarts.
    (state / f"{SECOND}.health").unlink()
    pool = _pool_where(
        kube,
        node,
        lambda s: not any(d.taints for rs in s for d in rs.spec.devices or []),
        "the healed card's taints gone",
    )
    assert _generation(pool) > generation
    return _generation(pool)


def _metric_lines(port: int, node: str) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return [
        line
        for line in text.splitlines()
        if line.startswith("gpu_dra_resourceslice_offers{") and f'node="{node}"' in line
    ]


def test_the_handler_publishes_what_the_scheduler_allocates_and_follows_health_and_mig_label(
    kube: KubeClient, kubeconfig: str, namespace: str, unique: str, tmp_path: Path
) -> None:
    node = f"gp-{unique}"
    created = create_ready_node(kube, node, labels={SELECT_LABEL: node})
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "sysfs" / "a30-x2", root, symlinks=True)
    state = tmp_path / "sim-state"
    state.mkdir()
    first, second = f"{node}-0-10de-20b7", f"{node}-1-10de-20b7"
    mig_class = f"mig-{unique}"
    kube.create(
        DEVICE_CLASS,
        device_class(mig_class, cel=f'device.driver == "{DRIVER}" && {ATTR}.deviceType == "MIG"'),
    )
    port = free_port()
    try:
        with node_components(
            kubeconfig,
            node,
            root=root,
            state=state,
            logs=tmp_path,
            metrics_port=port,
            handler_args=["--publish-resync-period=1s"],
        ):
            eventually(lambda: all(_exists(kube, name) for name in (first, second)), what="both PhysicalGPUs")
            time.sleep(2)
            assert _slices(kube, node) == []  # nothing is offered before DriverReady
            for name in (first, second):
                _report_driver_ready(kube, name)

            # The pool in the server's layout (1.35+: counters apart from devices; 1.34: inline), both
            # cards, owned by the Node.
            pool = _pool_where(
                kube, node, lambda s: len(_devices(s)) == 2 * OFFERS_PER_A30, "both cards' offers"
            )
            expected = {
                Layout.SEPARATE: [f"gpu-{node}-counters-00", f"gpu-{node}-devices-00"],
                Layout.INLINE: [f"gpu-{node}-devices-00"],
            }
            assert [name_of(rs) for rs in pool] == expected[read_server_version(kube).layout]
            assert _counter_sets(pool) == [FIRST_CARD, SECOND_CARD]
            for rs in pool:
                (owner,) = present(meta(rs).owner_references)
                assert (owner.kind, owner.name, owner.uid) == ("Node", node, uid_of(created))
            generation = _generation(pool)
            # The gauge follows the write it describes, a moment later.
            eventually(lambda: _metric_lines(port, node), what="the offers metric of the node")

            # The real scheduler allocates a MIG instance from the published offers.
            device = _allocate_mig_1g(kube, namespace, node, mig_class)
            assert device.startswith(f"{FIRST_CARD}-mig-14-")

            generation = _sick_card_is_tainted_then_healed(kube, node, state, generation)

            # MIG forbidden on the node: only the whole-card offers remain.
            kube.patch(
                NODE,
                node,
                {"metadata": {"labels": {"gpu.deckhouse.io/allow-mig": "false"}}},
                patch_type=PatchType.MERGE,
            )
            pool = _pool_where(
                kube, node, lambda s: not any("-mig-" in d for d in _devices(s)), "MIG offers withdrawn"
            )
            assert sorted(_devices(pool)) == [
                FIRST_CARD,
                f"{FIRST_CARD}-mps",
                f"{FIRST_CARD}-ts",
                SECOND_CARD,
                f"{SECOND_CARD}-mps",
                f"{SECOND_CARD}-ts",
            ]
            assert _generation(pool) > generation

            # A quiet spell: re-enrichment and the publisher's resync run every second, nothing changes.
            versions = {name_of(rs): meta(rs).resource_version for rs in _slices(kube, node)}
            time.sleep(5)
            assert {name_of(rs): meta(rs).resource_version for rs in _slices(kube, node)} == versions
    finally:
        kube.delete(DEVICE_CLASS, mig_class)
    for name in (first, second):
        kube.delete(PHYSICAL_GPU, name)
    # The slices are the Node's: they go with it.
    kube.delete(NODE, node)
    eventually(
        lambda: _slices(kube, node) == [], timeout=60, what="the slices garbage-collected with the Node"
    )


def _exists(kube: KubeClient, name: str) -> bool:
    try:
        gpu = kube.get(PHYSICAL_GPU, name)
    except NotFoundError:
        return False
    return bool(gpu.status and gpu.status.pci_info)
