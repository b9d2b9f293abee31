"""What wakes the orchestrator: its ConfigMap's data or identity, and an edit of what it rendered."""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes.client import (
    V1ConfigMap,
    V1DaemonSet,
    V1DaemonSetSpec,
    V1DaemonSetStatus,
    V1LabelSelector,
    V1ObjectMeta,
    V1OwnerReference,
    V1PodTemplateSpec,
)

from pkg.framework.reconcile import Request
from pkg.gpucontroller.orchestrator.internal.watch import config_map_events, daemon_set_watch

CONFIG = Request(name="gcp", namespace="gpu")


def config_map(*, uid: str = "cm", data: dict[str, str] | None = None, rv: str = "1") -> V1ConfigMap:
    meta = V1ObjectMeta(name="gcp", namespace="gpu", uid=uid, resource_version=rv)
    return V1ConfigMap(metadata=meta, data=data or {"config.yaml": "{}"})


def daemon_set(
    *, generation: int = 1, owner: str = "cm", labels: dict[str, str] | None = None, deleting: bool = False,
    ready: int = 0,
) -> V1DaemonSet:  # fmt: skip
    meta = V1ObjectMeta(
        name="gcp-gpu-node-agent", namespace="gpu", generation=generation, labels=labels,
        owner_references=[V1OwnerReference(api_version="v1", kind="ConfigMap", name="gcp", uid=owner)],
        deletion_timestamp=datetime(2026, 1, 1, tzinfo=UTC) if deleting else None,
    )  # fmt: skip
    status = V1DaemonSetStatus(
        number_ready=ready, current_number_scheduled=1, desired_number_scheduled=1, number_misscheduled=0
    )
    spec = V1DaemonSetSpec(selector=V1LabelSelector(), template=V1PodTemplateSpec())
    return V1DaemonSet(metadata=meta, spec=spec, status=status)


def test_the_config_map_wakes_on_new_data_or_a_new_object_not_on_metadata_churn() -> None:
    events = config_map_events()
    assert not events.update(config_map(), config_map(rv="2"))
    assert events.update(config_map(), config_map(data={"config.yaml": "x"}))
    assert events.update(config_map(), config_map(uid="cm-2"))
    assert events.create(config_map())
    assert events.delete(config_map())


def test_every_rendered_daemon_set_maps_to_the_one_configuration_request() -> None:
    assert daemon_set_watch(CONFIG).requests_for(daemon_set()) == [CONFIG]


def test_a_daemon_set_update_passes_for_spec_labels_owners_or_deletion_not_status() -> None:
    events = daemon_set_watch(CONFIG).predicate
    assert not events.update(daemon_set(), daemon_set(ready=1))
    assert events.update(daemon_set(), daemon_set(generation=2))
    assert events.update(daemon_set(), daemon_set(labels={"team": "x"}))
    assert events.update(daemon_set(), daemon_set(owner="someone-else"))
    assert events.update(daemon_set(), daemon_set(deleting=True))
    assert events.delete(daemon_set())
