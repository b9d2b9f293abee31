"""The monitoring server over real HTTP on an ephemeral port."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter

from pkg.framework.manager.server import HealthChecks, MonitoringServer, parse_bind_address


def fetch(url: str, accept: str | None = None) -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read().decode()


class Served:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.healthz, self.readyz = HealthChecks("healthz"), HealthChecks("readyz")
        self.server = MonitoringServer(
            bind_address="127.0.0.1:0", healthz=self.healthz, readyz=self.readyz, registry=self.registry
        )
        self.base = f"http://127.0.0.1:{self.server.port}"


@pytest.fixture
def served() -> Iterator[Served]:
    served = Served()
    stop = threading.Event()
    thread = threading.Thread(target=served.server.run, args=(stop,), daemon=True)
    thread.start()
    yield served
    stop.set()
    thread.join(2)
    assert not thread.is_alive()


def fail(reason: str) -> None:
    raise RuntimeError(reason)


def test_metrics_expose_the_given_registry(served: Served) -> None:
    Counter("gpu_test_things", "Things.", registry=served.registry).inc(3)
    status, content_type, body = fetch(f"{served.base}/metrics")
    assert status == 200
    assert content_type.startswith("text/plain")
    assert "gpu_test_things_total 3.0" in body
    _, content_type, body = fetch(f"{served.base}/metrics", accept="application/openmetrics-text")
    assert content_type.startswith("application/openmetrics-text")
    assert body.rstrip().endswith("# EOF")


def test_health_without_checks_is_ok(served: Served) -> None:
    assert fetch(f"{served.base}/healthz")[::2] == (200, "ok")
    assert fetch(f"{served.base}/readyz")[::2] == (200, "ok")


def test_failing_check_names_itself_and_verbose_lists_every_check(served: Served) -> None:
    served.readyz.add("cache", lambda: None)
    served.readyz.add("driver", lambda: fail("driver not loaded"))
    status, _, body = fetch(f"{served.base}/readyz")
    assert status == 500
    assert "[-]driver failed" in body
    assert "driver not loaded" not in body
    assert "cache" not in body
    status, _, body = fetch(f"{served.base}/readyz?verbose")
    assert status == 500
    assert body.splitlines() == [
        "[+]cache ok",
        "[-]driver failed: driver not loaded",
        "readyz check failed",
    ]
    assert fetch(f"{served.base}/healthz")[0] == 200  # liveness is a separate set


def test_verbose_success_lists_checks(served: Served) -> None:
    served.healthz.add("ping", lambda: None)
    status, _, body = fetch(f"{served.base}/healthz?verbose=1")
    assert status == 200
    assert body.splitlines() == ["[+]ping ok", "healthz check passed"]


def test_unknown_path_is_404(served: Served) -> None:
    assert fetch(f"{served.base}/nope")[0] == 404


def test_duplicate_check_names_are_rejected() -> None:
    checks = HealthChecks("readyz")
    checks.add("cache", lambda: None)
    with pytest.raises(ValueError, match="cache"):
        checks.add("cache", lambda: None)


@pytest.mark.parametrize(
    ("address", "expected"),
    [(":8080", ("0.0.0.0", 8080)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("[::1]:9090", ("::1", 9090))],
)
def test_parse_bind_address(address: str, expected: tuple[str, int]) -> None:
    assert parse_bind_address(address) == expected


@pytest.mark.parametrize("address", ["8080", "host:", "host:port"])
def test_parse_bind_address_rejects_garbage(address: str) -> None:
    with pytest.raises(ValueError, match="host:port"):
        parse_bind_address(address)


def test_port_is_known_before_run_and_close_releases_it() -> None:
    served = Served()
    assert served.server.port > 0
    served.server.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{served.base}/healthz", timeout=1)
