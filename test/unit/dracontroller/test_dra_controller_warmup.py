"""The selector warmer: the leader makes every class's selector passes once the caches have
synced, and again for what changes (a republished pool, a class created later), on its own
schedule."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pytest
from pytest_mock import MockerFixture
from testutil.unit.dra.allocator.alloc_builders import a30_pool
from testutil.unit.dracontroller.dra_controller_fakes import Env, our_mig_class, our_physical_class

from pkg.dracontroller.warmup import SelectorWarmer


def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_one_round_warms_every_class_and_pool_and_the_next_only_what_changed(
    caplog: pytest.LogCaptureFixture,
    mocker: MockerFixture,
) -> None:
    env = Env(mocker, [*a30_pool("node-a"), *a30_pool("node-b")], [our_mig_class("1g"), our_physical_class()])
    warmer = env.container.selector_warmer()  # as the process wires it
    assert isinstance(warmer, SelectorWarmer)
    stop = threading.Event()
    with caplog.at_level(logging.INFO, logger="pkg.dracontroller.warmup"):
        assert warmer.warm(stop) == 4  # 2 classes x 2 pools
    assert "made 4 selector passes" in caplog.text
    assert warmer.warm(stop) == 0
    env.classes.update(our_mig_class("2g"))  # a class created after the first round
    for rs in a30_pool("node-b", generation=2):  # node-b's driver republished its pool
        env.slices.update(rs)
    assert warmer.warm(stop) == 1 + 3  # node-a for the new class; node-b (rebuilt) for all three


def test_the_warmer_runs_on_the_leader_until_stopped(mocker: MockerFixture) -> None:
    env = Env(mocker, a30_pool("node-a"), [our_mig_class("1g")])
    warmer = SelectorWarmer(allocator=env.allocator, cache_reader=env.cache_reader, period=0.01)
    assert warmer.needs_leader_election  # only the leader allocates and explains
    stop = threading.Event()
    runner = threading.Thread(target=warmer.run, args=(stop,))
    runner.start()
    try:
        env.classes.update(our_physical_class())
        # The running warmer picks up the new class: nothing is left for a round made here.
        assert eventually(lambda: warmer.warm(threading.Event()) == 0)
    finally:
        stop.set()
        runner.join(timeout=5)
    assert not runner.is_alive()
