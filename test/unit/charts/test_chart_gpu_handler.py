"""The chart's gpu-handler: its DaemonSet (as gpu-controller renders it from the chart's ConfigMap),
its exact RBAC and its confinement to its own node.

Helpers come from ``chart_render``, the ``helm`` fixture from the conftest (test helpers are imported by bare
name per folder); the permissions it pins are ``GPU_HANDLER_PERMISSIONS`` there, next to the other
components'.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from testutil.unit.charts.chart_render import (
    GPU_HANDLER_PERMISSIONS,
    NAMESPACE,
    confined_users,
    find,
    granted_by,
    node_daemon_sets,
    of,
    one,
    render,
)


@pytest.fixture(scope="module")
def docs(helm: Path) -> list[dict[str, Any]]:
    return render(helm)


def daemon_set(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return node_daemon_sets(docs)["gpu-handler"]


def pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(daemon_set(docs)["spec"]["template"]["spec"])


def main_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (main,) = pod(docs)["containers"]
    return dict(main)


def test_cluster_role_grants_exactly_the_handler_calls(docs: list[dict[str, Any]]) -> None:
    assert granted_by(one(of(docs, "gpu-handler"), "ClusterRole")) == GPU_HANDLER_PERMISSIONS
    account = one(of(docs, "gpu-handler"), "ServiceAccount")["metadata"]["name"]
    assert account == "rel-gpu-control-plane-gpu-handler"
    assert pod(docs)["serviceAccountName"] == account
    assert pod(docs)["automountServiceAccountToken"] is True  # the Pod-bound token names the node
    own = of(docs, "gpu-handler")
    binding = one(own, "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    assert binding["roleRef"]["name"] == one(own, "ClusterRole")["metadata"]["name"]
    assert find(own, "Role") == find(own, "RoleBinding") == []


def test_the_policy_confines_the_handler_by_default(helm: Path) -> None:
    policy = one(render(helm), "ValidatingAdmissionPolicy")
    assert f"system:serviceaccount:{NAMESPACE}:rel-gpu-control-plane-gpu-handler" in confined_users(policy)


def test_container_args_env_and_probes(docs: list[dict[str, Any]]) -> None:
    main = main_container(docs)
    assert main["image"] == "gpu-control-plane:0.1.0"
    assert main["command"] == ["gpu-handler"]
    assert main["args"] == [
        "--backend=nvidia",
        "--sysfs-root=/host/sys",
        "--enrich-period=60s",
        "--publish=true",
        "--publish-resync-period=5m",
        "--imex-channels=128",
        "--kubelet-plugin=true",
        "--kubelet-root=/var/lib/kubelet",
        "--cdi-dir=/var/run/cdi",
        "--mps-root=/run/gpu.deckhouse.io/mps",
        "--dev-root=/dev",
        "--proc-root=/proc",
        "--prepare-lock-timeout=30s",
        "--daemons-on-host=true",
        "--driver-root=/host/driver-root",
        "--driver-root-on-host=/",
        "--host-run=/host/run",
        "--driver-capabilities=all",
        "--cdi-hook-source=/opt/gpu-control-plane/bin/nvidia-cdi-hook",
        "--attribution-interval=10s",
        "--attribution-max-series=1000",
        "--usage-status-interval=30s",
        "--metrics-bind-address=:8080",
    ]
    env = {item["name"]: item.get("value", item.get("valueFrom")) for item in main["env"]}
    assert env == {
        "NODE_NAME": {"fieldRef": {"fieldPath": "spec.nodeName"}},
        "POD_UID": {"fieldRef": {"fieldPath": "metadata.uid"}},
        "NVIDIA_VISIBLE_DEVICES": "all",
        "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",  # nvidia-cuda-mps-control comes with compute
        "LOG_LEVEL": "Info",
        "LOG_OUTPUT": "stderr",
        "LOG_DEBUG_VERBOSITY": "0",
        "LOG_DEBUG_CONTROLLER_LIST": "",
    }
    assert main["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def test_the_handler_accepts_the_rendered_args(
    docs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pkg.app.gpu_handler as app

    monkeypatch.setenv("NODE_NAME", "gpu-node-1")
    monkeypatch.setenv("POD_UID", "0f3c1d2e-7a44-4b8e-9d51-2c4b6a8e0f13")
    args = app.parser().parse_args(main_container(docs)["args"])
    settings = app.settings_from(args)
    assert settings.plugin is not None
    assert (settings.plugin.kubelet_root, settings.plugin.cdi_dir, settings.plugin.instance) == (
        Path("/var/lib/kubelet"),
        Path("/var/run/cdi"),
        "0f3c1d2e-7a44-4b8e-9d51-2c4b6a8e0f13",
    )
    assert settings.plugin.mps_root == Path("/run/gpu.deckhouse.io/mps")
    root = settings.driver_root
    assert (root.root, root.host_root, root.host_run) == (
        Path("/host/driver-root"),
        Path("/"),
        Path("/host/run"),
    )
    assert root.capabilities == {"compute", "utility", "graphics", "video", "display"}
    assert settings.cdi_hook_source == Path("/opt/gpu-control-plane/bin/nvidia-cdi-hook")
    assert settings.daemons_on_host is True  # MPS daemons outlive the Pod
    assert (settings.dev_root, settings.proc_root) == (Path("/dev"), Path("/proc"))
    assert args.command is None  # the run, not a subcommand
    assert (settings.node_name, settings.backend, settings.sysfs_root) == (
        "gpu-node-1",
        "nvidia",
        Path("/host/sys"),
    )
    assert (settings.enrich_period, settings.publish, settings.publish_resync_period) == (60.0, True, 300.0)


def test_the_kubelet_plugin_gets_its_host_folders_at_their_host_paths_and_root(
    docs: list[dict[str, Any]],
) -> None:
    spec, main = pod(docs), main_container(docs)
    host_paths = {v["name"]: v["hostPath"] for v in spec["volumes"] if "hostPath" in v}
    assert host_paths == {
        "host-sys": {"path": "/sys", "type": "Directory"},
        "kubelet-plugins": {"path": "/var/lib/kubelet/plugins", "type": "DirectoryOrCreate"},
        "kubelet-plugins-registry": {"path": "/var/lib/kubelet/plugins_registry", "type": "Directory"},
        "cdi": {"path": "/var/run/cdi", "type": "DirectoryOrCreate"},
        "mps": {"path": "/run/gpu.deckhouse.io/mps", "type": "DirectoryOrCreate"},
        "host-dev": {"path": "/dev", "type": "Directory"},
        "driver-root": {"path": "/", "type": "DirectoryOrCreate"},
        "host-run": {"path": "/run", "type": "Directory"},
    }
    mounts = {m["name"]: m for m in main["volumeMounts"]}
    # VFIO passthrough binds drivers through sysfs (docs/vfio.md): writable with the kubelet plugin.
    assert mounts["host-sys"] == {"name": "host-sys", "mountPath": "/host/sys", "readOnly": False}
    assert mounts["tmp"] == {"name": "tmp", "mountPath": "/tmp"}
    # The kubelet dials the path the plugin reports, and CDI specs name host paths: same paths inside.
    for name in ("kubelet-plugins", "kubelet-plugins-registry", "cdi", "mps", "host-dev"):
        assert mounts[name]["mountPath"] == host_paths[name]["path"]
    # The driver's user space and its daemons' sockets: read-only, seeing a driver mounted later.
    for name, path in (("driver-root", "/host/driver-root"), ("host-run", "/host/run")):
        assert mounts[name] == {
            "name": name,
            "mountPath": path,
            "readOnly": True,
            "mountPropagation": "HostToContainer",
        }
    # The host's PID namespace only: MPS daemons are started through the host's init (--daemons-on-host).
    assert spec["hostPID"] is True
    for host_namespace in ("hostNetwork", "hostIPC"):
        assert not spec.get(host_namespace), host_namespace
    assert spec["securityContext"]["runAsUser"] == 0
    assert main["securityContext"]["privileged"] is True
    assert main["securityContext"]["readOnlyRootFilesystem"] is True


def test_without_the_kubelet_plugin_no_host_folder_root_or_privilege(helm: Path) -> None:
    docs = render(helm, {"gpuHandler.kubeletPlugin.enabled": False})
    spec, main = pod(docs), main_container(docs)
    host_paths = {v["name"]: v["hostPath"] for v in spec["volumes"] if "hostPath" in v}
    assert host_paths == {"host-sys": {"path": "/sys", "type": "Directory"}}
    assert "--kubelet-plugin=false" in main["args"]
    # Only Prepare reads claims and ComputeDomains.
    granted = granted_by(one(of(docs, "gpu-handler"), "ClusterRole"))
    assert (
        not {("resource.k8s.io", "resourceclaims", "get"), ("gpu.deckhouse.io", "computedomains", "get")}
        & granted
    )
    assert not [
        a for a in main["args"] if a.startswith(("--kubelet-root", "--cdi-dir", "--mps-root", "--dev-root"))
    ]
    env = {item["name"]: item.get("value") for item in main["env"]}
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
    assert "POD_UID" not in {e["name"] for e in main["env"]}
    assert "runtimeClassName" not in spec
    assert "--daemons-on-host=true" not in main["args"]
    assert not spec.get("hostPID")
    assert spec["securityContext"]["runAsNonRoot"] is True
    security = main["securityContext"]
    assert security["privileged"] is False
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    verbs = granted_by(one(of(docs, "gpu-handler"), "ClusterRole"))
    assert ("resource.k8s.io", "resourceclaims", "get") not in verbs
    assert ("", "pods", "get") not in verbs
    assert ("", "pods", "list") not in verbs  # attribution rides on the plugin
    assert ("resource.k8s.io", "resourceclaims/status", "patch") not in verbs
    assert not any(arg.startswith("--attribution") for arg in main["args"])
    assert ("events.k8s.io", "events", "create") not in verbs


def test_scheduling_defaults(docs: list[dict[str, Any]]) -> None:
    """On the nodes whose cards are DriverReady (the gate label gpu-controller keeps), tainted GPU
    nodes included; critical priority; no surge."""
    spec = pod(docs)
    assert spec["tolerations"] == [{"operator": "Exists", "effect": "NoSchedule"}]
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["nodeSelector"] == {"gpu.deckhouse.io/driver-ready": "true"}
    assert "affinity" not in spec
    daemonset = daemon_set(docs)
    assert daemonset["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    selector = daemonset["spec"]["selector"]["matchLabels"]
    assert selector["app.kubernetes.io/component"] == "gpu-handler"
    assert selector.items() <= daemonset["spec"]["template"]["metadata"]["labels"].items()


def test_values_reach_the_daemonset(helm: Path) -> None:
    docs = render(
        helm,
        {
            "image.tag": "2.0.0",
            "gpuHandler.image.repository": "registry.example/handler",
            "gpuHandler.backend": "simulated-nvidia",
            "gpuHandler.runtimeClassName": "nvidia",
            "gpuHandler.enrichPeriod": "30s",
            "gpuHandler.publish": False,
            "gpuHandler.publishResyncPeriod": "10m",
            "gpuHandler.imexChannels": 0,
            "gpuHandler.metrics.port": 9100,
            "gpuHandler.nodeSelector": {"nvidia.com/gpu.present": "true"},
        },
    )
    spec, main = pod(docs), main_container(docs)
    assert main["image"] == "registry.example/handler:2.0.0"
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true", "gpu.deckhouse.io/driver-ready": "true"}
    for arg in (
        "--backend=simulated-nvidia",
        "--enrich-period=30s",
        "--publish=false",
        "--publish-resync-period=10m",
        "--imex-channels=0",
        "--metrics-bind-address=:9100",
    ):
        assert arg in main["args"]


def test_the_handler_can_be_disabled(helm: Path) -> None:
    rendered = render(helm, {"gpuHandler.enabled": False})
    assert of(rendered, "gpu-handler") == []
    assert "gpu-handler" not in node_daemon_sets(rendered)
    users = confined_users(one(rendered, "ValidatingAdmissionPolicy"))
    assert not any(user.endswith("-gpu-handler") for user in users)


def test_amd_nodes_get_a_second_daemon_set_from_the_same_release(
    helm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pkg.app.gpu_handler as app

    docs = render(helm, {"gpuHandler.amd.enabled": True, "gpuHandler.runtimeClassName": "nvidia"})
    daemon_sets = node_daemon_sets(docs)
    nvidia, amd = daemon_sets["gpu-handler"], daemon_sets["gpu-handler-amd"]
    assert amd["metadata"]["name"] == f"{nvidia['metadata']['name']}-amd"
    nvidia_pod, amd_pod = nvidia["spec"]["template"]["spec"], amd["spec"]["template"]["spec"]
    assert nvidia_pod["nodeSelector"] == {
        "gpu.deckhouse.io/driver-ready": "true",
        "gpu.deckhouse.io/nvidia.present": "true",
    }
    assert amd_pod["nodeSelector"] == {
        "gpu.deckhouse.io/driver-ready": "true",
        "gpu.deckhouse.io/amd.present": "true",
    }
    # The same account, so the same RBAC and the same node confinement.
    assert amd_pod["serviceAccountName"] == nvidia_pod["serviceAccountName"]
    assert "runtimeClassName" not in amd_pod
    [main] = [c for c in amd_pod["containers"] if c["name"] == "gpu-handler"]
    assert not [e for e in main["env"] if e["name"].startswith("NVIDIA_")]
    monkeypatch.setenv("NODE_NAME", "mi-node-1")
    monkeypatch.setenv("POD_UID", "0f3c1d2e-7a44-4b8e-9d51-2c4b6a8e0f13")
    settings = app.settings_from(app.parser().parse_args(main["args"]))
    assert settings.backend == "amd"
    assert settings.plugin is not None
    assert settings.daemons_on_host is False
    assert settings.cdi_hook_source is None


def test_without_amd_values_the_release_renders_one_handler(docs: list[dict[str, Any]]) -> None:
    assert "gpu-handler-amd" not in node_daemon_sets(docs)
    assert pod(docs)["nodeSelector"] == {"gpu.deckhouse.io/driver-ready": "true"}
