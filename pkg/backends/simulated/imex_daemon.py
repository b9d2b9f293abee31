"""A stand-in for ``nvidia-imex``: a real process reading the same files, keeping the same readiness contract.

CI has no multi-node NVLink, so a ComputeDomain's daemon Pods run this instead of NVIDIA's daemon:

* ``python -m pkg.backends.simulated.imex_daemon -c /etc/nvidia-imex/config.cfg`` reads
  ``config.cfg`` and the nodes file it names (``IMEX_NODE_CONFIG_FILE``, relative to the config's
  folder when relative), listens on ``SERVER_PORT`` (on ``BIND_INTERFACE_IP``, or every address
  when that is empty, as in a Pod), and answers each connection with a one-line hello naming
  itself (``IMEX-STANDIN imex-0``);
* it tries every other peer of the nodes file, resolving names through the ``hosts`` file next
  to ``config.cfg`` (``--hosts`` to change it), re-read on every attempt, so an address that
  arrives or changes while it runs is used at the next attempt: what NVIDIA's daemon does when
  the wrapper updates ``/etc/hosts`` and signals it. A peer counts as reached only when it
  answers with its own name, so an address left over from a Pod that moved is not taken for
  its successor. A name with no address is unreachable. A peer that fails is retried with
  exponential backoff (reset when its address changes); a reached one is checked again every
  few seconds, so a peer that goes away makes the daemon NOT_READY again;
* which peer it is: ``--name`` or ``IMEX_NODE_NAME``, else the hosts entry whose address is
  ``POD_IP``;
* its state — ``READY``, or ``NOT_READY`` and which peers are missing and why — is written
  atomically to a state file (``/run/nvidia-imex/state``, ``--state``) whenever it changes, and
  each change is logged;
* ``--query`` prints the state file and exits 0 only when it says READY: the daemon Pod's
  readiness probe, in place of ``nvidia-imex-ctl -q`` (which prints ``READY`` when NVIDIA's
  daemon is ready);
* SIGTERM stops it cleanly: the listener closes and the state file is removed, so no READY
  outlives the daemon.

Standard library and :mod:`pkg.backends.nvidia.imex_config` only: it runs in the project image.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Final

from pkg.backends.nvidia.imex_config import (
    HOSTS_FILE,
    ImexConfigError,
    parse_config,
    parse_hosts,
    parse_nodes_config,
    read_bounded,
)

DEFAULT_STATE: Final = Path("/run/nvidia-imex/state")
READY: Final = "READY"
NOT_READY: Final = "NOT_READY"
HELLO: Final = "IMEX-STANDIN"
UNKNOWN_NAME: Final = "-"
_HELLO_LIMIT: Final = 256

_log = logging.getLogger("imex-standin")


@dataclass(frozen=True)
class StandInOptions:
    """How one stand-in runs; the timings are small in tests and the defaults in a Pod."""

    config_path: Path
    state_path: Path = DEFAULT_STATE
    hosts_path: Path | None = None
    name: str | None = None
    pod_ip: str | None = None
    bind: str | None = None
    first_retry_s: float = 0.2
    max_retry_s: float = 5.0
    recheck_s: float = 2.0
    connect_timeout_s: float = 1.0


@dataclass
class _Peer:
    """What the stand-in knows of one peer: its last attempt's outcome and when to try again."""

    reached: bool = False
    reason: str = "not tried yet"
    address: str | None = None
    delay_s: float = 0.0
    next_attempt: float = 0.0


@dataclass
class _View:
    """One round's reading of the hosts file and of who this daemon is."""

    hosts: Mapping[str, str] = field(default_factory=dict)
    problem: str = ""
    me: str | None = None


class StandIn:
    """One stand-in daemon: a listener that says hello, and a loop that reaches the peers."""

    def __init__(self, options: StandInOptions) -> None:
        self._options = options
        self._config = parse_config(read_bounded(options.config_path), source=str(options.config_path))
        nodes_path = Path(self._config.node_config_file)
        if not nodes_path.is_absolute():
            nodes_path = options.config_path.parent / nodes_path
        self._nodes = parse_nodes_config(read_bounded(nodes_path), source=str(nodes_path))
        self._hosts_path = options.hosts_path or options.config_path.parent / HOSTS_FILE
        self._peers = {node: _Peer(delay_s=options.first_retry_s) for node in self._nodes}
        self._me: str | None = None
        self._state = ""

    @property
    def port(self) -> int:
        return self._config.server_port

    def serve(self, stop: threading.Event) -> None:
        """Listen and reach the peers until ``stop`` is set; the state file is gone when it returns."""
        listener = self._listen()
        accepting = threading.Thread(
            target=self._accept, args=(listener, stop), name="imex-accept", daemon=True
        )
        accepting.start()
        try:
            while not stop.is_set():
                view = self._view()
                self._me = view.me
                self._attempt_due(view)
                self._publish(view)
                stop.wait(self._sleep_s())
        finally:
            stop.set()
            accepting.join()
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                self._options.state_path.unlink()

    def _listen(self) -> socket.socket:
        address = self._options.bind if self._options.bind is not None else self._config.bind_interface_ip
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((address, self._config.server_port))
        listener.listen(64)
        listener.settimeout(0.1)
        _log.info("listening on %s:%d", address or "*", self._config.server_port)
        return listener

    def _accept(self, listener: socket.socket, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with connection, contextlib.suppress(OSError):
                connection.sendall(f"{HELLO} {self._me or UNKNOWN_NAME}\n".encode())

    def _view(self) -> _View:
        try:
            hosts = parse_hosts(read_bounded(self._hosts_path), source=str(self._hosts_path))
        except FileNotFoundError:
            hosts, problem = {}, f"{self._hosts_path} does not exist"
        except (ImexConfigError, OSError) as exc:
            hosts, problem = {}, str(exc)
        else:
            problem = ""
        return _View(hosts=hosts, problem=problem, me=self._own_name(hosts))

    def _own_name(self, hosts: Mapping[str, str]) -> str | None:
        if self._options.name:
            return self._options.name
        if self._options.pod_ip:
            names = sorted(name for name, address in hosts.items() if address == self._options.pod_ip)
            return next((name for name in names if name in self._peers), None)
        return None

    def _attempt_due(self, view: _View) -> None:
        now = time.monotonic()
        for name, peer in self._peers.items():
            if name == view.me:
                continue
            address = _resolve(name, view.hosts)
            if now < peer.next_attempt and address == peer.address:
                continue
            self._attempt(name, peer, address, view.problem)

    def _attempt(self, name: str, peer: _Peer, address: str | None, hosts_problem: str) -> None:
        was_reached = peer.reached
        if address != peer.address:
            peer.delay_s = self._options.first_retry_s
        peer.address = address
        if address is None:
            reached, reason = False, f"no address ({hosts_problem})" if hosts_problem else "no address"
        else:
            reached, reason = self._knock(name, address)
        peer.reached, peer.reason = reached, reason
        if reached:
            peer.delay_s = self._options.first_retry_s
            peer.next_attempt = time.monotonic() + self._options.recheck_s
        else:
            peer.next_attempt = time.monotonic() + peer.delay_s
            peer.delay_s = min(peer.delay_s * 2, self._options.max_retry_s)
        if reached != was_reached:
            _log.info("peer %s at %s: %s", name, address, "reached" if reached else reason)

    def _knock(self, name: str, address: str) -> tuple[bool, str]:
        try:
            with socket.create_connection(
                (address, self._config.server_port), timeout=self._options.connect_timeout_s
            ) as connection:
                hello = _read_line(connection)
        except OSError as exc:
            return False, f"{address}:{self._config.server_port}: {exc.strerror or exc}"
        if hello != f"{HELLO} {name}":
            return False, f"{address}:{self._config.server_port} answered {hello!r}, not {name}"
        return True, ""

    def _publish(self, view: _View) -> None:
        state = self._render_state(view)
        if state == self._state:
            return
        _write_atomically(self._options.state_path, state)
        _log.info("%s", state.strip().replace("\n", "; "))
        self._state = state

    def _render_state(self, view: _View) -> str:
        if view.me is None:
            unknown = f"this daemon's name is unknown: no --name or IMEX_NODE_NAME, and {self._unmatched()}"
            return f"{NOT_READY}\n{unknown}\n"
        if view.me not in self._peers:
            return f"{NOT_READY}\nthis daemon ({view.me}) is not in the nodes file\n"
        missing = [
            f"{name}: {peer.reason}"
            for name, peer in self._peers.items()
            if name != view.me and not peer.reached
        ]
        if missing:
            return f"{NOT_READY}\nas {view.me}, missing " + ", ".join(missing) + "\n"
        return f"{READY}\n"

    def _unmatched(self) -> str:
        if self._options.pod_ip:
            return f"no peer of the hosts file has the address {self._options.pod_ip} (POD_IP)"
        return "POD_IP is not set"

    def _sleep_s(self) -> float:
        due = [peer.next_attempt for name, peer in self._peers.items() if name != self._me]
        if not due:
            return self._options.recheck_s
        return min(max(min(due) - time.monotonic(), 0.02), self._options.recheck_s)


def query(state_path: Path) -> tuple[int, str]:
    """The readiness probe: the state file's text, and 0 only when it says READY."""
    try:
        text = read_bounded(state_path)
    except FileNotFoundError:
        return 1, f"{NOT_READY}\nno state file {state_path}: the daemon is not running\n"
    except (ImexConfigError, OSError) as exc:
        return 1, f"{NOT_READY}\n{exc}\n"
    first = text.split("\n", 1)[0].strip()
    return (0 if first == READY else 1), text


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    if arguments.query:
        code, text = query(arguments.state)
        sys.stdout.write(text)
        return code
    logging.basicConfig(level=logging.INFO, format="%(asctime)s imex-standin %(message)s", stream=sys.stderr)
    options = StandInOptions(
        config_path=arguments.config,
        state_path=arguments.state,
        hosts_path=arguments.hosts,
        name=arguments.name or os.environ.get("IMEX_NODE_NAME") or None,
        pod_ip=os.environ.get("POD_IP") or None,
        bind=arguments.bind,
    )
    try:
        stand_in = StandIn(options)
    except (ImexConfigError, OSError) as exc:
        print(f"imex-standin: {exc}", file=sys.stderr)
        return 1
    stop = threading.Event()

    def on_term(signum: int, frame: FrameType | None) -> None:
        _log.info("signal %d: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    try:
        stand_in.serve(stop)
    except OSError as exc:
        print(f"imex-standin: port {stand_in.port}: {exc}", file=sys.stderr)
        return 1
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="imex_daemon", description="A stand-in for nvidia-imex.")
    parser.add_argument("-c", "--config", type=Path, required=True, help="config.cfg, as nvidia-imex -c")
    parser.add_argument("--query", action="store_true", help="print the state; exit 0 only when READY")
    parser.add_argument("--state", type=Path, default=DEFAULT_STATE, help="the state file")
    parser.add_argument(
        "--hosts", type=Path, default=None, help="the hosts file (default: next to config.cfg)"
    )
    parser.add_argument(
        "--name", default=None, help="this daemon's stable name (default: IMEX_NODE_NAME, POD_IP)"
    )
    parser.add_argument(
        "--bind", default=None, help="the address to listen on (default: BIND_INTERFACE_IP, all)"
    )
    return parser


def _resolve(name: str, hosts: Mapping[str, str]) -> str | None:
    if name in hosts:
        return hosts[name]
    with contextlib.suppress(ValueError):
        return str(ipaddress.ip_address(name))
    return None


def _read_line(connection: socket.socket) -> str:
    data = b""
    while b"\n" not in data and len(data) < _HELLO_LIMIT:
        chunk = connection.recv(_HELLO_LIMIT - len(data))
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0].decode(errors="replace").strip()


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


if __name__ == "__main__":
    sys.exit(main())
