"""The write barrier: a sync ends only when the informer has delivered the agent's own writes."""

from __future__ import annotations

import threading

from kubernetes.client import V1ObjectMeta
from testutil.unit.nodeagent.nodeagent_fakes import gpu_object

from api.gpu.v1alpha1 import PhysicalGPU
from pkg.framework.cache.listener import DeletedFinalStateUnknown
from pkg.nodeagent.internal.service import CacheBarrier


def _at(name: str, rv: str) -> PhysicalGPU:
    return PhysicalGPU(metadata=V1ObjectMeta(name=name, resource_version=rv, uid=f"uid-{name}"))


def test_wait_returns_once_the_expected_version_arrives() -> None:
    barrier = CacheBarrier(name="t")
    barrier.expect_version("a", "7")
    barrier.expect_deleted("uid-b")

    def arrive() -> None:
        barrier.on_update(_at("a", "6"), _at("a", "7"))
        barrier.on_delete(_at("b", "3"))

    timer = threading.Timer(0.05, arrive)
    timer.start()
    assert barrier.wait(5.0)
    timer.join()


def test_events_seen_before_the_expectation_count() -> None:
    barrier = CacheBarrier(name="t")
    barrier.on_add(_at("a", "7"), is_in_initial_list=False)
    barrier.on_delete(DeletedFinalStateUnknown("b", gpu_object("b", None, uid="uid-b")))
    barrier.expect_version("a", "7")
    barrier.expect_deleted("uid-b")
    barrier.expect_version("c", None)  # a write that returned no version adds nothing
    assert barrier.wait(0.0)


def test_a_timeout_forgets_the_expectations() -> None:
    barrier = CacheBarrier(name="t")
    barrier.expect_version("a", "7")
    barrier.on_update(_at("a", "6"), _at("a", "8"))  # another version is not ours
    assert not barrier.wait(0.01)
    assert barrier.wait(0.0)  # forgotten: the next sync does not wait for it again


def test_history_is_bounded() -> None:
    barrier = CacheBarrier(name="t", history=2)
    for rv in ("1", "2", "3"):
        barrier.on_add(_at("a", rv), is_in_initial_list=True)
    barrier.expect_version("a", "1")
    assert not barrier.wait(0.0)
