"""Sources: the jittered period, signals, channels and the start event, and a controller driven by them."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from pkg.framework.controller.controller import Controller
from pkg.framework.controller.enqueue import EnqueueRequestsFromMapFunc
from pkg.framework.controller.predicate import Funcs
from pkg.framework.controller.source import ChannelSource, PeriodicSource, SignalSource, StartSource
from pkg.framework.jitter import Jitter
from pkg.framework.reconcile.contract import Request, Result


def test_periodic_delays_are_jittered_within_bounds() -> None:
    source = PeriodicSource(name="resync", every=Jitter(period=300.0))
    delays = [source.every.next() for _ in range(200)]
    assert min(delays) >= 240.0
    assert max(delays) <= 360.0
    assert len(set(delays)) > 100
    with pytest.raises(ValueError, match="period"):
        Jitter(period=0)


def test_periodic_source_emits_until_stopped() -> None:
    stop, calls = threading.Event(), []
    source = PeriodicSource(name="resync", every=Jitter(period=0.02))
    thread = threading.Thread(target=source.start, args=(lambda _obj: calls.append(1), stop))
    thread.start()
    time.sleep(0.2)
    stop.set()
    thread.join(1.0)
    assert not thread.is_alive()
    assert 3 <= len(calls) <= 15


def test_a_signal_source_emits_once_per_signal() -> None:
    fired, stop = threading.Event(), threading.Event()
    previous = signal.getsignal(signal.SIGHUP)
    try:
        source = SignalSource(signal.SIGHUP, name="sighup", message="received SIGHUP: syncing now")
        thread = threading.Thread(target=source.start, args=(lambda _obj: fired.set(), stop))
        thread.start()
        os.kill(os.getpid(), signal.SIGHUP)
        assert fired.wait(2.0)
    finally:
        stop.set()
        signal.signal(signal.SIGHUP, previous)


def test_a_channel_emits_what_is_sent_in_order() -> None:
    stop, seen = threading.Event(), list[object]()
    channel = ChannelSource(name="cards")
    channel.send("a")
    channel.send()
    thread = threading.Thread(target=channel.start, args=(seen.append, stop))
    thread.start()
    deadline = time.monotonic() + 2.0
    while len(seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join(1.0)
    assert seen == ["a", None]


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[Request] = []
        self.done = threading.Event()

    def reconcile(self, request: Request) -> Result:
        self.calls.append(request)
        self.done.set()
        return Result()


def test_sources_enter_the_controller_through_predicates_and_mappers() -> None:
    reconciler = _Recorder()
    controller = Controller(name="t-sources", reconciler=reconciler)
    channel = ChannelSource(name="cards")
    sync = EnqueueRequestsFromMapFunc(lambda _obj: [Request("sync")])
    controller.watch(StartSource(), sync)
    controller.watch(channel, sync, predicates=[Funcs(generic=lambda obj: obj != "ignored")])
    channel.send("ignored")
    stop = threading.Event()
    thread = threading.Thread(target=controller.run, args=(stop,))
    thread.start()
    try:
        assert reconciler.done.wait(2.0)
    finally:
        stop.set()
        thread.join(5.0)
    assert reconciler.calls == [Request("sync")]
    with pytest.raises(RuntimeError, match="before the controller runs"):
        controller.watch(ChannelSource(name="late"), sync)
