"""The Helm chart on a real node, from the project's image: install, upgrade, uninstall.

This module has a control plane and a real node of its own (three A30s: a whole card, an
MPS-shared card and a MIG card at once), so the release's
gpu-controller, node agent and gpu-handler are the only ones there: the session's node runs our
components as host processes, which a second gpu-handler on the same node would contest. The image
is the one ``make image`` builds, assembled from the Debian archive and PyPI
(:mod:`pkg.devcluster.projectimage`) and imported into the node's containerd under two tags, so
that the upgrade changes the image reference.

The release uses the chart's defaults except: the local image (``pullPolicy: Never``), the
simulated hosts (``simulatedHosts``, ``gpuHandler.backend: simulated-nvidia``: test-only values),
the validator run from our image with the stand-in validation of ``pkg.devcluster.gpustack``
(NVIDIA's image cannot be pulled here), DCGM and dcgm-exporter off (NVIDIA's images, nothing to read
without a driver), and the node agent without udev (uevents need the host network). Pods reach the
API server through the ``kubernetes`` Service (:mod:`pkg.devcluster.apiroute`).
"""

from __future__ import annotations

import functools
import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from testutil.e2e import rbac_audit
from testutil.e2e.chart_release import (
    CHART,
    FIXTURES,
    NAMESPACE,
    NODE,
    PROXY_IMAGE,
    RELEASE,
    ROOT,
    TAGS,
    card_of_each_uuid,
    cgroups_of,
    handler_pods,
    helm,
    mps_daemon_of,
    new_failures,
    not_ready,
    prepare_failures,
    release_values,
    rolled,
    scrape,
    serving_pod,
    shown,
    workloads,
)
from testutil.e2e.gpu_nodes import (
    Seen,
    card_state,
    cdi_specs,
    claim_pod,
    gpu_instances,
    gpu_pod,
    shared_claim,
)

from pkg.backends.simulated.data import DRIVER_VERSION
from pkg.devcluster.apiroute import ApiServerRoute
from pkg.devcluster.cluster import (
    CONTROLLERS,
    NODE_CONTROLLERS,
    ControlPlane,
    ControlPlaneConfig,
    default_bin_dir,
)
from pkg.devcluster.driverroot import Layout, build_driver_root
from pkg.devcluster.gpucomponents import node_gpus
from pkg.devcluster.images import ImageArchive, static_binary_archive
from pkg.devcluster.node import NodeConfig, RealNode
from pkg.devcluster.processes import wait_until
from pkg.framework.client import KubeClient
from pkg.framework.client.builtin_kinds import POD, RESOURCE_CLAIM
from pkg.framework.client.config import new_api_client

# The first test builds the image (debootstrap, a venv: minutes on a cold cache) and starts a
# control plane and a node, and the machine's real-node lock may be held by another run.
pytestmark = pytest.mark.timeout(1500)


# A node index no pool node takes (the pool numbers its nodes from 0): its own bridge and subnet.
NODE_INDEX = 9


@pytest.fixture(scope="module")
def plane(work_dir: Path, node_pool: Any) -> Iterator[ControlPlane]:
    """A control plane of this module's own (``node_pool`` holds the machine's real-node lock)."""
    control_plane = ControlPlane(
        ControlPlaneConfig(
            bin_dir=default_bin_dir(),
            work_dir=work_dir / "chart-cluster",
            controllers=CONTROLLERS + NODE_CONTROLLERS,
            audit=True,  # what each component calls, for the RBAC audit
        )
    )
    control_plane.start()
    try:
        yield control_plane
    finally:
        control_plane.stop()


@pytest.fixture(scope="module")
def node(
    plane: ControlPlane, images: ImageArchive, project_image: ImageArchive, work_dir: Path
) -> Iterator[RealNode]:
    real = RealNode(
        config=NodeConfig(name=NODE, gpu_fixture=FIXTURES / "sysfs" / "a30-x3"),
        plane=plane,
        index=NODE_INDEX,
        images=images,
        # Short: socket paths under the kubelet's root are limited to 105 bytes.
        work_dir=work_dir / "cn",
    )
    network = real.containerd.network
    route = ApiServerRoute(bridge=network.bridge, subnet=network.subnet, apiserver_port=plane.apiserver_port)
    try:
        route.install()
        real.start()
        # The simulated hosts' stand-in driver, where the release's gpu-handler reads it.
        build_driver_root(real.base / "nvidia-driver", layout=Layout.VENDOR_FOLDER, version=DRIVER_VERSION)
        started = time.monotonic()
        real.containerd.import_images(project_image.path)
        proxy = static_binary_archive(
            work_dir / "kube-rbac-proxy.tar",
            reference=PROXY_IMAGE,
            binary=default_bin_dir() / "kube-rbac-proxy",
        )
        real.containerd.import_images(proxy.path)
        print(f"project image imported in {time.monotonic() - started:.1f}s")
        yield real
    finally:
        # A failed test may leave the release: its controllers would recreate the Pods the node
        # deletes on stop.
        helm(plane, "uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--ignore-not-found", check=False)
        real.stop()
        route.remove()
        leftovers = real.leftovers()
        real.remove_files()
        assert not leftovers, f"the chart's node left things behind: {leftovers}"


@pytest.fixture(scope="module")
def kube(plane: ControlPlane) -> KubeClient:
    return KubeClient(new_api_client(str(plane.kubeconfig)), field_manager="gpu-control-plane-tests")


class Release:
    """What the tests of this module learnt, in order: install, upgrade, uninstall."""

    figures: dict[str, float] = {}
    mps_card = ""
    mps_daemon = 0


def test_install_from_chart_defaults_runs_a_gpu_pod(
    plane: ControlPlane, node: RealNode, kube: KubeClient
) -> None:
    started = time.monotonic()
    helm(
        plane,
        "install",
        RELEASE,
        str(CHART),
        "-n",
        NAMESPACE,
        "--create-namespace",
        values=release_values(node, TAGS[0]),
    )
    wait_until(lambda: len(node_gpus(plane, NODE)) == 3, timeout=180, what="the node's 3 PhysicalGPUs")
    plane.kubectl("apply", "-f", str(ROOT / "config" / "samples" / "deviceclasses.yaml"))
    plane.kubectl("create", "namespace", "workloads")
    kube.create(POD, gpu_pod("first-gpu", "gpu", node=NODE), namespace="workloads")
    wait_until(
        lambda: "shown" in plane.kubectl("logs", "-n", "workloads", "first-gpu", check=False),
        timeout=300,
        what="the first GPU Pod to run",
    )
    Release.figures["install_to_first_gpu_pod_s"] = time.monotonic() - started
    seen = Seen.parse(plane.kubectl("logs", "-n", "workloads", "first-gpu"))
    assert seen.visible.startswith("GPU-"), seen
    assert any(n.startswith("/dev/nvidia") for n in seen.nodes), seen
    wait_until(lambda: not not_ready(plane), timeout=180, what="every Deployment and DaemonSet Ready")
    assert set(workloads(plane)) == {
        f"Deployment/{RELEASE}-gpu-control-plane-gpu-controller",
        f"Deployment/{RELEASE}-gpu-control-plane-gpu-dra-controller",
        f"DaemonSet/{RELEASE}-gpu-control-plane-gpu-node-agent",
        f"DaemonSet/{RELEASE}-gpu-control-plane-gpu-validator",
        f"DaemonSet/{RELEASE}-gpu-control-plane-gpu-handler",
    }
    print(f"install to first GPU Pod: {Release.figures['install_to_first_gpu_pod_s']:.1f}s")

    # An MPS share of another card: its control daemon runs on the host, outside gpu-handler's Pod.
    cards = card_of_each_uuid(plane)
    Release.mps_card = min(card for uuid, card in cards.items() if uuid != seen.visible)
    claim = shared_claim("mps-share", "gpu-mps", share_percent=50, card=Release.mps_card)
    kube.create(RESOURCE_CLAIM, claim, namespace="workloads")
    kube.create(POD, claim_pod("mps-share", "mps-share", node=NODE), namespace="workloads")
    wait_until(lambda: shown(plane, "mps-share"), timeout=180, what="the MPS share's Pod to run")
    daemon = mps_daemon_of(node, Release.mps_card)
    assert daemon is not None
    Release.mps_daemon = daemon
    assert cgroups_of(daemon) == {"/"}, "the MPS daemon is in a cgroup of gpu-handler's Pod"
    lines = plane.kubectl("logs", "-n", "workloads", "mps-share").splitlines()
    share = dict(line.split("=", 1) for line in lines if "=" in line)
    assert (share["THREADS"], share["DAEMON"]) == ("50", str(daemon))


# promtool's lint findings on names we keep on purpose (docs/architecture.md#metrics-behind-kube-rbac-proxy):
# gpu_dra_claim_allocations_total is a gauge, and the DRA metrics' deviceType label is camelCase. Anything
# else it finds fails the test.
SPEC_GAUGE_TOTAL = 'gpu_dra_claim_allocations_total non-counter metrics should not have "_total" suffix'


CAMEL_CASE = "label names should be written in 'snake_case' not 'camelCase'"


def spec_named(finding: str) -> bool:
    return finding == SPEC_GAUGE_TOTAL or (finding.startswith("gpu_dra_") and finding.endswith(CAMEL_CASE))


def test_metrics_only_through_kube_rbac_proxy(plane: ControlPlane, node: RealNode) -> None:
    reader = f"{RELEASE}-gpu-control-plane-metrics-reader"
    plane.kubectl("create", "serviceaccount", "scraper", "-n", "workloads")
    plane.kubectl("create", "serviceaccount", "stranger", "-n", "workloads")
    plane.kubectl(
        "create",
        "clusterrolebinding",
        "scraper",
        f"--clusterrole={reader}",
        "--serviceaccount=workloads:scraper",
    )
    scraper = plane.kubectl("create", "token", "scraper", "-n", "workloads").strip()
    stranger = plane.kubectl("create", "token", "stranger", "-n", "workloads").strip()
    promtool = default_bin_dir() / "promtool"
    problems: dict[str, list[str]] = {}
    for component in ("gpu-controller", "gpu-dra-controller", "gpu-node-agent", "gpu-handler"):
        pod = serving_pod(plane, component)
        ip, name = pod["status"]["podIP"], pod["metadata"]["name"]
        status, body = scrape(f"{ip}:8443", scraper)
        assert status == 200, (name, status)
        assert "# HELP" in body, name
        check = subprocess.run(
            [promtool, "check", "metrics"],
            input=body,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        findings = [f for f in (check.stdout + check.stderr).splitlines() if f.strip()]
        problems[component] = [f for f in findings if not spec_named(f)]
        assert scrape(f"{ip}:8443", None)[0] == 401, name
        readiness = scrape(f"{ip}:8443", None, "/readyz?verbose")  # the kubelet's probe needs no token
        assert readiness[0] == 200, (name, readiness)
        if component == "gpu-handler":  # Ready only once the kubelet can call its plugin
            assert "[+]kubelet-plugin-registered ok" in readiness[1], readiness
        assert scrape(f"{ip}:8443", stranger)[0] == 403, name
        # The component's own endpoint is on loopback only.
        port = 9478 if component == "gpu-node-agent" else 8080
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((ip, port), timeout=3).close()
    assert {c: p for c, p in problems.items() if p} == {}, "promtool check metrics"


def test_upgrade_rolls_the_handler_without_a_failed_prepare(
    plane: ControlPlane, node: RealNode, kube: KubeClient
) -> None:
    [old] = handler_pods(plane)
    # Only what happens from here counts (a Pod created at install may have met the plugin unregistered).
    before = prepare_failures(plane)
    helm(plane, "upgrade", RELEASE, str(CHART), "-n", NAMESPACE, values=release_values(node, TAGS[1]))
    # Pods asking for MIG devices while the handler rolls: the kubelet must always have a plugin.
    created: list[str] = []
    deadline = time.monotonic() + 240
    while not rolled(plane, TAGS[1]) and time.monotonic() < deadline:
        if len(created) < 3:
            name = f"during-{len(created)}"
            kube.create(POD, gpu_pod(name, "mig-1g", node=NODE), namespace="workloads")
            created.append(name)
        time.sleep(2)
    assert rolled(plane, TAGS[1]), f"gpu-handler did not roll to {TAGS[1]}: {handler_pods(plane)}"
    kube.create(POD, gpu_pod("after", "mig-1g", node=NODE), namespace="workloads")
    created.append("after")
    for name in created:
        wait_until(functools.partial(shown, plane, name), timeout=180, what=f"GPU Pod {name} to run")
    [new] = handler_pods(plane)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    wait_until(lambda: not not_ready(plane), timeout=180, what="every workload Ready on the new image")
    assert shown(plane, "first-gpu"), "the GPU Pod of the install stopped during the upgrade"
    # The MPS share's daemon outlived the old handler: the same process serves the share.
    assert mps_daemon_of(node, Release.mps_card) == Release.mps_daemon, "the MPS daemon was restarted"
    in_share = plane.kubectl(
        "exec", "-n", "workloads", "mps-share", "--", "cat", "/tmp/nvidia-mps/nvidia-cuda-mps-control.pid"
    )
    assert in_share.strip() == str(Release.mps_daemon)
    failures = new_failures(before, prepare_failures(plane))
    Release.figures["upgrade_prepare_failures"] = len(failures)
    Release.figures["pods_during_upgrade"] = len(created) - 1
    print(
        f"upgrade: {len(created) - 1} GPU Pods created while gpu-handler rolled, prepare failures: {failures}"
    )
    assert failures == []
    # The old Pod's plugin sockets went with it: one registration socket of our driver remains.
    # (Only our driver registers on this node; names are hashed when the path would be too long.)
    registry = node.kubelet.paths.root / "plugins_registry"
    assert len(list(registry.glob("*-reg.sock"))) == 1, list(registry.iterdir())
    plugin = node.kubelet.paths.root / "plugins" / "gpu.deckhouse.io"
    assert len(list(plugin.glob("dra-*.sock"))) == 1, list(plugin.iterdir())


# Granted, and called only on paths this run does not take; each with the path that calls it (the
# chart's own comment on the rule). Keyed by the component's ServiceAccount suffix.
CALLED_ELSEWHERE: dict[str, dict[rbac_audit.Permission, str]] = {
    "gpu-controller": {
        ("apps", "daemonsets", "delete"): "pruning the DaemonSet of a component turned off",
        ("gpu.deckhouse.io", "physicalgpus", "delete"): "orphan cleanup: PhysicalGPUs of deleted nodes",
        ("gpu.deckhouse.io", "physicalgpus", "patch"): "metadata (finalizers, labels) repaired by JSON patch",
        ("gpu.deckhouse.io", "gpuclasses/status", "update"): "GPUClass status (no GPUClass in this run)",
        ("gpu.deckhouse.io", "gpuclasses/finalizers", "update"): "GPUClass owner references (none here)",
        ("resource.k8s.io", "deviceclasses", "create"): "a GPUClass's DeviceClass, applied (none here)",
        ("resource.k8s.io", "deviceclasses", "patch"): "a GPUClass's DeviceClass, applied (none here)",
        (
            "",
            "configmaps/finalizers",
            "update",
        ): "blockOwnerDeletion where OwnerReferencesPermissionEnforcement runs",
        ("events.k8s.io", "events", "patch"): "a repeated Event, patched into a series (not every run)",
        # Compute domains (no ComputeDomain in this run; test_compute_domains.py drives them).
        ("gpu.deckhouse.io", "computedomains", "patch"): "a ComputeDomain's finalizer (none here)",
        ("gpu.deckhouse.io", "computedomains/status", "update"): "a ComputeDomain's status (none here)",
        ("gpu.deckhouse.io", "computedomains/finalizers", "update"): "a domain's template ownership (none)",
        ("resource.k8s.io", "resourceclaimtemplates", "create"): "a domain's claim template, applied",
        ("resource.k8s.io", "resourceclaimtemplates", "patch"): "a domain's claim template, applied",
        ("", "configmaps", "create"): "an IMEX ensemble's ConfigMap, applied (no domain here)",
        ("", "configmaps", "patch"): "an IMEX ensemble's ConfigMap, applied (no domain here)",
        ("", "configmaps", "delete"): "the ConfigMap of an ensemble whose last domain went",
        ("", "configmaps", "get"): "the channel ledger, read before an update (no domain here)",
        ("", "configmaps", "update"): "the channel ledger, updated at its resourceVersion",
        ("", "pods", "create"): "an IMEX daemon Pod (no domain here)",
        ("", "pods", "delete"): "an IMEX daemon Pod of an old peer list or a node that left",
    },
    "gpu-dra-controller": {
        ("resource.k8s.io", "resourceclaims", "patch"): "allocating a claim no Pod references (none here)",
        (
            "resource.k8s.io",
            "resourceclaims/status",
            "update",
        ): "allocating a claim no Pod references (none here)",
        ("events.k8s.io", "events", "create"): "Events on claims (none allocated here)",
        ("events.k8s.io", "events", "patch"): "a repeated Event patched into a series",
        ("gpu.deckhouse.io", "claimexplanations", "delete"): "an answered kubectl gpu explain past its TTL",
        (
            "gpu.deckhouse.io",
            "claimexplanations/status",
            "patch",
        ): "answering a kubectl gpu explain (test/integration/test_claim_explanation.py)",
    },
    "gpu-handler": {
        ("resource.k8s.io", "resourceslices", "delete"): "slices of a pool that shrank",
        (
            "resource.k8s.io",
            "resourceclaims/driver",
            "associated-node:patch",
        ): "checked by the API server within each resourceclaims/status patch: never a request of its own",
        ("events.k8s.io", "events", "create"): "Events on failed prepares (none failed here)",
        ("events.k8s.io", "events", "patch"): "a repeated Event patched into a series",
        ("gpu.deckhouse.io", "computedomains", "get"): "an IMEX channel's Prepare reads its domain (none)",
    },
    "gpu-node-agent": {
        ("gpu.deckhouse.io", "physicalgpus", "patch"): "labels of an existing card merge-patched",
        ("gpu.deckhouse.io", "physicalgpus", "delete"): "the PhysicalGPU of a removed card",
    },
}


def test_explain_runs_in_the_dra_controller_pod(plane: ControlPlane) -> None:
    """What NOTES.txt tells an operator to run, with the controller's own ServiceAccount."""
    # A named Pod, not deployment/…: kubectl may pick an old Pod of the upgrade still stopping.
    pod = serving_pod(plane, "gpu-dra-controller")["metadata"]["name"]
    argv = ["gpu-dra-controller", "explain", "workloads/mps-share", "--node", NODE, "--local"]
    shown = plane.kubectl("exec", "-n", NAMESPACE, pod, "-c", "gpu-dra-controller", "--", *argv)
    assert "note: workloads/mps-share is already allocated" in shown, shown
    assert Release.mps_card in shown, shown


def test_rbac_grants_exactly_what_the_components_call(plane: ControlPlane) -> None:
    """Every call the components made in this run (the API server's audit log: install, GPU Pods,
    metrics, upgrade) is granted, and every permission the chart grants was called, or is in
    CALLED_ELSEWHERE with the path that calls it."""
    manifest = [d for d in yaml.safe_load_all(helm(plane, "get", "manifest", RELEASE, "-n", NAMESPACE)) if d]
    granted = rbac_audit.grants(manifest, NAMESPACE)
    used = rbac_audit.calls(plane.audit_log, NAMESPACE)
    report = {}
    for account in sorted(set(granted) | set(used)):
        have, need = granted.get(account, set()), used.get(account, set())
        component = account.removeprefix(f"{RELEASE}-gpu-control-plane-")
        known = set(CALLED_ELSEWHERE.get(component, {}))
        report[account] = {
            "called": rbac_audit.describe(need),
            "missing": rbac_audit.describe(need - have),
            "unused": rbac_audit.describe(have - need - known),
        }
    artifacts = ROOT / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    (artifacts / "rbac-audit.json").write_text(json.dumps(report, indent=2))
    assert {a: r["missing"] for a, r in report.items() if r["missing"]} == {}, "called but not granted"
    assert {a: r["unused"] for a, r in report.items() if r["unused"]} == {}, "granted but never called"


def test_uninstall_leaves_nothing_behind(plane: ControlPlane, node: RealNode, kube: KubeClient) -> None:
    plane.kubectl("delete", "pods", "--all", "-n", "workloads", "--wait=true", "--timeout=120s")
    wait_until(lambda: not cdi_specs(node), timeout=60, what="the claims' CDI specs removed")
    # The last MPS share went: its daemon was asked to quit and the card got its compute mode back.
    assert mps_daemon_of(node, Release.mps_card) is None
    assert not (node.base / "mps" / Release.mps_card).exists()
    assert card_state(node, Release.mps_card)["compute_mode"] == 0
    plane.kubectl("delete", "resourceclaims", "--all", "-n", "workloads", "--wait=true", "--timeout=60s")
    manifest = [d for d in yaml.safe_load_all(helm(plane, "get", "manifest", RELEASE, "-n", NAMESPACE)) if d]
    helm(plane, "uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout=180s")

    def remaining() -> list[str]:
        left = []
        for doc in manifest:
            kind, name = doc["kind"], doc["metadata"]["name"]
            args = ["get", kind.lower(), name, "--ignore-not-found", "-o", "name"]
            if doc["metadata"].get("namespace"):
                args += ["-n", doc["metadata"]["namespace"]]
            if kind != "CustomResourceDefinition" and plane.kubectl(*args).strip():
                left.append(f"{kind}/{name}")
        left += plane.kubectl("get", "daemonsets,pods", "-n", NAMESPACE, "-o", "name").split()
        left += plane.kubectl("get", "resourceslices", "-o", "name").split()
        return left

    wait_until(lambda: not remaining(), timeout=180, what=f"nothing of the release left: {remaining()}")
    assert cdi_specs(node) == []
    assert not list(node.cdi_dir.glob("*gpu.deckhouse.io*")), list(node.cdi_dir.iterdir())
    assert gpu_instances(node) == {}, "MIG instances left on the cards"
    # Kept on purpose (crds.keep, the default): the CRDs, and so the PhysicalGPUs in them.
    crds = [d for d in manifest if d["kind"] == "CustomResourceDefinition"]
    for crd in crds:
        kept = json.loads(plane.kubectl("get", "crd", crd["metadata"]["name"], "-o", "json"))
        assert kept["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    print(f"figures: {json.dumps(Release.figures)}")
