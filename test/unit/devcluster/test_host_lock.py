"""The real-node lock makes a second set of nodes wait for the first, instead of failing its
footprint check on the first one's host-wide entries, and a waiting run says whom it waits for."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from pkg.devcluster.hostlock import LockHolder, elapsed, exclusive_host, read_holder, waiting_message


def test_second_holder_waits_until_first_releases(tmp_path: Path) -> None:
    lock = tmp_path / "nodes.lock"
    order: list[str] = []
    messages: list[str] = []
    waited = threading.Event()
    entered = threading.Event()

    def note(message: str) -> None:
        messages.append(message)
        waited.set()

    def second() -> None:
        with exclusive_host(lock, on_wait=note):
            order.append("second")
        entered.set()

    with exclusive_host(lock):
        thread = threading.Thread(target=second)
        thread.start()
        assert waited.wait(10), "the second holder did not notice the lock was taken"
        assert not entered.wait(0.2), "the second holder got in while the first held the lock"
        order.append("first")
    thread.join(10)
    assert order == ["first", "second"]
    assert f"PID {os.getpid()}" in messages[0]


def test_free_lock_is_taken_without_waiting(tmp_path: Path) -> None:
    waits: list[str] = []
    with exclusive_host(tmp_path / "run" / "nodes.lock", on_wait=waits.append):
        pass
    assert waits == []


def test_the_holder_is_recorded_while_held_and_cleared_after(tmp_path: Path) -> None:
    lock = tmp_path / "nodes.lock"
    before = time.time()
    with exclusive_host(lock):
        holder = read_holder(lock)
        assert holder is not None
        assert holder.pid == os.getpid()
        assert holder.command  # the running program and its arguments
        assert before <= holder.since <= time.time()
    assert read_holder(lock) is None


def test_a_waiting_run_repeats_the_holder_and_the_time_it_has_waited(tmp_path: Path) -> None:
    lock = tmp_path / "nodes.lock"
    messages: list[str] = []
    three = threading.Event()

    def note(message: str) -> None:
        messages.append(message)
        if len(messages) == 3:
            three.set()

    with exclusive_host(lock):
        thread = threading.Thread(
            target=lambda: exclusive_host(lock, on_wait=note, report_every=0.5).__enter__()
        )
        thread.daemon = True
        thread.start()
        assert three.wait(10), f"the waiting run reported {len(messages)} time(s), not again every 0.5 s"
    thread.join(10)
    assert all(f"PID {os.getpid()}" in m and "since " in m and "waited " in m for m in messages)
    assert "waited 0s" in messages[0]


def test_the_message_names_command_pid_start_and_wait() -> None:
    holder = LockHolder(pid=4242, command="demo.py --keep-running", since=0.0)
    message = waiting_message(holder, 185.0)
    assert "demo.py --keep-running (PID 4242, since 00:00:00 UTC)" in message
    assert "waited 3m05s" in message


def test_a_holder_that_wrote_no_record_is_still_reported() -> None:
    assert "has not said who it is" in waiting_message(None, 5.0)


def test_an_unreadable_record_is_no_holder(tmp_path: Path) -> None:
    lock = tmp_path / "nodes.lock"
    lock.write_text("not json")
    assert read_holder(lock) is None


def test_elapsed_is_seconds_then_minutes() -> None:
    assert [elapsed(s) for s in (0.4, 59.9, 60, 3601)] == ["0s", "59s", "1m00s", "60m01s"]
