"""The real-node lock makes a second set of nodes wait for the first, instead of failing its
footprint check on the first one's host-wide entries."""

from __future__ import annotations

import threading
from pathlib import Path

from pkg.devcluster.footprint import exclusive_host


def test_second_holder_waits_until_first_releases(tmp_path: Path) -> None:
    lock = tmp_path / "nodes.lock"
    order: list[str] = []
    waited = threading.Event()
    entered = threading.Event()

    def second() -> None:
        with exclusive_host(lock, on_wait=waited.set):
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


def test_free_lock_is_taken_without_waiting(tmp_path: Path) -> None:
    waits: list[bool] = []
    with exclusive_host(tmp_path / "run" / "nodes.lock", on_wait=lambda: waits.append(True)):
        pass
    assert waits == []
