"""The informer events that wake a sync (the predicates of the node agent's watches)."""

from __future__ import annotations

from testutil.k8s_fields import labels_of
from testutil.unit.nodeagent.nodeagent_fakes import gpu_object

from api.gpu.v1alpha1 import CurrentState, DriverType, PhysicalGPUStatus
from pkg.nodeagent.internal.watch import gpu_events, node_events


def test_gpu_events_pass_deletes_and_edits_of_the_agents_fields_only() -> None:
    predicate = gpu_events()
    gpu = gpu_object("g", "0000:3b:00.0", status=PhysicalGPUStatus())
    assert predicate.delete(gpu)
    assert not predicate.create(gpu)
    other_writer = gpu.model_copy(deep=True)
    other_writer.status = PhysicalGPUStatus(observed_generation=3)
    other_writer.metadata.labels = {**labels_of(gpu), "team": "ml"}
    assert not predicate.update(gpu, other_writer)
    edited = gpu.model_copy(deep=True)
    edited.status = PhysicalGPUStatus(current_state=CurrentState(driver_type=DriverType.VFIO))
    assert predicate.update(gpu, edited)
    relabelled = gpu.model_copy(deep=True)
    relabelled.metadata.labels = {**labels_of(gpu), "gpu.deckhouse.io/device": "x"}
    assert predicate.update(gpu, relabelled)


def test_node_events_ignore_heartbeats() -> None:
    from kubernetes.client import V1Node, V1ObjectMeta

    predicate = node_events()
    old = V1Node(metadata=V1ObjectMeta(name="n1", resource_version="1", labels={"a": "b"}))
    heartbeat = V1Node(metadata=V1ObjectMeta(name="n1", resource_version="2", labels={"a": "c"}))
    removed = V1Node(
        metadata=V1ObjectMeta(name="n1", resource_version="3", labels={"gpu.deckhouse.io/os.id": "x"})
    )
    assert predicate.create(old)
    assert not predicate.delete(old)
    assert not predicate.update(old, heartbeat)
    assert predicate.update(old, removed)
