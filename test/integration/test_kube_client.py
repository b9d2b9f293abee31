"""The typed client against the real API server: errors, paging, conflicts, patches, apply."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import V1ConfigMap, V1ObjectMeta
from testutil.k8s_fields import meta, name_of

from pkg.framework.client import (
    AlreadyExistsError,
    ConflictError,
    InvalidError,
    KubeClient,
    NotFoundError,
    PatchType,
)
from pkg.framework.client.builtin_kinds import CONFIG_MAP


def _cm(name: str, namespace: str, data: dict[str, str] | None = None) -> V1ConfigMap:
    return V1ConfigMap(metadata=V1ObjectMeta(name=name, namespace=namespace), data=data or {})


def test_typed_errors(kube: KubeClient, namespace: str) -> None:
    with pytest.raises(NotFoundError):
        kube.get(CONFIG_MAP, "missing", namespace)
    kube.create(CONFIG_MAP, _cm("one", namespace))
    with pytest.raises(AlreadyExistsError):
        kube.create(CONFIG_MAP, _cm("one", namespace))
    with pytest.raises(InvalidError) as invalid:
        kube.create(CONFIG_MAP, _cm("Not_A_DNS_Name", namespace))
    assert "Not_A_DNS_Name" in invalid.value.message


def test_list_follows_every_page(kube: KubeClient, namespace: str) -> None:
    for i in range(7):
        kube.create(CONFIG_MAP, _cm(f"page-{i}", namespace))
    first = kube.list_page(CONFIG_MAP, namespace=namespace, limit=2)
    assert len(first.items) == 2
    assert first.continue_token
    items, resource_version = kube.list(CONFIG_MAP, namespace=namespace, limit=2)
    names = sorted(name_of(i) for i in items if name_of(i).startswith("page-"))
    assert names == [f"page-{i}" for i in range(7)]
    assert int(resource_version) > 0


def test_update_from_stale_read_conflicts(kube: KubeClient, namespace: str) -> None:
    created = kube.create(CONFIG_MAP, _cm("cas", namespace, {"v": "1"}))
    fresh = created.model_copy(deep=True)
    fresh.data = {"v": "2"}
    kube.update(CONFIG_MAP, fresh)
    stale = created.model_copy(deep=True)
    stale.data = {"v": "3"}
    with pytest.raises(ConflictError):
        kube.update(CONFIG_MAP, stale)
    assert kube.get(CONFIG_MAP, "cas", namespace).data == {"v": "2"}


def test_json_patch_with_resource_version_test_is_optimistic(kube: KubeClient, namespace: str) -> None:
    created = kube.create(CONFIG_MAP, _cm("patch", namespace))
    rv = meta(created).resource_version
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "add", "path": "/metadata/labels", "value": {"gpu.deckhouse.io/node": "n1"}},
    ]
    patched = kube.patch(CONFIG_MAP, "patch", ops, patch_type=PatchType.JSON, namespace=namespace)
    assert meta(patched).labels == {"gpu.deckhouse.io/node": "n1"}
    escaped: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "replace", "path": "/metadata/labels/gpu.deckhouse.io~1node", "value": "n2"},
    ]
    with pytest.raises((ConflictError, InvalidError)):
        kube.patch(CONFIG_MAP, "patch", escaped, patch_type=PatchType.JSON, namespace=namespace)
    escaped[0]["value"] = meta(patched).resource_version
    again = kube.patch(CONFIG_MAP, "patch", escaped, patch_type=PatchType.JSON, namespace=namespace)
    assert meta(again).labels == {"gpu.deckhouse.io/node": "n2"}


def test_server_side_apply_tracks_ownership(kube: KubeClient, namespace: str) -> None:
    other = KubeClient(kube._api, field_manager="another-writer")
    kube.apply(CONFIG_MAP, _cm("owned", namespace, {"ours": "1"}), force=False)
    other.apply(CONFIG_MAP, _cm("owned", namespace, {"theirs": "1"}), force=False)
    merged = kube.get(CONFIG_MAP, "owned", namespace)
    assert merged.data == {"ours": "1", "theirs": "1"}
    managers = {m.manager for m in meta(merged).managed_fields or []}
    assert {"gpu-control-plane-tests", "another-writer"} <= managers

    with pytest.raises(ConflictError):
        other.apply(CONFIG_MAP, _cm("owned", namespace, {"ours": "2", "theirs": "1"}), force=False)
    forced = other.apply(CONFIG_MAP, _cm("owned", namespace, {"ours": "2", "theirs": "1"}), force=True)
    assert forced.data == {"ours": "2", "theirs": "1"}
    # Applying without a field we own removes it: apply is declarative per manager.
    trimmed = kube.apply(CONFIG_MAP, _cm("owned", namespace, {}), force=False)
    assert trimmed.data == {"ours": "2", "theirs": "1"}  # "ours" moved to another-writer by force
