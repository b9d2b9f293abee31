"""One small HTTP server for ``/metrics``, ``/healthz`` and ``/readyz``.

One port per process keeps the Pod spec and the kube-rbac-proxy sidecar simple (the
sidecar terminates TLS and authorizes; this server listens on plain HTTP, normally on localhost).

Health checks follow the API server's convention: a check is a callable that returns when healthy
and raises when not, with the reason as the message. ``/healthz`` answers whether the process should
be restarted (liveness), ``/readyz`` whether it should receive work (readiness). Both answer 200
``ok`` or 500 naming the failing checks; ``?verbose`` lists every check with its outcome. Checks run
on the request's thread (the server is threaded), so they must be cheap: read a flag, never call the
API server.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

logger = logging.getLogger(__name__)

HealthCheck = Callable[[], None]
"""Returns when healthy; raises with the reason when not."""


@dataclass(frozen=True)
class CheckResult:
    name: str
    error: str | None  # None when the check passed


class HealthChecks:
    """A named, ordered set of checks; thread-safe to add to while being served."""

    def __init__(self, kind: str):
        self.kind = kind  # "healthz" or "readyz": named in the failure text
        self._checks: dict[str, HealthCheck] = {}
        self._lock = threading.Lock()

    def add(self, name: str, check: HealthCheck) -> None:
        with self._lock:
            if name in self._checks:
                raise ValueError(f"{self.kind} check {name!r} is already registered")
            self._checks[name] = check

    def run(self) -> list[CheckResult]:
        with self._lock:
            checks = list(self._checks.items())
        results = []
        for name, check in checks:
            try:
                check()
            except Exception as exc:
                results.append(CheckResult(name, str(exc) or type(exc).__name__))
            else:
                results.append(CheckResult(name, None))
        return results


def parse_bind_address(address: str) -> tuple[str, int]:
    """``":8080"``, ``"127.0.0.1:0"`` or ``"[::1]:8080"`` → (host, port); an empty host means all."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"bind address {address!r} is not host:port")
    return host.strip("[]") or "0.0.0.0", int(port)


class MonitoringServer:
    """Serves metrics and health; a :class:`~pkg.framework.manager.runnable.Runnable`.

    The socket is bound in the constructor, so a taken port fails at start-up and :attr:`port` is
    known before :meth:`run` (pass port 0 in tests). :meth:`run` closes it when ``stop`` is set.
    """

    needs_leader_election = False

    def __init__(
        self,
        *,
        bind_address: str,
        healthz: HealthChecks,
        readyz: HealthChecks,
        registry: CollectorRegistry,
    ):
        self.name = "monitoring-server"
        host, port = parse_bind_address(bind_address)
        handler = type("_Handler", (_Handler,), {"healthz": healthz, "readyz": readyz, "registry": registry})
        server_class = _IPv6Server if ":" in host else ThreadingHTTPServer
        self._server = server_class((host, port), handler)
        self._server.daemon_threads = True

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def run(self, stop: threading.Event) -> None:
        serving = threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name=self.name, daemon=True
        )
        serving.start()
        logger.info("serving metrics and health", extra={"port": self.port})
        try:
            stop.wait()
        finally:
            self._server.shutdown()
            self.close()

    def close(self) -> None:
        """Releases the socket (for a server that was never run)."""
        self._server.server_close()


class _IPv6Server(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    healthz: HealthChecks
    readyz: HealthChecks
    registry: CollectorRegistry

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            self._answer(200, encoder(self.registry), content_type)
        elif url.path in ("/healthz", "/readyz"):
            checks = self.healthz if url.path == "/healthz" else self.readyz
            self._health(checks, verbose="verbose" in parse_qs(url.query, keep_blank_values=True))
        else:
            self._answer(404, b"not found\n", "text/plain; charset=utf-8")

    def _health(self, checks: HealthChecks, *, verbose: bool) -> None:
        results = checks.run()
        failed = [r for r in results if r.error is not None]
        if not failed and not verbose:
            self._answer(200, b"ok", "text/plain; charset=utf-8")
            return
        lines = [f"[+]{r.name} ok" if r.error is None else f"[-]{r.name} failed: {r.error}" for r in results]
        if not verbose:  # without ?verbose, name the failures but keep their reasons internal
            lines = [f"[-]{r.name} failed: reason withheld" for r in failed]
        lines.append(f"{checks.kind} check failed" if failed else f"{checks.kind} check passed")
        self._answer(500 if failed else 200, ("\n".join(lines) + "\n").encode(), "text/plain; charset=utf-8")

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("http request: " + format, *args, extra={"client": self.client_address[0]})
