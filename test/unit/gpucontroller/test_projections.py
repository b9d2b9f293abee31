"""gpu-controller's cache projections keep every field its controllers read.

A whole PhysicalGPU and Node, as the node agent, gpu-handler and the kubelet write them, are
projected as the informers project them (raw JSON, then decoded, then interned); every reader of the caches —
the PhysicalGPU state and its handlers, the inventory metrics, the gate labels, the GPUClass
UUID lookup, the node index — must answer the same on the projection as on the whole object.
"""

from __future__ import annotations

import copy
import functools
from datetime import UTC, datetime
from typing import Any

from kubernetes.client import V1Condition
from prometheus_client import CollectorRegistry
from pytest_mock import MockerFixture

from api.gpu.v1alpha1 import PhysicalGPU, PhysicalGPUStatus
from pkg.domain.indexes import PHYSICAL_GPU_BY_NODE_INDEX
from pkg.domain.kinds import PHYSICAL_GPU
from pkg.framework.cache.store import Store
from pkg.framework.client.builtin_kinds import NODE
from pkg.framework.reconcile import Resource
from pkg.framework.reconcile.contract import Request
from pkg.gpucontroller.gpuclass.internal.gpu_uuid import gpu_uuid
from pkg.gpucontroller.nodelabels.reconciler import gate_labels
from pkg.gpucontroller.nodelabels.watch import gate_inputs_changed
from pkg.gpucontroller.physicalgpu.internal.handler.default_conditions import DefaultConditionsHandler
from pkg.gpucontroller.physicalgpu.internal.state import state_factory
from pkg.gpucontroller.physicalgpu.metrics import PhysicalGPUCollector
from pkg.gpucontroller.projections import PhysicalGPUInterner, project_node, project_physical_gpu

NOW = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
MANAGED = [
    {
        "manager": "gpu-node-agent",
        "operation": "Apply",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {}},
    }
]
LONG_NODE = "a-node-name-longer-than-sixty-three-characters-which-labels-cannot-hold-x"


def whole_gpu() -> dict[str, Any]:
    """A PhysicalGPU as the API server sends it once every writer has written."""
    return {
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "PhysicalGPU",
        "metadata": {
            "name": "node-1-0-10de-20b7",
            "uid": "uid-1",
            "resourceVersion": "42",
            "generation": 1,
            "creationTimestamp": "2026-11-26T11:00:00Z",
            "labels": {
                "gpu.deckhouse.io/node": "node-1",
                "gpu.deckhouse.io/vendor": "nvidia",
                "gpu.deckhouse.io/device": "a30-pcie",
            },
            "annotations": {"note": "x" * 200},
            "managedFields": MANAGED,
        },
        "spec": {},
        "status": {
            "nodeInfo": {
                "nodeName": LONG_NODE,
                "os": {"id": "debian", "version": "12", "name": "Debian GNU/Linux"},
                "kernelRelease": "6.1.0-28-amd64",
                "bareMetal": True,
            },
            "pciInfo": {
                "address": "0000:02:00.0",
                "class": {"code": "0302"},
                "vendor": {"id": "10de"},
                "device": {"id": "20b7"},
            },
            "capabilities": {"productName": "NVIDIA A30", "memoryMiB": 24576, "vendor": "Nvidia"},
            "currentState": {
                "driverType": "Nvidia",
                "nvidia": {"gpuUUID": "GPU-1234", "driverVersion": "580.76.05", "cudaVersion": "13.0"},
            },
            "conditions": [
                {
                    "type": "DriverReady",
                    "status": "True",
                    "reason": "Validated",
                    "message": "validator Pod ns/v is Ready",
                    "lastTransitionTime": "2026-11-26T11:10:00Z",
                    "observedGeneration": 1,
                },
                {
                    "type": "HardwareHealthy",
                    "status": "False",
                    "reason": "XidError",
                    "message": "Xid 79",
                    "lastTransitionTime": "2026-11-26T11:20:00Z",
                },
            ],
            "observedGeneration": 1,
        },
    }


def decoded(
    raw: dict[str, Any], *, projected: bool, interner: PhysicalGPUInterner | None = None
) -> PhysicalGPU:
    """``raw`` decoded whole, or as gpu-controller's cache holds it: projected, then interned."""
    body = copy.deepcopy(raw)
    if not projected:
        return PHYSICAL_GPU.decode(body)
    return (interner if interner is not None else PhysicalGPUInterner())(
        PHYSICAL_GPU.decode(project_physical_gpu(body))
    )


def both(raw: dict[str, Any]) -> tuple[PhysicalGPU, PhysicalGPU]:
    return decoded(raw, projected=False), decoded(raw, projected=True)


def _same(gpu: PhysicalGPU, _request: Request) -> PhysicalGPU:
    return gpu


def scrape(gpu: PhysicalGPU) -> list[Any]:
    store: Store[PhysicalGPU] = Store()
    store.add(gpu)
    registry = CollectorRegistry()
    registry.register(PhysicalGPUCollector(store))
    return [(s.name, s.labels, s.value) for family in registry.collect() for s in family.samples]


def test_the_projection_drops_what_no_controller_reads() -> None:
    projected = project_physical_gpu(whole_gpu())
    assert set(projected["metadata"]) == {"name", "uid", "resourceVersion", "generation", "labels"}
    assert projected["status"]["nodeInfo"] == {"nodeName": LONG_NODE}
    assert projected["status"]["currentState"] == {"driverType": "Nvidia", "nvidia": {"gpuUUID": "GPU-1234"}}
    assert "capabilities" not in projected["status"]


def test_metrics_are_the_same_on_the_projection() -> None:
    whole, projected = both(whole_gpu())
    assert scrape(projected) == scrape(whole)
    info = {"name": "node-1-0-10de-20b7", "node": "node-1", "vendor": "nvidia", "device": "a30-pcie",
            "pci_address": "0000:02:00.0", "driver_type": "Nvidia"}  # fmt: skip
    assert ("gpu_physicalgpu_info", info, 1.0) in scrape(projected)


def test_the_physicalgpu_reconcile_decides_the_same_on_the_projection(mocker: MockerFixture) -> None:
    build = state_factory(lambda node: node == LONG_NODE)
    for gpu in both(whole_gpu()):
        resource: Resource[PhysicalGPU, PhysicalGPUStatus] = Resource(
            Request(name="x"),
            getter=functools.partial(_same, gpu),
            writer=mocker.Mock(),
            status_type=PhysicalGPUStatus,
        )
        resource.fetch()
        state = build(resource)
        assert (state.node_name, state.node_exists, state.validated_by_validator, state.being_deleted) == (
            LONG_NODE, True, True, False,
        )  # fmt: skip
        assert str(state.driver_ready_before) == "True"
        DefaultConditionsHandler(now=lambda: NOW).handle(state)
        assert resource.changed().status == resource.original.status  # both conditions present: no write


def test_gate_labels_gpuclass_uuids_and_the_node_index_are_the_same_on_the_projection() -> None:
    whole, projected = both(whole_gpu())
    assert gate_labels([projected]) == gate_labels([whole])
    assert gpu_uuid(projected) == gpu_uuid(whole) == "GPU-1234"
    assert not gate_inputs_changed(whole, projected)
    index = PHYSICAL_GPU_BY_NODE_INDEX.func
    assert index(projected) == index(whole) == ["node-1"]


def test_a_card_without_status_or_nvidia_state_projects_as_it_decodes() -> None:
    raw = whole_gpu()
    bare = {k: v for k, v in raw.items() if k != "status"}
    assert decoded(bare, projected=True).status is None
    raw["status"]["currentState"] = {"driverType": "VFIO"}
    whole, projected = both(raw)
    assert projected.status is not None
    assert whole.status is not None
    assert projected.status.current_state == whole.status.current_state
    assert gpu_uuid(projected) is None


def test_a_deleting_card_is_seen_as_deleting() -> None:
    raw = whole_gpu()
    raw["metadata"]["deletionTimestamp"] = "2026-11-26T12:00:00Z"
    assert decoded(raw, projected=True).metadata.deletion_timestamp is not None


def test_a_node_keeps_its_name_and_labels_only() -> None:
    raw = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1", "uid": "u", "resourceVersion": "7", "labels": {"a": "b"},
                     "annotations": {"x": "y"}, "managedFields": MANAGED},
        "spec": {"podCIDR": "10.0.0.0/24"},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "images": [{"names": ["i"]}]},
    }  # fmt: skip
    node = NODE.decode(project_node(raw))
    assert node.metadata is not None
    assert (node.metadata.name, node.metadata.labels, node.metadata.resource_version) == (
        "node-1",
        {"a": "b"},
        "7",
    )
    assert node.metadata.managed_fields is None
    assert node.metadata.annotations is None
    assert node.status is None
    assert node.spec is None


def test_conditions_are_kept_whole() -> None:
    whole, projected = both(whole_gpu())
    assert projected.status is not None
    assert whole.status is not None
    conditions: list[V1Condition] = projected.status.conditions or []
    assert conditions == whole.status.conditions


def test_interned_cards_encode_as_projected_and_share_what_repeats() -> None:
    interner = PhysicalGPUInterner()
    raws = [whole_gpu(), whole_gpu()]
    raws[1]["metadata"]["name"], raws[1]["metadata"]["uid"] = "node-1-1-10de-20b7", "uid-2"
    raws[1]["status"]["pciInfo"]["address"] = "0000:03:00.0"
    first, second = (decoded(raw, projected=True, interner=interner) for raw in raws)
    for raw, gpu in zip(raws, (first, second), strict=True):
        assert PHYSICAL_GPU.encode(gpu) == PHYSICAL_GPU.encode(PHYSICAL_GPU.decode(project_physical_gpu(raw)))
    assert first.status is not None
    assert second.status is not None
    assert first.spec is second.spec
    assert first.metadata.labels is second.metadata.labels
    assert first.status.node_info is second.status.node_info
    assert first.status.pci_info is not second.status.pci_info  # another address
    assert first.status.pci_info is not None
    assert second.status.pci_info is not None
    assert first.status.pci_info.vendor is second.status.pci_info.vendor
    assert first.status.conditions is not None
    assert second.status.conditions is not None
    assert first.status.conditions[0] is second.status.conditions[0]
    assert first.metadata is not second.metadata
    assert first.__pydantic_fields_set__ is second.__pydantic_fields_set__


def test_an_edited_copy_of_an_interned_card_leaves_the_cache_as_it_was() -> None:
    interner = PhysicalGPUInterner()
    cached, other = (decoded(whole_gpu(), projected=True, interner=interner) for _ in range(2))
    before = PHYSICAL_GPU.encode(other)
    working = cached.model_copy(deep=True)  # what a reconcile edits
    assert working.status is not None
    assert working.metadata.labels is not None
    working.status.conditions = [*(working.status.conditions or []), V1Condition(
        type="X", status="True", reason="R", message="m", last_transition_time=NOW)]  # fmt: skip
    assert working.status.node_info is not None
    working.status.node_info.node_name = "elsewhere"
    working.metadata.labels["new"] = "label"
    working.metadata.annotations = {"a": "b"}
    assert PHYSICAL_GPU.encode(cached) == before
    assert PHYSICAL_GPU.encode(other) == before
    assert "annotations" not in cached.metadata.__pydantic_fields_set__


def test_the_interner_forgets_its_values_past_its_bound() -> None:
    def cards_on_ten_nodes(interner: PhysicalGPUInterner) -> int:
        for n in range(10):
            raw = whole_gpu()
            raw["status"]["nodeInfo"]["nodeName"] = f"node-{n}"
            decoded(raw, projected=True, interner=interner)
        return len(interner)

    one_card = 9  # spec, labels, nodeInfo, PCI class, vendor, device and info, two conditions
    assert cards_on_ten_nodes(PhysicalGPUInterner()) == one_card + 9  # a new nodeInfo per node
    assert cards_on_ten_nodes(PhysicalGPUInterner(max_values=3)) <= 3 + one_card
