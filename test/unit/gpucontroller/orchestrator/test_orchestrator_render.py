"""The rendered DaemonSets: placed by the gate labels only, owned by the ConfigMap, with selectors
that never change, and each component's needs from the host (and no more)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client import V1ConfigMap, V1DaemonSet, V1ObjectMeta
from pydantic import ValidationError
from testutil.k8s_fields import meta, name_of, present, spec_of, template_pod

from api.gpu.v1alpha1 import GPUOperatorConfig
from pkg.gpucontroller.names import Component
from pkg.gpucontroller.orchestrator.render import RenderContext, render_all

ALL: dict[str, Any] = {
    "imagePullSecrets": ["regcred"],
    "driverRoot": "/run/nvidia/driver",
    "nodeAgent": {
        "image": "gcp:1",
        "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
        "serviceAccountName": "agent-sa",
    },
    "validator": {
        "image": "nvcr.io/validator:1",
        "readinessCommand": ["sh", "-c", "test -c /host/dev/nvidiactl"],
    },
    "gpuHandler": {
        "image": "gcp:1",
        "runtimeClassName": "nvidia",
        "serviceAccountName": "handler-sa",
        "nodeSelector": {"pool": "gpu"},
    },
    "dcgm": {"image": "nvcr.io/dcgm:4"},
    "dcgmExporter": {"image": "nvcr.io/dcgm-exporter:4"},
}


def render(spec: dict[str, Any], *, uid: str = "cm-uid") -> dict[Component, V1DaemonSet]:
    config_map = V1ConfigMap(metadata=V1ObjectMeta(name="gcp", namespace="gpu", uid=uid))
    return render_all(
        RenderContext(config_map=config_map, spec=GPUOperatorConfig.model_validate({"spec": spec}).spec)
    )


def test_every_enabled_component_has_a_daemon_set_named_after_the_config() -> None:
    rendered = render(ALL)
    assert {c: name_of(ds) for c, ds in rendered.items()} == {
        Component.NODE_AGENT: "gcp-gpu-node-agent",
        Component.VALIDATOR: "gcp-gpu-validator",
        Component.GPU_HANDLER: "gcp-gpu-handler",
        Component.DCGM: "gcp-nv-hostengine",
        Component.DCGM_EXPORTER: "gcp-dcgm-exporter",
    }
    assert set(render({"nodeAgent": {"image": "x"}})) == {Component.NODE_AGENT}


def test_nodes_are_chosen_by_gate_labels_never_by_names() -> None:
    rendered = render(ALL)
    selectors = {c: template_pod(ds).node_selector for c, ds in rendered.items()}
    assert selectors == {
        Component.NODE_AGENT: None,
        Component.VALIDATOR: {"gpu.deckhouse.io/nvidia.present": "true"},
        Component.GPU_HANDLER: {"pool": "gpu", "gpu.deckhouse.io/driver-ready": "true"},
        Component.DCGM: {"gpu.deckhouse.io/driver-ready": "true"},
        Component.DCGM_EXPORTER: {"gpu.deckhouse.io/driver-ready": "true"},
    }
    affinity = present(present(template_pod(rendered[Component.NODE_AGENT]).affinity).node_affinity)
    [term] = present(affinity.required_during_scheduling_ignored_during_execution).node_selector_terms
    assert [(e.key, e.operator) for e in term.match_expressions or []] == [
        ("node-role.kubernetes.io/control-plane", "DoesNotExist")
    ]
    for ds in rendered.values():
        assert template_pod(ds).node_name is None
        assert "kubernetes.io/hostname" not in str(ds.to_dict())


def test_owned_by_the_config_map_with_a_fixed_selector() -> None:
    ds = render(ALL)[Component.VALIDATOR]
    [owner] = present(meta(ds).owner_references)
    assert (owner.kind, owner.name, owner.uid, owner.controller, owner.block_owner_deletion) == (
        "ConfigMap",
        "gcp",
        "cm-uid",
        True,
        True,
    )
    assert meta(ds).namespace == "gpu"
    assert spec_of(ds).selector.match_labels == {
        "app.kubernetes.io/component": "gpu-validator",
        "gpu.deckhouse.io/operator-config": "gcp",
    }
    assert (
        present(present(spec_of(ds).template.metadata).labels)["app.kubernetes.io/managed-by"]
        == "gpu-controller"
    )
    # Settings never reach the selector: it cannot change once the DaemonSet exists.
    other = render({**ALL, "validator": {"image": "other:2", "nodeSelector": {"a": "b"}}})[
        Component.VALIDATOR
    ]
    assert spec_of(other).selector == spec_of(ds).selector


def test_the_same_document_renders_the_same_daemon_sets() -> None:
    assert render(ALL) == render(ALL)


def test_pods_share_pull_secrets_and_use_a_token_only_with_an_account() -> None:
    rendered = render(ALL)
    agent = template_pod(rendered[Component.NODE_AGENT])
    assert (agent.service_account_name, agent.automount_service_account_token) == ("agent-sa", True)
    assert [s.name for s in present(agent.image_pull_secrets)] == ["regcred"]
    dcgm = template_pod(rendered[Component.DCGM])
    assert (dcgm.service_account_name, dcgm.automount_service_account_token) == (None, False)


def test_node_agent_reads_the_host_read_only_and_uses_the_host_network_only_for_uevents() -> None:
    pod = template_pod(render(ALL)[Component.NODE_AGENT])
    [agent] = pod.containers
    assert agent.command == ["gpu-node-agent"]
    assert "--udev=true" in present(agent.args)
    assert pod.host_network is True
    assert {m.mount_path for m in present(agent.volume_mounts) if m.read_only} == {
        "/host/sys",
        "/host/etc/os-release",
        "/host/proc/sys/kernel",
        "/host/proc/cpuinfo",
    }
    assert present(agent.security_context).privileged is False
    assert present(agent.security_context).read_only_root_filesystem is True
    assert present(present(present(agent.env)[0].value_from).field_ref).field_path == "spec.nodeName"
    no_udev = template_pod(render({"nodeAgent": {"image": "x", "udev": False}})[Component.NODE_AGENT])
    assert no_udev.host_network is None


def test_validator_validates_in_an_init_container_and_is_ready_after_it() -> None:
    pod = template_pod(render(ALL)[Component.VALIDATOR])
    [init] = present(pod.init_containers)
    [wait] = pod.containers
    assert (init.command, init.args) == (["sh", "-c"], ["nvidia-validator"])
    assert {e.name: e.value for e in present(init.env) if e.value} == {
        "COMPONENT": "driver",
        "WITH_WAIT": "false",
    }
    assert present(init.security_context).privileged is True
    assert init.termination_message_policy == "FallbackToLogsOnError"
    assert {v.name: present(v.host_path).type for v in present(pod.volumes)} == {
        "host-root": "Directory",
        "driver-root": "DirectoryOrCreate",
    }
    assert {v.name: present(v.host_path).path for v in present(pod.volumes)} == {
        "host-root": "/",
        "driver-root": "/run/nvidia/driver",
    }
    assert present(present(wait.readiness_probe).var_exec).command == [
        "sh",
        "-c",
        "test -c /host/dev/nvidiactl",
    ]
    assert wait.security_context is None
    assert pod.termination_grace_period_seconds == 5


def test_a_command_override_replaces_command_and_arguments() -> None:
    stand_in = {"image": "busybox", "command": ["sh", "-c", "exec httpd -f"]}
    agent = template_pod(render({"nodeAgent": stand_in})[Component.NODE_AGENT]).containers[0]
    assert (agent.command, agent.args) == (["sh", "-c", "exec httpd -f"], None)
    validator = template_pod(render({"validator": stand_in})[Component.VALIDATOR])  # the driver on /
    assert present(validator.init_containers)[0].command == ["sh", "-c", "exec httpd -f"]
    assert validator.containers[0].command == ["sh", "-c"]  # the waiting container is the component's own
    assert [v.name for v in present(validator.volumes)] == ["host-root"]
    with_args = render({"nodeAgent": {**stand_in, "args": ["x"]}})[Component.NODE_AGENT]
    assert template_pod(with_args).containers[0].args == ["x"]


def test_the_exporter_reaches_the_nodes_hostengine_while_dcgm_runs() -> None:
    def env(spec: dict[str, Any]) -> dict[str, str | None]:
        [exporter] = template_pod(render(spec)[Component.DCGM_EXPORTER]).containers
        return {e.name: e.value for e in present(exporter.env)}

    assert env(ALL)["DCGM_REMOTE_HOSTENGINE_INFO"] == "$(NODE_IP):5555"
    assert env(ALL)["DCGM_EXPORTER_KUBERNETES"] == "true"
    alone = {"dcgmExporter": {"image": "e", "podResourcesPath": None}}
    assert "DCGM_REMOTE_HOSTENGINE_INFO" not in env(alone)
    assert env(alone)["DCGM_EXPORTER_KUBERNETES"] == "false"
    assert template_pod(render(alone)[Component.DCGM_EXPORTER]).volumes is None
    [engine] = template_pod(render(ALL)[Component.DCGM]).containers
    assert [(p.container_port, p.host_port) for p in present(engine.ports)] == [(5555, 5555)]


def test_gpu_handler_runs_our_binary_with_the_runtime_class() -> None:
    pod = template_pod(render(ALL)[Component.GPU_HANDLER])
    [handler] = pod.containers
    assert pod.runtime_class_name == "nvidia"
    assert handler.command == ["gpu-handler"]
    assert "--backend=nvidia" in present(handler.args)
    assert {e.name: e.value for e in present(handler.env)}["NVIDIA_VISIBLE_DEVICES"] == "all"


@pytest.mark.parametrize(("configured", "flag"), [(None, "--imex-channels=128"), (0, "--imex-channels=0")])
def test_gpu_handler_offers_the_configured_imex_channels(configured: int | None, flag: str) -> None:
    handler_settings = {
        **ALL["gpuHandler"],
        **({"imexChannels": configured} if configured is not None else {}),
    }
    [handler] = template_pod(
        render({**ALL, "gpuHandler": handler_settings})[Component.GPU_HANDLER]
    ).containers
    assert [a for a in present(handler.args) if a.startswith("--imex-channels")] == [flag]


@pytest.mark.parametrize("count", [-1, 2048])
def test_an_imex_channel_count_beyond_the_drivers_channels_is_refused(count: int) -> None:
    with pytest.raises(ValidationError, match="imexChannels"):
        GPUOperatorConfig.model_validate(
            {"spec": {**ALL, "gpuHandler": {**ALL["gpuHandler"], "imexChannels": count}}}
        )


def test_a_config_map_without_uid_cannot_own() -> None:
    with pytest.raises(ValueError, match="no name or uid"):
        render(ALL, uid="")
