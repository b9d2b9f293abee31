"""The API link relays a node's connections and cuts them on demand, with resets, not hangs."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from pkg.devcluster.apilink import ApiLink


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture
def upstream() -> Iterator[int]:
    server = _Server(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


@pytest.fixture
def link(upstream: int) -> Iterator[ApiLink]:
    relay = ApiLink(upstream)
    relay.start()
    yield relay
    relay.stop()


def _connect(link: ApiLink) -> socket.socket:
    return socket.create_connection(("127.0.0.1", link.port), timeout=5)


def _echo(sock: socket.socket, payload: bytes) -> bytes:
    sock.sendall(payload)
    received = b""
    while len(received) < len(payload):
        chunk = sock.recv(65536)
        if not chunk:
            break
        received += chunk
    return received


def _exchange(sock: socket.socket) -> None:
    """Sends and reads once; a closed connection without a reset counts as a failure to cut."""
    sock.sendall(b"ping")
    if not sock.recv(4):
        raise AssertionError("the connection was closed, not reset")


def _connect_and_exchange(port: int) -> None:
    """A new client's first exchange: the reset may reach it at connect, send or receive."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        _exchange(sock)


def test_bytes_pass_through_both_ways(link: ApiLink) -> None:
    payload = bytes(range(256)) * 1000  # larger than one relay chunk
    with _connect(link) as sock:
        assert _echo(sock, payload) == payload


def test_a_cut_resets_established_connections(link: ApiLink) -> None:
    with _connect(link) as sock:
        assert _echo(sock, b"ping") == b"ping"
        link.cut()
        with pytest.raises(ConnectionResetError):
            _exchange(sock)
    assert link.connections() == 0


def test_while_cut_new_connections_are_reset(link: ApiLink) -> None:
    link.cut()
    with pytest.raises(ConnectionResetError):
        _connect_and_exchange(link.port)


def test_restore_lets_new_connections_through_on_the_same_port(link: ApiLink) -> None:
    port = link.port
    link.cut()
    link.restore()
    assert link.port == port
    with _connect(link) as sock:
        assert _echo(sock, b"again") == b"again"


def test_an_upstream_that_refuses_resets_the_client() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]  # nothing listens there once the probe closes
    relay = ApiLink(closed_port)
    relay.start()
    try:
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            _connect_and_exchange(relay.port)
    finally:
        relay.stop()


def test_the_url_names_the_link_s_port() -> None:
    relay = ApiLink(6443, port=16443)
    try:
        assert relay.url == "https://127.0.0.1:16443"
    finally:
        relay.stop()
