"""The supervisor of our component processes: CrashLoop-style restarts, recorded, ours told apart."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pkg.devcluster.processes import ManagedProcess, wait_until
from pkg.devcluster.supervisor import Supervisor, resident_bytes


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def supervisor(clock: Clock) -> Iterator[Supervisor]:
    supervisor = Supervisor(initial_backoff=10, max_backoff=25, reset_after=600, clock=clock)
    yield supervisor
    supervisor.stop()


def _process(tmp_path: Path, name: str, script: str) -> ManagedProcess:
    return ManagedProcess(name=name, argv=["sh", "-c", script], log_path=tmp_path / f"{name}.log")


def _exited(process: ManagedProcess) -> None:
    assert process.process is not None
    process.process.wait(timeout=10)


def test_an_exited_process_is_started_again_only_after_its_backoff(
    tmp_path: Path, supervisor: Supervisor, clock: Clock
) -> None:
    crasher = _process(tmp_path, "crasher", "exit 3")
    supervisor.supervise(crasher)
    first = crasher.process
    _exited(crasher)
    assert supervisor.poll() == []
    clock.now += 9.9
    assert supervisor.poll() == []
    assert crasher.process is first
    clock.now += 0.1
    [restart] = supervisor.poll()
    assert crasher.process is not first
    assert (restart.name, restart.exit_code, restart.signal, restart.ours) == ("crasher", 3, None, False)
    assert (restart.exited_at, restart.delay, restart.started_at) == (1000.0, 10, 1010.0)
    assert supervisor.restarts("crasher") == [restart]


def test_the_backoff_doubles_up_to_its_cap(tmp_path: Path, supervisor: Supervisor, clock: Clock) -> None:
    crasher = _process(tmp_path, "crasher", "exit 1")
    supervisor.supervise(crasher)
    delays = []
    for _ in range(4):
        _exited(crasher)
        supervisor.poll()
        clock.now += 100
        [restart] = supervisor.poll()
        delays.append(restart.delay)
    assert delays == [10, 20, 25, 25]


def test_the_backoff_starts_over_after_ten_minutes_up(
    tmp_path: Path, supervisor: Supervisor, clock: Clock
) -> None:
    crasher = _process(tmp_path, "crasher", "exit 1")
    supervisor.supervise(crasher)
    for _ in range(2):
        _exited(crasher)
        supervisor.poll()
        clock.now += 100
        supervisor.poll()
    _exited(crasher)
    clock.now += 600  # it ran (as far as the supervisor saw) ten minutes before exiting
    supervisor.poll()
    clock.now += 10
    [restart] = supervisor.poll()
    assert restart.delay == 10


def test_a_kill_is_a_sigkill_marked_ours_and_a_crash_after_it_is_not(
    tmp_path: Path, supervisor: Supervisor, clock: Clock
) -> None:
    sleeper = _process(tmp_path, "sleeper", "sleep 60")
    supervisor.supervise(sleeper)
    supervisor.kill("sleeper")
    _exited(sleeper)
    supervisor.poll()
    clock.now += 10
    [killed] = supervisor.poll()
    assert (killed.signal, killed.exit_code, killed.ours) == ("SIGKILL", None, True)
    assert sleeper.running()
    assert sleeper.process is not None
    sleeper.process.terminate()  # not through the supervisor: a crash of its own
    _exited(sleeper)
    supervisor.poll()
    clock.now += 20
    [crashed] = supervisor.poll()
    assert (crashed.signal, crashed.ours) == ("SIGTERM", False)


def test_a_paused_process_is_left_stopped_and_started_after_the_pause(
    tmp_path: Path, supervisor: Supervisor, clock: Clock
) -> None:
    sleeper = _process(tmp_path, "sleeper", "sleep 60")
    supervisor.supervise(sleeper)
    with supervisor.paused("sleeper") as [paused]:
        paused.stop()
        clock.now += 100
        assert supervisor.poll() == []
        assert not sleeper.running()
        assert supervisor.names == []
    assert sleeper.running()
    assert supervisor.names == ["sleeper"]
    assert supervisor.restarts("sleeper") == []  # a stop on purpose is no restart


def test_an_unknown_name_is_named_in_the_error(supervisor: Supervisor) -> None:
    with pytest.raises(KeyError, match=r"gpu-handler.*none"):
        supervisor.kill("gpu-handler")


def test_rss_is_read_while_the_process_runs(tmp_path: Path, supervisor: Supervisor) -> None:
    sleeper = _process(tmp_path, "sleeper", "sleep 60")
    supervisor.supervise(sleeper)
    rss = supervisor.rss_bytes("sleeper")
    assert rss is not None
    assert rss > 0
    sleeper.stop()
    assert supervisor.rss_bytes("sleeper") is None


def test_resident_bytes_are_the_second_statm_field_in_pages(tmp_path: Path) -> None:
    (tmp_path / "statm").write_text("5000 300 100 1 0 200 0\n")
    assert resident_bytes(tmp_path) == 300 * os.sysconf("SC_PAGE_SIZE")
    assert resident_bytes(tmp_path / "gone") is None


def test_the_thread_restarts_without_a_caller_polling(tmp_path: Path) -> None:
    supervisor = Supervisor(initial_backoff=0.1)
    crasher = _process(tmp_path, "crasher", "sleep 0.2; exit 2")
    supervisor.supervise(crasher)
    supervisor.start()
    try:
        wait_until(lambda: len(supervisor.restarts("crasher")) >= 2, timeout=10, what="two restarts")
    finally:
        supervisor.stop()
    assert not crasher.running()
    assert all(r.exit_code == 2 for r in supervisor.restarts("crasher"))
    time.sleep(0.3)
    assert not crasher.running()  # stopped for good: no thread left to start it
