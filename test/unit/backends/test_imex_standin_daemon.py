"""The IMEX stand-in, real sockets: stand-ins on loopback addresses reach each other or say who is missing.

Each stand-in listens on its own 127.0.0.x address and the domain's one port, as daemon Pods of
one domain do on their Pod IPs; the files are the ones gpu-controller renders.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pkg.backends.nvidia.imex_config import CONFIG_FILE, HOSTS_FILE, member_name, render_imex_files
from pkg.backends.simulated.imex_daemon import StandIn, StandInOptions, query

ROOT = Path(__file__).resolve().parents[3]


def _address(index: int) -> str:
    return f"127.0.0.{index + 2}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((_address(0), 0))
        port: int = probe.getsockname()[1]
    return port


def _wait_for(probe: Callable[[], bool], *, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@dataclass
class Domain:
    """A domain's config folder and the stand-ins started on it, each in a thread."""

    folder: Path
    port: int
    size: int
    stops: dict[int, threading.Event] = field(default_factory=dict)
    threads: dict[int, threading.Thread] = field(default_factory=dict)

    def write(self, addressed: set[int]) -> None:
        members = [(member_name(i), _address(i) if i in addressed else None) for i in range(self.size)]
        for name, text in render_imex_files(members, port=self.port, config_dir=str(self.folder)).items():
            (self.folder / name).write_text(text)

    def state_path(self, index: int) -> Path:
        return self.folder / f"state-{index}"

    def start(self, index: int, *, name: str | None = "", pod_ip: str | None = None) -> None:
        options = StandInOptions(
            config_path=self.folder / CONFIG_FILE,
            state_path=self.state_path(index),
            name=member_name(index) if name == "" else name,
            pod_ip=pod_ip,
            bind=_address(index),
            first_retry_s=0.05,
            max_retry_s=0.2,
            recheck_s=0.2,
            connect_timeout_s=0.5,
        )
        stand_in = StandIn(options)
        stop = threading.Event()
        thread = threading.Thread(target=stand_in.serve, args=(stop,), daemon=True)
        thread.start()
        self.stops[index], self.threads[index] = stop, thread

    def stop(self, index: int) -> None:
        self.stops.pop(index).set()
        self.threads.pop(index).join(timeout=5)

    def state(self, index: int) -> str:
        path = self.state_path(index)
        return path.read_text() if path.exists() else ""

    def wait_state(self, index: int, first_line: str, *, containing: str = "", lacking: str = "\0") -> str:
        def matches() -> bool:
            text = self.state(index)
            return text.split("\n", 1)[0] == first_line and containing in text and lacking not in text

        _wait_for(
            matches, what=f"stand-in {index} to be {first_line} {containing!r} (now {self.state(index)!r})"
        )
        return self.state(index)


@pytest.fixture
def domain(tmp_path: Path) -> Iterator[Domain]:
    made = Domain(folder=tmp_path, port=_free_port(), size=3)
    yield made
    for index in list(made.stops):
        made.stop(index)


def test_three_stand_ins_are_ready_once_each_reaches_the_others(domain: Domain) -> None:
    domain.write({0, 1, 2})
    for index in range(3):
        domain.start(index)

    for index in range(3):
        assert domain.wait_state(index, "READY") == "READY\n"


def test_not_ready_while_a_peer_is_down_and_ready_once_it_answers(domain: Domain) -> None:
    domain.write({0, 1, 2})
    domain.start(0)
    domain.start(1)

    # the peer that answers is not listed as missing, the one that does not is, with the reason
    domain.wait_state(0, "NOT_READY", containing="imex-2: 127.0.0.4", lacking="imex-1")
    domain.wait_state(1, "NOT_READY", containing="Connection refused", lacking="imex-0")

    domain.start(2)
    domain.wait_state(0, "READY")
    domain.wait_state(2, "READY")


def test_a_peer_that_goes_away_makes_the_others_not_ready_again(domain: Domain) -> None:
    domain.size = 2
    domain.write({0, 1})
    domain.start(0)
    domain.start(1)
    domain.wait_state(0, "READY")

    domain.stop(1)

    domain.wait_state(0, "NOT_READY", containing="imex-1")


def test_a_peer_without_an_address_is_missing_until_the_hosts_file_gives_it_one(domain: Domain) -> None:
    domain.write({0, 2})
    for index in range(3):
        domain.start(index)

    assert "imex-1: no address" in domain.wait_state(0, "NOT_READY", containing="imex-1")
    domain.wait_state(2, "NOT_READY", containing="imex-1: no address")

    domain.write({0, 1, 2})  # the hosts file is re-read on every attempt: no restart

    for index in range(3):
        domain.wait_state(index, "READY")


def test_an_address_that_answers_as_another_peer_does_not_count(domain: Domain) -> None:
    domain.size = 2
    domain.write({0, 1})
    domain.start(0)
    domain.start(1, name="imex-7")  # a daemon at imex-1's address that is not imex-1

    domain.wait_state(0, "NOT_READY", containing="answered 'IMEX-STANDIN imex-7', not imex-1")


def test_a_stand_in_knows_itself_by_its_pod_ip_in_the_hosts_file(domain: Domain) -> None:
    domain.size = 2
    domain.write({0, 1})
    domain.start(0, name=None, pod_ip=_address(0))
    domain.start(1, name=None, pod_ip=_address(1))

    domain.wait_state(0, "READY")
    domain.wait_state(1, "READY")


def test_a_stand_in_that_cannot_tell_its_name_or_is_not_a_member_is_not_ready(domain: Domain) -> None:
    domain.write({1, 2})
    domain.start(0, name=None, pod_ip=_address(0))  # its own address is not in the hosts file yet
    domain.start(1, name="imex-9")

    domain.wait_state(
        0, "NOT_READY", containing="no peer of the hosts file has the address 127.0.0.2 (POD_IP)"
    )
    domain.wait_state(1, "NOT_READY", containing="this daemon (imex-9) is not in the nodes file")


def test_a_broken_hosts_file_is_reported_and_no_peer_counts(domain: Domain) -> None:
    domain.size = 2
    domain.write({0, 1})
    (domain.folder / HOSTS_FILE).write_text("127.0.0.2 imex-0\ngarbage\n")
    domain.start(0)

    domain.wait_state(0, "NOT_READY", containing="imex-1: no address (")
    assert "hosts:2: expected ADDRESS NAME" in domain.state(0)


def test_stopping_removes_the_state_file(domain: Domain) -> None:
    domain.write({0, 1, 2})
    domain.start(0)
    domain.wait_state(0, "NOT_READY")

    domain.stop(0)

    assert not domain.state_path(0).exists()


def test_query_exits_zero_only_for_a_ready_state(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert query(state)[0] == 1
    assert "no state file" in query(state)[1]

    state.write_text("NOT_READY\nas imex-0, missing imex-1: no address\n")
    assert query(state) == (1, "NOT_READY\nas imex-0, missing imex-1: no address\n")

    state.write_text("READY\n")
    assert query(state) == (0, "READY\n")


def _module(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "pkg.backends.simulated.imex_daemon", *arguments]


def _run(*arguments: str) -> subprocess.CompletedProcess[bytes]:
    """One short run of the module (the probe, a refused start); its exit code is what is checked."""
    return subprocess.run(_module(*arguments), check=False, cwd=ROOT, capture_output=True, timeout=30)


def test_the_module_serves_answers_the_probe_and_stops_on_sigterm(domain: Domain) -> None:
    domain.size = 1
    domain.write({0})
    config, state = str(domain.folder / CONFIG_FILE), str(domain.state_path(0))
    env = {**os.environ, "POD_IP": _address(0)}
    daemon = subprocess.Popen(
        _module("-c", config, "--state", state, "--bind", _address(0)),
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        domain.wait_state(0, "READY")  # alone in its domain: nothing to reach
        probe = _run("-c", config, "--state", state, "--query")
        assert (probe.returncode, probe.stdout) == (0, b"READY\n")
        with socket.create_connection((_address(0), domain.port), timeout=2) as hello:
            assert hello.recv(64) == b"IMEX-STANDIN imex-0\n"

        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=10) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    assert daemon.stderr is not None
    assert "signal 15: stopping" in daemon.stderr.read()
    assert not domain.state_path(0).exists()
    after = _run("-c", config, "--state", state, "--query")
    assert after.returncode == 1
    assert after.stdout.startswith(b"NOT_READY\n")


def test_the_module_refuses_a_malformed_config_naming_the_line(tmp_path: Path) -> None:
    config = tmp_path / CONFIG_FILE
    config.write_text("SERVER_PORT=50000\nSERVER_PORT=50001\n")

    run = _run("-c", str(config), "--state", str(tmp_path / "s"))

    assert run.returncode == 1
    assert f"{config}:2: SERVER_PORT is set twice" in run.stderr.decode()
