"""Who holds which GPU, on a real node: device-seconds, the info series and the Events.

Two Pods on different classes (a MIG 1g slice and a whole A30) are allocated by the real
kube-scheduler and prepared by our kubelet plugin; gpu-dra-controller runs as a process and is
restarted while they run, so the counters must continue from the ledger. The truth is measured
independently: a thread polls the claims every 50 ms and records when each allocation appeared and
went. The scraped device-seconds must be within one second per minute held (at least one second)
of that truth, the info series must name each Pod, and both claims must carry the create and
release Events (their PhysicalGPUs too). The scraped series then feed ``promtool test rules``
with synthetic DCGM series, so the recording rules are proven on what the controller exports.

A Prometheus server (built from its module) scrapes the controller through kube-rbac-proxy with a
metrics reader's token every second for the whole run, restart included, and evaluates the
chart's recording rules every second (the test's copy; the shipped interval is a minute): the
GPU-hours it records by namespace and class, read through its HTTP API, must equal the truth
within the same bound.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import V1Namespace, V1ObjectMeta
from prometheus_client.parser import text_string_to_metric_families
from testutil.e2e.gpu_nodes import gpu_pod, run_and_show
from testutil.e2e.prometheus_server import (
    Prometheus,
    delete_reader,
    metrics_proxy,
    prometheus,
    reader_token,
    shortened_rules,
)
from testutil.extra_kinds import CORE_EVENT
from testutil.k8s_fields import name_of, uid_of

from pkg.devcluster.cluster import ControlPlane
from pkg.devcluster.gpucomponents import GpuComponents
from pkg.devcluster.processes import ManagedProcess, free_port, ready, wait_until
from pkg.framework.client import AlreadyExistsError, KubeClient
from pkg.framework.client.builtin_kinds import NAMESPACE, POD, RESOURCE_CLAIM

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "charts" / "gpu-control-plane" / "files" / "prometheus" / "recording-rules.yaml"
LEASE_NAMESPACE = "gpu-accounting-e2e"
HOLD = 40.0  # seconds both Pods keep their devices, a controller restart in the middle
PODS = {"acct-mig": ("mig-1g", "gpu-mig-1g"), "acct-whole": ("gpu", "gpu-physical")}


@dataclass
class Truth:
    """When each claim's allocation appeared and went, as a 50 ms poll of the API saw it."""

    start: dict[str, float] = field(default_factory=dict)
    end: dict[str, float] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def watch(self, kube: KubeClient, namespace: str) -> None:
        while not self.stop.is_set():
            claims, _ = kube.list(RESOURCE_CLAIM, namespace=namespace)
            now = time.time()
            held = {uid_of(c) for c in claims if c.status is not None and c.status.allocation is not None}
            for claim in claims:
                self.names[uid_of(claim)] = name_of(claim)
                if uid_of(claim) in held:
                    self.start.setdefault(uid_of(claim), now)
            for uid in self.start:
                if uid not in held:
                    self.end.setdefault(uid, now)
            self.stop.wait(0.05)


def _scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


@pytest.fixture
def dra_controller(
    kube: KubeClient, control_plane: ControlPlane, tmp_path: Path
) -> Iterator[tuple[ManagedProcess, int]]:
    with contextlib.suppress(AlreadyExistsError):
        kube.create(NAMESPACE, V1Namespace(metadata=V1ObjectMeta(name=LEASE_NAMESPACE)))
    port = free_port()
    proc = ManagedProcess(
        name="gpu-dra-controller",
        argv=[
            sys.executable,
            "-m",
            "pkg.app.gpu_dra_controller",
            f"--kubeconfig={control_plane.kubeconfig}",
            f"--metrics-bind-address=127.0.0.1:{port}",
            f"--leader-election-namespace={LEASE_NAMESPACE}",
            "--accounting-period=2s",
        ],
        log_path=tmp_path / "gpu-dra-controller.log",
    )
    proc.start()
    try:
        wait_until(lambda: ready(port), timeout=60, what="gpu-dra-controller ready", process=proc)
        yield proc, port
    finally:
        proc.stop()


@pytest.fixture
def monitored(
    control_plane: ControlPlane, namespace: str, dra_controller: tuple[ManagedProcess, int], tmp_path: Path
) -> Iterator[Prometheus]:
    """A Prometheus server scraping gpu-dra-controller every second through kube-rbac-proxy with a
    metrics reader's token, evaluating the chart's recording rules every second."""
    _proc, port = dra_controller
    rules = shortened_rules(RULES, tmp_path / "recording-rules.yaml", "1s")
    try:
        token = reader_token(control_plane, namespace)
        with (
            metrics_proxy(control_plane, port, tmp_path) as proxy,
            prometheus(tmp_path / "prometheus", {"gpu-dra-controller": proxy}, token, [rules]) as server,
        ):
            yield server
    finally:
        delete_reader(control_plane, namespace)


def _series(port: int, name: str, **match: str) -> list[tuple[dict[str, str], float]]:
    return [
        (labels, value) for labels, value in _scrape(port).get(name, []) if match.items() <= labels.items()
    ]


def _events(kube: KubeClient, namespace: str | None, reason: str) -> list[tuple[str, str]]:
    """(kind, name) of the objects with Events of ``reason``, read through the core v1 API (the
    kubelet's Events have no eventTime, which the events.k8s.io model insists on)."""
    events, _ = kube.list(CORE_EVENT, namespace=namespace)
    return [
        (str(e.involved_object.kind), str(e.involved_object.name))
        for e in events
        if e.reason == reason and e.involved_object is not None
    ]


@pytest.mark.timeout(900)  # the first test of a session may wait for another run's real nodes
def test_device_seconds_info_series_and_events_for_two_pods_across_a_restart(
    kube: KubeClient,
    control_plane: ControlPlane,
    namespace: str,
    gpu_node: GpuComponents,
    dra_controller: tuple[ManagedProcess, int],
    monitored: Prometheus,
    tmp_path: Path,
) -> None:
    proc, port = dra_controller
    truth = Truth()
    watcher = threading.Thread(target=truth.watch, args=(kube, namespace), daemon=True)
    watcher.start()
    try:
        seen = {
            pod: run_and_show(kube, control_plane, namespace, gpu_pod(pod, resource, node=gpu_node.node.name))
            for pod, (resource, _cls) in PODS.items()
        }
        wait_until(lambda: len(truth.start) == 2, timeout=30, what="both claims allocated")

        def info_names_both() -> bool:
            pods = {
                labels["pod"] for labels, _ in _series(port, "gpu_dra_allocation_info", namespace=namespace)
            }
            return pods == set(PODS)

        wait_until(info_names_both, timeout=30, what="the info series to name both Pods")
        info = {
            labels["pod"]: labels
            for labels, _ in _series(port, "gpu_dra_allocation_info", namespace=namespace)
        }
        for pod, (_resource, cls) in PODS.items():
            assert info[pod]["class"] == cls
            assert info[pod]["node"] == gpu_node.node.name
            assert info[pod]["UUID"].startswith("GPU-")
            assert info[pod]["physicalgpu"]
        assert info["acct-mig"]["deviceType"] == "MIG"
        assert info["acct-mig"]["profile"] == "1g.6gb"
        assert info["acct-whole"]["deviceType"] == "Physical"

        mig = _prepared_mig_device(gpu_node, namespace, info["acct-mig"], seen["acct-mig"].visible)

        time.sleep(HOLD / 2)
        proc.stop()  # a restart mid-run: the ledger, not the process, carries the counters
        proc.start()
        wait_until(lambda: ready(port), timeout=60, what="gpu-dra-controller ready again", process=proc)
        time.sleep(HOLD / 2)

        for pod in PODS:
            kube.delete(POD, pod, namespace)
        wait_until(lambda: len(truth.end) == 2, timeout=90, what="both allocations released")
    finally:
        truth.stop.set()
        watcher.join()

    held = {truth.names[uid]: truth.end[uid] - truth.start[uid] for uid in truth.start}
    assert all(seconds > HOLD for seconds in held.values()), held

    def exported() -> dict[str, float]:
        return {
            labels["class"]: value
            for labels, value in _series(port, "gpu_dra_allocation_seconds_total", namespace=namespace)
        }

    wait_until(
        lambda: len(exported()) == 2 and not _series(port, "gpu_dra_allocation_info", namespace=namespace),
        timeout=30,
        what="the releases to be accounted",
    )
    by_class = exported()
    truth_by_class = {}
    for uid, name in truth.names.items():
        pod = next(p for p in PODS if name.startswith(p))
        truth_by_class[PODS[pod][1]] = truth.end[uid] - truth.start[uid]
    errors = {cls: by_class[cls] - truth_by_class[cls] for cls in truth_by_class}
    print(f"device-seconds exported {by_class}, measured {truth_by_class}, error {errors}")
    for cls, error in errors.items():
        assert abs(error) <= max(1.0, truth_by_class[cls] / 60.0), (cls, by_class, truth_by_class)

    _prove_rules_live(monitored, namespace, by_class, truth_by_class)

    made = {labels["class"]: value for labels, value in _series(port, "gpu_dra_allocations_total")}
    assert min(made.get("gpu-mig-1g", 0), made.get("gpu-physical", 0)) >= 1, made

    claim_names = set(truth.names.values())
    for reason in ("AllocationCreated", "AllocationReleased"):
        on_claims = {name for kind, name in _events(kube, namespace, reason) if kind == "ResourceClaim"}
        assert on_claims == claim_names, (reason, on_claims)
        on_cards = {name for kind, name in _events(kube, None, reason) if kind == "PhysicalGPU"}
        assert {labels["physicalgpu"] for labels in info.values()} <= on_cards, (reason, on_cards)

    _prove_rules_on(tmp_path, info, mig, by_class, namespace)


HOURS = "gpu_dra:namespace_class:gpu_hours:increase1h"
LEADER = "gpu_dra:allocation_seconds:leader"


def _prove_rules_live(
    server: Prometheus, namespace: str, exported: dict[str, float], truth: dict[str, float]
) -> None:
    """Prometheus, having scraped the run through kube-rbac-proxy: once its recorded device-seconds
    reached the exported totals, its GPU-hours by namespace and class are the truth, within the
    same bound as the exported counter."""

    def recorded(expr: str) -> dict[str, float]:
        return {
            labels["class"]: value for labels, value in server.query(f'{expr}{{namespace="{namespace}"}}')
        }

    wait_until(
        lambda: recorded(LEADER) == exported, timeout=30, what="Prometheus to record the exported totals"
    )
    time.sleep(3)  # three more evaluations of the GPU-hours rule over the final samples
    hours = recorded(HOURS)
    print(f"Prometheus GPU-hours {hours} (x3600: { {c: h * 3600 for c, h in hours.items()} }), truth {truth}")
    assert sorted(hours) == sorted(truth)
    for cls, seconds in truth.items():
        assert abs(hours[cls] * 3600 - seconds) <= max(1.0, seconds / 60.0), (cls, hours, truth)


def _text(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))


def _labels(cls: str, namespace: str) -> str:
    return f'class="{cls}",namespace="{namespace}"'


def _prepared_mig_device(
    gpu_node: GpuComponents, namespace: str, info: dict[str, str], visible: str
) -> dict[str, str]:
    """gpu-handler's series of the MIG device it prepared: the instance the container was given."""
    port = _metrics_port(gpu_node.handler)

    def prepared() -> list[dict[str, str]]:
        found = _series(port, "gpu_dra_prepared_device_info", namespace=namespace)
        return [labels for labels, _ in found if labels["claim"] == info["claim"]]

    wait_until(lambda: len(prepared()) == 1, timeout=30, what="gpu-handler to export the MIG device")
    [mig] = prepared()
    assert mig["mig_uuid"] == visible
    assert mig["dra_device"] == info["dra_device"]
    assert mig["GPU_I_ID"].isdigit()
    return mig


def _metrics_port(proc: ManagedProcess) -> int:
    [address] = [a.split("=", 1)[1] for a in proc.argv if a.startswith("--metrics-bind-address=")]
    return int(address.rsplit(":", 1)[1])


def _prove_rules_on(
    tmp_path: Path,
    info: dict[str, dict[str, str]],
    mig: dict[str, str],
    seconds: dict[str, float],
    namespace: str,
) -> None:
    """promtool: the chart's recording rules over the series this run exported plus synthetic DCGM
    utilisation (the whole card idle at 2 %, the MIG slice's own instance busy at 80 %)."""
    promtool = Path(os.environ.get("GPU_CP_BIN_DIR", "")) / "promtool"
    if not promtool.exists():
        pytest.fail(f"promtool is not built ({promtool}): run 'make tools'")
    series = [{"series": f"gpu_dra_prepared_device_info{{{_text(mig)}}}", "values": "1x120"}]
    for labels in info.values():
        series.append({"series": f"gpu_dra_allocation_info{{{_text(labels)}}}", "values": "1x120"})
    whole, sliced = info["acct-whole"], info["acct-mig"]
    series.append({"series": f'DCGM_FI_DEV_GPU_UTIL{{UUID="{whole["UUID"]}",gpu="0"}}', "values": "2x120"})
    instance = f'UUID="{sliced["UUID"]}",GPU_I_ID="{mig["GPU_I_ID"]}"'
    series.append({"series": f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{{instance},gpu="1"}}', "values": "0.8x120"})
    for cls, total in seconds.items():
        per_minute = 60  # held for the whole two hours: one device-second per second
        where = 'node="n",deviceType="t"'
        series.append(
            {
                "series": f"gpu_dra_allocation_seconds_total{{{_labels(cls, namespace)},{where}}}",
                "values": f"{total:.0f}+{per_minute}x120",
            }
        )
    test: dict[str, Any] = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {
                        "expr": f"{HOURS}{{{_labels(cls, namespace)}}}",
                        "eval_time": "120m",
                        "exp_samples": [
                            {
                                "labels": f"{HOURS}{{{_labels(cls, namespace)}}}",
                                "value": 1,
                            }
                        ],
                    }
                    for cls in seconds
                ],
                "alert_rule_test": [],
            }
        ],
    }
    idle = {
        "expr": "gpu_dra:allocation:idle",
        "eval_time": "120m",
        "exp_samples": [
            {
                "labels": "gpu_dra:allocation:idle{"
                + ",".join(
                    f'{k}="{whole[k]}"'
                    for k in ("claim", "class", "namespace", "node", "physicalgpu", "pod", "UUID")
                )
                + "}",
                "value": 1,
            }
        ],
    }
    keys = ("claim", "class", "namespace", "node", "physicalgpu", "pod", "UUID")
    busy = {
        "expr": f'gpu_dra:allocation:utilisation{{claim="{sliced["claim"]}"}}',
        "eval_time": "120m",
        "exp_samples": [
            {
                "labels": "gpu_dra:allocation:utilisation{"
                + ",".join([*(f'{k}="{sliced[k]}"' for k in keys), f'GPU_I_ID="{mig["GPU_I_ID"]}"'])
                + "}",
                "value": 80,
            }
        ],
    }
    test["tests"][0]["promql_expr_test"] += [idle, busy]
    path = tmp_path / "rules-test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    done = subprocess.run(
        [str(promtool), "test", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
