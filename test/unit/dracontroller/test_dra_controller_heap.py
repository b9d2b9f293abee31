"""The heap settler: the controller's GC policy runs in its own runnable, not inside a decision."""

from __future__ import annotations

import gc
import threading
import time

from testutil.unit.dra.allocator.alloc_builders import Cluster, a30_pool, mig_class

from pkg.dra.allocator import Allocator
from pkg.dracontroller.heap import HeapSettler


def test_settling_the_heap_follows_large_builds_only() -> None:
    allocator = Allocator(settle_after_devices=5)
    cluster = Cluster(a30_pool("node-a"), [mig_class("1g")])
    cluster.allocator = allocator
    try:
        assert not allocator.settle_heap()  # nothing built yet
        cluster.take("mig-1g")  # builds one A30: 8 devices
        assert allocator.settle_heap()
        assert gc.get_freeze_count() > 0
        cluster.take("mig-1g")  # the pool is cached: nothing new built
        assert not allocator.settle_heap()
    finally:
        gc.unfreeze()


def test_the_settler_settles_a_large_build_on_its_own_schedule() -> None:
    allocator = Allocator(settle_after_devices=5)
    cluster = Cluster(a30_pool("node-a"), [mig_class("1g")])
    cluster.allocator = allocator
    cluster.take("mig-1g")  # a decision builds the pools; it does not settle them
    settler = HeapSettler(allocator=allocator, period=0.01)
    stop = threading.Event()
    runner = threading.Thread(target=settler.run, args=(stop,))
    try:
        runner.start()
        deadline = time.monotonic() + 5
        while gc.get_freeze_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gc.get_freeze_count() > 0
        assert not allocator.settle_heap()  # the settler already did
    finally:
        stop.set()
        runner.join(timeout=5)
        gc.unfreeze()
    assert not runner.is_alive()
    assert not settler.needs_leader_election
