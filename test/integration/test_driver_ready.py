"""DriverReady from the GPU validator's Pod, end to end against the real control plane.

gpu-controller runs as a process; the real node agent and gpu-handler (simulated NVIDIA backend) run
on a copy of the ``a30-x2`` fixture host for a kubelet-less Node; the test plays the kubelet by
writing the validator Pod's status. Offers exist exactly while the Pod is Ready: before it, while
its validation fails (the condition then carries the Pod's own reason and message), and once it is
gone, the node's pool holds no device. The node gate labels follow, and so do the metric and the
Events.

The second test races gpu-handler's own status writer (server-side apply of ``HardwareHealthy``)
against gpu-controller's ``DriverReady`` writes on one object: neither condition may ever vanish
from a stored version, and both end as their writers last said.
"""

from __future__ import annotations

import shutil
import threading
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from kubernetes.client import V1Condition, V1ObjectMeta
from testutil.cluster_views import GATES, cards, driver_ready, gates, offers
from testutil.integration.dra_objects import create_ready_node
from testutil.integration.gpu_controller_helpers import (
    create_validator_pod,
    delete_now,
    gpu_controller,
    report_validator,
)
from testutil.integration.process_helpers import eventually, node_components
from testutil.k8s_fields import status_of

from api.gpu.v1alpha1 import LABEL_NODE, LABEL_VENDOR, PhysicalGPU, PhysicalGPUStatus
from pkg.devcluster.processes import free_port
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import EVENT, NODE
from pkg.framework.client.watch import WatchEventType
from pkg.gpuhandler.enrichment.owned import OwnedStatus
from pkg.gpuhandler.enrichment.status_writer import KubeStatusWriter

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "test" / "fixtures"
OFFERS_PER_A30 = 16


def test_offers_exist_exactly_while_the_validator_pod_is_ready(
    kube: KubeClient, kubeconfig: str, namespace: str, unique: str, tmp_path: Path
) -> None:
    node = f"dr-{unique}"
    create_ready_node(kube, node)
    root = tmp_path / "host"
    shutil.copytree(FIXTURES / "sysfs" / "a30-x2", root, symlinks=True)
    port = free_port()
    try:
        with (
            node_components(kubeconfig, node, root=root, state=tmp_path / "nvml", logs=tmp_path),
            gpu_controller(
                kubeconfig, namespace, log_path=tmp_path / "gpu-controller.log", metrics_port=port
            ),
        ):
            pending = {("Unknown", "ValidationPending")}
            eventually(
                lambda: len(cards(kube, node)) == 2 and driver_ready(kube, node) == pending,
                what="2 cards pending",
            )
            eventually(lambda: gates(kube, node) == {GATES[0]: "true"}, what="the nvidia.present gate alone")
            assert offers(kube, node) == 0

            create_validator_pod(kube, namespace, node)
            report_validator(kube, namespace, ready=False)
            eventually(
                lambda: driver_ready(kube, node) == {("Unknown", "ValidationInProgress")}, what="in progress"
            )
            assert offers(kube, node) == 0

            report_validator(kube, namespace, ready=True)
            eventually(lambda: driver_ready(kube, node) == {("True", "Validated")}, what="DriverReady=True")
            eventually(
                lambda: offers(kube, node) == 2 * OFFERS_PER_A30, what="both cards' offers", timeout=60
            )
            eventually(lambda: gates(kube, node) == {GATES[0]: "true", GATES[1]: "true"}, what="both gates")

            report_validator(
                kube, namespace, ready=False, init_failure="CrashLoopBackOff", message="back-off 10s"
            )
            eventually(
                lambda: driver_ready(kube, node) == {("False", "CrashLoopBackOff")}, what="DriverReady=False"
            )
            [message] = {
                c.message
                for g in cards(kube, node)
                for c in status_of(g).conditions or []
                if c.type == "DriverReady"
            }
            assert message == (
                f"validator Pod {namespace}/validator: "
                "init container driver-validation is CrashLoopBackOff: back-off 10s"
            )
            eventually(lambda: offers(kube, node) == 0, what="offers withdrawn", timeout=60)
            eventually(lambda: gates(kube, node) == {GATES[0]: "true"}, what="driver-ready gate removed")

            report_validator(kube, namespace, ready=True)
            eventually(lambda: offers(kube, node) == 2 * OFFERS_PER_A30, what="offers back", timeout=60)

            delete_now(kube, namespace)
            eventually(
                lambda: driver_ready(kube, node) == pending, what="back to Unknown without a validator"
            )
            eventually(lambda: offers(kube, node) == 0, what="offers gone with the validator", timeout=60)

            metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            for gpu in cards(kube, node):
                series = (
                    f'gpu_physicalgpu_condition{{condition="DriverReady",name="{gpu.metadata.name}",'
                    f'node="{node}",status="Unknown"}} 1.0'
                )
                assert series in metrics
        events, _ = kube.list(EVENT, namespace="default")
        reasons = [
            str(e.reason)
            for e in events
            if e.regarding and e.regarding.name in {g.metadata.name for g in cards(kube, node)}
        ]
        # One Event per transition and card: ->Unknown(in progress) is not a status change from Unknown.
        assert sorted(set(reasons)) == ["DriverNotReady", "DriverReady", "DriverReadyUnknown"]
        assert reasons.count("DriverNotReady") == 2
    finally:
        for gpu in cards(kube, node):
            kube.delete(PHYSICAL_GPU, str(gpu.metadata.name))
        kube.delete(NODE, node)


def _condition(type_: str, status: str, message: str) -> V1Condition:
    now = datetime.now(UTC).replace(microsecond=0)
    return V1Condition(type=type_, status=status, reason="Checked", message=message, last_transition_time=now)


class VersionLog:
    """Every version of one PhysicalGPU the server stored, in order (a watch misses none), as its
    conditions ``{type: status}``."""

    def __init__(self, kube: KubeClient, name: str, resource_version: str) -> None:
        self.seen: list[dict[str, str]] = []
        self.stop = threading.Event()
        self._events = kube.watch(
            PHYSICAL_GPU,
            resource_version=resource_version,
            field_selector=f"metadata.name={name}",
            timeout_seconds=240,
        )
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for event in self._events:
            if event.type is not WatchEventType.BOOKMARK:
                conditions = (event.raw.get("status") or {}).get("conditions", [])
                self.seen.append({c["type"]: c["status"] for c in conditions})
            if self.stop.is_set():
                return

    def close(self, poke: Callable[[], object]) -> list[dict[str, str]]:
        """Stops after the next event (``poke`` makes one) and returns what was seen."""
        self.stop.set()
        poke()
        self._thread.join(timeout=30)
        return self.seen


def _thirty_times(write: Callable[[int], None]) -> None:
    for i in range(30):
        write(i)


def test_driver_ready_and_hardware_healthy_merge_while_their_writers_race(
    kube: KubeClient, kubeconfig: str, namespace: str, unique: str, tmp_path: Path
) -> None:
    node = f"race-{unique}"
    create_ready_node(kube, node)
    name = f"{node}-0-10de-20b7"
    labels = {LABEL_NODE: node, LABEL_VENDOR: "nvidia"}
    gpu = kube.create(PHYSICAL_GPU, PhysicalGPU(metadata=V1ObjectMeta(name=name, labels=labels)))
    gpu.status = PhysicalGPUStatus()
    log = VersionLog(kube, name, str(kube.update_status(PHYSICAL_GPU, gpu).metadata.resource_version))
    handler = KubeStatusWriter(
        KubeClient(kube.api_client, field_manager="gpu-handler")
    )  # gpu-handler's writer
    create_validator_pod(kube, namespace, node)

    def health(i: int) -> None:
        status = "True" if i % 2 else "False"
        handler.apply(
            kube.get(PHYSICAL_GPU, name),
            OwnedStatus(health=_condition("HardwareHealthy", status, f"apply {i}")),
        )

    def validator(i: int) -> None:
        report_validator(kube, namespace, ready=bool(i % 2))
        time.sleep(0.05)

    def settled() -> bool:
        conditions = {c.type: c for c in status_of(kube.get(PHYSICAL_GPU, name)).conditions or []}
        health, ready = conditions.get("HardwareHealthy"), conditions.get("DriverReady")
        return bool(
            health and ready and (health.status, health.message) == ("False", "final")
            and (ready.status, ready.reason) == ("True", "Validated")
        )  # fmt: skip

    try:
        with gpu_controller(kubeconfig, namespace, log_path=tmp_path / "gpu-controller.log"):
            eventually(
                lambda: ("missing", "") not in driver_ready(kube, node), what="the controller's first write"
            )
            writers = [
                threading.Thread(target=_thirty_times, args=(health,)),
                threading.Thread(target=_thirty_times, args=(validator,)),
            ]
            for writer in writers:
                writer.start()
            for writer in writers:
                writer.join(timeout=120)
            report_validator(kube, namespace, ready=True)
            handler.apply(
                kube.get(PHYSICAL_GPU, name),
                OwnedStatus(health=_condition("HardwareHealthy", "False", "final")),
            )
            eventually(settled, what="both writers' last word")
            time.sleep(2)
            assert settled(), "a later write undid one of the conditions"
        seen = log.close(lambda: kube.update_status(PHYSICAL_GPU, kube.get(PHYSICAL_GPU, name)))
        both = next(
            i for i, conditions in enumerate(seen) if {"DriverReady", "HardwareHealthy"} <= set(conditions)
        )
        lost = [
            conditions
            for conditions in seen[both:]
            if not {"DriverReady", "HardwareHealthy"} <= set(conditions)
        ]
        assert lost == [], f"a write dropped a condition another writer owns: {lost[:3]}"
        assert len(seen) - both > 40, f"the writers hardly raced: {len(seen)} versions"
        owners = {
            entry.manager: entry.operation
            for entry in kube.get(PHYSICAL_GPU, name).metadata.managed_fields or []
            if "HardwareHealthy" in str(entry.fields_v1)
        }
        assert owners.get("gpu-handler") == "Apply"
    finally:
        log.stop.set()
        kube.delete(PHYSICAL_GPU, name)
        kube.delete(NODE, node)
