"""The node agent's udev source: debounced uevents, a failing monitor, no udev at all."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from pkg.nodeagent.internal.source import Debouncer, UdevSource


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
        self.script, self.stop = list(script), stop
        self.timeouts: list[float | None] = []

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
    source = UdevSource(monitor_factory=lambda: monitor, quiet=0.05)
    source.start(lambda _obj: calls.append(1), stop)
    assert calls == [1]
    assert monitor.timeouts[0] == 0.5  # idle poll interval before the burst


def test_a_failing_monitor_syncs_to_be_safe_and_backs_off() -> None:
    stop, calls = threading.Event(), []
    monitor = _Monitor([OSError(105, "No buffer space available"), None, None], stop)
    UdevSource(monitor_factory=lambda: monitor, quiet=0.01).start(lambda _obj: calls.append(1), stop)
    assert calls == [1]


def test_no_udev_means_no_crash(caplog: Any) -> None:
    stop = threading.Event()

    def broken() -> Any:
        raise OSError("netlink: permission denied")

    threading.Timer(0.05, stop.set).start()
    UdevSource(monitor_factory=broken).start(lambda _obj: None, stop)
    assert "relying on the periodic resync" in caplog.text


def test_the_real_netlink_monitor_polls_without_udevd() -> None:
    from pkg.nodeagent.internal.source import netlink_monitor

    try:
        monitor = netlink_monitor()
    except (ImportError, OSError) as exc:  # no libudev or no netlink in this sandbox
        pytest.skip(f"kernel uevents unavailable here: {exc}")
    assert monitor.poll(timeout=0.05) is None  # nothing is hot-plugged during a unit test
