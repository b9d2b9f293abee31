"""``DriverFilesReady`` on a real API server: its own field manager, merged beside the others.

gpu-handler's kubelet plugin reports whether the driver's user space can be given to containers
(pkg.gpuhandler.preparation.driver_files_status) by server-side apply of that one condition under
``gpu-handler-driver-files``. The enrichment's apply of ``HardwareHealthy`` (field manager
``gpu-handler``) must never remove it, nor it the enrichment's; a bad state is a Warning event on
the card, once per reason.
"""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes.client import V1Condition, V1ObjectMeta
from testutil.integration.dra_objects import create_ready_node
from testutil.k8s_fields import status_of

from api.gpu.v1alpha1 import LABEL_NODE, LABEL_VENDOR, PhysicalGPU, PhysicalGPUStatus
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import EVENT, NODE
from pkg.framework.events.recorder import EventRecorderLogger
from pkg.gpuhandler.enrichment.owned import OwnedStatus
from pkg.gpuhandler.enrichment.status_writer import KubeStatusWriter
from pkg.gpuhandler.preparation.driver_files_status import DriverFilesFinding, KubeDriverFilesStatus


def _conditions(kube: KubeClient, name: str) -> dict[str, tuple[str, str]]:
    gpu = kube.get(PHYSICAL_GPU, name)
    return {str(c.type): (str(c.status), str(c.reason)) for c in status_of(gpu).conditions or []}


def test_driver_files_ready_is_its_own_and_survives_the_enrichments_apply(
    kube: KubeClient, unique: str
) -> None:
    node = f"df-{unique}"
    create_ready_node(kube, node)
    name = f"{node}-0-10de-20b7"
    labels = {LABEL_NODE: node, LABEL_VENDOR: "nvidia"}
    gpu = kube.create(PHYSICAL_GPU, PhysicalGPU(metadata=V1ObjectMeta(name=name, labels=labels)))
    gpu.status = PhysicalGPUStatus()
    kube.update_status(PHYSICAL_GPU, gpu)
    recorder = EventRecorderLogger(
        client=kube, reporting_controller="gpu.deckhouse.io/gpu-handler", reporting_instance=node
    )
    status = KubeDriverFilesStatus(
        client=kube, gpus=lambda: [kube.get(PHYSICAL_GPU, name)], recorder=recorder
    )
    handler = KubeStatusWriter(KubeClient(kube.api_client, field_manager="gpu-handler"))
    try:
        status.report(
            DriverFilesFinding(
                ready=False, reason="DriverRootMissing", message="driver root /x does not exist"
            )
        )
        assert _conditions(kube, name) == {"DriverFilesReady": ("False", "DriverRootMissing")}

        now = datetime.now(UTC).replace(microsecond=0)
        healthy = V1Condition(
            type="HardwareHealthy", status="True", reason="Healthy", message="", last_transition_time=now
        )
        handler.apply(kube.get(PHYSICAL_GPU, name), OwnedStatus(health=healthy))
        assert _conditions(kube, name) == {
            "DriverFilesReady": ("False", "DriverRootMissing"),
            "HardwareHealthy": ("True", "Healthy"),
        }

        status.sync()  # unchanged: no write, no second event
        status.report(
            DriverFilesFinding(ready=True, reason="DriverFilesFound", message="driver 580.76.05: 7 libraries")
        )
        assert _conditions(kube, name) == {
            "DriverFilesReady": ("True", "DriverFilesFound"),
            "HardwareHealthy": ("True", "Healthy"),
        }
        fields = kube.get(PHYSICAL_GPU, name).metadata.managed_fields or []
        assert {"gpu-handler", "gpu-handler-driver-files"} <= {str(f.manager) for f in fields}
        recorder.flush()
        events, _ = kube.list(EVENT, namespace="default")
        warnings = [e.reason for e in events if e.regarding and e.regarding.name == name]
        assert warnings == ["DriverRootMissing"]
    finally:
        recorder.stop()
        kube.delete(PHYSICAL_GPU, name)
        kube.delete(NODE, node)
