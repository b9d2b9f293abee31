"""Triggers: debounced uevents, the jittered resync, SIGHUP, and the informer event predicates."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest
from nodeagent_fakes import gpu_object

from api.gpu.v1alpha1 import CurrentState, DriverType, PhysicalGPUStatus
from pkg.nodeagent.internal.trigger import (
    Debouncer,
    PeriodicTrigger,
    UdevTrigger,
    gpu_events,
    install_sighup_trigger,
    node_events,
)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_debouncer_waits_for_quiet() -> None:
    clock = _Clock()
    debouncer = Debouncer(quiet=1.0, max_delay=10.0, clock=clock)
    assert debouncer.timeout(0.5) == 0.5  # idle: just poll
    assert not debouncer.fire()
    debouncer.event()
    clock.now += 0.6
    debouncer.event()  # the burst goes on
    assert debouncer.timeout(0.5) == pytest.approx(1.0)
    clock.now += 0.9
    assert not debouncer.fire()
    clock.now += 0.1
    assert debouncer.fire()
    assert not debouncer.fire()  # once per burst


def test_debouncer_fires_during_an_endless_storm() -> None:
    clock = _Clock()
    debouncer = Debouncer(quiet=1.0, max_delay=3.0, clock=clock)
    fired = 0
    for _ in range(40):  # an event every 0.5 s for 20 s: never quiet
        debouncer.event()
        fired += debouncer.fire()
        clock.now += 0.5
    assert 5 <= fired <= 7


class _Monitor:
    """Serves scripted poll results: a device, None (timeout) or an exception; then stops the run."""

    def __init__(self, script: list[Any], stop: threading.Event) -> None:
        self.script, self.stop, self.timeouts = list(script), stop, []

    def poll(self, timeout: float | None = None) -> Any:
        self.timeouts.append(timeout)
        if not self.script:
            self.stop.set()
            return None
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        if item is None:
            time.sleep(timeout or 0)
        return item


class _Device:
    action, sys_path = "add", "/sys/devices/pci0000:3b/0000:3b:00.0"


def test_a_burst_of_uevents_is_one_sync() -> None:
    stop, calls = threading.Event(), []
    monitor = _Monitor([_Device(), _Device(), _Device(), None, None], stop)
    trigger = UdevTrigger(enqueue=lambda: calls.append(1), monitor_factory=lambda: monitor, quiet=0.05)
    trigger.run(stop)
    assert calls == [1]
    assert monitor.timeouts[0] == 0.5  # idle poll interval before the burst


def test_a_failing_monitor_syncs_to_be_safe_and_backs_off() -> None:
    stop, calls = threading.Event(), []
    monitor = _Monitor([OSError(105, "No buffer space available"), None, None], stop)
    UdevTrigger(enqueue=lambda: calls.append(1), monitor_factory=lambda: monitor, quiet=0.01).run(stop)
    assert calls == [1]


def test_no_udev_means_no_crash(caplog: Any) -> None:
    stop = threading.Event()

    def broken() -> Any:
        raise OSError("netlink: permission denied")

    threading.Timer(0.05, stop.set).start()
    UdevTrigger(enqueue=lambda: None, monitor_factory=broken).run(stop)
    assert "relying on the periodic resync" in caplog.text


def test_periodic_delays_are_jittered_within_bounds() -> None:
    trigger = PeriodicTrigger(enqueue=lambda: None, period=300.0)
    delays = [trigger.next_delay() for _ in range(200)]
    assert min(delays) >= 240.0
    assert max(delays) <= 360.0
    assert len(set(delays)) > 100
    with pytest.raises(ValueError, match="period"):
        PeriodicTrigger(enqueue=lambda: None, period=0)


def test_periodic_trigger_enqueues_until_stopped() -> None:
    stop, calls = threading.Event(), []
    trigger = PeriodicTrigger(enqueue=lambda: calls.append(1), period=0.02)
    thread = threading.Thread(target=trigger.run, args=(stop,))
    thread.start()
    time.sleep(0.2)
    stop.set()
    thread.join(1.0)
    assert not thread.is_alive()
    assert 3 <= len(calls) <= 15


def test_sighup_enqueues_a_sync() -> None:
    fired = threading.Event()
    previous = signal.getsignal(signal.SIGHUP)
    try:
        install_sighup_trigger(fired.set)
        os.kill(os.getpid(), signal.SIGHUP)
        assert fired.wait(2.0)
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_gpu_events_pass_deletes_and_edits_of_the_agents_fields_only() -> None:
    predicate = gpu_events()
    gpu = gpu_object("g", "0000:3b:00.0", status=PhysicalGPUStatus())
    assert predicate.delete(gpu)
    assert not predicate.create(gpu)
    other_writer = gpu.model_copy(deep=True)
    other_writer.status = PhysicalGPUStatus(observed_generation=3)
    other_writer.metadata.labels = {**gpu.metadata.labels, "team": "ml"}
    assert not predicate.update(gpu, other_writer)
    edited = gpu.model_copy(deep=True)
    edited.status = PhysicalGPUStatus(current_state=CurrentState(driver_type=DriverType.VFIO))
    assert predicate.update(gpu, edited)
    relabelled = gpu.model_copy(deep=True)
    relabelled.metadata.labels = {**gpu.metadata.labels, "gpu.deckhouse.io/device": "x"}
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


def test_the_real_netlink_monitor_polls_without_udevd() -> None:
    from pkg.nodeagent.internal.trigger import netlink_monitor

    try:
        monitor = netlink_monitor()
    except (ImportError, OSError) as exc:  # no libudev or no netlink in this sandbox
        pytest.skip(f"kernel uevents unavailable here: {exc}")
    assert monitor.poll(timeout=0.05) is None  # nothing is hot-plugged during a unit test
