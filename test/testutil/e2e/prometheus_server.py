"""A Prometheus server over our components, as a cluster's monitoring stack would run it.

Prometheus is the server built from its module (``hack/tools/prometheus``); it scrapes through
kube-rbac-proxy (``hack/tools/kube-rbac-proxy``) with the token of a ServiceAccount that may only
``get /metrics`` (the chart's metrics-reader ClusterRole grants the same), evaluates rule files the
test hands it, and is read through its HTTP API (``/api/v1/query``, ``/api/v1/alerts``).

Rule groups keep their expressions; only their ``interval`` is shortened, in the test's copy, so
that a minute of test time holds many evaluations.
"""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from pkg.devcluster.cluster import ControlPlane, default_bin_dir
from pkg.devcluster.processes import ManagedProcess, free_port, wait_until

READER = "metrics-reader"


def reader_token(plane: ControlPlane, namespace: str) -> str:
    """A token of ServiceAccount ``namespace/metrics-reader``, bound to get ``/metrics`` only."""
    role = f"{namespace}-{READER}"
    objects = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": READER, "namespace": namespace}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": READER, "namespace": namespace}],
        },
    ]
    plane.kubectl("apply", "-f", "-", input_text=yaml.safe_dump_all(objects))
    return plane.kubectl("create", "token", READER, "-n", namespace, "--duration=1h").strip()


def delete_reader(plane: ControlPlane, namespace: str) -> None:
    role = f"{namespace}-{READER}"
    plane.kubectl("delete", "clusterrole,clusterrolebinding", role, "--ignore-not-found", "--wait=false")


@contextmanager
def metrics_proxy(plane: ControlPlane, upstream_port: int, folder: Path) -> Iterator[int]:
    """kube-rbac-proxy in front of ``127.0.0.1:upstream_port`` (HTTPS, self-signed, the API
    server's TokenReview and SubjectAccessReview); yields its port."""
    port = free_port()
    proc = ManagedProcess(
        name="kube-rbac-proxy",
        argv=[
            str(default_bin_dir() / "kube-rbac-proxy"),
            f"--secure-listen-address=127.0.0.1:{port}",
            f"--upstream=http://127.0.0.1:{upstream_port}/",
            f"--kubeconfig={plane.kubeconfig}",
            "--ignore-paths=/healthz,/readyz",
        ],
        log_path=folder / f"kube-rbac-proxy-{upstream_port}.log",
    )
    proc.start()
    try:
        wait_until(lambda: _listening(port), timeout=30, what="kube-rbac-proxy to listen", process=proc)
        yield port
    finally:
        proc.stop()


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def shortened_rules(source: Path, target: Path, interval: str) -> Path:
    """A copy of the rule file ``source`` whose groups are evaluated every ``interval``."""
    rules = yaml.safe_load(source.read_text())
    for group in rules["groups"]:
        group["interval"] = interval
    target.write_text(yaml.safe_dump(rules, sort_keys=False))
    return target


def chart_alert_rules(target: Path, values: dict[str, str], interval: str) -> Path:
    """The chart's alerts (its PrometheusRule, rendered with ``values``) as a rule file whose
    groups are evaluated every ``interval``: the test's configuration, not the shipped rules."""
    chart = Path(__file__).resolve().parents[3] / "charts" / "gpu-control-plane"
    args = [str(default_bin_dir() / "helm"), "template", "alerts", str(chart)]
    args += ["--api-versions", "monitoring.coreos.com/v1/PrometheusRule", "--set", "alerts.enabled=true"]
    for path, value in values.items():
        args += ["--set-string", f"{path}={value}"]
    out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=60).stdout
    [rule] = [
        d
        for d in yaml.safe_load_all(out)
        if d and d["kind"] == "PrometheusRule" and d["metadata"]["name"].endswith("-alerts")
    ]
    groups = rule["spec"]["groups"]
    for group in groups:
        group["interval"] = interval
    target.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return target


@dataclass
class Prometheus:
    port: int

    def _get(self, path: str, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        """An instant query now: each series' labels and value."""
        data = self._get("/api/v1/query", query=expr)
        return [(dict(r["metric"]), float(r["value"][1])) for r in data["result"]]

    def alerts(self, name: str, state: str = "firing") -> list[dict[str, str]]:
        """The labels of the alerts ``name`` now in ``state``."""
        found = self._get("/api/v1/alerts")["alerts"]
        return [dict(a["labels"]) for a in found if a["labels"]["alertname"] == name and a["state"] == state]

    def targets_up(self) -> list[str]:
        return [t["scrapePool"] for t in self._get("/api/v1/targets")["activeTargets"] if t["health"] == "up"]


@contextmanager
def prometheus(
    folder: Path, targets: dict[str, int], token: str, rule_files: Sequence[Path], *, interval: str = "1s"
) -> Iterator[Prometheus]:
    """A Prometheus server scraping each ``job: port`` (a kube-rbac-proxy) every ``interval`` with
    ``token``, evaluating ``rule_files``; yields its API once every target is up."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "token").write_text(token)
    config = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [
            {
                "job_name": job,
                "scheme": "https",
                "tls_config": {"insecure_skip_verify": True},  # the proxy's self-signed certificate
                "authorization": {"credentials_file": str(folder / "token")},
                "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
            }
            for job, port in targets.items()
        ],
    }
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    proc = ManagedProcess(
        name="prometheus",
        argv=[
            str(default_bin_dir() / "prometheus"),
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        log_path=folder / "prometheus.log",
    )
    proc.start()
    server = Prometheus(port)
    try:
        wait_until(
            lambda: _listening(port) and sorted(server.targets_up()) == sorted(targets),
            timeout=60,
            what="Prometheus to scrape every target",
            process=proc,
        )
        yield server
    finally:
        proc.stop()
