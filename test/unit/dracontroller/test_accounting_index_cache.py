"""The device index is built once per set of slices and PhysicalGPUs, and again when one changes."""

from __future__ import annotations

from typing import Any

from testutil.unit.dra.allocator.alloc_builders import a30_pool

from pkg.dracontroller.accounting.index_cache import DeviceIndexCache

DRIVER = "gpu.deckhouse.io"
CARD = "gpu-0000-02-00-0"


def test_same_objects_answer_from_the_cache_and_a_replaced_slice_is_seen() -> None:
    slices: list[Any] = a30_pool()
    cache = DeviceIndexCache(slices=lambda: list(slices), physical_gpus=list, driver=DRIVER)
    first = cache.index()
    assert first[(f"gpus-node-a-{CARD}", f"{CARD}-mig-1g-0")].device_type == "MIG"
    assert cache.index() is first  # nothing changed: not rebuilt
    slices[:] = a30_pool(node="node-b")  # the informer replaced the objects
    second = cache.index()
    assert second is not first
    assert (f"gpus-node-a-{CARD}", f"{CARD}-mig-1g-0") not in second
    assert second[(f"gpus-node-b-{CARD}", f"{CARD}-mig-1g-0")].node == "node-b"
    assert cache.index() is second
