"""One node's network path to the API server, which a test can cut and restore.

Every local node reaches the one kube-apiserver over loopback, so cutting a single node off (a
network partition, a switch failing) cannot be done with the network itself. An :class:`ApiLink`
is a plain TCP relay between that node's clients (its kubelet, gpu-handler, gpu-node-agent) and the
API server: TLS passes through untouched, so certificates and authorisation are exactly those of a
direct connection. :meth:`ApiLink.cut` resets every established connection and resets each new one
as soon as it arrives, which is what the clients of a partitioned node see (errors, not hangs);
:meth:`ApiLink.restore` lets connections through again, on the same port, so the clients reconnect
by themselves with their own retry logic.

One thread serves every connection through a selector, so a cut is applied between two reads,
never in the middle of a send another thread is making.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import struct
import threading

from pkg.devcluster.processes import free_port

log = logging.getLogger(__name__)

_CHUNK = 65536
_SEND_TIMEOUT = 10.0
_CONNECT_TIMEOUT = 5.0


def _reset(sock: socket.socket) -> None:
    """Closes ``sock`` with a TCP reset (SO_LINGER 0), as a dropped route or a dead peer shows."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class ApiLink:
    """A TCP relay ``127.0.0.1:port`` -> ``127.0.0.1:upstream_port`` that can be cut."""

    def __init__(self, upstream_port: int, *, port: int | None = None) -> None:
        self.upstream_port = upstream_port
        self.port = port if port is not None else free_port()
        self._cut = False
        self._lock = threading.Lock()
        self._applied = threading.Event()  # the loop has reset what a cut must reset
        self._stopping = False
        self._listener: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        self._peers: dict[socket.socket, socket.socket] = {}
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def is_cut(self) -> bool:
        return self._cut

    def connections(self) -> int:
        """Relayed connections open now."""
        with self._lock:
            return len(self._peers) // 2

    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self._listener = listener
        self._selector.register(listener, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._serve, name=f"api-link:{self.port}", daemon=True)
        self._thread.start()

    def cut(self) -> None:
        """Resets every relayed connection and every new one until :meth:`restore`; returns once
        the established ones are reset."""
        self._applied.clear()
        self._cut = True
        self._wake()
        if not self._applied.wait(timeout=10):
            raise TimeoutError(f"the API link on port {self.port} did not apply the cut")

    def restore(self) -> None:
        self._cut = False

    def stop(self) -> None:
        self._stopping = True
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._wake_r.close()
        self._wake_w.close()

    # -- the loop ------------------------------------------------------------------------------------

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _serve(self) -> None:
        try:
            while not self._stopping:
                for key, _ in self._selector.select(timeout=1.0):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    if sock is self._wake_r:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(_CHUNK)
                    elif sock is self._listener:
                        self._accept(sock)
                    else:
                        self._relay(sock)
                if self._cut:
                    self._reset_all()
                    self._applied.set()
        finally:
            self._reset_all()
            if self._listener is not None:
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(self._listener)
                self._listener.close()
            self._selector.close()

    def _accept(self, listener: socket.socket) -> None:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        if self._cut:
            _reset(client)
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=_CONNECT_TIMEOUT)
        except OSError as exc:
            log.debug("api link %s: upstream refused: %s", self.port, exc)
            _reset(client)  # the API server is down: the client sees what it would see directly
            return
        for sock in (client, upstream):
            sock.settimeout(_SEND_TIMEOUT)
            self._selector.register(sock, selectors.EVENT_READ)
        with self._lock:
            self._peers[client] = upstream
            self._peers[upstream] = client

    def _relay(self, sock: socket.socket) -> None:
        peer = self._peers.get(sock)
        if peer is None:
            return
        try:
            data = sock.recv(_CHUNK)  # readable: does not block
            if data:
                peer.sendall(data)
                return
        except OSError as exc:
            log.debug("api link %s: connection failed: %s", self.port, exc)
        self._drop(sock, reset=False)

    def _drop(self, sock: socket.socket, *, reset: bool) -> None:
        with self._lock:
            peer = self._peers.pop(sock, None)
            if peer is not None:
                self._peers.pop(peer, None)
        for one in (sock, peer):
            if one is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(one)
            if reset:
                _reset(one)
            else:
                with contextlib.suppress(OSError):
                    one.close()

    def _reset_all(self) -> None:
        with self._lock:
            socks = list(self._peers)
        for sock in socks:
            if sock in self._peers:
                self._drop(sock, reset=True)
