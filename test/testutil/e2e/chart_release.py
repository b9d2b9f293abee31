"""What the chart release e2e reads of its release: the values it installs with, ``helm`` itself, the
rollout, the Pods and Events of the release, the MPS daemons on the node, the metrics endpoints."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from pkg.devcluster.cluster import (
    ControlPlane,
    default_bin_dir,
)
from pkg.devcluster.gpustack import VALIDATION
from pkg.devcluster.images import REGISTRY
from pkg.devcluster.node import RealNode
from pkg.devcluster.projectimage import PROJECT_REPOSITORY
from testutil.e2e.gpu_nodes import (
    mps_daemon_in,
)

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "gpu-control-plane"
FIXTURES = ROOT / "test" / "fixtures"
RELEASE, NAMESPACE = "gpucp", "gpu-system"
TAGS = ("v1", "v2")
NODE = "e2e-chart"
PROXY_IMAGE = f"{REGISTRY}/kube-rbac-proxy:v0.19.1"


def release_values(node: RealNode, tag: str) -> dict[str, Any]:
    hosts = node.base.parent
    shutil.copy(FIXTURES / "pci.ids", hosts / "pci.ids")
    image = {"repository": PROJECT_REPOSITORY, "tag": tag, "pullPolicy": "Never"}
    return {
        "image": image,
        "simulatedHosts": {"dir": str(hosts), "pciIds": str(hosts / "pci.ids")},
        "gpuHandler": {"backend": "simulated-nvidia"},
        "nodeAgent": {"udev": False},
        "validator": {
            "image": {"repository": PROJECT_REPOSITORY, "tag": TAGS[0]},
            "pullPolicy": "Never",
            "hostRoot": str(hosts),
            "command": ["sh", "-c", VALIDATION],
            "readinessCommand": ["sh", "-c", VALIDATION],
        },
        "metricsProxy": {
            "image": {"repository": PROXY_IMAGE.rsplit(":", 1)[0], "tag": "v0.19.1"},
            "pullPolicy": "Never",
        },
        "dcgm": {"enabled": False},
        "dcgmExporter": {"enabled": False},
    }


def helm(
    plane: ControlPlane,
    *args: str,
    values: dict[str, Any] | None = None,
    timeout: float = 300,
    check: bool = True,
) -> str:
    argv = [str(default_bin_dir() / "helm"), f"--kubeconfig={plane.kubeconfig}", *args]
    if values is not None:
        argv += ["--values", "-"]
    result = subprocess.run(
        argv,
        input=yaml.safe_dump(values) if values else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0 or not check, f"helm {' '.join(args)} failed: {result.stderr}"
    return result.stdout


def workloads(plane: ControlPlane) -> dict[str, dict[str, Any]]:
    """The release's Deployments and DaemonSets by kind/name, from the API."""
    out = plane.kubectl("get", "deployments,daemonsets", "-n", NAMESPACE, "-o", "json")
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in json.loads(out)["items"]}


def not_ready(plane: ControlPlane) -> list[str]:
    """Workloads not yet rolled out, and Pods of the release still terminating (empty: none).

    A Deployment counts as rolled as ``kubectl rollout status`` judges it: no old replica left
    beside the updated ones. Terminating Pods are waited for as well: until its container stops, an
    old Pod still serves, and ``kubectl exec deployment/…`` may pick it and be killed with it.
    """
    waiting = []
    for name, obj in workloads(plane).items():
        status, spec = obj.get("status", {}), obj["spec"]
        if obj["kind"] == "Deployment":
            want = spec.get("replicas", 1)
            ready = all(
                status.get(field, 0) == want for field in ("replicas", "updatedReplicas", "readyReplicas")
            )
        else:
            want = status.get("desiredNumberScheduled", 0)
            ready = (
                want > 0
                and status.get("numberReady", 0) == want
                and status.get("updatedNumberScheduled") == want
            )
        if not ready or status.get("observedGeneration") != obj["metadata"]["generation"]:
            waiting.append(name)
    pods = json.loads(plane.kubectl("get", "pods", "-n", NAMESPACE, "-o", "json"))["items"]
    waiting += [f"Pod/{p['metadata']['name']} (terminating)" for p in pods if terminating(p)]
    return waiting


def terminating(pod: dict[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def pod_ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def serving_pod(plane: ControlPlane, component: str) -> dict[str, Any]:
    """A Ready, not terminating Pod of ``component``: the one a command or a scrape should reach."""
    serving = [p for p in pods_of(plane, component) if not terminating(p) and pod_ready(p)]
    assert serving, f"no Ready {component} Pod: {[p['metadata']['name'] for p in pods_of(plane, component)]}"
    return serving[0]


def pods_of(plane: ControlPlane, component: str) -> list[dict[str, Any]]:
    out = plane.kubectl(
        "get", "pods", "-n", NAMESPACE, "-l", f"app.kubernetes.io/component={component}", "-o", "json"
    )
    return list(json.loads(out)["items"])


def prepare_failures(plane: ControlPlane) -> dict[str, tuple[str, int]]:
    """The kubelet's failed-prepare/unprepare Events: by uid, what they say and how often."""
    out = plane.kubectl("get", "events", "-A", "-o", "json")
    return {
        e["metadata"]["uid"]: (
            f"{e['involvedObject'].get('name')}: {e.get('message', '')[:200]}",
            e.get("count", 1),
        )
        for e in json.loads(out)["items"]
        if e.get("reason") in ("FailedPrepareDynamicResources", "FailedUnprepareDynamicResources")
    }


def new_failures(before: dict[str, tuple[str, int]], after: dict[str, tuple[str, int]]) -> list[str]:
    """Events that are new in ``after``, or repeated since ``before``."""
    return [text for uid, (text, count) in after.items() if uid not in before or count > before[uid][1]]


def card_of_each_uuid(plane: ControlPlane) -> dict[str, str]:
    """The node's cards: PCI address by GPU UUID, from the PhysicalGPUs."""
    out = plane.kubectl(
        "get",
        "physicalgpus",
        "-l",
        f"gpu.deckhouse.io/node={NODE}",
        "-o",
        "jsonpath={range .items[*]}{.status.currentState.nvidia.gpuUUID}={.status.pciInfo.address} {end}",
    )
    return dict(line.split("=", 1) for line in out.split())


def mps_daemon_of(node: RealNode, card: str) -> int | None:
    """The PID of the card's MPS control daemon if it runs (the chart's --mps-root on simulated hosts)."""
    return mps_daemon_in(node.base / "mps", card)


def cgroups_of(pid: int) -> set[str]:
    """The process's path in every cgroup hierarchy."""
    return {line.split(":", 2)[2] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()}


def scrape(address: str, token: str | None, path: str = "/metrics") -> tuple[int, str]:
    """GET https://<address><path> as a scraper would (the proxy's certificate is self-signed)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    request = urllib.request.Request(f"https://{address}{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""


def handler_pods(plane: ControlPlane) -> list[dict[str, Any]]:
    return [p for p in pods_of(plane, "gpu-handler") if not terminating(p)]


def rolled(plane: ControlPlane, tag: str) -> bool:
    """gpu-handler runs one Pod on the node, of the image ``tag``, Ready."""
    handlers = pods_of(plane, "gpu-handler")
    return (
        len(handlers) == 1
        and handlers[0]["spec"]["containers"][0]["image"].endswith(f":{tag}")
        and pod_ready(handlers[0])
    )


def shown(plane: ControlPlane, pod: str) -> bool:
    return "shown" in plane.kubectl("logs", "-n", "workloads", pod, check=False)
