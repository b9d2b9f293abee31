"""What an informer without managedFields relies on: the API server keeps an object's managed fields
when an update carries none, so a controller may write back (PUT) the object it cached stripped."""

from __future__ import annotations

from kubernetes.client import V1ObjectMeta

from api.gpu.v1alpha1 import LABEL_NODE, PciClass, PciId, PciInfo, PhysicalGPU, PhysicalGPUStatus
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.cache.transforms import strip_managed_fields
from pkg.framework.client import KubeClient
from pkg.framework.client.config import new_api_client


def managers(gpu: PhysicalGPU) -> set[tuple[str, str]]:
    return {
        (e.manager or "", e.subresource or "")
        for e in (gpu.metadata.managed_fields if gpu.metadata else []) or ()
    }


def test_status_put_of_a_stripped_object_keeps_every_managers_fields(kubeconfig: str, unique: str) -> None:
    agent = KubeClient(new_api_client(kubeconfig), field_manager="node-agent-like")
    handler = KubeClient(new_api_client(kubeconfig), field_manager="handler-like")
    controller = KubeClient(new_api_client(kubeconfig), field_manager="controller-like")
    name = f"strip-{unique}"
    gpu = agent.create(PHYSICAL_GPU, PhysicalGPU(metadata=V1ObjectMeta(name=name, labels={LABEL_NODE: "n"})))
    gpu.status = PhysicalGPUStatus(
        pci_info=PciInfo(address="0000:02:00.0", class_=PciClass(code="0302"), vendor=PciId(id="10de"),
                         device=PciId(id="20b7"))
    )  # fmt: skip
    agent.update_status(PHYSICAL_GPU, gpu)
    handler.apply(
        PHYSICAL_GPU,
        {"metadata": {"name": name}, "status": {"nodeInfo": {"kernelRelease": "6.1.0"}}},
        subresource="status",
    )
    before = agent.get(PHYSICAL_GPU, name)
    assert ("handler-like", "status") in managers(before)

    cached = PHYSICAL_GPU.decode(strip_managed_fields(PHYSICAL_GPU.encode(before)))
    assert cached.metadata is not None
    assert cached.metadata.managed_fields is None
    assert cached.status is not None
    cached.status.pci_info.vendor.name = "NVIDIA Corporation"  # type: ignore[union-attr]
    written = controller.update_status(PHYSICAL_GPU, cached)

    after = managers(written)
    assert managers(before) <= after  # nobody's record was lost
    assert ("controller-like", "status") in after
    assert written.status is not None
    assert written.status.node_info is not None
    assert written.status.node_info.kernel_release == "6.1.0"
    controller.delete(PHYSICAL_GPU, name)
