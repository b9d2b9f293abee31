"""The health feed's own loop (:meth:`HealthFeed.run`): a rebuild at once when the list is marked
stale, one every period when nothing asks, one more (not one each) for a burst of marks, a failed
rebuild survived, and a prompt return once stopped.

The feed is real; its checkpoint store and health board are autospecced mocks, and a rebuild is
counted where it ends, at the board. Each test runs the loop on a thread of its own and waits on
events with a bound, never on a sleep; the periods are either far too long to pass during a test
(so only a mark can wake the loop) or a few milliseconds (so only the period does).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

import pytest
from pytest_mock import MockerFixture, MockType

from pkg.framework.kubeletplugin.types import HealthBoard
from pkg.gpuhandler.preparation.checkpoint import CheckpointData, CheckpointStore
from pkg.gpuhandler.preparation.health_feed import HealthFeed

NEVER = 60.0  # a period no test lasts: only ``stale`` wakes the loop
BOUND = 5.0  # how long a test waits for what must happen (it happens in milliseconds)
EMPTY = CheckpointData(boot_id="boot-1")


class Rebuilds:
    """Counts the lists the board received, and lets a test wait for the n-th one."""

    def __init__(self) -> None:
        self._count = 0
        self._changed = threading.Condition()

    def __call__(self, devices: object) -> None:
        with self._changed:
            self._count += 1
            self._changed.notify_all()

    @property
    def count(self) -> int:
        with self._changed:
            return self._count

    def wait_for(self, n: int, timeout: float = BOUND) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._count >= n, timeout)


class Loop:
    """``feed.run`` on a thread, stopped as the plugin stops it: ``stop``, then ``stale`` to wake it."""

    def __init__(self, feed: HealthFeed, period: float) -> None:
        self.feed = feed
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=feed.run, args=(self.stop,), kwargs={"period": period}, daemon=True
        )

    def start(self) -> Loop:
        self.thread.start()
        return self

    def end(self, timeout: float = BOUND) -> None:
        self.stop.set()
        self.feed.stale.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the loop did not return once stopped"


@pytest.fixture
def store(mocker: MockerFixture) -> MockType:
    mock = mocker.create_autospec(CheckpointStore, instance=True)
    mock.load.return_value = EMPTY
    return mock


@pytest.fixture
def rebuilds() -> Rebuilds:
    return Rebuilds()


@pytest.fixture
def feed(mocker: MockerFixture, store: MockType, rebuilds: Rebuilds) -> HealthFeed:
    board = mocker.create_autospec(HealthBoard, instance=True)
    board.publish.side_effect = rebuilds
    return HealthFeed(board=board, store=store, gpus=list, clock=lambda: 1000.0)


@pytest.fixture
def loop(feed: HealthFeed) -> Iterator[Callable[[float], Loop]]:
    """Starts the loop with a period; every loop started is stopped at the end of the test."""
    started: list[Loop] = []

    def start(period: float) -> Loop:
        started.append(Loop(feed, period).start())
        return started[-1]

    yield start
    for each in started:
        each.end()


def test_a_stale_mark_rebuilds_the_list_at_once_without_waiting_for_the_period(
    feed: HealthFeed, store: MockType, rebuilds: Rebuilds, loop: Callable[[float], Loop]
) -> None:
    loop(NEVER)
    assert not rebuilds.wait_for(1, timeout=0.05)  # nothing asked: nothing rebuilt

    feed.stale.set()

    assert rebuilds.wait_for(1)
    store.load.assert_called_once_with()
    assert not feed.stale.is_set()  # taken: the next mark asks again


def test_each_later_mark_asks_for_one_more_rebuild(
    feed: HealthFeed, rebuilds: Rebuilds, loop: Callable[[float], Loop]
) -> None:
    loop(NEVER)
    for n in (1, 2, 3):
        feed.stale.set()
        assert rebuilds.wait_for(n)
    assert rebuilds.count == 3


def test_with_nothing_asking_the_list_is_rebuilt_every_period(
    feed: HealthFeed, rebuilds: Rebuilds, loop: Callable[[float], Loop]
) -> None:
    loop(0.005)

    assert rebuilds.wait_for(3)
    assert not feed.stale.is_set()


def test_a_burst_of_marks_during_a_rebuild_costs_one_more_rebuild_not_one_each(
    feed: HealthFeed, store: MockType, rebuilds: Rebuilds, loop: Callable[[float], Loop]
) -> None:
    """The first rebuild is held in the checkpoint's read while fifty Prepares mark the list stale."""
    reading, go_on = threading.Event(), threading.Event()

    def slow_first_load() -> CheckpointData:
        if not reading.is_set():
            reading.set()
            assert go_on.wait(BOUND)
        return EMPTY

    store.load.side_effect = slow_first_load
    running = loop(NEVER)
    feed.stale.set()
    assert reading.wait(BOUND)

    for _ in range(50):
        feed.stale.set()
    go_on.set()

    assert rebuilds.wait_for(2)
    running.end()
    assert rebuilds.count == 2
    assert store.load.call_count == 2


def test_a_failed_rebuild_is_logged_and_the_loop_rebuilds_on_the_next_mark(
    feed: HealthFeed,
    store: MockType,
    rebuilds: Rebuilds,
    loop: Callable[[float], Loop],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="pkg.gpuhandler.preparation.health_feed")
    failed = threading.Event()

    def load() -> CheckpointData:
        if not failed.is_set():
            failed.set()
            raise RuntimeError("the informer's store is gone")
        return EMPTY

    store.load.side_effect = load
    running = loop(NEVER)
    feed.stale.set()
    assert failed.wait(BOUND)

    feed.stale.set()

    assert rebuilds.wait_for(1)
    assert running.thread.is_alive()
    [logged] = [r for r in caplog.records if r.name == "pkg.gpuhandler.preparation.health_feed"]
    assert logged.getMessage() == "rebuilding the device health list failed"
    assert logged.exc_info is not None
    assert str(logged.exc_info[1]) == "the informer's store is gone"


def test_the_loop_returns_promptly_once_stopped_and_rebuilds_nothing_more(
    rebuilds: Rebuilds, loop: Callable[[float], Loop]
) -> None:
    """The plugin sets ``stop`` and then ``stale``: the mark that wakes the loop is no request."""
    running = loop(NEVER)

    running.end(timeout=1.0)

    assert rebuilds.count == 0


def test_a_stop_alone_is_seen_when_the_period_ends(
    feed: HealthFeed, rebuilds: Rebuilds, loop: Callable[[float], Loop]
) -> None:
    running = loop(0.02)
    running.stop.set()

    running.thread.join(1.0)

    assert not running.thread.is_alive()
    assert rebuilds.count == 0


def test_a_loop_stopped_before_it_starts_returns_at_once(feed: HealthFeed, rebuilds: Rebuilds) -> None:
    stop = threading.Event()
    stop.set()
    feed.stale.set()

    feed.run(stop, period=NEVER)

    assert rebuilds.count == 0
