"""gpu-node-agent in the chart: its ClusterRole is exactly the agent's calls, its DaemonSet reads the
host read-only with no privileges, and the node admission policy confines it to its own node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from testutil.unit.charts.chart_render import (
    NAMESPACE,
    NODE_AGENT_PERMISSIONS,
    NODE_NAME_EXTRA,
    confined_users,
    daemonset,
    find,
    granted_by,
    node_daemon_sets,
    of,
    one,
    render,
)


def agent_pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(daemonset(docs)["spec"]["template"]["spec"])


def agent_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (main,) = agent_pod(docs)["containers"]
    return dict(main)


def test_node_agent_cluster_role_grants_exactly_the_agent_calls(default_docs: list[dict[str, Any]]) -> None:
    docs = of(default_docs, "gpu-node-agent")
    assert granted_by(one(docs, "ClusterRole")) == NODE_AGENT_PERMISSIONS
    account = one(docs, "ServiceAccount")["metadata"]["name"]
    assert agent_pod(default_docs)["serviceAccountName"] == account
    assert agent_pod(default_docs)["automountServiceAccountToken"] is True  # the token names the node
    binding = one(docs, "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}]
    assert binding["roleRef"]["name"] == one(docs, "ClusterRole")["metadata"]["name"]
    assert find(docs, "Role") == find(docs, "RoleBinding") == []


def test_node_agent_container_args_env_and_probes(default_docs: list[dict[str, Any]]) -> None:
    main = agent_container(default_docs)
    assert main["image"] == "gpu-control-plane:0.1.0"
    assert main["command"] == ["gpu-node-agent"]
    assert main["args"] == [
        "--sysfs-root=/host/sys",
        "--host-root=/host",
        "--resync-period=5m",
        "--udev=true",
        "--metrics-bind-address=:9478",
    ]
    env = {item["name"]: item.get("value", item.get("valueFrom")) for item in main["env"]}
    assert env == {
        "NODE_NAME": {"fieldRef": {"fieldPath": "spec.nodeName"}},
        "LOG_LEVEL": "Info",
        "LOG_OUTPUT": "stderr",
        "LOG_DEBUG_VERBOSITY": "0",
        "LOG_DEBUG_CONTROLLER_LIST": "",
    }
    assert main["ports"] == [{"name": "metrics", "containerPort": 9478, "protocol": "TCP"}]
    assert main["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert main["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}


def test_node_agent_gets_read_only_host_paths_and_no_privileges(default_docs: list[dict[str, Any]]) -> None:
    """Exactly the host files the agent reads, all read-only; no root, capabilities or privilege."""
    pod, main = agent_pod(default_docs), agent_container(default_docs)
    host_paths = {volume["name"]: volume["hostPath"] for volume in pod["volumes"] if "hostPath" in volume}
    assert host_paths == {
        "host-sys": {"path": "/sys", "type": "Directory"},
        "host-os-release": {"path": "/etc/os-release", "type": "File"},
        "host-kernel": {"path": "/proc/sys/kernel", "type": "Directory"},
        "host-cpuinfo": {"path": "/proc/cpuinfo", "type": "File"},
    }
    mounts = {mount["name"]: mount for mount in main["volumeMounts"]}
    assert {name: mounts[name]["mountPath"] for name in host_paths} == {
        "host-sys": "/host/sys",
        "host-os-release": "/host/etc/os-release",
        "host-kernel": "/host/proc/sys/kernel",
        "host-cpuinfo": "/host/proc/cpuinfo",
    }
    assert all(mounts[name]["readOnly"] is True for name in host_paths)
    assert mounts["tmp"] == {"name": "tmp", "mountPath": "/tmp"}
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}} in pod["volumes"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for host_namespace in ("hostPID", "hostIPC"):
        assert not pod.get(host_namespace), host_namespace
    security = main["securityContext"]
    assert security["privileged"] is False
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert "add" not in security["capabilities"]


def test_the_agent_reads_its_host_files_inside_the_mounts(
    default_docs: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rendered args, parsed by the agent's own parser, point every read into a mount."""
    import pkg.app.gpu_node_agent as app

    monkeypatch.setenv("NODE_NAME", "gpu-node-1")
    settings = app.settings_from(app.parser().parse_args(agent_container(default_docs)["args"]))
    assert settings.node_name == "gpu-node-1"
    assert settings.resync_period == 300.0
    assert settings.udev is True
    mounts = [
        Path(m["mountPath"]) for m in agent_container(default_docs)["volumeMounts"] if m["name"] != "tmp"
    ]
    reads = [
        # A regular file in the container (the bind mount resolves a symlinked /etc/os-release on
        # the host), so the agent never falls back to <host-root>/usr/lib/os-release.
        settings.host_root / "etc" / "os-release",
        settings.host_root / "proc" / "sys" / "kernel" / "osrelease",
        settings.host_root / "proc" / "cpuinfo",
        settings.sysfs_root / "bus" / "pci" / "devices",
        settings.sysfs_root / "class" / "dmi" / "id" / "product_name",
    ]
    for path in reads:
        assert any(path == mount or mount in path.parents for mount in mounts), path


@pytest.mark.parametrize("udev", [True, False])
def test_host_network_only_for_uevents(helm: Path, udev: bool) -> None:
    docs = render(helm, {"nodeAgent.udev": udev})
    pod = agent_pod(docs)
    assert pod.get("hostNetwork", False) is udev
    assert pod.get("dnsPolicy") == ("ClusterFirstWithHostNet" if udev else None)
    assert f"--udev={str(udev).lower()}" in agent_container(docs)["args"]


def test_node_agent_scheduling_defaults(default_docs: list[dict[str, Any]]) -> None:
    """Every node but the control plane, tainted GPU nodes included; critical priority; no surge."""
    pod = agent_pod(default_docs)
    assert "nodeSelector" not in pod
    assert pod["tolerations"] == [{"operator": "Exists", "effect": "NoSchedule"}]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term == {
        "matchExpressions": [{"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}]
    }
    assert pod["priorityClassName"] == "system-node-critical"
    strategy = daemonset(default_docs)["spec"]["updateStrategy"]
    assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}}
    selector = daemonset(default_docs)["spec"]["selector"]["matchLabels"]
    assert selector.items() <= daemonset(default_docs)["spec"]["template"]["metadata"]["labels"].items()
    assert selector["app.kubernetes.io/component"] == "gpu-node-agent"


def test_node_agent_values_reach_the_daemonset(helm: Path) -> None:
    docs = render(
        helm,
        {
            "image.tag": "2.0.0",
            "nodeAgent.image.repository": "registry.example/agent",
            "nodeAgent.resyncPeriod": "30s",
            "nodeAgent.metrics.port": 9100,
            "nodeAgent.nodeSelector": {"feature.node.kubernetes.io/pci-10de.present": "true"},
            "nodeAgent.priorityClassName": "",
        },
    )
    pod, main = agent_pod(docs), agent_container(docs)
    assert main["image"] == "registry.example/agent:2.0.0"
    assert "--resync-period=30s" in main["args"]
    assert "--metrics-bind-address=:9100" in main["args"]
    assert main["ports"][0]["containerPort"] == 9100
    assert pod["nodeSelector"] == {"feature.node.kubernetes.io/pci-10de.present": "true"}
    assert "priorityClassName" not in pod
    assert agent_container(render(helm, {"nodeAgent.image.tag": "3.1"}))["image"] == "gpu-control-plane:3.1"


def test_node_agent_can_be_disabled(helm: Path) -> None:
    docs = render(helm, {"nodeAgent.enabled": False})
    assert of(docs, "gpu-node-agent") == []
    assert "gpu-node-agent" not in node_daemon_sets(docs)
    handler = one(of(docs, "gpu-handler"), "ServiceAccount")["metadata"]["name"]
    assert confined_users(one(docs, "ValidatingAdmissionPolicy")) == [
        f"system:serviceaccount:{NAMESPACE}:{handler}"
    ]
    # Nobody left to confine: no policy either, unless accounts are listed.
    off = {"nodeAgent.enabled": False, "gpuHandler.enabled": False}
    assert of(render(helm, off), "node-admission-policy") == []
    docs = render(helm, {**off, "admissionPolicy.serviceAccounts": [{"name": "dcgm"}]})
    assert confined_users(one(docs, "ValidatingAdmissionPolicy")) == [
        f"system:serviceaccount:{NAMESPACE}:dcgm"
    ]


# -- the node admission policy -----------------------------------------------------------------------------


def test_policy_confines_the_node_accounts(helm: Path) -> None:
    docs = render(
        helm,
        {
            "admissionPolicy.serviceAccounts": [
                {"name": "gpu-handler"},
                {"name": "dcgm", "namespace": "monitoring"},
            ]
        },
    )
    policy = one(docs, "ValidatingAdmissionPolicy")
    agent = one(of(docs, "gpu-node-agent"), "ServiceAccount")["metadata"]["name"]
    handler = one(of(docs, "gpu-handler"), "ServiceAccount")["metadata"]["name"]
    assert confined_users(policy) == [
        f"system:serviceaccount:{NAMESPACE}:{agent}",
        f"system:serviceaccount:{NAMESPACE}:{handler}",
        f"system:serviceaccount:{NAMESPACE}:gpu-handler",
        "system:serviceaccount:monitoring:dcgm",
    ]
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    rules = {
        (group, resource): sorted(rule["operations"])
        for rule in spec["matchConstraints"]["resourceRules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    every_write = ["CREATE", "DELETE", "UPDATE"]
    assert rules == {
        ("gpu.deckhouse.io", "physicalgpus"): every_write,
        ("gpu.deckhouse.io", "physicalgpus/status"): every_write,
        ("resource.k8s.io", "resourceslices"): every_write,
        ("", "nodes"): every_write,
        ("", "nodes/status"): every_write,
    }
    # The node comes from the token's extra, and a token without one is refused first.
    variables = {variable["name"]: variable["expression"] for variable in spec["variables"]}
    assert NODE_NAME_EXTRA in variables["tokenNodes"]
    first = spec["validations"][0]
    assert first["expression"] == "variables.node != ''"
    assert "names no node" in first["messageExpression"]
    for validation in spec["validations"]:
        assert validation["reason"] == "Forbidden"
        assert validation["messageExpression"].startswith("variables.user + ")
    binding = one(docs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}


def test_policy_can_be_disabled(helm: Path) -> None:
    docs = render(helm, {"admissionPolicy.enabled": False})
    assert find(docs, "ValidatingAdmissionPolicy") == find(docs, "ValidatingAdmissionPolicyBinding") == []
    assert [d["kind"] for d in of(docs, "gpu-node-agent")] == [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
    ]
