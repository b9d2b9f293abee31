"""What wakes a GPUClass: its own new generations, its DeviceClass, the cards it names."""

from __future__ import annotations

from typing import Any

from kubernetes.client import V1DeviceClass, V1ObjectMeta, V1OwnerReference

from api.gpu.v1alpha1 import GPUClass, PhysicalGPU
from pkg.framework.cache.indexer import indexers_of
from pkg.framework.cache.store import Store
from pkg.framework.reconcile import Request
from pkg.gpucontroller.gpuclass.internal.indexes import INDEXES
from pkg.gpucontroller.gpuclass.internal.watch import device_class_watch, gpu_class_events, named_gpu_watch


def gpu_class(name: str, *, generation: int = 1, names: list[str] | None = None) -> GPUClass:
    spec: dict[str, Any] = {"vendor": "Nvidia", "deviceType": "Physical"}
    if names is not None:
        spec["names"] = names
    return GPUClass.from_api_dict({"metadata": {"name": name, "generation": generation}, "spec": spec})


def card(name: str, uuid: str | None = None, *, node: str = "n1") -> PhysicalGPU:
    raw: dict[str, Any] = {"metadata": {"name": name, "labels": {"gpu.deckhouse.io/node": node}}}
    if uuid is not None:
        raw["status"] = {"currentState": {"driverType": "Nvidia", "nvidia": {"gpuUUID": uuid}}}
    return PhysicalGPU.model_validate(raw)


def device_class(name: str, *, generation: int = 1, owner: str | None = None, **labels: str) -> V1DeviceClass:
    owners = [V1OwnerReference(api_version="v1", kind="GPUClass", name=name, uid=owner)] if owner else None
    meta = V1ObjectMeta(name=name, generation=generation, labels=labels or None, owner_references=owners)
    return V1DeviceClass(metadata=meta)


def test_a_gpu_class_update_passes_only_with_a_new_generation() -> None:
    events = gpu_class_events()
    assert not events.update(gpu_class("a30"), gpu_class("a30"))  # a status write
    assert events.update(gpu_class("a30"), gpu_class("a30", generation=2))
    assert events.create(gpu_class("a30"))


def test_a_device_class_wakes_the_gpu_class_of_its_name_when_its_shape_changes() -> None:
    watch = device_class_watch()
    assert watch.requests_for(device_class("a30")) == [Request("a30")]
    assert not watch.predicate.update(device_class("a30"), device_class("a30"))
    assert watch.predicate.update(device_class("a30"), device_class("a30", generation=2))
    assert watch.predicate.update(device_class("a30"), device_class("a30", owner="u-2"))
    assert watch.predicate.update(device_class("a30"), device_class("a30", team="x"))
    assert watch.predicate.delete(device_class("a30"))


def test_a_card_wakes_the_classes_naming_it_and_only_a_uuid_change_passes() -> None:
    classes: Store[Any] = Store(indexers=indexers_of(INDEXES))
    for cls in (gpu_class("a", names=["gpu-1", "gpu-2"]), gpu_class("b", names=["gpu-2"]), gpu_class("c")):
        classes.add(cls)
    watch = named_gpu_watch(classes)
    assert watch.requests_for(card("gpu-2")) == [Request("a"), Request("b")]
    assert watch.requests_for(card("gpu-9")) == []
    assert not watch.predicate.update(card("gpu-1", "GPU-1"), card("gpu-1", "GPU-1", node="n2"))
    assert watch.predicate.update(card("gpu-1"), card("gpu-1", "GPU-1"))
